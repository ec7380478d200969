"""Macro F1 under its two names: ``macro_f1`` (scikit-learn's default, the Asymmetric Duos
code) and ``macro_f1_wilds`` (WILDS' F1: the classes present in the labels), each one
convention on every split, checked against scikit-learn and the wilds package itself."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import f1_score

from benchmark.core.metric_info import METRICS
from benchmark.core.metrics import compute_metrics, metrics_from_counts
from benchmark.core.samples import sample_stats

# class 3 is predicted but never true, class 4 neither: the two conventions differ
Y = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 1])
PRED = np.array([0, 1, 0, 1, 3, 2, 2, 3, 2, 1])


def _probs(pred, c=5):
    p = np.full((len(pred), c), 0.1 / (c - 1))
    p[np.arange(len(pred)), pred] = 0.9
    return torch.as_tensor(p)


def test_both_conventions_against_sklearn_where_they_differ():
    m = compute_metrics(_probs(PRED), torch.as_tensor(Y))
    published = f1_score(Y, PRED, average="macro")  # classes 0..3 (union of y and pred)
    wilds = f1_score(Y, PRED, average="macro", labels=np.unique(Y))  # classes 0..2
    assert published == pytest.approx(f1_score(Y, PRED, average="macro", labels=[0, 1, 2, 3]))
    assert abs(published - wilds) > 0.1  # the example discriminates
    assert m["macro_f1"] == pytest.approx(published, abs=1e-12)
    assert m["macro_f1_wilds"] == pytest.approx(wilds, abs=1e-12)


def test_wilds_convention_is_the_wilds_package_metric():
    from wilds.common.metrics.all_metrics import F1

    ref = F1(average="macro").compute(torch.as_tensor(PRED), torch.as_tensor(Y), return_dict=False)
    m = compute_metrics(_probs(PRED), torch.as_tensor(Y))
    assert m["macro_f1_wilds"] == pytest.approx(float(ref), abs=1e-6)  # wilds returns float32


def test_bootstrap_weights_use_the_same_conventions():
    """A resample given as counts per sorted position scores as sklearn on the resampled samples."""
    rng = np.random.default_rng(0)
    stats = sample_stats(_probs(PRED), torch.as_tensor(Y))
    rank = stats.rank.numpy()  # sorted position (1-based: column 0 of counts is the pad) of each input sample
    rows, want = [], []
    for _ in range(20):
        idx = rng.integers(0, len(Y), len(Y))
        counts = np.zeros(len(Y) + 1)
        np.add.at(counts, rank[idx], 1)
        rows.append(counts)
        y, p = Y[idx], PRED[idx]
        want.append((f1_score(y, p, average="macro"), f1_score(y, p, average="macro", labels=np.unique(y))))
    got = metrics_from_counts(stats, torch.as_tensor(np.stack(rows)))
    assert got["macro_f1"].numpy() == pytest.approx([w[0] for w in want], abs=1e-12)
    assert got["macro_f1_wilds"].numpy() == pytest.approx([w[1] for w in want], abs=1e-12)
    assert any(abs(a - b) > 1e-3 for a, b in want)


def test_group_rows_keep_one_convention_per_name_on_every_split():
    from benchmark.config.evaluate import EvalConfig
    from benchmark.methods.rows import GROUP_METRICS, _metric_rows

    groups = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    cfg = EvalConfig(suite="t", groups={"test": torch.as_tensor(groups), "shift": torch.as_tensor(groups)})
    res = {k: (v, float("nan"), float("nan")) for k, v in compute_metrics(_probs(PRED), torch.as_tensor(Y)).items()}
    by_split = {}
    for split in ("test", "shift"):
        rows = _metric_rows(cfg, {}, split, res, torch.as_tensor(PRED), torch.as_tensor(Y))
        by_split[split] = {r["metric"]: r["value"] for r in rows}
    assert by_split["test"] == pytest.approx(by_split["shift"], nan_ok=True)  # same data, same numbers on both splits
    got = by_split["shift"]
    assert set(GROUP_METRICS) <= set(got)
    per = {
        conv: [
            f1_score(
                Y[groups == g],
                PRED[groups == g],
                average="macro",
                **({"labels": np.unique(Y[groups == g])} if conv else {}),
            )
            for g in (0, 1)
        ]
        for conv in (False, True)
    }
    assert got["mean_group_macro_f1"] == pytest.approx(np.mean(per[False]), abs=1e-12)
    assert got["worst_group_macro_f1"] == pytest.approx(min(per[False]), abs=1e-12)
    assert got["mean_group_macro_f1_wilds"] == pytest.approx(np.mean(per[True]), abs=1e-12)
    assert got["worst_group_macro_f1_wilds"] == pytest.approx(min(per[True]), abs=1e-12)
    assert per[False] != pytest.approx(per[True])  # the groups discriminate the conventions


def test_every_reported_name_is_registered():
    from benchmark.methods.rows import GROUP_METRICS

    for name in ("macro_f1", "macro_f1_wilds", *GROUP_METRICS):
        assert name in METRICS and METRICS[name].higher_is_better
    assert "WILDS" in METRICS["macro_f1_wilds"].label


def test_model_selection_scores_macro_f1_as_sklearn():
    """train.selection_score's ``macro_f1`` is the package's one macro F1 (scikit-learn's classes):
    on single logits (N, C) and on member logits (M, N, C) scored by the mean of member softmaxes."""
    from benchmark.models.train import selection_score

    g = torch.Generator().manual_seed(3)
    y = torch.randint(0, 6, (200,), generator=g)
    z = torch.randn(200, 8, generator=g) * 2  # classes 6 and 7 only ever predicted: the conventions differ
    pred = z.softmax(-1).argmax(-1).numpy()
    assert set(pred) - set(y.numpy())
    assert selection_score(z, y, "macro_f1") == pytest.approx(f1_score(y.numpy(), pred, average="macro"), abs=1e-12)
    members = torch.randn(3, 200, 8, generator=g)
    mean_pred = members.softmax(-1).mean(0).argmax(-1).numpy()
    assert selection_score(members, y, "macro_f1") == pytest.approx(
        f1_score(y.numpy(), mean_pred, average="macro"), abs=1e-12
    )
    assert selection_score(z, y, "accuracy") == pytest.approx(float((pred == y.numpy()).mean()), abs=1e-12)


def test_one_definition_serves_the_bootstrap_and_the_groups():
    """macro_f1_table on weighted (B, C) counts and on per-group integer counts, against sklearn's sample weights."""
    from benchmark.core.groups import group_macro_f1
    from benchmark.core.metrics import macro_f1_table

    rng = np.random.default_rng(1)
    y, p = rng.integers(0, 5, 60), rng.integers(0, 7, 60)
    w = rng.integers(0, 3, (4, 60)).astype(float)
    tp = np.stack([np.bincount(y, wi * (y == p), minlength=7) for wi in w])
    true = np.stack([np.bincount(y, wi, minlength=7) for wi in w])
    predicted = np.stack([np.bincount(p, wi, minlength=7) for wi in w])
    union, wilds = macro_f1_table(*(torch.as_tensor(a) for a in (tp, true, predicted)))
    for i, wi in enumerate(w):
        keep = wi > 0
        labels = np.unique(np.concatenate([y[keep], p[keep]]))
        assert union[i].item() == pytest.approx(
            f1_score(y, p, average="macro", labels=labels, sample_weight=wi), abs=1e-12
        )
        assert wilds[i].item() == pytest.approx(
            f1_score(y, p, average="macro", labels=np.unique(y[keep]), sample_weight=wi), abs=1e-12
        )
    groups = rng.integers(0, 4, 60)
    for present, f1 in (
        ("union", group_macro_f1(p, y, groups)[0]),
        ("true", group_macro_f1(p, y, groups, present="true")[0]),
    ):
        for k in range(4):
            m = groups == k
            labels = np.unique(np.concatenate([y[m], p[m]]) if present == "union" else y[m])
            assert f1[k].item() == pytest.approx(f1_score(y[m], p[m], average="macro", labels=labels), abs=1e-12)
