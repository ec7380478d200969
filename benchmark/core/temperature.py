"""Temperature scaling of one model and joint temperatures of an Asymmetric Duo.

Both fits minimise the validation NLL of ``softmax(sum_j w_j z_j)``: one model
(``w = 1/T``) or a duo (``w_base z_base + w_side z_side``, published as
``(z_base / T_base + z_side / T_side) / 2``, i.e. ``w = 1 / (2T)``). Two modes:

``converged``
    The NLL is convex in the weights ``w``, so we minimise over ``w`` with
    Newton's method (exact gradient and Hessian, one pass over the data each,
    float64) and a backtracking (Armijo) line search, and stop when every
    gradient component is below ``gtol``. This reaches the global optimum; it
    is unconstrained, so a useless sidekick may get a slightly negative weight.
    If the NLL has no finite minimiser (e.g. every validation prediction is
    correct with a margin, so sharpening forever helps) a :class:`FitError` says so.
``paper-exact``
    The published procedure step for step, in float32: a grid over ``T``
    (single: ``arange(0.05, 5.05, 0.05)``; duo: ``T_base, T_side`` in
    ``arange(0.05, 5.05, 0.2)``), first strict minimum of ``F.cross_entropy``
    kept, then one ``torch.optim.LBFGS(lr=0.01, max_iter=50)`` step on the
    temperatures themselves (no line search, no positivity constraint).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from benchmark.core.validation import InputError, as_labels, as_logits, check_choice, check_same_shape

FIT_MODES = ("converged", "paper-exact")
_CHUNK_ROWS = 2048


class FitError(InputError):
    """A temperature fit cannot produce a finite optimum for these inputs."""


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


def nll_grad_hess(logits: list[torch.Tensor], labels: torch.Tensor, w: torch.Tensor, *, dtype: torch.dtype = torch.float64) -> tuple[float, torch.Tensor, torch.Tensor]:
    """Mean NLL of ``softmax(sum_j w_j z_j)`` with its gradient and Hessian in ``w``.

    ``f = mean_i [logsumexp_c s_ic - s_{i,y_i}]``, ``s = sum_j w_j z_j``;
    ``grad_j = mean_i [E_p z_ij - z_{ij,y_i}]``;
    ``hess_jk = mean_i [E_p (z_ij z_ik) - E_p z_ij E_p z_ik]`` (a covariance,
    hence positive semi-definite: the NLL is convex in ``w``). Per-sample terms
    are computed in ``dtype`` and summed over samples in float64.
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
        log_py = torch.log(p.gather(1, y)[:, 0])
        tiny = p.gather(1, y)[:, 0] < torch.finfo(dtype).tiny  # underflow: use the exact log-softmax
        if bool(tiny.any()):
            log_py[tiny] = torch.log_softmax(score[tiny], 1).gather(1, y[tiny])[:, 0]
        f -= float(log_py.sum(dtype=f64))
        means = [torch.linalg.vecdot(p, zj) for zj in zs]
        for j in range(d):
            g[j] += float((means[j] - zs[j].gather(1, y)[:, 0]).sum(dtype=f64))
            pz = p * zs[j]
            for k in range(j, d):
                h[j, k] += float((torch.linalg.vecdot(pz, zs[k]) - means[j] * means[k]).sum(dtype=f64))
    h = torch.triu(h) + torch.triu(h, 1).T
    return f / n, g / n, h / n


def _newton_direction(g: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``-H^+ g`` on the well-conditioned eigenspace of ``H``; ``-g`` if ``H`` is ~0."""
    lam, vec = torch.linalg.eigh(h)
    keep = lam > 1e-12 * max(float(lam.max()), 0.0)
    if not bool(keep.any()):
        return -g
    inv = torch.where(keep, 1.0 / lam.clamp_min(1e-300), torch.zeros_like(lam))
    return -(vec @ (inv * (vec.T @ g)))


def _newton(logits, labels, w: torch.Tensor, dtype: torch.dtype, gtol: float, max_iter: int) -> tuple[torch.Tensor, float, bool]:
    """Damped Newton from ``w`` until ``max|grad| <= gtol``; returns (w, f, converged)."""
    f, g, h = nll_grad_hess(logits, labels, w, dtype=dtype)
    for _ in range(max_iter):
        if float(g.abs().max()) <= gtol:
            return w, f, True
        step = _newton_direction(g, h)
        slope = float(g @ step)
        if slope >= 0:  # numerical noise: fall back to steepest descent
            step, slope = -g, -float(g @ g)
        t = 1.0
        for _ in range(50):
            cand = w + t * step
            fc, gc, hc = nll_grad_hess(logits, labels, cand, dtype=dtype)
            if fc <= f + 1e-4 * t * slope:
                break
            t *= 0.5
        else:  # no decrease measurable at this precision
            return w, f, False
        w, f, g, h = cand, fc, gc, hc
        if float(w.abs().max()) > 1e6:
            break
    return w, f, float(g.abs().max()) <= gtol


def minimise_nll(logits: list[torch.Tensor], labels: torch.Tensor, w0: list[float], *, gtol: float = 1e-9, max_iter: int = 100) -> tuple[torch.Tensor, float]:
    """Global minimiser of the convex NLL over weights ``w``.

    Damped Newton (Armijo backtracking) in float32 until the gradient is below
    1e-4, then in float64 until every component is below ``gtol``. Raises
    :class:`FitError` when that fails: the NLL has no finite minimiser.
    """
    w = torch.tensor(w0, dtype=torch.float64)
    w, _, _ = _newton(logits, labels, w, torch.float32, 1e-4, max_iter)
    w, f, ok = _newton(logits, labels, w, torch.float64, gtol, max_iter)
    if ok:
        return w, f
    g = nll_grad_hess(logits, labels, w)[1]
    if float(w.abs().max()) <= 1e6 and float(g.abs().max()) <= 1e3 * gtol:
        return w, f  # stalled at the floating-point floor, next to the optimum
    raise FitError(
        f"temperature fit: the validation NLL has no finite minimum (weights run to {w.tolist()}, gradient "
        f"{g.tolist()}); typically every validation prediction is already correct, so no temperature is optimal"
    )


def _validate(logits, labels, name: str):
    z = as_logits(logits, name)
    y = as_labels(labels, "labels", n=z.shape[0], num_classes=z.shape[1])
    return z, y


def _lbfgs(params: list[torch.Tensor], loss_fn) -> None:
    """The published refinement: one LBFGS step, lr=0.01, max_iter=50, no line search."""
    optimizer = torch.optim.LBFGS(params, lr=0.01, max_iter=50)

    def closure():
        optimizer.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    optimizer.step(closure)


def fit_temperature(logits, labels, mode: str = "converged") -> TemperatureFit:
    """Temperature ``T`` minimising the NLL of ``softmax(logits / T)`` on (validation) data."""
    check_choice(mode, "mode", FIT_MODES)
    z, y = _validate(logits, labels, "logits")
    if mode == "converged":
        w, f = minimise_nll([z], y, [1.0])
        return TemperatureFit(temperature=1.0 / float(w[0]), nll=f, mode=mode)
    z = z.to(torch.float32)
    best_nll, best_t = float("inf"), 1.0
    for t in torch.arange(0.05, 5.05, 0.05):
        t = t.item()
        loss = F.cross_entropy(z / t, y).item()
        if loss < best_nll:
            best_nll, best_t = loss, t
    temp = torch.tensor([best_t], requires_grad=True)
    _lbfgs([temp], lambda: F.cross_entropy(z / temp, y))
    t_final = temp.detach().item()
    return TemperatureFit(temperature=t_final, nll=nll_grad_hess([z], y, torch.tensor([1.0 / t_final]))[0], mode=mode)


def fit_duo(base_logits, side_logits, labels, mode: str = "converged") -> DuoFit:
    """Duo weights/temperatures minimising the NLL of ``softmax(w_b z_b + w_s z_s)``."""
    check_choice(mode, "mode", FIT_MODES)
    zb, y = _validate(base_logits, labels, "base_logits")
    zs = as_logits(side_logits, "side_logits")
    check_same_shape(zb, zs, "base_logits", "side_logits")
    if mode == "converged":
        w, f = minimise_nll([zb, zs], y, [0.5, 0.5])
        wb, ws = float(w[0]), float(w[1])
        return DuoFit(t_base=_temperature(wb), t_side=_temperature(ws), w_base=wb, w_side=ws, nll=f, mode=mode)
    zb, zs = zb.to(torch.float32), zs.to(torch.float32)
    best_nll, best = float("inf"), (1.0, 1.0)
    grid = torch.arange(0.05, 5.05, 0.2)
    for tb in grid:
        for ts in grid:
            nll = F.cross_entropy((zb / tb + zs / ts) / 2, y).item()
            if nll < best_nll:
                best_nll, best = nll, (tb.item(), ts.item())
    tb = torch.tensor([best[0]], requires_grad=True)
    ts = torch.tensor([best[1]], requires_grad=True)
    _lbfgs([tb, ts], lambda: F.cross_entropy((zb / tb + zs / ts) / 2, y))
    tb_f, ts_f = tb.detach().item(), ts.detach().item()
    wb, ws = 1.0 / (2 * tb_f), 1.0 / (2 * ts_f)
    f = nll_grad_hess([zb, zs], y, torch.tensor([wb, ws]))[0]
    return DuoFit(t_base=tb_f, t_side=ts_f, w_base=wb, w_side=ws, nll=f, mode=mode)


def _temperature(w: float) -> float:
    """Published temperature of a duo weight, ``T = 1 / (2w)`` (``inf`` for ``w = 0``)."""
    return float("inf") if w == 0 else 1.0 / (2 * w)
