"""Risk-coverage and reliability curves: their areas and weighted gaps are the metrics of benchmark.core.metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmark.core.curves import augrc_from_curve, aurc_from_curve, ece_from_bins, reliability, risk_coverage
from benchmark.core.metrics import compute_metrics


def _probs(n=400, c=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, c, generator=g) * 2
    y = torch.randint(0, c, (n,), generator=g)
    return torch.softmax(logits.double(), 1), y


@pytest.mark.parametrize("ties", [False, True])
def test_curve_areas_are_aurc_and_augrc(ties):
    p, y = _probs()
    conf, pred = p.max(1)
    if ties:  # a confidence score with large tie groups
        conf = (conf * 10).round() / 10
        assert len(np.unique(conf.numpy())) < 12
    m = compute_metrics(p, y, confidence=conf)
    curve = risk_coverage(conf, pred == y)
    assert aurc_from_curve(curve) == pytest.approx(m["aurc"], abs=1e-12)
    assert augrc_from_curve(curve) == pytest.approx(m["augrc"], abs=1e-12)
    assert curve["coverage"][-1] == 1.0 and curve["selective_risk"][-1] == pytest.approx(1 - m["accuracy"])


def test_hand_worked_risk_coverage_with_a_tie():
    # confidences 0.9 (right), 0.8 (wrong), 0.8 (right), 0.5 (wrong): the tie group holds 1 error in 2
    curve = risk_coverage([0.9, 0.8, 0.8, 0.5], [1, 0, 1, 0])
    assert curve["coverage"].tolist() == [0.25, 0.5, 0.75, 1.0]
    assert curve["selective_risk"].tolist() == pytest.approx([0.0, 0.25, 1 / 3, 0.5])  # E(2) = 0.5 (expected)
    assert aurc_from_curve(curve) == pytest.approx((0 + 0.25 + 1 / 3 + 0.5) / 4)


def test_reliability_bins_weighted_gaps_are_the_ece():
    p, y = _probs(n=1000, seed=3)
    conf, pred = p.max(1)
    for n_bins in (15, 10):
        bins = reliability(conf, pred == y, n_bins=n_bins)
        assert bins["count"].sum() == 1000 and len(bins["lo"]) == n_bins
        assert ece_from_bins(bins) == pytest.approx(compute_metrics(p, y, ece_bins=n_bins)["ece"], abs=1e-12)
    # a hand-worked case: bins of width 0.5; (0, 0.5]: conf 0.5 wrong; (0.5, 1]: conf 0.75 right, 0.9 wrong
    b = reliability([0.5, 0.75, 0.9], [0, 1, 0], n_bins=2)
    assert b["count"].tolist() == [1, 2] and b["accuracy"].tolist() == [0.0, 0.5]
    assert ece_from_bins(b) == pytest.approx(1 / 3 * 0.5 + 2 / 3 * abs(0.5 - 0.825))


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="same non-zero length"):
        risk_coverage([0.1, 0.2], [1])
    with pytest.raises(ValueError, match="n_bins: must be a positive integer"):
        reliability([0.5], [1], n_bins=0)
