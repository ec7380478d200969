"""The published (``paper-exact``) temperature fits, about 20 times faster, with the published numbers.

The published procedure (``/work/shared/REFERENCE.md``): evaluate the float32
``F.cross_entropy`` at every point of a temperature grid (625 points for a duo,
100 for one model), keep the first strict minimum in loop order, then take one
``torch.optim.LBFGS(lr=0.01, max_iter=50)`` step (no line search) from it. Here:

**Grid: the same point, from a few evaluations.** The NLL is convex in the
weights ``w = 1 / (k T)`` (``k`` = 1 for one model, 2 for a duo), so each
evaluated point ``p`` bounds every grid point ``q`` from below by its tangent
plane, ``NLL(q) >= f_p + g_p . (w_q - w_p)``. Points are evaluated (NLL and
gradient in one pass, :func:`nll_and_grad`) in order of their lowest bound until
every other point's bound exceeds the best value by a margin (``1e-4 |f| + 1e-6``,
hundreds of times the float32 rounding of either computation; each plane is also
lowered by ``1e-5`` of its terms for the rounding of the gradient). Points left
within the margin of the best are then evaluated with the published expression
itself, in loop order, keeping the first strict minimum: no other point can be
the published one, so the result is that point even for exact ties.

**LBFGS: the same optimizer, a fused closure.** ``torch.optim.LBFGS`` runs as
published, but its closure computes the NLL and its gradient in one pass (float32
terms, float64 sums over samples) instead of autograd through float32 tensors.
The published gradient carries its own float32 rounding (about 1e-5 relative),
so the trajectories agree to about 1e-7 relative on the temperatures (tests
require 1e-6). LBFGS's stopping rules (loss change < 1e-9, gradient < 1e-7, step
< 1e-9) and its curvature test (``y . s > 1e-10``) could be decided either way by
that rounding: when any step comes near one of them, the refinement is redone with
the published closure, so the decision is the published one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from math import frexp, isfinite

import torch

_ROWS = 256  # rows per block: (256, C) float32 temporaries stay in cache
_GRID_MARGIN = (1e-4, 1e-6)  # relative, absolute: points this close to the best are evaluated as published
_PLANE_SLACK = 1e-5  # each tangent plane is lowered by this fraction of its terms
# LBFGS decisions that float32 rounding could flip: a loss change below 24 float32 ulps of the loss (the
# published float32 loss was within 2.7 ulps of the exact one on every case tried), a gradient below 1e-4,
# a step below 1e-6, y . s within 2e-4 |g| |s| of 1e-10 (the published gradient: within 3.5e-5 relative)
_NEAR_LOSS_ULPS, _NEAR_GRAD, _NEAR_STEP, _YS_NOISE = 24, 1e-4, 1e-6, 2e-4


@contextmanager
def _one_thread() -> Iterator[None]:
    """torch on one thread: blocks of 256 rows are too small to share, and with several threads
    the waiting ones spin (4 times the CPU time on a busy 2-core machine); results then do not
    depend on the thread count either. (torch's setting is per process: the project calls the
    numeric core from one Python thread per process.)"""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def nll_and_grad(logits: list[torch.Tensor], labels: torch.Tensor, w: list[float]) -> tuple[float, list[float]]:
    """Mean NLL of ``softmax(sum_j w_j z_j)`` and its gradient in ``w`` (float32 ``(N, C)`` logits).

    One pass over blocks of rows, on one thread: ``e = exp(s - max s)`` in float32, then
    ``NLL_i = max s_i + log sum e_i - s_{i,y_i}`` and ``grad_j = mean_i (e_i . z_ij / sum e_i - z_{ij,y_i})``,
    each sample's terms summed in float64.
    """
    with _one_thread():
        return _nll_and_grad(logits, labels, w)


def _nll_and_grad(logits: list[torch.Tensor], labels: torch.Tensor, w: list[float]) -> tuple[float, list[float]]:
    n, c = labels.shape[0], logits[0].shape[1]
    f64 = torch.float64
    zy = [z.gather(1, labels[:, None])[:, 0] for z in logits]
    top, total = torch.empty(n), torch.empty(n)  # per sample: max s, sum exp(s - max s)
    dots = torch.empty(len(logits), n)  # per sample and model: sum_c exp(s - max s) z_j
    buf, tmp = torch.empty(min(_ROWS, n), c), torch.empty(min(_ROWS, n), c)
    for s in range(0, n, _ROWS):
        blocks = [z[s : s + _ROWS] for z in logits]
        r = blocks[0].shape[0]
        e, t = buf[:r], tmp[:r]
        torch.mul(blocks[0], w[0], out=e)
        for wj, zj in zip(w[1:], blocks[1:]):
            e.add_(zj, alpha=wj)
        m = torch.amax(e, 1, keepdim=True, out=top[s : s + r, None])
        e.sub_(m).exp_()
        torch.sum(e, 1, out=total[s : s + r])
        for j, zj in enumerate(blocks):
            torch.sum(torch.mul(e, zj, out=t), 1, out=dots[j, s : s + r])
    total64 = total.to(f64)
    sy = sum(wj * zyj.to(f64) for wj, zyj in zip(w, zy))
    f = float((top.to(f64) + total64.log() - sy).sum())
    g = [float((dots[j].to(f64) / total64 - zy[j].to(f64)).sum()) for j in range(len(logits))]
    return f / n, [gj / n for gj in g]


def grid_argmin(
    logits: list[torch.Tensor], labels: torch.Tensor, temps: torch.Tensor, k: int, published: Callable[[int], float]
) -> int | None:
    """Index (in loop order) of the published grid minimum; ``temps``: ``(P, K)`` grid temperatures.

    ``published(i)`` is the published loss at point ``i``. None when an evaluation is not
    finite (then the caller runs the published loop).
    """
    w = 1.0 / (k * temps.to(torch.float64))
    lower = torch.full((w.shape[0],), -torch.inf, dtype=torch.float64)
    seen = torch.zeros(w.shape[0], dtype=torch.bool)
    values: dict[int, float] = {}
    best = torch.inf
    i = int((temps.to(torch.float64) - 1.0).abs().sum(1).argmin())  # start next to T = 1
    while True:
        f, g = nll_and_grad(logits, labels, w[i].tolist())
        if not (isfinite(f) and all(isfinite(x) for x in g)):
            return None
        values[i], seen[i], best = f, True, min(best, f)
        dw, gt = w - w[i], torch.tensor(g, dtype=torch.float64)
        lower = torch.maximum(lower, f + dw @ gt - _PLANE_SLACK * (abs(f) + dw.abs() @ gt.abs()))
        open_ = (~seen) & (lower <= best + _GRID_MARGIN[0] * abs(best) + _GRID_MARGIN[1])
        if not bool(open_.any()):
            break
        cand = open_.nonzero()[:, 0]
        i = int(cand[lower[cand].argmin()])
    bound = best + _GRID_MARGIN[0] * abs(best) + _GRID_MARGIN[1]
    best_nll, best_i = float("inf"), None
    for i in sorted(j for j, f in values.items() if f <= bound):  # the published loop on the survivors
        loss = published(i)
        if loss < best_nll:
            best_nll, best_i = loss, i
    return best_i


def lbfgs(
    params: list[torch.Tensor],
    loss_fn: Callable[[], torch.Tensor],
    logits: list[torch.Tensor],
    labels: torch.Tensor,
    k: int,
) -> None:
    """The published refinement, one ``LBFGS(lr=0.01, max_iter=50)`` step on the temperatures ``params``
    (float32 ``(1,)`` tensors, updated in place), with the fused closure; the published closure
    ``loss_fn`` (autograd) where a stopping rule is near (see the module)."""
    start = [p.detach().clone() for p in params]
    trace = []

    def fused() -> torch.Tensor:
        t = [float(p.detach()) for p in params]
        f, gw = nll_and_grad(logits, labels, [1.0 / (k * tj) for tj in t])
        gt = [-gj / (k * tj * tj) for gj, tj in zip(gw, t)]
        for p, gj in zip(params, gt):
            p.grad = torch.tensor([gj], dtype=p.dtype)
        trace.append((f, t, gt))
        return torch.tensor(f, dtype=torch.float64)

    _run_lbfgs(params, fused)
    if _near_a_stopping_rule(trace):
        with torch.no_grad():
            for p, s in zip(params, start):
                p.copy_(s)
        _run_lbfgs(params, loss_fn, autograd=True)


def _run_lbfgs(params: list[torch.Tensor], loss_fn: Callable[[], torch.Tensor], autograd: bool = False) -> None:
    optimizer = torch.optim.LBFGS(params, lr=0.01, max_iter=50)

    def closure() -> torch.Tensor:
        if not autograd:
            return loss_fn()
        optimizer.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    optimizer.step(closure)


def _ulp32(x: float) -> float:
    """The spacing of float32 numbers at ``x``."""
    return 2.0 ** (frexp(abs(x))[1] - 24) if x else 2.0**-149


def _near_a_stopping_rule(trace: list) -> bool:
    """Whether float32 rounding could have decided one of LBFGS's tests differently along ``trace``."""
    for j, (f, t, g) in enumerate(trace):
        if not (isfinite(f) and all(isfinite(x) for x in t + g)) or max(abs(x) for x in g) < _NEAR_GRAD:
            return True
        if j == 0:
            continue
        f0, t0, g0 = trace[j - 1]
        step = [a - b for a, b in zip(t, t0)]
        if abs(f - f0) < _NEAR_LOSS_ULPS * _ulp32(f) + 1e-9 or max(abs(x) for x in step) < _NEAR_STEP:
            return True
        ys = sum((a - b) * s for a, b, s in zip(g, g0, step))
        noise = _YS_NOISE * max(abs(x) for x in g) * sum(abs(s) for s in step)
        if abs(ys - 1e-10) <= noise:
            return True
    return False
