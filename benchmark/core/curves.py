"""The curves behind AURC, AUGRC and ECE, for plotting: risk-coverage and reliability.

Pure functions of per-sample arrays (numpy or torch, converted to float64 numpy),
consistent with :mod:`benchmark.core.metrics` by construction:

* :func:`risk_coverage`: sort by confidence (most confident first); for
  ``k = 1..N`` the coverage ``k/N``, the selective risk ``E(k)/k`` and the
  generalised risk ``E(k)/N`` (``E(k)`` the errors among the ``k`` most
  confident, linearly interpolated inside a tie group, as the metrics do).
  ``mean(selective risk) == aurc`` and the trapezoid of the generalised risk
  from the origin ``== augrc``.
* :func:`reliability`: equal-width bins ``(lo, hi]`` of the top-label
  confidence (the first bin also holds 0; the binning of the metrics' ECE); per bin the
  count, mean accuracy and mean confidence. ``sum(count/N * |accuracy -
  confidence|) == ece``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _array(x: ArrayLike, name: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name}: must be one-dimensional, got shape {a.shape}")
    return a


def risk_coverage(confidence: ArrayLike, correct: ArrayLike) -> dict[str, np.ndarray]:
    """``{"coverage", "selective_risk", "generalized_risk"}``, each of length N (most confident first)."""
    s, c = _array(confidence, "confidence"), _array(correct, "correct")
    if len(s) != len(c) or len(s) == 0:
        raise ValueError(f"confidence and correct: need the same non-zero length, got {len(s)} and {len(c)}")
    order = np.argsort(-s, kind="stable")
    s, err = s[order], 1.0 - c[order]
    n = len(s)
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True]) + 1  # group end positions K_g (1-based, exclusive)
    starts = np.r_[0, ends[:-1]]
    cum = np.r_[0.0, np.cumsum(err)]
    k = np.arange(1, n + 1, dtype=np.float64)
    group = np.repeat(np.arange(len(ends)), ends - starts)
    k0, k1 = starts[group].astype(np.float64), ends[group].astype(np.float64)
    e0, e1 = cum[starts[group]], cum[ends[group]]
    errors = e0 + (k - k0) * (e1 - e0) / (k1 - k0)  # E(k), linear inside each tie group
    return {"coverage": k / n, "selective_risk": errors / k, "generalized_risk": errors / n}


def aurc_from_curve(curve: dict) -> float:
    """AURC as published: the mean selective risk over ``k = 1..N``."""
    return float(np.mean(curve["selective_risk"]))


def augrc_from_curve(curve: dict) -> float:
    """AUGRC: trapezoid of the generalised risk over coverage, from the origin."""
    x = np.r_[0.0, curve["coverage"]]
    y = np.r_[0.0, curve["generalized_risk"]]
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


def reliability(top_confidence: ArrayLike, top_correct: ArrayLike, n_bins: int = 15) -> dict[str, np.ndarray]:
    """Per bin: ``lo``, ``hi``, ``count``, ``accuracy`` and ``confidence`` (NaN in an empty bin)."""
    q, a = _array(top_confidence, "top_confidence"), _array(top_correct, "top_correct")
    if len(q) != len(a):
        raise ValueError(f"top_confidence and top_correct: need the same length, got {len(q)} and {len(a)}")
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins: must be a positive integer, got {n_bins!r}")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.clip(np.searchsorted(edges, q, side="left") - 1, 0, n_bins - 1)  # (lo, hi], as torch.bucketize
    count = np.bincount(bins, minlength=n_bins).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.bincount(bins, weights=a, minlength=n_bins) / count
        conf = np.bincount(bins, weights=q, minlength=n_bins) / count
    return {"lo": edges[:-1], "hi": edges[1:], "count": count, "accuracy": acc, "confidence": conf}


def ece_from_bins(bins: dict) -> float:
    """ECE: the bin gaps ``|accuracy - confidence|`` weighted by the share of samples in each bin."""
    n = bins["count"].sum()
    gap = np.nan_to_num(np.abs(bins["accuracy"] - bins["confidence"]))
    return float(np.sum(bins["count"] / n * gap)) if n else float("nan")
