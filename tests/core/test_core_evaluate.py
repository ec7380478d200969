"""Bootstrap intervals and paired differences against direct resampling and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from benchmark.core.bootstrap import bootstrap_samples, resample_indices, two_sided_p_value
from benchmark.core.combine import Prediction, single_prediction
from benchmark.core.evaluate import evaluate, paired_difference
from benchmark.core.metrics import compute_metrics
from benchmark.core.samples import sample_stats
from benchmark.core.validation import InputError


def _case(seed, n=300, c=5, signal=2.0, quantise=None):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    z = torch.randn(n, c, generator=g, dtype=torch.float64)
    z[torch.arange(n), y] += signal
    probs = torch.softmax(z, 1)
    if quantise:  # coarse confidences: many ties
        probs = torch.round(probs * quantise) + 1e-3
        probs = probs / probs.sum(1, keepdim=True)
    return probs, y


def _pred(probs):
    conf, arg = probs.max(1)
    return Prediction(probs=probs, prediction=arg, confidence=conf)


@pytest.mark.parametrize("quantise", [None, 6])
def test_bootstrap_equals_direct_resampling(quantise):
    """Counts-based resamples give the metrics of the explicitly resampled data."""
    probs, y = _case(0, n=120, quantise=quantise)
    stats = sample_stats(probs, y)
    got = bootstrap_samples([stats], 40, seed=3, chunk=16)[0]
    draws = torch.cat(list(resample_indices(len(y), 40, seed=3, chunk=16)))
    for b, idx in enumerate(draws):
        ref = compute_metrics(probs[idx], y[idx])
        for k, v in ref.items():
            if math.isnan(v):
                assert math.isnan(float(got[k][b])), k
            else:
                assert float(got[k][b]) == pytest.approx(v, rel=1e-5, abs=1e-7), (k, b)


def test_evaluate_values_and_determinism():
    probs, y = _case(1)
    pred = _pred(probs)
    res = evaluate(pred, y, n_bootstrap=200, seed=5)
    ref = compute_metrics(probs, y)
    assert list(res) == list(ref)
    for k, (v, lo, hi) in res.items():
        assert v == ref[k]
        assert lo <= hi
    assert res == evaluate(pred, y, n_bootstrap=200, seed=5)
    assert res != evaluate(pred, y, n_bootstrap=200, seed=6)
    none = evaluate(pred, y, n_bootstrap=0)
    assert all(v == ref[k] and math.isnan(lo) and math.isnan(hi) for k, (v, lo, hi) in none.items())


def test_percentile_interval_is_the_percentile_of_resampled_metrics():
    probs, y = _case(2, n=150)
    res = evaluate(_pred(probs), y, n_bootstrap=60, seed=9, level=0.9)
    draws = torch.cat(list(resample_indices(len(y), 60, seed=9)))
    acc = np.array([compute_metrics(probs[i], y[i])["accuracy"] for i in draws])
    _, lo, hi = res["accuracy"]
    assert (lo, hi) == pytest.approx(tuple(np.percentile(acc, [5, 95])), abs=1e-9)


def test_interval_coverage_in_simulation():
    """~95% of 95% intervals cover the true value of mean-type metrics."""
    rng = np.random.default_rng(0)
    n, reps, p_true = 200, 300, 0.75
    q = np.linspace(0.5, 1.0, 200001)[1:-1]
    true_nll = np.mean(-(q * np.log(q) + (1 - q) * np.log(1 - q)))  # calibrated conf ~ U(0.5, 1)
    hits = {"accuracy": 0, "nll": 0}
    for r in range(reps):
        correct = rng.random(n) < p_true
        acc_res = evaluate(_binary(correct, np.full(n, 0.8)), _labels(correct), n_bootstrap=300, seed=r)
        conf = rng.uniform(0.5, 1.0, n)
        calibrated = rng.random(n) < conf
        nll_res = evaluate(_binary(calibrated, conf), _labels(calibrated), n_bootstrap=300, seed=r)
        hits["accuracy"] += acc_res["accuracy"][1] <= p_true <= acc_res["accuracy"][2]
        hits["nll"] += nll_res["nll"][1] <= true_nll <= nll_res["nll"][2]
    for k, h in hits.items():
        assert 0.91 <= h / reps <= 0.985, (k, h / reps)


def _binary(correct, conf):
    probs = torch.tensor(np.stack([conf, 1 - conf], 1))
    return Prediction(probs=probs, prediction=torch.zeros(len(conf), dtype=torch.long), confidence=probs[:, 0])


def _labels(correct):
    return torch.tensor(np.where(correct, 0, 1))


def test_paired_difference():
    probs, y = _case(3, n=400)
    good = _pred(probs)
    noisy = single_prediction(
        torch.log(probs) + torch.randn(probs.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 2
    )
    diff = paired_difference(good, noisy, y, n_bootstrap=300, seed=2)
    ref_a, ref_b = compute_metrics(probs, y), compute_metrics(noisy.probs, y, confidence=noisy.confidence)
    for k, d in diff.items():
        assert d["diff"] == pytest.approx(ref_a[k] - ref_b[k], abs=1e-12)
        assert d["ci_low"] <= d["ci_high"]
    assert diff["accuracy"]["ci_low"] > 0 and diff["accuracy"]["p_value"] < 0.01
    assert diff["nll"]["ci_high"] < 0
    # the difference's interval comes from shared resamples of both methods
    sa, sb = sample_stats(probs, y), sample_stats(noisy.probs, y)
    ba, bb = bootstrap_samples([sa, sb], 300, seed=2)
    lo, hi = np.percentile((ba["aurc"] - bb["aurc"]).numpy(), [2.5, 97.5])
    assert (diff["aurc"]["ci_low"], diff["aurc"]["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
    same = paired_difference(good, good, y, n_bootstrap=100)
    assert all(
        d["diff"] == 0 and d["ci_low"] == 0 == d["ci_high"] and d["p_value"] == 1
        for d in same.values()
        if not math.isnan(d["diff"])
    )


def test_two_sided_p_value():
    assert two_sided_p_value(torch.tensor([1.0, 2.0, 3.0])) == pytest.approx(2 * 1 / 4)
    assert two_sided_p_value(torch.tensor([-1.0, 1.0, 2.0, 3.0])) == pytest.approx(2 * 2 / 5)
    assert math.isnan(two_sided_p_value(torch.tensor([float("nan")])))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(n_bootstrap=-1), "n_bootstrap"),
        (dict(level=1.0), "level"),
        (dict(sac_threshold=2.0), "sac_threshold"),
    ],
)
def test_bad_arguments(kwargs, message):
    probs, y = _case(4, n=20)
    with pytest.raises(InputError, match=message):
        evaluate(_pred(probs), y, **kwargs)


def test_bad_predictions():
    probs, y = _case(5, n=20)
    with pytest.raises(InputError, match="pred: must be a Prediction"):
        evaluate(probs, y)
    with pytest.raises(InputError, match="labels: has N=19"):
        paired_difference(_pred(probs), _pred(probs), y[:19])
    with pytest.raises(InputError, match="pred_b has C=6"):
        other = torch.softmax(torch.randn(20, 6), 1)
        paired_difference(_pred(probs), _pred(other), y)
