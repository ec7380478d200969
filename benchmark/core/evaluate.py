"""Every metric of a prediction record with percentile-bootstrap intervals.

:func:`evaluate` gives ``metric -> (value, ci_low, ci_high)``;
:func:`paired_difference` compares two methods on the same samples with a
paired bootstrap (both see the same resamples). Point values are computed in
float64 on the data itself; see :mod:`benchmark.core.bootstrap` for the resamples.
"""

from __future__ import annotations

from benchmark.core.bootstrap import bootstrap_samples, check_bootstrap_args, percentile_interval, two_sided_p_value
from benchmark.core.combine import Prediction
from benchmark.core.metrics import check_sac_threshold, point_metrics
from benchmark.core.samples import SampleStats, sample_stats
from benchmark.core.validation import InputError, TensorLike

_NAN = float("nan")


def _stats(pred: Prediction, labels: TensorLike, name: str, ece_bins: int, brier: str) -> SampleStats:
    if not isinstance(pred, Prediction):
        raise InputError(f"{name}: must be a Prediction record, got {type(pred).__name__}")
    return sample_stats(
        pred.probs, labels, confidence=pred.confidence, prediction=pred.prediction, ece_bins=ece_bins, brier=brier
    )


def evaluate(
    pred: Prediction,
    labels: TensorLike,
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    ece_bins: int = 15,
    sac_threshold: float = 0.98,
    brier: str = "usual",
) -> dict[str, tuple[float, float, float]]:
    """``metric -> (value, ci_low, ci_high)`` for every metric of
    :func:`benchmark.core.metrics.compute_metrics`; the interval is the
    ``level`` percentile-bootstrap interval over ``n_bootstrap`` resamples
    (NaN bounds when ``n_bootstrap == 0``). Same seed, same numbers.
    """
    check_bootstrap_args(n_bootstrap, level)
    sac_threshold = check_sac_threshold(sac_threshold)
    return evaluate_stats(
        _stats(pred, labels, "pred", ece_bins, brier),
        n_bootstrap=n_bootstrap,
        seed=seed,
        level=level,
        sac_threshold=sac_threshold,
    )


def evaluate_stats(
    stats: SampleStats, *, n_bootstrap: int = 1000, seed: int = 0, level: float = 0.95, sac_threshold: float = 0.98
) -> dict[str, tuple[float, float, float]]:
    """:func:`evaluate` of a prediction given by its :class:`~benchmark.core.samples.SampleStats`."""
    check_bootstrap_args(n_bootstrap, level)
    sac_threshold = check_sac_threshold(sac_threshold)
    values = point_metrics(stats, sac_threshold=sac_threshold)
    if n_bootstrap == 0:
        return {k: (v, _NAN, _NAN) for k, v in values.items()}
    samples = bootstrap_samples([stats], n_bootstrap, seed, sac_threshold=sac_threshold)[0]
    return {k: (v, *percentile_interval(samples[k], level)) for k, v in values.items()}


def paired_difference(
    pred_a: Prediction,
    pred_b: Prediction,
    labels: TensorLike,
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    ece_bins: int = 15,
    sac_threshold: float = 0.98,
    brier: str = "usual",
) -> dict[str, dict[str, float]]:
    """Paired bootstrap of ``metric(a) - metric(b)`` on the same samples.

    Returns ``metric -> {"diff", "ci_low", "ci_high", "p_value"}``: the observed
    difference, its percentile interval over resamples shared by both methods,
    and the two-sided bootstrap p-value of no difference
    (:func:`benchmark.core.bootstrap.two_sided_p_value`). NaN interval and
    p-value when ``n_bootstrap == 0``.
    """
    check_bootstrap_args(n_bootstrap, level)
    sac_threshold = check_sac_threshold(sac_threshold)
    return paired_difference_stats(
        _stats(pred_a, labels, "pred_a", ece_bins, brier),
        _stats(pred_b, labels, "pred_b", ece_bins, brier),
        n_bootstrap=n_bootstrap,
        seed=seed,
        level=level,
        sac_threshold=sac_threshold,
    )


def paired_difference_stats(
    sa: SampleStats,
    sb: SampleStats,
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    sac_threshold: float = 0.98,
) -> dict[str, dict[str, float]]:
    """:func:`paired_difference` of two predictions given by their :class:`~benchmark.core.samples.SampleStats`."""
    check_bootstrap_args(n_bootstrap, level)
    sac_threshold = check_sac_threshold(sac_threshold)
    if sa.num_classes != sb.num_classes:
        raise InputError(f"pred_a has C={sa.num_classes} classes but pred_b has C={sb.num_classes}")
    va, vb = point_metrics(sa, sac_threshold=sac_threshold), point_metrics(sb, sac_threshold=sac_threshold)
    if n_bootstrap == 0:
        return {k: {"diff": va[k] - vb[k], "ci_low": _NAN, "ci_high": _NAN, "p_value": _NAN} for k in va}
    ba, bb = bootstrap_samples([sa, sb], n_bootstrap, seed, sac_threshold=sac_threshold)
    out = {}
    for k in va:
        d = ba[k] - bb[k]
        lo, hi = percentile_interval(d, level)
        out[k] = {"diff": va[k] - vb[k], "ci_low": lo, "ci_high": hi, "p_value": two_sided_p_value(d)}
    return out
