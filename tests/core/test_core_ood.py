"""OOD detection metrics against scikit-learn, with ties."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from benchmark.core.ood import ood_evaluate, ood_metrics
from benchmark.core.validation import InputError


def _sklearn(conf_id, conf_ood):
    s = np.concatenate([conf_id, conf_ood])
    is_id = np.r_[np.ones(len(conf_id)), np.zeros(len(conf_ood))]
    fpr, tpr, _ = roc_curve(is_id, s, drop_intermediate=False)
    return {
        "ood_auroc": roc_auc_score(is_id, s),
        "ood_aupr": average_precision_score(1 - is_id, -s),
        "ood_fpr95": fpr[np.argmax(tpr >= 0.95)],
    }


@pytest.mark.parametrize("ties", [False, True])
def test_against_sklearn(ties):
    rng = np.random.default_rng(0)
    conf_id = rng.beta(5, 2, 500)
    conf_ood = rng.beta(2, 3, 300)
    if ties:
        conf_id, conf_ood = np.round(conf_id * 10) / 10, np.round(conf_ood * 10) / 10
    got = ood_metrics(torch.tensor(conf_id), conf_ood)
    ref = _sklearn(conf_id, conf_ood)
    assert list(got) == ["ood_auroc", "ood_aupr", "ood_fpr95"]
    for k in ref:
        assert got[k] == pytest.approx(ref[k], abs=1e-12), k


def test_hand_worked():
    # ID {0.9, 0.5}, OOD {0.5, 0.1}: pairs (0.9>0.5) (0.9>0.1) (0.5=0.5 -> 1/2) (0.5>0.1)
    got = ood_metrics([0.9, 0.5], [0.5, 0.1])
    assert got["ood_auroc"] == pytest.approx(3.5 / 4)
    # from low confidence: {0.1} OOD (P=1, R=1/2), then {0.5, 0.5} (P=2/3, R=1)
    assert got["ood_aupr"] == pytest.approx(0.5 * 1 + 0.5 * 2 / 3)
    # accepting 95% of ID needs threshold 0.5, which accepts 1 of 2 OOD samples
    assert got["ood_fpr95"] == pytest.approx(0.5)
    perfect = ood_metrics([0.9, 0.8], [0.2, 0.1])
    assert perfect == {"ood_auroc": 1.0, "ood_aupr": 1.0, "ood_fpr95": 0.0}


def test_order_invariance_and_bootstrap():
    rng = np.random.default_rng(1)
    conf_id, conf_ood = np.round(rng.random(200), 1), np.round(rng.random(150) * 0.8, 1)
    ref = ood_metrics(conf_id, conf_ood)
    assert ood_metrics(rng.permutation(conf_id), rng.permutation(conf_ood)) == pytest.approx(ref, abs=1e-14)
    res = ood_evaluate(conf_id, conf_ood, n_bootstrap=200, seed=0)
    for k, (v, lo, hi) in res.items():
        assert v == ref[k] and lo <= v <= hi and lo < hi
    assert res == ood_evaluate(conf_id, conf_ood, n_bootstrap=200, seed=0)
    assert all(np.isnan(lo) for _, lo, _ in ood_evaluate(conf_id, conf_ood, n_bootstrap=0).values())


@pytest.mark.parametrize(
    "args, message",
    [
        (([0.5, float("nan")], [0.1]), "conf_id: contains NaN"),
        (([0.5], []), "conf_ood: is empty"),
        (([[0.5]], [0.1]), "conf_id: must be 1-D"),
    ],
)
def test_bad_input(args, message):
    with pytest.raises(InputError) as e:
        ood_metrics(*args)
    assert message in str(e.value)


def test_bootstrap_group_counts_equal_the_per_sample_weights():
    """The bootstrap scores each resample from its ID/OOD counts per tie group; the same resamples
    scored from (B, N) per-sample weights (the direct definition, ``_from_weights``) give the
    same numbers bit for bit, ties included, and the kept draws are the seeded draws."""
    from benchmark.core import ood

    g = torch.Generator().manual_seed(5)
    a = torch.randint(0, 40, (300,), generator=g).double() / 40  # many ties, across ID and OOD
    b = torch.randint(0, 30, (120,), generator=g).double() / 40
    n1, n2, rank, is_id, ends, group_of = ood._setup(a, b)
    rng = np.random.default_rng(0)
    for idx_id, idx_ood in ood._stratified_indices(n1, n2, 200, 0):
        assert torch.equal(idx_id, torch.from_numpy(rng.integers(0, n1, size=idx_id.shape)))
        assert torch.equal(idx_ood, torch.from_numpy(rng.integers(0, n2, size=idx_ood.shape)))
        idx = torch.cat([idx_id, n1 + idx_ood], 1)
        w = torch.zeros(idx.shape[0], n1 + n2, dtype=torch.float64).scatter_add_(
            1, rank[idx], torch.ones(idx.shape, dtype=torch.float64)
        )
        direct = ood._from_weights(w, is_id, ends)
        one = torch.ones(1, 1, dtype=torch.float64)
        pos = torch.zeros(idx.shape[0], ends.shape[0], dtype=torch.float64).scatter_add_(
            1, group_of[:n1][idx_id], one.expand(idx_id.shape)
        )
        neg = torch.zeros(idx.shape[0], ends.shape[0], dtype=torch.float64).scatter_add_(
            1, group_of[n1:][idx_ood], one.expand(idx_ood.shape)
        )
        fast = ood._from_group_counts(pos, neg)
        for k in direct:
            assert torch.equal(direct[k], fast[k]), k
