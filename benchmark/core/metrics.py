"""Classification, calibration and selective-prediction metrics.

Inputs: probabilities ``p`` (N, C), integer labels ``y`` (N,), a confidence
score ``s`` (N,; higher = more confident, default ``max_c p``) and a predicted
class ``yhat`` (N,; default ``argmax_c p``, first index on ties). A sample is
*correct* when ``yhat == y``; ``E(k)`` is the number of errors among the ``k``
most confident samples. All results are fractions.

Ties in confidence
------------------
Samples with exactly equal confidence form a *tie group*; no metric depends on
the order of samples inside a group, so permuting the input never changes a
result:

* AUROC, AURC (both definitions), E-AURC and AUGRC are the expectation of the
  metric over all orderings of each tie group. For AUROC this is the standard
  tie-averaged statistic (a tied correct/wrong pair counts 1/2, as in
  scikit-learn); for the risk-coverage metrics ``E(k)`` is linearly
  interpolated inside each group (its expected value under a random order).
* SAC is evaluated at group ends only: a confidence threshold accepts or
  rejects a whole tie group.

The published code breaks ties by the order of an unstable ``argsort``, so on
inputs without ties the two agree exactly and with ties they may differ slightly.

Every metric is computed from per-sample quantities sorted once by confidence;
:func:`metrics_from_counts` evaluates all of them for many sample weightings at
once, which is how the bootstrap (:mod:`benchmark.core.bootstrap`) works.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from benchmark.core import ranking
from benchmark.core.validation import InputError, as_labels, as_probs, as_scores, check_choice

BRIER_MODES = ("usual", "per_entry")
_CHUNK_ROWS = 4096
_ADDITIVE = ("correct", "nll", "brier")  # columns of SampleStats.additive before the ECE bins


def sac_key(threshold: float) -> str:
    """Result key of SAC at ``threshold``: ``0.98 -> "sac98"``, ``0.995 -> "sac99.5"``."""
    return f"sac{threshold * 100:g}"


def metric_names(sac_threshold: float = 0.98) -> tuple[str, ...]:
    """Keys of :func:`compute_metrics`, in order."""
    return ("accuracy", "macro_f1", "brier", "nll", "ece", "auroc", "aurc", "aurc_trapezoid", "eaurc", "augrc", sac_key(sac_threshold))


@dataclass(frozen=True)
class SampleStats:
    """Per-sample quantities, sorted by confidence (descending, ties grouped).

    ``order[i]`` is the input index of sorted position ``i``; ``ends`` are the
    sorted positions closing each tie group; ``additive`` (N, 3 + bins) holds the
    columns correct, nll, brier and the signed ECE residual ``q - a`` in its
    bin's column (zeros elsewhere); ``correct_pos`` are the sorted positions of
    correct samples.
    """

    order: torch.Tensor
    ends: torch.Tensor
    err: torch.Tensor
    additive: torch.Tensor
    labels: torch.Tensor
    prediction: torch.Tensor
    correct_pos: torch.Tensor
    num_classes: int
    brier_scale: float

    @property
    def n(self) -> int:
        return int(self.order.shape[0])


def _per_sample(probs: torch.Tensor, labels: torch.Tensor, ece_bins: int):
    """NLL, squared error, top-label confidence/class and ECE bin of each sample."""
    n = probs.shape[0]
    eps = torch.finfo(probs.dtype).eps
    nll = torch.empty(n, dtype=torch.float64)
    sq = torch.empty(n, dtype=torch.float64)
    top_conf = torch.empty(n, dtype=probs.dtype)
    top = torch.empty(n, dtype=torch.int64)
    for s in range(0, n, _CHUNK_ROWS):
        p, y = probs[s : s + _CHUNK_ROWS], labels[s : s + _CHUNK_ROWS]
        py = p.gather(1, y[:, None])[:, 0].to(torch.float64)
        nll[s : s + _CHUNK_ROWS] = -torch.log(py.clamp(eps, 1 - eps))
        sq[s : s + _CHUNK_ROWS] = (p * p).sum(1, dtype=torch.float64) - 2 * py + 1
        torch.max(p, dim=1, out=(top_conf[s : s + _CHUNK_ROWS], top[s : s + _CHUNK_ROWS]))
    edges = torch.linspace(0, 1, ece_bins + 1, dtype=probs.dtype)
    bins = (torch.bucketize(top_conf, edges, right=False) - 1).clamp(0, ece_bins - 1)
    return nll, sq, top_conf.to(torch.float64), top, bins


def sample_stats(probs, labels, *, confidence=None, prediction=None, ece_bins: int = 15, brier: str = "usual") -> SampleStats:
    """Validate the inputs and compute the per-sample quantities of every metric."""
    probs = as_probs(probs, "probs")
    n, c = probs.shape
    labels = as_labels(labels, "labels", n=n, num_classes=c)
    check_choice(brier, "brier", BRIER_MODES)
    if not isinstance(ece_bins, int) or isinstance(ece_bins, bool) or ece_bins < 1:
        raise InputError(f"ece_bins: must be a positive integer, got {ece_bins!r}")
    nll, sq, top_conf, top, bins = _per_sample(probs, labels, ece_bins)
    conf = top_conf if confidence is None else as_scores(confidence, "confidence", n=n)
    pred = top if prediction is None else as_labels(prediction, "prediction", n=n, num_classes=c)
    correct = (pred == labels).to(torch.float64)
    additive = torch.zeros(n, len(_ADDITIVE) + ece_bins, dtype=torch.float64)
    additive[:, 0], additive[:, 1], additive[:, 2] = correct, nll, sq
    residual = top_conf - (top == labels).to(torch.float64)
    additive.scatter_(1, (bins + len(_ADDITIVE))[:, None], residual[:, None])
    order, ends = ranking.tie_groups(conf)
    correct_sorted = correct[order]
    return SampleStats(
        order=order,
        ends=ends,
        err=1.0 - correct_sorted,
        additive=additive[order],
        labels=labels[order],
        prediction=pred[order],
        correct_pos=correct_sorted.nonzero().flatten(),
        num_classes=c,
        brier_scale=1.0 if brier == "usual" else 1.0 / c,
    )


def _macro_f1(stats: SampleStats, w: torch.Tensor) -> torch.Tensor:
    c, b = stats.num_classes, w.shape[1]
    true = w.new_zeros(c, b).index_add_(0, stats.labels, w)
    pred = w.new_zeros(c, b).index_add_(0, stats.prediction, w)
    hit = w.new_zeros(c, b).index_add_(0, stats.labels[stats.correct_pos], w[stats.correct_pos])
    denom = true + pred
    present = denom > 0
    f1 = torch.where(present, 2 * hit / denom.clamp_min(1e-300), torch.zeros_like(denom))
    return f1.sum(0) / present.sum(0)


def metrics_from_counts(stats: SampleStats, counts: torch.Tensor, *, sac_threshold: float = 0.98, harmonic: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """All metrics for ``B`` weightings of the samples at once.

    ``counts`` (N, B) float64 holds, in *sorted* order (``stats.order``), how
    often each sample occurs in each weighting (a bootstrap resample; a column
    of ones for the data itself); every column must sum to ``N``. Returns a
    tensor (B,) per metric name of :func:`metric_names`.
    """
    n = float(stats.n)
    h = ranking.harmonic(stats.n) if harmonic is None else harmonic
    sums = stats.additive.T @ counts
    K = ranking.cumulative_at_ends(counts, stats.ends)
    E = ranking.cumulative_at_ends(counts * stats.err[:, None], stats.ends)
    out = {
        "accuracy": sums[0] / n,
        "macro_f1": _macro_f1(stats, counts),
        "brier": sums[2] / n * stats.brier_scale,
        "nll": sums[1] / n,
        "ece": sums[len(_ADDITIVE) :].abs().sum(0) / n,
        "auroc": ranking.auroc(K - E, E),
    }
    out.update(ranking.risk_coverage(K, E, h))
    out[sac_key(sac_threshold)] = ranking.selective_coverage(K, E, 1 - sac_threshold)
    return out


def check_sac_threshold(t: float) -> float:
    if not (isinstance(t, (int, float)) and 0 <= t <= 1):
        raise InputError(f"sac_threshold: must be a number in [0, 1], got {t!r}")
    return float(t)


def compute_metrics(probs, labels, *, confidence=None, prediction=None, ece_bins: int = 15, sac_threshold: float = 0.98, brier: str = "usual") -> dict[str, float]:
    r"""Every metric of one set of predictions (see the module docstring for ties).

    With ``c_i = [yhat_i == y_i]``, ``q_i = max_c p_ic`` and ``a_i = [argmax_c p_ic == y_i]``:

    * ``accuracy = mean_i c_i``
    * ``macro_f1 = mean_k 2 TP_k / (2 TP_k + FP_k + FN_k)`` over the classes present
      in ``y`` or ``yhat`` (scikit-learn ``f1_score(average="macro")``)
    * ``brier = mean_i sum_c (p_ic - [c == y_i])^2`` (0..2); ``brier="per_entry"``
      divides by C (the published code: mean over N*C entries)
    * ``nll = -mean_i log clip(p_{i,y_i}, eps, 1 - eps)``, ``eps`` the machine
      epsilon of ``probs``' dtype (scikit-learn ``log_loss``)
    * ``ece = sum_b |sum_{i in b} (q_i - a_i)| / N`` over ``ece_bins`` equal-width
      bins ``(lo, hi]`` of the *top-label* confidence ``q`` (independent of
      ``confidence``/``prediction``, as published)
    * ``auroc``: tie-averaged AUROC of ``confidence`` separating correct from wrong
      (NaN if all are correct or all wrong)
    * ``aurc`` = ``(1/N) sum_k E(k)/k`` (published), ``aurc_trapezoid``
      (TorchUncertainty), ``eaurc = aurc - aurc(oracle order)``, ``augrc``
      (Traub et al.): see :func:`benchmark.core.ranking.risk_coverage`
    * ``sac<t>`` (``sac98`` by default): the largest coverage ``k/N`` at a
      confidence threshold with ``E(k)/k <= 1 - t``; 0 if none.
    """
    sac_threshold = check_sac_threshold(sac_threshold)
    stats = sample_stats(probs, labels, confidence=confidence, prediction=prediction, ece_bins=ece_bins, brier=brier)
    ones = torch.ones(stats.n, 1, dtype=torch.float64)
    return {k: float(v[0]) for k, v in metrics_from_counts(stats, ones, sac_threshold=sac_threshold).items()}
