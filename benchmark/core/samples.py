"""Per-sample quantities of one prediction, sorted once by confidence.

:func:`sample_stats` validates a prediction and reduces it to what every metric
needs: per-sample terms (correct, NLL, Brier, ECE residual), labels and
predicted classes, and the tie-group structure of the confidence. Sorted
positions are 1-based; position 0 is an empty pad, so that a cumulative sum over
positions starts at 0 (``cum[:, j]`` = weight of positions ``1..j``).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import torch

from benchmark.core import ranking
from benchmark.core.validation import InputError, TensorLike, as_labels, as_probs, as_scores, check_choice

BRIER_MODES = ("usual", "per_entry")
ADDITIVE_COLUMNS = ("correct", "nll", "brier")  # then one ECE-residual column per bin
_CHUNK_ROWS = 4096


@dataclass(frozen=True)
class GroupIndex:
    """Error groups as indices into the cumulative sums.

    ``k_before``/``k_end``: columns of ``cum`` just before the group and at its
    end; ``e_before``/``e_end``: the same for the cumulative error weights.
    """

    k_before: torch.Tensor
    k_end: torch.Tensor
    e_before: torch.Tensor
    e_end: torch.Tensor

    def select(self, mask: torch.Tensor) -> GroupIndex:
        """The groups where ``mask`` holds."""
        return GroupIndex(self.k_before[mask], self.k_end[mask], self.e_before[mask], self.e_end[mask])


@dataclass(frozen=True)
class SampleStats:
    """Sorted per-sample quantities (see the module docstring for the layout).

    ``order[i]``: input index of sorted position ``i + 1``; ``rank``: sorted
    position of each input sample. ``additive`` (N+1, 3 + bins): columns correct,
    nll, brier and the signed ECE residual ``q - a`` in its bin's column.
    ``err_idx``: 0 followed by the sorted positions of wrong predictions. An
    *error group* is a tie group holding a wrong prediction; it is *pure* when all
    its members are wrong (``pure``) and *mixed* otherwise (``mixed``).
    ``first_kind[j]`` describes the tie group of position ``j``: -2 without
    errors, -1 pure, ``m >= 0`` mixed group ``m``.
    """

    order: torch.Tensor
    rank: torch.Tensor
    additive: torch.Tensor
    labels: torch.Tensor
    prediction: torch.Tensor
    err_idx: torch.Tensor
    pure: GroupIndex
    mixed: GroupIndex
    first_kind: torch.Tensor
    num_classes: int
    brier_scale: float

    @property
    def n(self) -> int:
        """The number of samples."""
        return int(self.order.shape[0])


def _per_sample(
    probs: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """NLL, squared error and top-label confidence/class of each sample."""
    n = probs.shape[0]
    eps = torch.finfo(probs.dtype).eps
    nll = torch.empty(n, dtype=torch.float64)
    sq = torch.empty(n, dtype=torch.float64)
    top_conf = torch.empty(n, dtype=probs.dtype)
    top = torch.empty(n, dtype=torch.int64)
    for s in range(0, n, _CHUNK_ROWS):
        rows = slice(s, s + _CHUNK_ROWS)
        p, y = probs[rows], labels[rows]
        py = p.gather(1, y[:, None])[:, 0].to(torch.float64)
        nll[rows] = -torch.log(py.clamp(eps, 1 - eps))
        # sum_c (p_c - [c = y])^2 = sum_c p_c^2 - 2 p_y + 1
        sq[rows] = torch.linalg.vecdot(p, p).to(torch.float64) - 2 * py + 1
        torch.max(p, dim=1, out=(top_conf[rows], top[rows]))
    return nll, sq, top_conf, top


def _pad(t: torch.Tensor, value: float = 0) -> torch.Tensor:
    return torch.cat([torch.full((1, *t.shape[1:]), value, dtype=t.dtype), t])


def sample_stats(
    probs: TensorLike,
    labels: TensorLike,
    *,
    confidence: TensorLike | None = None,
    prediction: TensorLike | None = None,
    ece_bins: int = 15,
    brier: str = "usual",
) -> SampleStats:
    """Validate a prediction and compute the sorted per-sample quantities.

    ``confidence`` defaults to the top-label probability ``max_c p``,
    ``prediction`` to ``argmax_c p`` (first index on ties).
    """
    probs = as_probs(probs, "probs")
    n, c = probs.shape
    labels = as_labels(labels, "labels", n=n, num_classes=c)
    nll, sq, top_conf, top = _per_sample(probs, labels)
    return stats_from_terms(
        nll,
        sq,
        top_conf,
        top,
        labels,
        num_classes=c,
        confidence=confidence,
        prediction=prediction,
        ece_bins=ece_bins,
        brier=brier,
    )


def stats_from_terms(
    nll: torch.Tensor,
    sq: torch.Tensor,
    top_conf: torch.Tensor,
    top: torch.Tensor,
    labels: TensorLike,
    *,
    num_classes: int,
    confidence: TensorLike | None = None,
    prediction: TensorLike | None = None,
    ece_bins: int = 15,
    brier: str = "usual",
) -> SampleStats:
    """:func:`sample_stats` from per-sample terms of the probabilities ``p`` (N,) each:
    ``nll = -log clip(p_y)`` and ``sq = sum_c (p_c - [c = y])^2`` (float64),
    ``top_conf = max_c p`` (in the probabilities' dtype: it sets the ECE bin)
    and ``top = argmax_c p`` (see :mod:`benchmark.core.streaming`)."""
    n = top.shape[0]
    labels = as_labels(labels, "labels", n=n, num_classes=num_classes)
    check_choice(brier, "brier", BRIER_MODES)
    if not isinstance(ece_bins, Integral) or isinstance(ece_bins, bool) or ece_bins < 1:
        raise InputError(f"ece_bins: must be a positive integer, got {ece_bins!r}")
    ece_bins = int(ece_bins)
    edges = torch.linspace(0, 1, ece_bins + 1, dtype=top_conf.dtype)
    bins = (torch.bucketize(top_conf, edges, right=False) - 1).clamp(0, ece_bins - 1)
    top_conf = top_conf.to(torch.float64)
    conf = top_conf if confidence is None else as_scores(confidence, "confidence", n=n)
    pred = top if prediction is None else as_labels(prediction, "prediction", n=n, num_classes=num_classes)
    correct = pred == labels
    order, group = ranking.tie_groups(conf)
    additive = torch.zeros(n + 1, len(ADDITIVE_COLUMNS) + ece_bins, dtype=torch.float64)  # sorted, row 0 the pad
    additive[1:, 0], additive[1:, 1], additive[1:, 2] = correct[order], nll[order], sq[order]
    residual = top_conf[order] - (top[order] == labels[order]).to(torch.float64)
    additive[1:].scatter_(1, (bins[order] + len(ADDITIVE_COLUMNS))[:, None], residual[:, None])
    rank = torch.empty_like(order)
    rank[order] = torch.arange(1, n + 1)
    err_pos = (~correct[order]).nonzero().flatten()  # 0-based sorted positions
    err_group, errors_in = torch.unique_consecutive(group[err_pos], return_counts=True)
    ends = ranking.group_ends(group)
    sizes = torch.diff(ends, prepend=torch.tensor([-1]))
    e_end = torch.cumsum(errors_in, 0)
    groups = GroupIndex(
        k_before=ends[err_group] + 1 - sizes[err_group],
        k_end=ends[err_group] + 1,
        e_before=e_end - errors_in,
        e_end=e_end,
    )
    is_pure = errors_in == sizes[err_group]
    kind = torch.full((ends.shape[0],), -2, dtype=torch.int64)
    kind[err_group[is_pure]] = -1
    kind[err_group[~is_pure]] = torch.arange(int((~is_pure).sum()))
    return SampleStats(
        order=order,
        rank=rank,
        additive=additive,
        labels=_pad(labels[order]),
        prediction=_pad(pred[order]),
        err_idx=_pad(err_pos + 1),
        pure=groups.select(is_pure),
        mixed=groups.select(~is_pure),
        first_kind=_pad(kind[group], -2),
        num_classes=num_classes,
        brier_scale=1.0 if brier == "usual" else 1.0 / num_classes,
    )
