"""Temperature scaling of one model and joint temperatures of an Asymmetric Duo.

Both fits minimise the validation NLL of ``softmax(sum_j w_j z_j)``: one model
(``w = 1/T``) or a duo (``w_base z_base + w_side z_side``, published as
``(z_base / T_base + z_side / T_side) / 2``, i.e. ``w = 1 / (2T)``). Two modes:

``converged``
    The NLL is convex in the weights ``w``, so we minimise over ``w`` with
    Newton's method (exact gradient and Hessian, one pass over the data) and a
    backtracking (Armijo) line search, and stop when every component of the
    float64 gradient is at most ``1e-6 min(1, NLL)`` (float32 for the bulk of the
    iterations, float64 for the final check). This reaches the global optimum; it
    is unconstrained, so a useless sidekick may get a slightly negative weight.
    If the NLL has no finite minimiser (e.g. every validation prediction is
    correct with a margin, so sharpening forever helps) a :class:`FitError` says so.
``paper-exact``
    The published procedure's numbers, in float32: a grid over ``T``
    (single: ``arange(0.05, 5.05, 0.05)``; duo: ``T_base, T_side`` in
    ``arange(0.05, 5.05, 0.2)``), first strict minimum of ``F.cross_entropy``
    kept, then one ``torch.optim.LBFGS(lr=0.01, max_iter=50)`` step on the
    temperatures themselves (no line search, no positivity constraint). Computed
    about 20 times faster than the published loop, with the same grid point and the
    same LBFGS trajectory (to about 1e-7 relative): see :mod:`benchmark.core.paper_fit`.

Separable validation data (both modes, checked before fitting, see
:func:`separating_direction`): when some direction ``d`` of the weights makes
the label's combined logit ``sum_j d_j z_ij`` the largest of every sample, the NLL
keeps decreasing along ``d`` and has no minimum at finite temperatures (for one
model: every sample classified correctly, ties allowed; for a duo also a
combination that is correct only jointly, with weights of any sign, since the
converged fit is unconstrained). Both fit modes then raise :class:`FitError`
naming the model(s) and the smallest margin, never a temperature.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import isfinite

import torch
import torch.nn.functional as F

from benchmark.core.paper_fit import grid_argmin, lbfgs
from benchmark.core.separability import separating_direction
from benchmark.core.validation import InputError, TensorLike, as_labels, as_logits, check_choice, check_same_shape

FIT_MODES = ("converged", "paper-exact")
_CHUNK_ROWS = 256  # (256, C) temporaries stay in cache and in the heap; 2048 rows page-faulted on every chunk


class FitError(InputError):
    """A temperature fit cannot produce a finite optimum for these inputs (a ``ValueError``:
    the command-line tools and pipeline stages print it as one line and exit with code 2)."""


@dataclass(frozen=True)
class TemperatureFit:
    temperature: float
    nll: float  # validation NLL at the fitted temperature (float64)
    mode: str


@dataclass(frozen=True)
class DuoFit:
    t_base: float
    t_side: float
    w_base: float  # = 1 / (2 t_base)
    w_side: float
    nll: float  # validation NLL of softmax(w_base z_base + w_side z_side) (float64)
    mode: str


def nll_grad_hess(
    logits: list[torch.Tensor],
    labels: torch.Tensor,
    w: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float64,
    hessian: bool = True,
) -> tuple[float, torch.Tensor, torch.Tensor | None]:
    """Mean NLL of ``softmax(sum_j w_j z_j)`` with its gradient and Hessian in ``w``.

    ``f = mean_i [logsumexp_c s_ic - s_{i,y_i}]``, ``s = sum_j w_j z_j``;
    ``grad_j = mean_i [E_p z_ij - z_{ij,y_i}]``;
    ``hess_jk = mean_i [E_p (z_ij z_ik) - E_p z_ij E_p z_ik]`` (a covariance,
    hence positive semi-definite: the NLL is convex in ``w``). Per-sample terms
    are computed in ``dtype`` and summed over samples in float64. Returns
    ``(f, grad, hess)``, ``hess`` None unless ``hessian``.
    """
    d, n = len(logits), labels.shape[0]
    f64 = torch.float64
    f, g, h = 0.0, torch.zeros(d, dtype=f64), torch.zeros(d, d, dtype=f64)
    ws = w.tolist()
    for s in range(0, n, _CHUNK_ROWS):
        rows = slice(s, s + _CHUNK_ROWS)
        y = labels[rows, None]
        zs = [z[rows].to(dtype) for z in logits]
        score = zs[0] * ws[0]
        for wj, zj in zip(ws[1:], zs[1:]):
            score.add_(zj, alpha=wj)
        p = torch.softmax(score, 1)
        py = p.gather(1, y)[:, 0]
        log_py = torch.log(py)
        tiny = py < torch.finfo(dtype).tiny  # underflow: use the exact log-softmax
        if bool(tiny.any()):
            log_py[tiny] = torch.log_softmax(score[tiny], 1).gather(1, y[tiny])[:, 0]
        f -= float(log_py.sum(dtype=f64))
        pz = [p * zj for zj in zs]
        means = [pzj.sum(1) for pzj in pz]
        for j in range(d):
            g[j] += float((means[j] - zs[j].gather(1, y)[:, 0]).sum(dtype=f64))
            for k in range(j, d) if hessian else ():
                h[j, k] += float((torch.linalg.vecdot(pz[j], zs[k]) - means[j] * means[k]).sum(dtype=f64))
    h = torch.triu(h) + torch.triu(h, 1).T
    return f / n, g / n, (h / n if hessian else None)


def _newton_direction(g: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``-H^+ g`` on the well-conditioned eigenspace of ``H``; ``-g`` if ``H`` is ~0."""
    lam, vec = torch.linalg.eigh(h)
    keep = lam > 1e-12 * max(float(lam.max()), 0.0)
    if not bool(keep.any()):
        return -g
    inv = torch.where(keep, 1.0 / lam.clamp_min(1e-300), torch.zeros_like(lam))
    return -(vec @ (inv * (vec.T @ g)))


def _newton(
    ev: Callable[..., tuple[float, torch.Tensor, torch.Tensor | None]],
    w: torch.Tensor,
    state: tuple[float, torch.Tensor, torch.Tensor | None],
    gtol: float,
    max_iter: int,
    update_hessian: bool,
) -> tuple[torch.Tensor, tuple[float, torch.Tensor, torch.Tensor | None], bool]:
    """Damped Newton (Armijo backtracking) from ``w`` until ``max|grad| <= gtol min(1, f)``.

    ``ev(w, hessian)`` returns ``(f, grad, hess)``; ``state`` is its value at ``w``.
    Without ``update_hessian`` the Hessian of ``state`` is kept (it only sets the
    step, not the fixed point). Stops early when a step no longer halves a small
    gradient: the evaluation's precision is exhausted. Returns
    ``(w, (f, grad, hess), converged)``.
    """
    f, g, h = state
    assert h is not None, "the first state carries its Hessian"
    for _ in range(max_iter):
        gmax = float(g.abs().max())
        if gmax <= gtol * min(1.0, f):
            return w, (f, g, h), True
        step = _newton_direction(g, h)
        slope = float(g @ step)
        if slope >= 0:  # numerical noise: fall back to steepest descent
            step, slope = -g, -float(g @ g)
        t = 1.0
        for _ in range(30):
            fc, gc, hc = ev(w + t * step, update_hessian)
            if fc <= f + 1e-4 * t * slope:
                break
            t *= 0.5
        else:  # no decrease measurable at this precision
            return w, (f, g, h), False
        w, f, g = w + t * step, fc, gc
        if update_hessian:
            assert hc is not None, "asked for with update_hessian"
            h = hc
        if float(w.abs().max()) > 1e6 or (gmax < 1e-3 and float(g.abs().max()) > 0.5 * gmax):
            break
    return w, (f, g, h), float(g.abs().max()) <= gtol * min(1.0, f)


def minimise_nll(
    logits: list[torch.Tensor], labels: torch.Tensor, w0: list[float], *, gtol: float = 1e-6, max_iter: int = 100
) -> tuple[torch.Tensor, float]:
    """Global minimiser of the convex NLL ``f`` over weights ``w``.

    Damped Newton with float32 evaluations (cheap) until the gradient is below
    1e-5 or float32 precision is exhausted, then with float64 evaluations until
    every component of the float64 gradient is at most ``gtol min(1, f)``; ``f``
    is then within about ``gtol^2`` of its minimum. The tolerance is relative
    when ``f < 1`` so that a perfectly separable validation set, whose NLL decays
    to 0 without a minimum, is not mistaken for converged: then
    :class:`FitError` is raised.
    """
    ev32 = lambda w, hess: nll_grad_hess(logits, labels, w, dtype=torch.float32, hessian=hess)  # noqa: E731
    ev64 = lambda w, hess: nll_grad_hess(logits, labels, w, dtype=torch.float64, hessian=hess)  # noqa: E731
    w = torch.tensor(w0, dtype=torch.float64)
    w, (_, _, h), _ = _newton(ev32, w, ev32(w, True), max(gtol, 1e-5), max_iter, update_hessian=True)
    f, g, _ = ev64(w, False)
    w, (f, g, _), ok = _newton(ev64, w, (f, g, h), gtol, max_iter, update_hessian=False)
    if not ok and float(w.abs().max()) <= 1e6:
        w, (f, g, _), ok = _newton(ev64, w, ev64(w, True), gtol, max_iter, update_hessian=True)
    if ok and f > 0:  # f == 0: the NLL underflowed, the weights ran off towards a separating direction
        return w, f
    raise FitError(
        f"temperature fit: the validation NLL has no finite minimum (weights run to {w.tolist()}, NLL {f:.3g}, "
        f"gradient {g.tolist()}); typically every validation prediction is already correct, so no temperature is "
        "optimal"
    )


def _validate(logits: TensorLike, labels: TensorLike, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    z = as_logits(logits, name)
    y = as_labels(labels, "labels", n=z.shape[0], num_classes=z.shape[1])
    return z, y


def _grid_argmin(
    logits: list[torch.Tensor], labels: torch.Tensor, temps: torch.Tensor, k: int, loss: Callable[[int], float]
) -> int | None:
    """The published grid search's first strict minimum (loop order), None if no loss is finite:
    :func:`~benchmark.core.paper_fit.grid_argmin`, or the published loop itself where that declines."""
    i = grid_argmin(logits, labels, temps, k, loss)
    if i is not None:
        return i
    best_nll = float("inf")
    for j in range(temps.shape[0]):
        nll = loss(j)
        if nll < best_nll:
            best_nll, i = nll, j
    return i


def fit_temperature(
    logits: TensorLike, labels: TensorLike, mode: str = "converged", *, name: str | None = None
) -> TemperatureFit:
    """Temperature ``T`` minimising the NLL of ``softmax(logits / T)`` on (validation) data.

    Raises :class:`FitError` (naming ``name``, the model, when given) when the logits are
    separable: no finite temperature minimises the NLL (see the module).
    """
    check_choice(mode, "mode", FIT_MODES)
    z, y = _validate(logits, labels, "logits")
    _check_separable([z], y, [name or "the model"], mode)
    if mode == "converged":
        w, f = minimise_nll([z], y, [1.0])
        return TemperatureFit(temperature=_temperature(float(w[0]), 1.0), nll=f, mode=mode)
    z = z.to(torch.float32)
    grid = torch.arange(0.05, 5.05, 0.05)
    loss = lambda i: F.cross_entropy(z / grid[i].item(), y).item()  # noqa: E731  (the published expression)
    i = _grid_argmin([z], y, grid[:, None], 1, loss)
    temp = torch.tensor([grid[i].item() if i is not None else 1.0], requires_grad=True)
    lbfgs([temp], lambda: F.cross_entropy(z / temp, y), [z], y, 1)
    t_final = _check_published(temp.detach().item())
    f = nll_grad_hess([z], y, torch.tensor([1.0 / t_final], dtype=torch.float64), hessian=False)[0]
    return TemperatureFit(temperature=t_final, nll=f, mode=mode)


def fit_duo(
    base_logits: TensorLike,
    side_logits: TensorLike,
    labels: TensorLike,
    mode: str = "converged",
    *,
    names: tuple[str, str] | None = None,
) -> DuoFit:
    """Duo weights/temperatures minimising the NLL of ``softmax(w_b z_b + w_s z_s)``.

    Raises :class:`FitError` (naming ``names``, base and sidekick, when given) when the
    logits are separable, by either member alone or only jointly (see the module).
    """
    check_choice(mode, "mode", FIT_MODES)
    zb, y = _validate(base_logits, labels, "base_logits")
    zs = as_logits(side_logits, "side_logits")
    check_same_shape(zb, zs, "base_logits", "side_logits")
    _check_separable(
        [zb, zs], y, [f"{names[0]} (base)", f"{names[1]} (sidekick)"] if names else ["the base", "the sidekick"], mode
    )
    if mode == "converged":
        w, f = minimise_nll([zb, zs], y, [0.5, 0.5])
        wb, ws = float(w[0]), float(w[1])
        return DuoFit(
            t_base=_temperature(wb, 2.0), t_side=_temperature(ws, 2.0), w_base=wb, w_side=ws, nll=f, mode=mode
        )
    zb, zs = zb.to(torch.float32), zs.to(torch.float32)
    grid = torch.arange(0.05, 5.05, 0.2)
    g = len(grid)
    loss = lambda i: F.cross_entropy((zb / grid[i // g] + zs / grid[i % g]) / 2, y).item()  # noqa: E731  (published)
    i = _grid_argmin([zb, zs], y, torch.cartesian_prod(grid, grid), 2, loss)  # loop order: t_base outer
    tb = torch.tensor([grid[i // g].item() if i is not None else 1.0], requires_grad=True)
    ts = torch.tensor([grid[i % g].item() if i is not None else 1.0], requires_grad=True)
    lbfgs([tb, ts], lambda: F.cross_entropy((zb / tb + zs / ts) / 2, y), [zb, zs], y, 2)
    tb_f, ts_f = _check_published(tb.detach().item()), _check_published(ts.detach().item())
    wb, ws = 1.0 / (2 * tb_f), 1.0 / (2 * ts_f)
    f = nll_grad_hess([zb, zs], y, torch.tensor([wb, ws], dtype=torch.float64), hessian=False)[0]
    return DuoFit(t_base=tb_f, t_side=ts_f, w_base=wb, w_side=ws, nll=f, mode=mode)


_ADVICE = "use a larger or harder validation split"


def _check_separable(logits: list[torch.Tensor], labels: torch.Tensor, names: list[str], mode: str) -> None:
    """:class:`FitError` when some direction of the weights separates the validation data."""
    sep = separating_direction(logits, labels)
    if sep is None:
        return
    n, m = sep.samples, sep.margin
    if len(logits) == 2:
        for j, name in enumerate(names):  # say so when one member alone is separable
            alone = separating_direction([logits[j]], labels)
            if alone is not None:
                logits, names, sep = [logits[j]], [name], alone
                break
    head = f"{mode} fit of {' + '.join(names)}: the validation logits"
    if len(logits) == 1:
        if sep.direction[0] > 0:
            what = (
                f"are separable: every one of the {n} samples is classified correctly (smallest margin "
                f"{sep.margin:.3g}), so the NLL keeps decreasing as T -> 0"
            )
        else:
            what = (
                f"have every sample's label at the smallest logit (margin {sep.margin:.3g}), so the NLL keeps "
                "decreasing as T -> 0 from below"
            )
        raise FitError(f"{head} {what} and has no minimum at a finite temperature; {_ADVICE}")
    db, ds = sep.direction
    raise FitError(
        f"{head} are jointly separable: the combination {db:.3g} z_base {ds:+.3g} z_side classifies every one of the "
        f"{n} samples correctly (smallest margin {m:.3g}), so the duo NLL has no minimum at finite temperatures; "
        f"{_ADVICE}"
    )


def _temperature(w: float, k: float) -> float:
    """Temperature of a weight, ``T = 1 / (k w)`` (k = 1 single, 2 duo; ``inf`` for ``w = 0``)."""
    return float("inf") if w == 0 else 1.0 / (k * w)


def _check_published(t: float) -> float:
    if not isfinite(t) or t == 0:
        raise FitError(f"paper-exact fit: the published LBFGS refinement ended at temperature {t}")
    return t
