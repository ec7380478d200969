"""Last-layer Laplace approximation (Daxberger et al., 2021) of a timm classifier.

The backbone stays at its MAP (fine-tuned) weights; the last layer
``z = W f + b`` (``theta = [W | b]``, C x (D+1), ``f~ = [f, 1]``) gets a Gaussian
posterior ``N(theta_MAP, (H + delta I)^-1)`` with ``H`` the generalised
Gauss-Newton of the summed training NLL (exact for a linear softmax layer):

    H = sum_n (f~_n f~_n^T) kron Lambda_n,   Lambda_n = diag(p_n) - p_n p_n^T

* ``diag``: ``H_cj = sum_n p_nc (1 - p_nc) f~_nj^2``;
* ``kron`` (KFAC): ``H ~ A kron G`` with ``A = sum_n f~_n f~_n^T`` and
  ``G = (1/N) sum_n Lambda_n`` (eigendecomposed; the posterior covariance is exact
  in that eigenbasis: ``1 / (a_i g_j + delta)``).

``delta`` is the prior precision (chosen on validation NLL over a grid).
Predictives (``LaplaceHead`` maps features (B, D) to logits whose softmax is the
predictive):

* ``probit``: ``z ~ N(z_MAP, S(x))`` with ``S = J Sigma J^T``; extended probit
  ``p = softmax(kappa * z_MAP)``, ``kappa_c = (1 + pi/8 S_cc)^-1/2`` -> (B, C);
* ``mc``: ``M`` last layers sampled from the posterior once (seeded), applied to
  every input -> (M, B, C) member logits (mean of softmaxes).

With ``delta = inf`` the posterior collapses on the MAP: both predictives give
the MAP model's logits.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.config.typed import check
from benchmark.methods import baselines as bl
from benchmark.methods.last_layer import BackboneHead, linear_head
from benchmark.methods.registry import Output, register_cost, register_method
from benchmark.models import cost as costs

METHOD = "last-layer Laplace"
HESSIANS = ("diag", "kron")
PREDICTIVES = ("probit", "mc")


@dataclass(frozen=True)
class LastLayerHessian:
    """GGN of the summed training NLL w.r.t. ``[W | b]`` (no prior), float64."""

    kind: str
    diag: Tensor | None = None  # (C, D+1)            kind "diag"
    a_vals: Tensor | None = None  # (D+1,)             kind "kron": eigenvalues of A
    a_vecs: Tensor | None = None  # (D+1, D+1)
    g_vals: Tensor | None = None  # (C,)               eigenvalues of G
    g_vecs: Tensor | None = None  # (C, C)


def check_options(hessian: str, predictive: str, samples, model_name: str = "") -> None:
    """``hessian``, ``predictive`` and (for ``mc``) ``samples`` checked; ``ValueError`` naming the model and the
    option."""
    where = f"{METHOD} of model {model_name!r}"
    if hessian not in HESSIANS:
        raise ValueError(f"{where}: hessian must be one of {HESSIANS}, got {hessian!r}")
    if predictive not in PREDICTIVES:
        raise ValueError(f"{where}: predictive must be one of {PREDICTIVES}, got {predictive!r}")
    if predictive == "mc" and (isinstance(samples, bool) or not isinstance(samples, int) or samples < 1):
        raise ValueError(f"{where}: the mc predictive needs samples >= 1, got {samples!r}")


def check_prior_precision(delta, where: str = METHOD) -> float:
    """``delta`` as a prior precision: a positive number, infinity allowed; ``ValueError`` naming ``where``."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not delta > 0 or math.isnan(delta):
        raise ValueError(f"{where}: prior precision must be a positive number (inf allowed), got {delta!r}")
    return float(delta)


def _tilde(features: Tensor) -> Tensor:
    return torch.cat([features, features.new_ones(features.shape[0], 1)], 1)


@torch.no_grad()
def fit_hessian(features: Tensor, labels: Tensor, weight: Tensor, bias: Tensor, kind: str = "kron") -> LastLayerHessian:
    """GGN of ``sum_n NLL(W f_n + b, y_n)`` at the MAP ``(weight, bias)`` (see the module docstring).

    The GGN does not depend on the labels of a softmax-NLL layer; ``labels`` only
    checks that the features are the training set's.
    """
    if kind not in HESSIANS:
        raise ValueError(f"{METHOD}: hessian must be one of {HESSIANS}, got {kind!r}")
    if features.ndim != 2 or labels.shape != features.shape[:1] or weight.shape != (bias.shape[0], features.shape[1]):
        raise ValueError(
            f"{METHOD}: need features (N, D), labels (N,), weight (C, D), bias (C,); got "
            f"{tuple(features.shape)}, {tuple(labels.shape)}, {tuple(weight.shape)}, {tuple(bias.shape)}"
        )
    f = _tilde(features.double())
    p = torch.softmax(f @ torch.cat([weight, bias[:, None]], 1).double().T, 1)
    if kind == "diag":
        return LastLayerHessian("diag", diag=(p * (1 - p)).T @ f.square())
    a_vals, a_vecs = torch.linalg.eigh(f.T @ f)
    g_vals, g_vecs = torch.linalg.eigh((torch.diag(p.sum(0)) - p.T @ p) / f.shape[0])
    return LastLayerHessian(
        "kron", a_vals=a_vals.clamp_min(0), a_vecs=a_vecs, g_vals=g_vals.clamp_min(0), g_vecs=g_vecs
    )


class LaplaceHead(nn.Module):
    """Features (B, D) -> predictive logits: (B, C) for ``probit``, (M, B, C) for ``mc``."""

    def __init__(
        self,
        hessian: LastLayerHessian,
        weight: Tensor,
        bias: Tensor,
        prior_precision: float,
        *,
        predictive: str = "probit",
        samples: int = 0,
        seed: int = 0,
    ):
        super().__init__()
        check_options(hessian.kind, predictive, samples)
        delta = check_prior_precision(prior_precision)
        self.kind, self.predictive, self.prior_precision = hessian.kind, predictive, delta
        w, b = weight.detach().double(), bias.detach().double()
        self.register_buffer("weight", weight.detach().clone())
        self.register_buffer("bias", bias.detach().clone())
        if hessian.kind == "diag":
            var = 1.0 / (hessian.diag + delta)  # (C, D+1) posterior variances
        else:
            var = 1.0 / (hessian.a_vals[:, None] * hessian.g_vals[None, :] + delta)  # (D+1, C) in the eigenbasis
        if predictive == "mc":
            gen = torch.Generator().manual_seed(int(seed))
            eps = torch.randn((samples, *w.shape[:1], w.shape[1] + 1), generator=gen, dtype=torch.float64)
            if hessian.kind == "diag":
                delta_theta = eps * var.sqrt()
            else:
                delta_theta = hessian.g_vecs @ (eps * var.T.sqrt()) @ hessian.a_vecs.T
            theta = torch.cat([w, b[:, None]], 1) + delta_theta  # (M, C, D+1)
            self.register_buffer("heads_wt", theta[:, :, :-1].transpose(1, 2).float().contiguous())  # (M, D, C)
            self.register_buffer("heads_b", theta[:, None, :, -1].float().contiguous())  # (M, 1, C)
        elif hessian.kind == "diag":
            self.register_buffer("var_wt", var[:, :-1].T.float().contiguous())  # (D, C)
            self.register_buffer("var_b", var[:, -1].float().contiguous())  # (C,)
        else:
            self.register_buffer("ua_top", hessian.a_vecs[:-1].float().contiguous())  # (D, D+1)
            self.register_buffer("ua_last", hessian.a_vecs[-1].float().contiguous())  # (D+1,)
            self.register_buffer("r", var.float().contiguous())  # (D+1, C)
            self.register_buffer("ug2t", hessian.g_vecs.square().T.float().contiguous())  # (C, C)

    def logit_variance(self, f: Tensor) -> Tensor:
        """Diagonal of the (B, C) logit covariance ``J Sigma J^T`` (probit predictive)."""
        if self.kind == "diag":
            return f.square() @ self.var_wt + self.var_b
        proj = f @ self.ua_top + self.ua_last  # f~ in the eigenbasis of A
        return (proj.square() @ self.r) @ self.ug2t

    def forward(self, f: Tensor) -> Tensor:
        """Features (B, D) -> logits: (M, B, C) sampled heads with ``mc``, else (B, C) probit-scaled logits."""
        if self.predictive == "mc":
            m = self.heads_wt.shape[0]
            return torch.bmm(f.unsqueeze(0).expand(m, -1, -1), self.heads_wt) + self.heads_b
        z = F.linear(f, self.weight, self.bias)
        return z * torch.rsqrt(1.0 + math.pi / 8.0 * self.logit_variance(f))

    def extra_macs(self) -> int:
        """Multiply-adds per image beyond the MAP classifier ``C D`` (what fvcore counts)."""
        d, c = self.weight.shape[1], self.weight.shape[0]
        if self.predictive == "mc":
            return (self.heads_wt.shape[0] - 1) * c * d
        return c * d if self.kind == "diag" else d * (d + 1) + (d + 1) * c + c * c

    def stored_floats(self) -> int:
        """Numbers the predictive stores on top of the model (posterior factors or sampled heads)."""
        return sum(b.numel() for n, b in self.named_buffers() if n not in ("weight", "bias"))


def predictive_nll(logits: Tensor, labels: Tensor) -> float:
    """Mean NLL of the predictive: ``softmax(z)`` for (N, C), ``mean_m softmax(z_m)`` for (M, N, C)."""
    logp = F.log_softmax(logits.double(), -1)
    if logp.ndim == 3:
        logp = torch.logsumexp(logp, 0) - math.log(logp.shape[0])
    return float(-logp.gather(1, labels[:, None]).mean())


@torch.no_grad()
def select_prior_precision(
    hessian: LastLayerHessian,
    weight: Tensor,
    bias: Tensor,
    val_features: Tensor,
    val_labels: Tensor,
    grid,
    *,
    predictive: str = "probit",
    samples: int = 0,
    seed: int = 0,
) -> tuple[float, dict[float, float]]:
    """The prior precision of ``grid`` with the lowest validation NLL (first on ties), and every NLL."""
    grid = [check_prior_precision(d, f"{METHOD} prior precision grid") for d in grid]
    if not grid:
        raise ValueError(f"{METHOD}: the prior precision grid is empty")
    nll = {
        d: predictive_nll(
            LaplaceHead(hessian, weight, bias, d, predictive=predictive, samples=samples, seed=seed)(val_features),
            val_labels,
        )
        for d in grid
    }
    return min(nll, key=nll.get), nll


class LastLayerLaplace(BackboneHead):
    """(B, 3, S, S) -> predictive logits of ``model`` with a Laplace last layer (model in eval mode)."""

    def __init__(self, model: nn.Module, head: LaplaceHead, *, model_name: str = ""):
        super().__init__(model, head, METHOD, model_name)


# ---- the method: params.yaml baselines.laplace.<key> -> one output (registered; see benchmark.methods.baselines) ----


@dataclass(frozen=True)
class LaplaceConfig:
    model: str
    prior_precisions: list[float] = field(metadata=check(min_len=1, above=0, inf=True))
    hessian: str = "kron"
    predictive: str = "probit"
    samples: int = 0
    seed: int = bl.seed_field()
    splits: list[str] | None = bl.splits_field()


def check_laplace(ctx, cfg: LaplaceConfig) -> list[str]:
    """The entry checked (options, the prior precision grid, a linear head); the splits it covers."""
    name = bl.model(ctx, cfg.model)
    check_options(cfg.hessian, cfg.predictive, cfg.samples, name)
    grid = cfg.prior_precisions
    if not isinstance(grid, list) or not grid:
        raise ValueError(f"{ctx.where}: prior_precisions must be a non-empty list of positive numbers, got {grid!r}")
    for d in grid:
        check_prior_precision(d, f"{ctx.where} ({METHOD} of model {name!r})")
    linear_head(ctx.skeleton(name), METHOD, name)
    return ctx.splits(cfg.splits)


@register_method(
    kind="laplace",
    family="laplace",
    title=METHOD,
    config=LaplaceConfig,
    needs=("checkpoints",),
    comment="last-layer Laplace",
    example=lambda x: (
        f"laplace-{x['base']}: {{model: {x['base']}, hessian: kron, predictive: probit, "
        "prior_precisions: [1.0e-2, 1.0, 100.0, 1.0e+4]}"
    ),
    fixture=lambda x: {f"la-{x['base']}": {"model": x["base"], "prior_precisions": [1.0, 100.0]}},
)
def laplace(ctx, cfg: LaplaceConfig, key: str) -> list[Output]:
    """Last-layer Laplace of zoo model ``model`` (GGN on train, prior precision by val NLL) ->
    ``results/methods/<key>``."""
    splits = check_laplace(ctx, cfg)
    name = cfg.model
    entry, model = ctx.load_trained(name)
    head = linear_head(model, METHOD, name)
    ctx.set_threads()
    tr, va = ctx.inputs(bl.TRAIN, entry), ctx.inputs(bl.VAL, entry)  # train: no augmentation
    f_tr, f_va, y_va = bl.features(ctx, model, tr), bl.features(ctx, model, va), va.labels
    hessian = fit_hessian(f_tr, tr.labels, head.weight.detach(), head.bias.detach(), cfg.hessian)
    opts = {"predictive": cfg.predictive, "samples": cfg.samples, "seed": cfg.seed}
    delta, nll = select_prior_precision(hessian, head.weight, head.bias, f_va, y_va, cfg.prior_precisions, **opts)
    la_head = LaplaceHead(hessian, head.weight, head.bias, delta, **opts)
    wrapper = LastLayerLaplace(model, la_head, model_name=name)
    info = {
        "family": "laplace",
        "method": f"{cfg.hessian}-{cfg.predictive}",
        "base": name,
        "hessian": cfg.hessian,
        "predictive": cfg.predictive,
        "samples": cfg.samples if cfg.predictive == "mc" else 0,
        "prior_precision": delta,
        "val_nll": {str(d): v for d, v in nll.items()},
        **laplace_cost(model, la_head, entry.img_size),
    }
    return [Output(key, info, model=wrapper, entry=entry, splits=splits)]


def laplace_cost(model: nn.Module, la_head: LaplaceHead, img_size: int) -> dict:
    """cost.json's ``gflops`` (one forward + the predictive's extra multiply-adds), ``gflops_one_forward`` and
    ``params`` (the model + the numbers the predictive stores)."""
    one = costs.count_flops(model, img_size)
    return {
        "gflops": one + la_head.extra_macs() / 1e9,
        "gflops_one_forward": one,
        "params": costs.count_params(model) + la_head.stored_floats(),
    }


@register_cost("laplace")
def laplace_output_cost(info: dict, entry, num_classes: int, members: int, cfg: LaplaceConfig) -> dict:
    """:func:`laplace_cost` of an output described by its cost record ``info``, rebuilt without weights (the sizes
    only depend on the shapes: a GGN fitted on one zero feature serves); computed once per process for each entry,
    class count and predictive (the GGN's eigendecompositions take seconds on a wide head)."""
    samples = info.get("samples", 0)
    check_options(info.get("hessian"), info.get("predictive"), samples, entry.name)
    if members != (samples if info["predictive"] == "mc" else 1):
        raise ValueError(
            f"{info['predictive']} predictive with samples {samples}, but the logits have {members} member(s)"
        )
    return dict(
        _cost_without_weights(
            entry, num_classes, info["hessian"], info["predictive"], samples if info["predictive"] == "mc" else 0
        )
    )


@functools.cache
def _cost_without_weights(entry, num_classes: int, kind: str, predictive: str, samples: int) -> dict:
    from benchmark.models import factory

    model = factory.create(entry, num_classes, load_weights=False)
    head = linear_head(model, METHOD, entry.name)
    w, b = head.weight.detach(), head.bias.detach()
    hessian = fit_hessian(w.new_zeros(1, w.shape[1]), torch.zeros(1, dtype=torch.long), w, b, kind)
    la_head = LaplaceHead(hessian, w, b, 1.0, predictive=predictive, samples=samples)
    return laplace_cost(model, la_head, entry.img_size)
