"""Metrics of softmax mixtures from per-sample terms, computed in row blocks.

A *mixture* is ``p = softmax(sum_j w_j z_j)`` of members' logits ``z_j`` (N, C):
a temperature-scaled model (``w = 1/T``) or an Asymmetric Duo (see
:mod:`benchmark.core.combine`). Every metric of :mod:`benchmark.core.metrics`
needs only a few numbers per sample, so :func:`mixture_terms` walks the logits
in blocks of rows (which may be memory-mapped) and never holds an (N, C)
probability matrix: per sample ``max_c p``, ``argmax_c p``, ``p_y`` (NLL),
``sum_c p_c^2`` (Brier) and, for a duo, ``p[argmax_c z_base]`` (the "published"
confidence).

:func:`terms_stats` turns the terms into the :class:`~benchmark.core.samples.SampleStats`
that :func:`~benchmark.core.samples.sample_stats` computes from the probabilities
(for :func:`~benchmark.core.evaluate.evaluate_stats` and
:func:`~benchmark.core.evaluate.paired_difference_stats`). The values agree with the probability-matrix path to float32
rounding (``torch.softmax`` instead of :mod:`~benchmark.core.combine`'s
explicit ``exp / sum``, about 1e-6 relative). :func:`mixture_probs` is the same
mixture as a probability matrix, for the callers that need one: an Asymmetric
Duo is computed by this module alone, as terms or as a matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import isfinite

import numpy as np
import torch

from benchmark.core.samples import SampleStats, stats_from_terms
from benchmark.core.validation import InputError, TensorLike, as_labels, check_same_shape

_ROWS = 256  # rows per block: a few (rows, C) float32 buffers stay in cache


@dataclass(frozen=True)
class MixtureTerms:
    """Per-sample terms of one mixture ``p`` (see the module docstring); (N,) each."""

    top_conf: torch.Tensor  # max_c p (the logits' dtype)
    top: torch.Tensor  # argmax_c p, int64
    base_conf: torch.Tensor | None  # p[argmax_c z_0] when asked for
    nll: torch.Tensor | None  # -log clip(p_y, eps, 1 - eps), float64, when labels are given
    sq: torch.Tensor | None  # sum_c (p_c - [c = y])^2, float64, when labels are given


def _check_members(logits: Sequence[torch.Tensor], weights: Sequence[Sequence[float]]) -> None:
    if not logits:
        raise InputError("logits: needs at least one member")
    for j, z in enumerate(logits):
        if not isinstance(z, torch.Tensor) or not z.is_floating_point() or z.ndim != 2 or min(z.shape) == 0:
            what = f"{z.dtype} {tuple(z.shape)}" if isinstance(z, torch.Tensor) else type(z).__name__
            raise InputError(f"logits[{j}]: must be a non-empty (N, C) floating tensor, got {what}")
        check_same_shape(logits[0], z, "logits[0]", f"logits[{j}]")
    if not weights:
        raise InputError("weights: needs at least one mixture")
    for k, w in enumerate(weights):
        if len(w) != len(logits) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and isfinite(x) for x in w
        ):
            raise InputError(f"weights[{k}]: must be {len(logits)} finite numbers (one per member), got {w!r}")


def _raise_non_finite(logits: Sequence[torch.Tensor], rows: slice) -> None:
    for j, z in enumerate(logits):
        bad = ~torch.isfinite(z[rows])
        if bad.any():
            row = rows.start + int(bad.any(1).nonzero()[0])
            raise InputError(
                f"logits[{j}]: contains {'NaN' if torch.isnan(z[rows]).any() else 'Inf'} (first non-finite value in "
                f"row {row})"
            )
    raise InputError(f"logits: the weighted sum overflows in rows {rows.start}..{rows.stop - 1}")


def _argmax(block: torch.Tensor) -> torch.Tensor:
    # numpy's SIMD argmax is several times faster than torch's on CPU; both return the first maximum
    return torch.from_numpy(np.argmax(block.numpy(), axis=1))


def _mixture_block(
    logits: Sequence[torch.Tensor],
    rows: slice,
    blocks: list[torch.Tensor],
    w: Sequence[float],
    s: torch.Tensor,
    out: torch.Tensor,
) -> torch.Tensor:
    """``out = softmax(sum_j w_j blocks[j])`` for one block of ``rows`` (``s``: scratch of the block's shape)."""
    torch.mul(blocks[0], w[0], out=s)
    for b, wj in zip(blocks[1:], w[1:]):
        s.add_(b, alpha=wj)
    if not torch.isfinite(s.sum()):  # a non-finite member (any weight) or an overflow
        _raise_non_finite(logits, rows)
    return torch.softmax(s, 1, out=out)


def mixture_probs(
    logits: Sequence[torch.Tensor], weights: Sequence[float]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The probability matrix of one mixture ``p = softmax(sum_j weights[j] logits[j])``, in row blocks.

    Returns ``(p (N, C), max_c p (N,), argmax_c p (N,) int64)``: bit for bit the
    ``p``, ``top_conf`` and ``top`` that :func:`mixture_terms` computes for the
    same mixture, for callers that need the whole matrix (the ``duo`` command,
    the curves figure, through :func:`~benchmark.core.combine.duo_prediction`).
    """
    _check_members(logits, [weights])
    n, c = logits[0].shape
    probs, top = torch.empty(n, c, dtype=logits[0].dtype), torch.empty(n, dtype=torch.int64)
    s = torch.empty(min(_ROWS, n), c, dtype=logits[0].dtype)
    for start in range(0, n, _ROWS):
        rows = slice(start, start + _ROWS)
        blocks = [z[rows] for z in logits]
        p = _mixture_block(logits, rows, blocks, weights, s[: blocks[0].shape[0]], probs[rows])
        top[rows] = _argmax(p)
    return probs, probs.gather(1, top[:, None])[:, 0], top


def mixture_terms(
    logits: Sequence[torch.Tensor],
    weights: Sequence[Sequence[float]],
    labels: TensorLike | None = None,
    *,
    base_conf: bool = False,
    release: Callable[[torch.Tensor], object] | None = None,
) -> tuple[list[MixtureTerms], torch.Tensor | None]:
    """Terms of the mixtures ``p_k = softmax(sum_j weights[k][j] logits[j])``, in one pass over the rows.

    ``logits``: members (N, C), finite, same shape; ``labels`` (N,) or None (then
    no ``nll``/``sq``, e.g. on OOD data). With ``base_conf`` each mixture also
    gets ``p_k[argmax_c logits[0]]``, and ``argmax_c logits[0]`` (N,) is returned
    as the second value (else None). ``release(block)``, if given, is called with
    each member's block of rows once it is used (the evaluate stage drops the
    pages of memory-mapped logits with it).
    """
    _check_members(logits, weights)
    n, c = logits[0].shape
    dtype = logits[0].dtype
    y = None if labels is None else as_labels(labels, "labels", n=n, num_classes=c)
    names = ["top_conf", "top"] + (["base"] if base_conf else []) + (["py", "p2"] if y is not None else [])
    out = [{k: torch.empty(n, dtype=torch.int64 if k == "top" else dtype) for k in names} for _ in weights]
    base_pred = torch.empty(n if base_conf else 0, dtype=torch.int64)  # filled (and returned) with base_conf only
    s, probs = torch.empty(min(_ROWS, n), c, dtype=dtype), torch.empty(min(_ROWS, n), c, dtype=dtype)
    for start in range(0, n, _ROWS):
        rows = slice(start, start + _ROWS)
        blocks = [z[rows] for z in logits]
        if base_conf:
            base_pred[rows] = _argmax(blocks[0])
        for w, o in zip(weights, out):
            s = s[: blocks[0].shape[0]]
            p = _mixture_block(logits, rows, blocks, w, s, probs[: s.shape[0]])
            top = _argmax(p)
            o["top"][rows] = top
            o["top_conf"][rows] = p.gather(1, top[:, None])[:, 0]
            if base_conf:
                o["base"][rows] = p.gather(1, base_pred[rows, None])[:, 0]
            if y is not None:
                o["py"][rows] = p.gather(1, y[rows, None])[:, 0]
                torch.linalg.vecdot(p, p, out=o["p2"][rows])
        if release is not None:
            for b in blocks:
                release(b)
    eps = torch.finfo(dtype).eps
    result = []
    for o in out:
        nll = sq = None
        if y is not None:
            py = o["py"].to(torch.float64)
            nll = -torch.log(py.clamp(eps, 1 - eps))
            sq = o["p2"].to(torch.float64) - 2 * py + 1  # sum_c (p_c - [c = y])^2
        result.append(MixtureTerms(top_conf=o["top_conf"], top=o["top"], base_conf=o.get("base"), nll=nll, sq=sq))
    return result, base_pred if base_conf else None


def terms_stats(
    terms: MixtureTerms,
    labels: TensorLike,
    *,
    num_classes: int,
    confidence: TensorLike | None = None,
    prediction: TensorLike | None = None,
    ece_bins: int = 15,
    brier: str = "usual",
) -> SampleStats:
    """:func:`~benchmark.core.samples.sample_stats` of the mixture whose terms are ``terms``.

    ``confidence`` defaults to ``max_c p``, ``prediction`` to ``argmax_c p``.
    """
    if terms.nll is None or terms.sq is None:
        raise InputError("terms: computed without labels; pass labels to mixture_terms for metrics")
    return stats_from_terms(
        terms.nll,
        terms.sq,
        terms.top_conf,
        terms.top,
        labels,
        num_classes=num_classes,
        confidence=confidence,
        prediction=prediction,
        ece_bins=ece_bins,
        brier=brier,
    )
