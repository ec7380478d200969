"""Metrics against independent computations (scikit-learn, direct formulas, hand-worked cases)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from sklearn.metrics import auc, brier_score_loss, f1_score, log_loss, roc_auc_score

from benchmark.core.metrics import compute_metrics, metric_names, sac_key
from benchmark.core.validation import InputError


def _random_case(seed, n=400, c=7, scale=2.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, c, generator=g, dtype=dtype) * scale
    labels = torch.randint(0, c, (n,), generator=g)
    logits[torch.arange(n), labels] += 1.5  # better than chance
    return logits.softmax(1), labels


def _published_rc(correct, uncertainty):
    """Risk-coverage quantities exactly as the published code (no ties)."""
    idx = np.argsort(uncertainty)
    risks = np.cumsum(1 - correct[idx]) / np.arange(1, len(correct) + 1)
    ideal = np.sort(correct)[::-1]
    opt = np.cumsum(1 - ideal) / np.arange(1, len(correct) + 1)
    return risks, risks.mean(), risks.mean() - opt.mean()


def _direct_ece(probs, labels, bins=15):
    conf, pred = probs.max(1)
    acc = (pred == labels).double()
    edges = torch.linspace(0, 1, bins + 1, dtype=probs.dtype)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (conf > lo) & (conf <= hi)
        if m.any():
            total += m.double().mean() * abs(conf[m].double().mean() - acc[m].mean())
    return float(total)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_against_sklearn_and_direct_formulas(seed):
    probs, labels = _random_case(seed)
    m = compute_metrics(probs, labels)
    p, y = probs.numpy(), labels.numpy()
    pred = p.argmax(1)
    conf = p.max(1)
    correct = (pred == y).astype(float)
    onehot = np.eye(p.shape[1])[y]
    assert m["accuracy"] == pytest.approx(correct.mean(), abs=1e-15)
    assert m["macro_f1"] == pytest.approx(f1_score(y, pred, average="macro"), abs=1e-12)
    assert m["brier"] == pytest.approx(((p - onehot) ** 2).sum(1).mean(), abs=1e-12)
    assert m["nll"] == pytest.approx(log_loss(y, p, labels=list(range(p.shape[1]))), abs=1e-12)
    assert m["ece"] == pytest.approx(_direct_ece(probs, labels), abs=1e-12)
    assert m["auroc"] == pytest.approx(roc_auc_score(correct, conf), abs=1e-12)
    risks, aurc, eaurc = _published_rc(correct, 1 - conf)
    assert m["aurc"] == pytest.approx(aurc, abs=1e-12)
    assert m["eaurc"] == pytest.approx(eaurc, abs=1e-12)
    n = len(y)
    cov = np.arange(1, n + 1) / n
    assert m["aurc_trapezoid"] == pytest.approx(auc(cov, risks) / (1 - 1 / n), abs=1e-12)
    gen_risk = np.concatenate([[0.0], risks * cov])
    assert m["augrc"] == pytest.approx(np.trapezoid(gen_risk, np.concatenate([[0.0], cov])), abs=1e-12)
    ok = np.nonzero(risks <= 1 - 0.98)[0]
    assert m["sac98"] == pytest.approx((ok.max() + 1) / n if ok.size else 0.0, abs=1e-15)


def test_published_brier_and_sac_threshold():
    probs, labels = _random_case(3)
    p, y = probs.numpy(), labels.numpy()
    m = compute_metrics(probs, labels, brier="per_entry", sac_threshold=0.9, ece_bins=4)
    assert m["brier"] == pytest.approx(brier_score_loss(np.eye(p.shape[1])[y].ravel(), p.ravel()), abs=1e-12)
    assert m["ece"] == pytest.approx(_direct_ece(probs, labels, bins=4), abs=1e-12)
    correct = (p.argmax(1) == y).astype(float)
    risks, _, _ = _published_rc(correct, 1 - p.max(1))
    ok = np.nonzero(risks <= 1 - 0.9)[0]
    assert m[sac_key(0.9)] == pytest.approx((ok.max() + 1) / len(y) if ok.size else 0.0)
    assert sac_key(0.9) == "sac90" and sac_key(0.995) == "sac99.5"
    assert list(m) == list(metric_names(0.9))


def test_float32_nll_clips_like_sklearn():
    probs = torch.tensor([[1.0, 0.0], [0.3, 0.7], [1e-12, 1.0 - 1e-12]], dtype=torch.float32)
    probs = probs / probs.sum(1, keepdim=True)
    labels = torch.tensor([1, 1, 0])
    m = compute_metrics(probs, labels)
    expected = log_loss(labels.numpy(), probs.numpy().astype(np.float32), labels=[0, 1])
    assert m["nll"] == pytest.approx(float(expected), rel=1e-6)
    assert np.isfinite(m["nll"])


def test_custom_confidence_and_prediction_are_used():
    probs, labels = _random_case(4)
    g = torch.Generator().manual_seed(9)
    pred = torch.randint(0, probs.shape[1], (probs.shape[0],), generator=g)
    conf = torch.rand(probs.shape[0], generator=g, dtype=torch.float64)
    m = compute_metrics(probs, labels, confidence=conf, prediction=pred)
    correct = (pred == labels).numpy().astype(float)
    assert m["accuracy"] == pytest.approx(correct.mean())
    assert m["macro_f1"] == pytest.approx(f1_score(labels.numpy(), pred.numpy(), average="macro"))
    assert m["auroc"] == pytest.approx(roc_auc_score(correct, conf.numpy()))
    _, aurc, eaurc = _published_rc(correct, -conf.numpy())
    assert m["aurc"] == pytest.approx(aurc) and m["eaurc"] == pytest.approx(eaurc)
    # ECE is top-label calibration of probs, independent of confidence/prediction
    assert m["ece"] == pytest.approx(_direct_ece(probs, labels))


def _metrics_from_conf(conf, correct):
    """Two-class probabilities with top-label confidence ``conf`` (>= 0.5) and chosen correctness."""
    conf = torch.as_tensor(conf, dtype=torch.float64)
    correct = torch.as_tensor(correct, dtype=torch.bool)
    n = conf.shape[0]
    probs = torch.zeros(n, 2, dtype=torch.float64)
    probs[:, 0] = conf
    probs[:, 1] = 1 - conf
    labels = torch.where(correct, 0, 1)
    return probs, labels, conf


def test_hand_worked_ties():
    probs, labels, _ = _metrics_from_conf([0.9, 0.9, 0.6, 0.6], [1, 0, 1, 0])
    m = compute_metrics(probs, labels, sac_threshold=0.5)
    assert m["auroc"] == pytest.approx(0.5)  # (1/2 + 1 + 0 + 1/2) / 4
    assert m["aurc"] == pytest.approx(0.5)  # E(k) = .5, 1, 1.5, 2
    assert m["augrc"] == pytest.approx(0.25)  # (0.5 + 1 + 1.5 + 2 - 1) / 16
    assert m["eaurc"] == pytest.approx(0.5 - (0 + 0 + 1 / 3 + 1 / 2) / 4)
    assert m["sac50"] == pytest.approx(1.0)
    # a threshold cannot split a tie group: {0.9, 0.9, 0.9} has risk 1/3
    probs, labels, _ = _metrics_from_conf([0.9, 0.9, 0.9, 0.6], [1, 1, 0, 1])
    assert compute_metrics(probs, labels, sac_threshold=0.8)["sac80"] == 0.0
    assert compute_metrics(probs, labels, sac_threshold=0.7)["sac70"] == 1.0


def _expected_over_tie_orders(conf, correct):
    """Average of the published (order-dependent) AURC/AUGRC over all orderings."""
    n = len(conf)
    vals = []
    for perm in itertools.permutations(range(n)):
        perm = np.array(perm)
        order = perm[np.argsort(-np.asarray(conf)[perm], kind="stable")]
        err = 1 - np.asarray(correct, dtype=float)[order]
        e = np.cumsum(err)
        k = np.arange(1, n + 1)
        risks = e / k
        augrc = np.trapezoid(np.r_[0, e / n], np.r_[0, k / n])
        trap = auc(k / n, risks) / (1 - 1 / n)
        vals.append((risks.mean(), augrc, trap))
    return np.mean(vals, axis=0)


def test_ties_equal_expectation_over_orderings():
    conf = [0.8, 0.8, 0.8, 0.6, 0.6, 0.55, 0.9]
    correct = [1, 0, 0, 1, 0, 1, 1]
    probs, labels, _ = _metrics_from_conf(conf, correct)
    m = compute_metrics(probs, labels)
    aurc, augrc, trap = _expected_over_tie_orders(conf, correct)
    assert m["aurc"] == pytest.approx(aurc, abs=1e-12)
    assert m["augrc"] == pytest.approx(augrc, abs=1e-12)
    assert m["aurc_trapezoid"] == pytest.approx(trap, abs=1e-12)
    assert m["auroc"] == pytest.approx(roc_auc_score(correct, conf), abs=1e-12)


def test_permutation_invariance_with_many_ties():
    probs, labels = _random_case(5, n=600, c=5)
    probs = torch.round(probs * 8) + 1e-3  # coarse values: many tied confidences
    probs = probs / probs.sum(1, keepdim=True)
    ref = compute_metrics(probs, labels)
    perm = torch.randperm(len(labels), generator=torch.Generator().manual_seed(1))
    got = compute_metrics(probs[perm], labels[perm])
    for k in ref:
        assert got[k] == pytest.approx(ref[k], rel=1e-12, abs=1e-14), k
    conf = probs.max(1).values
    assert len(torch.unique(conf)) < len(conf) / 4  # the case really has ties


def test_all_correct_all_wrong_one_class():
    probs, labels, _ = _metrics_from_conf([0.9, 0.7, 0.6], [1, 1, 1])
    m = compute_metrics(probs, labels)
    assert m["accuracy"] == 1 and m["aurc"] == 0 and m["eaurc"] == 0 and m["augrc"] == 0
    assert m["sac98"] == 1.0 and np.isnan(m["auroc"])
    probs, labels, _ = _metrics_from_conf([0.9, 0.7, 0.6], [0, 0, 0])
    m = compute_metrics(probs, labels)
    assert m["accuracy"] == 0 and m["aurc"] == pytest.approx(1.0) and m["sac98"] == 0.0
    assert m["eaurc"] == pytest.approx(0.0, abs=1e-15) and m["augrc"] == pytest.approx(0.5)
    assert m["macro_f1"] == pytest.approx(f1_score(labels.numpy(), [0, 0, 0], average="macro"))
    assert np.isnan(m["auroc"])
    one = compute_metrics(torch.ones(4, 1), torch.zeros(4, dtype=torch.long))
    assert one["accuracy"] == 1 and one["macro_f1"] == 1 and one["brier"] == 0
    assert one["nll"] == pytest.approx(-np.log(1 - np.finfo(np.float32).eps)) and one["ece"] == 0


def test_single_sample_trapezoid_is_nan():
    m = compute_metrics(torch.tensor([[0.7, 0.3]]), torch.tensor([0]))
    assert np.isnan(m["aurc_trapezoid"]) and m["aurc"] == 0


def test_numpy_inputs_accepted():
    probs, labels = _random_case(6)
    assert compute_metrics(probs.numpy(), labels.numpy()) == compute_metrics(probs, labels)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(probs=torch.tensor([[0.5, float("nan")]]), labels=torch.tensor([0])), "probs: contains NaN"),
        (dict(probs=torch.tensor([[2.0, -1.0]]), labels=torch.tensor([0])), "probs: probabilities must lie in"),
        (dict(probs=torch.tensor([[0.2, 0.2]]), labels=torch.tensor([0])), "probs: row 0 sums to"),
        (dict(probs=torch.tensor([[0.5, 0.5]]), labels=torch.tensor([2])), "labels: values must be in [0, 2)"),
        (dict(probs=torch.tensor([[0.5, 0.5]]), labels=torch.tensor([0, 1])), "labels: has N=2"),
        (dict(probs=torch.zeros(0, 3), labels=torch.zeros(0, dtype=torch.long)), "probs: is empty"),
        (dict(probs=torch.tensor([0.5, 0.5]), labels=torch.tensor([0])), "probs: must be (N, C)"),
        (dict(probs=torch.tensor([[0.5, 0.5]]), labels=torch.tensor([0.0])), "labels: must be integer"),
        (
            dict(probs=torch.tensor([[0.5, 0.5]]), labels=torch.tensor([0]), confidence=torch.tensor([0.1, 0.2])),
            "confidence: has N=2",
        ),
        (
            dict(probs=torch.tensor([[0.5, 0.5]]), labels=torch.tensor([0]), confidence=torch.tensor([float("inf")])),
            "confidence: contains Inf",
        ),
        (
            dict(probs=torch.tensor([[0.5, 0.5]]), labels=torch.tensor([0]), prediction=torch.tensor([5])),
            "prediction: values must be in",
        ),
        (dict(probs=torch.tensor([[0.5, 0.5]]), labels=torch.tensor([0]), brier="x"), "brier: unknown value"),
        (dict(probs=torch.tensor([[0.5, 0.5]]), labels=torch.tensor([0]), ece_bins=0), "ece_bins"),
        (dict(probs=torch.tensor([[0.5, 0.5]]), labels=torch.tensor([0]), sac_threshold=1.5), "sac_threshold"),
    ],
)
def test_bad_input_named(kwargs, message):
    with pytest.raises(InputError) as e:
        compute_metrics(**kwargs)
    assert message in str(e.value)
