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

from numbers import Real

import torch

from benchmark.core.f1 import macro_f1_table
from benchmark.core.samples import ADDITIVE_COLUMNS, GroupIndex, SampleStats, sample_stats
from benchmark.core.validation import InputError, TensorLike


def sac_key(threshold: float) -> str:
    """Result key of SAC at ``threshold``: ``0.98 -> "sac98"``, ``0.995 -> "sac99.5"``."""
    return f"sac{threshold * 100:g}"


def metric_names(sac_threshold: float = 0.98) -> tuple[str, ...]:
    """Keys of :func:`compute_metrics`, in order."""
    return (
        "accuracy",
        "macro_f1",
        "macro_f1_wilds",
        "brier",
        "nll",
        "ece",
        "auroc",
        "aurc",
        "aurc_trapezoid",
        "eaurc",
        "augrc",
        sac_key(sac_threshold),
    )


def _macro_f1(stats: SampleStats, w: torch.Tensor, w_err: torch.Tensor) -> dict[str, torch.Tensor]:
    """:func:`macro_f1_table` of ``B`` weightings of the samples (``TP = T - missed``)."""
    b, c = w.shape[0], stats.num_classes
    true = w.new_zeros(b, c).index_add_(1, stats.labels, w).to(torch.float64)
    pred = w.new_zeros(b, c).index_add_(1, stats.prediction, w).to(torch.float64)
    missed = w.new_zeros(b, c).index_add_(1, stats.labels[stats.err_idx], w_err).to(torch.float64)
    union, wilds = macro_f1_table(true - missed, true, pred)
    return {"macro_f1": union, "macro_f1_wilds": wilds}


def _lookup(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``table[idx]`` (index_select is several times faster than advanced indexing)."""
    return table.index_select(0, idx.flatten()).view(idx.shape)


def _group_terms(
    g: GroupIndex,
    cum: torch.Tensor,
    cum_err: torch.Tensor,
    tables: tuple[torch.Tensor, torch.Tensor],
    n: int,
    max_risk: float,
    pure: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Row sums of the error-group terms of :func:`metrics_from_counts`, the SAC candidate and the groups' error
    rates (1 in every non-empty pure group)."""
    f64 = torch.float64
    s_tab, q_tab = tables
    k_prev, k_end = cum.index_select(1, g.k_before), cum.index_select(1, g.k_end)
    e_prev = cum_err.index_select(1, g.e_before).to(f64)
    i_prev, i_end = k_prev.long(), k_end.long()
    k_prev, k_end = k_prev.to(f64), k_end.to(f64)
    n_g = k_end - k_prev
    d_s = _lookup(s_tab, i_end) - _lookup(s_tab, i_prev)
    d_q = _lookup(q_tab, i_end) - _lookup(q_tab, i_prev)
    if pure:  # every member wrong: e_g = n_g and r_g = 1 wherever n_g > 0
        e_g, e_end, rate = n_g, e_prev + n_g, (n_g > 0).to(f64)
        gen = n_g.sum(1) * (n + 0.5) - d_q.sum(1)
        risk, pairs = d_s.sum(1), (n_g * (k_prev - e_prev)).sum(1)
    else:
        e_end = cum_err.index_select(1, g.e_end).to(f64)
        e_g = e_end - e_prev
        rate = torch.where(n_g > 0, e_g / n_g.clamp_min(1), torch.zeros_like(e_g))
        gen = (rate * (n_g * (n + 0.5) - d_q)).sum(1)
        risk, pairs = (rate * d_s).sum(1), (e_g * (k_prev - e_prev + 0.5 * (n_g - e_g))).sum(1)
    sac = torch.zeros(cum.shape[0], dtype=f64)
    if n_g.shape[1]:
        for k, e in ((k_prev, e_prev), (k_end, e_end)):
            sac = torch.maximum(sac, torch.where(e / k <= max_risk, k, 0.0).amax(1))  # NaN (k = 0) is False
    return risk, gen, pairs, sac, rate


def metrics_from_counts(
    stats: SampleStats, counts: torch.Tensor, *, sac_threshold: float = 0.98
) -> dict[str, torch.Tensor]:
    """All metrics for ``B`` weightings of the samples at once.

    ``counts`` (B, N+1), float32 or float64 (exact integers), holds how often
    each sorted position (1-based, column 0 the zero pad) occurs in each
    weighting: a bootstrap resample, or ones for the data itself. Every row sums
    to N. Returns a float64 tensor (B,) per metric of :func:`metric_names`.

    Risk-coverage metrics need only the *error groups* (tie groups holding an
    error). With ``E(k)`` linear inside each tie group, a group spanning
    ``k in (K_{g-1}, K_g]`` with ``n_g`` samples, ``e_g`` errors and error rate
    ``r_g = e_g / n_g`` gives, with ``H`` the harmonic numbers and
    ``S(m) = sum_{j<m} H_j = m (H_m - 1)``:

    * ``sum_k E(k) / k = E(n) H_n - sum_g r_g (S(K_g) - S(K_{g-1}))``
    * ``sum_k E(k) = sum_g r_g (n_g (n + 1/2) - (Q(K_g) - Q(K_{g-1})))``, ``Q(m) = m^2 / 2``
    * correct-above-wrong pairs ``= sum_g e_g (C_{g-1} + (n_g - e_g) / 2)``,
      ``C_{g-1}`` the correct samples before the group.

    SAC checks the group ends just before and at the end of each error group,
    and ``k = n``: the selective risk only rises inside error groups.
    """
    b, n = counts.shape[0], counts.shape[1] - 1
    f64 = torch.float64
    sums = counts.to(f64) @ stats.additive
    cum = torch.cumsum(counts, 1)
    w_err = counts.index_select(1, stats.err_idx)
    cum_err = torch.cumsum(w_err, 1)
    e_tot = cum_err[:, -1].to(f64)
    harm = torch.zeros(n + 1, dtype=f64)
    harm[1:] = torch.cumsum(1.0 / torch.arange(1, n + 1, dtype=f64), 0)
    m = torch.arange(n + 1, dtype=f64)
    tables = (m * (harm - 1), 0.5 * m * m)  # S(m) = sum_{j<m} H_j, Q(m) = m^2 / 2
    max_risk = 1 - sac_threshold
    ds_p, gen_p, pairs_p, sac_p, _ = _group_terms(stats.pure, cum, cum_err, tables, n, max_risk, pure=True)
    ds_m, gen_m, pairs_m, sac_m, rate_m = _group_terms(stats.mixed, cum, cum_err, tables, n, max_risk, pure=False)
    risk_sum = e_tot * harm[n] - ds_p - ds_m

    first = torch.searchsorted(cum, torch.full((b, 1), 0.5, dtype=cum.dtype))[:, 0]
    kind = stats.first_kind[first]
    risk_1 = (kind == -1).to(f64)
    if rate_m.shape[1]:
        risk_1 = torch.where(kind >= 0, rate_m.gather(1, kind.clamp_min(0)[:, None])[:, 0], risk_1)
    correct_tot = n - e_tot
    optimal = (e_tot - correct_tot * (harm[n] - _lookup(harm, correct_tot.long()))) / n
    sac_all = torch.where(e_tot / n <= max_risk, float(n), 0.0)
    trapezoid = (
        (risk_sum - 0.5 * (risk_1 + e_tot / n)) / (n - 1) if n >= 2 else torch.full((b,), float("nan"), dtype=f64)
    )
    return {
        "accuracy": sums[:, 0] / n,
        **_macro_f1(stats, counts, w_err),
        "brier": sums[:, 2] / n * stats.brier_scale,
        "nll": sums[:, 1] / n,
        "ece": sums[:, len(ADDITIVE_COLUMNS) :].abs().sum(1) / n,
        "auroc": (pairs_p + pairs_m) / (correct_tot * e_tot),
        "aurc": risk_sum / n,
        "aurc_trapezoid": trapezoid,
        "eaurc": risk_sum / n - optimal,
        "augrc": (gen_p + gen_m - 0.5 * e_tot) / (n * n),
        sac_key(sac_threshold): torch.maximum(torch.maximum(sac_p, sac_m), sac_all) / n,
    }


def point_metrics(stats: SampleStats, *, sac_threshold: float = 0.98) -> dict[str, float]:
    """Every metric of the data itself (each sample weighted once), float64."""
    ones = torch.ones(1, stats.n + 1, dtype=torch.float64)
    ones[0, 0] = 0  # the pad position
    return {k: float(v[0]) for k, v in metrics_from_counts(stats, ones, sac_threshold=sac_threshold).items()}


def check_sac_threshold(t: float) -> float:
    """``t`` as a float in [0, 1], else :class:`InputError`."""
    if not (isinstance(t, Real) and not isinstance(t, bool) and 0 <= t <= 1):
        raise InputError(f"sac_threshold: must be a number in [0, 1], got {t!r}")
    return float(t)


def compute_metrics(
    probs: TensorLike,
    labels: TensorLike,
    *,
    confidence: TensorLike | None = None,
    prediction: TensorLike | None = None,
    ece_bins: int = 15,
    sac_threshold: float = 0.98,
    brier: str = "usual",
) -> dict[str, float]:
    r"""Every metric of one set of predictions (see the module docstring for ties).

    With ``c_i = [yhat_i == y_i]``, ``q_i = max_c p_ic`` and ``a_i = [argmax_c p_ic == y_i]``:

    * ``accuracy = mean_i c_i``
    * ``macro_f1 = mean_k 2 TP_k / (2 TP_k + FP_k + FN_k)`` over the classes present
      in ``y`` or ``yhat`` (scikit-learn ``f1_score(average="macro")`` without
      ``labels``: the Asymmetric Duos code's convention)
    * ``macro_f1_wilds``: the same mean over the classes present in ``y`` only
      (``f1_score(..., average="macro", labels=unique(y))``: WILDS' ``F1`` metric)
    * ``brier = mean_i sum_c (p_ic - [c == y_i])^2`` (0..2); ``brier="per_entry"``
      divides by C (the published code: mean over N*C entries)
    * ``nll = -mean_i log clip(p_{i,y_i}, eps, 1 - eps)``, ``eps`` the machine
      epsilon of ``probs``' dtype (scikit-learn ``log_loss``)
    * ``ece = sum_b |sum_{i in b} (q_i - a_i)| / N`` over ``ece_bins`` equal-width
      bins ``(lo, hi]`` of the *top-label* confidence ``q`` (independent of
      ``confidence``/``prediction``, as published)
    * ``auroc``: tie-averaged AUROC of ``confidence`` separating correct from wrong
      (NaN if all are correct or all wrong)
    * ``aurc = (1/N) sum_{k=1..N} risk_k`` with ``risk_k = E(k) / k`` (published)
    * ``aurc_trapezoid``: trapezoid of ``risk_k`` over coverage ``k/N``, ``k = 1..N``,
      divided by ``1 - 1/N`` (TorchUncertainty):
      ``(sum_k risk_k - (risk_1 + risk_N) / 2) / (N - 1)``; NaN for N = 1
    * ``eaurc = aurc - aurc*``, ``aurc*`` for the oracle order (errors last): with
      ``e`` errors, ``c = N - e``, ``aurc* = (e - c (H_N - H_c)) / N``
    * ``augrc`` (Traub et al. 2024): trapezoid of the generalised risk ``E(k) / N``
      over coverage ``k/N`` from the origin: ``(sum_k E(k) - E(N) / 2) / N^2``
    * ``sac<t>`` (``sac98`` by default): the largest coverage ``k/N`` at a
      confidence threshold with ``E(k)/k <= 1 - t``; 0 if none.
    """
    sac_threshold = check_sac_threshold(sac_threshold)
    stats = sample_stats(probs, labels, confidence=confidence, prediction=prediction, ece_bins=ece_bins, brier=brier)
    return point_metrics(stats, sac_threshold=sac_threshold)
