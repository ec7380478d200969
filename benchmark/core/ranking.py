"""Ranking metrics on tie groups, vectorised over weightings (bootstrap resamples).

Samples are sorted by score, highest first, and samples with *equal* scores form
one tie group. Everything here works on cumulative sums taken at the end of each
group: tensors of shape ``(G, B)`` for ``G`` groups and ``B`` weightings (one
column per bootstrap resample; a single column of ones for the plain metric).
Working at group level is what makes every metric independent of the input order:

* AUROC, AURC, E-AURC and AUGRC equal their *expectation over all orderings of
  tied samples* (for AUROC this is the usual tie-averaged statistic, as in
  scikit-learn). Within a group, the expected number of errors among the first
  ``k`` samples grows linearly, so the cumulative error count ``E(k)`` is
  linearly interpolated between group ends.
* SAC is evaluated only at group ends: a confidence threshold cannot accept
  part of a tie group.

All functions take ``K`` (cumulative sample weight) and/or ``E`` (cumulative
error weight), float64, with ``K[-1] == n`` for every column.
"""
from __future__ import annotations

import torch


def tie_groups(score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort ``score`` descending and find its tie groups.

    Returns ``order`` (N,), the stable descending sort permutation, and ``ends``
    (G,), the sorted position of the last sample of each group of equal scores.
    """
    sorted_score, order = torch.sort(score, descending=True, stable=True)
    change = sorted_score[1:] != sorted_score[:-1]
    ends = torch.cat([change.nonzero().flatten(), torch.tensor([score.shape[0] - 1])])
    return order, ends


def cumulative_at_ends(values: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """Cumulative sums of sorted ``values`` (N, B) taken at the group ends -> (G, B)."""
    cum = torch.cumsum(values, dim=0)
    return cum if ends.shape[0] == values.shape[0] else cum.index_select(0, ends)


def increments(cum: torch.Tensor) -> torch.Tensor:
    """Per-group amounts from cumulative sums: ``cum[g] - cum[g - 1]``."""
    return torch.diff(cum, dim=0, prepend=torch.zeros_like(cum[:1]))


def harmonic(n: int) -> torch.Tensor:
    """Harmonic numbers ``H[k] = sum_{j<=k} 1/j`` for ``k = 0..n`` (float64)."""
    return torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(1.0 / torch.arange(1, n + 1, dtype=torch.float64), 0)])


def auroc(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """Tie-averaged AUROC of the ranking: ``P(s_pos > s_neg) + P(s_pos = s_neg) / 2``.

    ``pos``/``neg``: cumulative positive/negative weight at the group ends (G, B).
    ``AUROC = sum_g pos_g (NEG - NEG_g + neg_g / 2) / (POS * NEG)`` with per-group
    amounts ``pos_g``, ``neg_g``, cumulative ``NEG_g`` and totals ``POS``, ``NEG``.
    NaN when either class is empty.
    """
    pos_g, neg_g = increments(pos), increments(neg)
    total_neg = neg[-1]
    num = (pos_g * (total_neg - neg + 0.5 * neg_g)).sum(0)
    return num / (pos[-1] * total_neg)


def risk_coverage(K: torch.Tensor, E: torch.Tensor, H: torch.Tensor) -> dict[str, torch.Tensor]:
    """AURC (both definitions), E-AURC and AUGRC from group-end cumulative sums.

    With ``n = K[-1]`` samples, ``E(k)`` errors among the ``k`` most confident
    (linear within tie groups) and selective risk ``risk_k = E(k) / k``:

    * ``aurc`` (published): ``(1/n) sum_{k=1..n} risk_k``. Group ``g`` covers
      ``k in (K_{g-1}, K_g]`` with error rate ``r_g = e_g / n_g`` and contributes
      ``(E_{g-1} - r_g K_{g-1}) (H[K_g] - H[K_{g-1}]) + e_g`` to the sum.
    * ``aurc_trapezoid`` (TorchUncertainty): trapezoid of ``risk_k`` over coverage
      ``k/n``, ``k = 1..n``, divided by ``1 - 1/n``:
      ``(sum_k risk_k - (risk_1 + risk_n) / 2) / (n - 1)``; NaN for ``n < 2``.
    * ``eaurc``: ``aurc`` minus the plain AURC of the oracle ordering (all correct
      first): with ``e`` errors and ``c = n - e``, ``AURC* = (e - c (H[n] - H[c])) / n``.
    * ``augrc`` (Traub et al. 2024): trapezoid of the generalised risk ``E(k) / n``
      over coverage from the origin: ``(sum_{k=1..n} E(k) - E(n) / 2) / n^2``,
      with ``sum_{k in g} E(k) = n_g E_{g-1} + e_g (n_g + 1) / 2``.

    ``H`` is :func:`harmonic` of at least ``n``.
    """
    n_g, e_g = increments(K), increments(E)
    K_prev, E_prev = K - n_g, E - e_g
    rate = torch.where(n_g > 0, e_g / n_g.clamp_min(1), torch.zeros_like(e_g))
    dH = H[K.long()] - H[K_prev.long()]
    risk_sum = ((E_prev - rate * K_prev) * dH + e_g).sum(0)
    n, errors = K[-1], E[-1]
    first = torch.argmax((n_g > 0).to(torch.int8), dim=0, keepdim=True)
    risk_1 = rate.gather(0, first)[0]
    trapezoid = (risk_sum - 0.5 * (risk_1 + errors / n)) / (n - 1)
    correct = n - errors
    optimal = (errors - correct * (H[n.long()] - H[correct.long()])) / n
    augrc = ((n_g * E_prev + 0.5 * e_g * (n_g + 1)).sum(0) - 0.5 * errors) / (n * n)
    return {
        "aurc": risk_sum / n,
        "aurc_trapezoid": torch.where(n >= 2, trapezoid, torch.full_like(trapezoid, float("nan"))),
        "eaurc": risk_sum / n - optimal,
        "augrc": augrc,
    }


def selective_coverage(K: torch.Tensor, E: torch.Tensor, max_risk: float) -> torch.Tensor:
    """SAC: the largest coverage ``K_g / n`` at a group end with ``E_g / K_g <= max_risk``;
    0 when no threshold qualifies.
    """
    ok = (E / K) <= max_risk  # NaN (K == 0) compares False
    return torch.where(ok, K, torch.zeros_like(K)).amax(0) / K[-1]


def average_precision(pos: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """Average precision of the ranking (as scikit-learn, no interpolation):
    ``AP = sum_g (pos_g / POS) * (POS_g / K_g)``; NaN without positives.
    """
    pos_g = increments(pos)
    prec = torch.where(total > 0, pos / total.clamp_min(1e-300), torch.zeros_like(pos))
    return (pos_g * prec).sum(0) / pos[-1]


def fpr_at_tpr(pos: torch.Tensor, neg: torch.Tensor, tpr: float = 0.95) -> torch.Tensor:
    """False positive rate at the first group end whose true positive rate reaches ``tpr``."""
    reached = (pos / pos[-1]) >= tpr
    first = torch.argmax(reached.to(torch.int8), dim=0, keepdim=True)
    return neg.gather(0, first)[0] / neg[-1]
