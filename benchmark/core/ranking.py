"""Sorting with tie groups, and ROC-type statistics on tie groups.

Samples are sorted by score, highest first; samples with *equal* scores form
one tie group. The statistics below take cumulative weights at the end of each
group, shape ``(B, G)`` for ``B`` weightings (bootstrap resamples; one row of
ones for the data itself) and ``G`` groups, so they never depend on the order of
samples inside a group: AUROC counts a tied positive/negative pair as 1/2
(scikit-learn's tie-averaged statistic) and curves are evaluated at group ends
(thresholds), as scikit-learn's ``roc_curve`` and ``precision_recall_curve`` do.
"""

from __future__ import annotations

import torch


def tie_groups(score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort ``score`` descending (stable) and find its tie groups.

    Returns ``order`` (N,), the sort permutation, and ``group`` (N,), the tie-group
    index (0..G-1) of each *sorted* position.
    """
    sorted_score, order = torch.sort(score, descending=True, stable=True)
    change = torch.zeros(score.shape[0], dtype=torch.int64)
    change[1:] = (sorted_score[1:] != sorted_score[:-1]).to(torch.int64)
    return order, torch.cumsum(change, 0)


def group_ends(group: torch.Tensor) -> torch.Tensor:
    """Sorted position of the last member of each tie group (G,)."""
    n = group.shape[0]
    last = torch.ones(n, dtype=torch.bool)
    last[:-1] = group[1:] != group[:-1]
    return last.nonzero().flatten()


def cumulative_at_ends(weights: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """Cumulative sums of sorted ``weights`` (B, N) taken at the group ends -> (B, G)."""
    cum = torch.cumsum(weights, dim=1)
    return cum if ends.shape[0] == weights.shape[1] else cum.index_select(1, ends)


def increments(cum: torch.Tensor) -> torch.Tensor:
    """Per-group amounts from cumulative sums: ``cum[:, g] - cum[:, g - 1]``."""
    return torch.diff(cum, dim=1, prepend=torch.zeros_like(cum[:, :1]))


def auroc(
    pos: torch.Tensor, neg: torch.Tensor, pos_g: torch.Tensor | None = None, neg_g: torch.Tensor | None = None
) -> torch.Tensor:
    """Tie-averaged AUROC ``P(s_pos > s_neg) + P(s_pos = s_neg) / 2`` (B,).

    ``pos``/``neg`` are cumulative positive/negative weights at the group ends.
    ``AUROC = sum_g pos_g (NEG - NEG_g + neg_g / 2) / (POS NEG)`` with per-group
    amounts ``pos_g``, ``neg_g``, cumulative ``NEG_g`` and totals ``POS``, ``NEG``;
    NaN when either class is empty. ``pos_g``/``neg_g``: the per-group amounts when the
    caller has them (the same numbers as :func:`increments` for integer weights).
    """
    pos_g = increments(pos) if pos_g is None else pos_g
    neg_g = increments(neg) if neg_g is None else neg_g
    total_neg = neg[:, -1:]
    num = (pos_g * (total_neg - neg + 0.5 * neg_g)).sum(1)
    return num / (pos[:, -1] * total_neg[:, 0])


def average_precision(pos: torch.Tensor, total: torch.Tensor, pos_g: torch.Tensor | None = None) -> torch.Tensor:
    """Average precision, as scikit-learn (no interpolation) (B,):
    ``AP = sum_g (pos_g / POS) (POS_g / K_g)`` with ``K_g`` the cumulative weight of
    all samples; NaN without positives.
    """
    prec = torch.where(total > 0, pos / total.clamp_min(1e-300), torch.zeros_like(pos))
    return ((increments(pos) if pos_g is None else pos_g) * prec).sum(1) / pos[:, -1]


def fpr_at_tpr(pos: torch.Tensor, neg: torch.Tensor, tpr: float = 0.95) -> torch.Tensor:
    """False positive rate ``NEG_g / NEG`` at the first group end where the true
    positive rate ``POS_g / POS`` reaches ``tpr`` (B,)."""
    reached = (pos / pos[:, -1:]) >= tpr
    first = torch.argmax(reached.to(torch.int8), dim=1, keepdim=True)
    return neg.gather(1, first)[:, 0] / neg[:, -1]
