"""Separable validation logits: weight directions along which the NLL has no minimum.

The NLL of ``softmax(sum_j w_j z_j)`` is convex in the weights ``w``. Along a
direction ``d`` it tends to a finite limit without reaching it exactly when
every sample's label has the largest combined logit ``sum_j d_j z_ijc`` (ties
allowed) and some sample has a strictly positive margin: the NLL then keeps
decreasing along ``d`` (for one model: as ``T -> 0``), so no finite temperature
is optimal. Any other direction either raises the NLL eventually or leaves it
constant (for example ``(1, -1)`` for two identical members), and then the
minimum is attained (Rockafellar, *Convex Analysis*, Thm. 27.1).

:func:`separating_direction` finds such a direction for one or two models:

* one model: ``d = +1`` when every sample's label has the largest logit
  (``d = -1`` when every label has the smallest one), exactly;
* two models: the directions ``d`` with ``d . a >= 0`` for every difference vector
  ``a_ic = (z_base,iy - z_base,ic, z_side,iy - z_side,ic)`` form an arc of the unit
  circle, computed in float64 from the angles of the ``a_ic``. The data are called
  separable when that arc is wider than :data:`ANGLE_TOL` radians (about one part
  in a million of the logits' scale), so that float32 rounding of proportional
  logits (``z_side = 0.7 z_base``) cannot fake or hide a separating direction.
  This covers a duo that is separable only jointly (each member misclassifies
  some samples, a combination of the two classifies all), with weights of any sign.

The scan stops at the first block of rows that rules separability out, so the
check costs one block of rows on ordinary data.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import torch

ANGLE_TOL = 1e-6  # radians: the smallest arc of separating directions called separable
_CHUNK_ROWS = 256


@dataclass(frozen=True)
class Separation:
    """A separating direction ``d`` (unit vector of weights) and its smallest margin
    ``min d . (z_iy - z_ic)`` over samples ``i`` and classes ``c`` whose difference is not 0."""

    direction: tuple[float, ...]
    margin: float
    samples: int


def _differences(logits: list[torch.Tensor], labels: torch.Tensor) -> Iterator[list[torch.Tensor]]:
    """Blocks of ``z_iy - z_ic`` (float64), one tensor per model, for 256 rows at a time."""
    n = labels.shape[0]
    for s in range(0, n, _CHUNK_ROWS):
        y = labels[s : s + _CHUNK_ROWS, None]
        blocks = []
        for z in logits:
            zc = z[s : s + _CHUNK_ROWS].to(torch.float64)
            blocks.append(zc.gather(1, y) - zc)
        yield blocks


def _margin(logits: list[torch.Tensor], labels: torch.Tensor, d: tuple[float, ...]) -> float:
    margin = math.inf
    for blocks in _differences(logits, labels):
        proj = cast(torch.Tensor, sum(dj * a for dj, a in zip(d, blocks)))
        nonzero = torch.stack([a != 0 for a in blocks]).any(0)
        if bool(nonzero.any()):
            margin = min(margin, float(proj[nonzero].min()))
    return margin


def _single(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, ...] | None:
    pos = neg = True
    nonzero = False
    for (a,) in _differences([logits], labels):
        pos = pos and bool((a >= 0).all())
        neg = neg and bool((a <= 0).all())
        nonzero = nonzero or bool((a != 0).any())
        if not (pos or neg):
            return None
    if not nonzero:
        return None  # every class tied in every sample: the NLL is constant
    return (1.0,) if pos else (-1.0,)


def _pair(base: torch.Tensor, side: torch.Tensor, labels: torch.Tensor) -> tuple[float, ...] | None:
    theta0 = None
    lo, hi = -math.pi / 2, math.pi / 2  # feasible angles of d, relative to the first nonzero a
    for ab, as_ in _differences([base, side], labels):
        nonzero = (ab != 0) | (as_ != 0)
        if not bool(nonzero.any()):
            continue
        ab, as_ = ab[nonzero], as_[nonzero]
        theta = torch.atan2(as_, ab)
        if theta0 is None:
            theta0 = float(theta[0])
        beta = torch.remainder(theta - theta0 + math.pi, 2 * math.pi) - math.pi  # in [-pi, pi)
        up, down = beta[beta >= 0], beta[beta < 0]
        if up.numel():
            lo = max(lo, float(up.max()) - math.pi / 2)
        if down.numel():
            hi = min(hi, float(down.min()) + math.pi / 2)
        if hi - lo <= ANGLE_TOL:
            return None
    if theta0 is None:
        return None
    phi = theta0 + (lo + hi) / 2
    return (math.cos(phi), math.sin(phi))


def separating_direction(logits: list[torch.Tensor], labels: torch.Tensor) -> Separation | None:
    """A direction of the weights of ``logits`` (one or two ``(N, C)`` tensors) along which the
    NLL of ``softmax(sum_j w_j z_j)`` decreases without a minimum, or None (see the module)."""
    if len(logits) == 1:
        d = _single(logits[0], labels)
    elif len(logits) == 2:
        d = _pair(logits[0], logits[1], labels)
    else:
        raise ValueError(f"separating_direction: one or two models, got {len(logits)}")
    if d is None:
        return None
    return Separation(direction=d, margin=_margin(logits, labels, d), samples=int(labels.shape[0]))
