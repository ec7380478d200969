"""MC dropout (Gal & Ghahramani, 2016) at the classifier input of a timm model.

timm classifiers have one dropout layer, right before the final linear
classifier (``drop_rate``: ``F.dropout`` on the pooled features; ``head_drop`` in
ViTs). The wrapper keeps the whole model in eval mode (BatchNorm uses its
running statistics) and draws ``T`` dropout masks on those features:

    z_t = W (m_t * f(x) / (1 - p)) + b,   m_t ~ Bernoulli(1 - p)^D,  t = 1..T

and returns the (T, B, C) logits (the ensemble prediction is the mean of the T
softmaxes).

Variants (:data:`VARIANTS`; the cost.json ``variant`` and the method name say which):

``trained`` (default, Gal & Ghahramani's method)
    sample the dropout the model was fine-tuned with: ``p`` = the ``drop_rate``
    of its recipe, recorded in its ``train.json``. A model trained without
    dropout, or a ``p`` other than its training rate, is refused.
``post-hoc``
    switch dropout on at test time only, with rate ``p`` (required unless the
    model has a training rate): masks the weights never saw in training.

Since the backbone before the dropout layer is deterministic, it runs once and
only the classifier runs ``T`` times; the result equals ``T`` full forwards
with those masks. The reported cost follows the general MC-dropout formula,
``T x`` one forward (dropout anywhere in the network needs ``T`` forwards).

Reproducibility: the masks come from a generator seeded with ``seed`` at every
forward, so a sample's logits depend only on its input and its position in the
batch (same batch size -> same numbers).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from benchmark.config.typed import check
from benchmark.methods import baselines as bl
from benchmark.methods.last_layer import linear_head, penultimate
from benchmark.methods.registry import Output, register_cost, register_method
from benchmark.models import cost as costs
from benchmark.models.recipe import recipe_of

METHOD = "MC dropout"
VARIANTS = ("trained", "post-hoc")


def check_samples(samples, model_name: str = "") -> int:
    """``samples`` (T) as an integer >= 1; ``ValueError`` naming the model."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"{METHOD} of model {model_name!r}: samples T must be an integer >= 1, got {samples!r}")
    return samples


def trained_rate(model: nn.Module) -> float | None:
    """Rate of timm's dropout before the classifier (``drop_rate``, or ViTs' ``head_drop``); None if it has none."""
    if isinstance(getattr(model, "head_drop", None), nn.Dropout):
        return float(model.head_drop.p)
    rate = getattr(model, "drop_rate", None)
    return None if rate is None else float(rate)


def _check_rate(p, what: str, where: str) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise ValueError(f"{where}: {what} must be a number in [0, 1), got {p!r}")
    return float(p)


def resolve_rate(
    model: nn.Module, p, model_name: str, *, variant: str = "trained", train_rate: float | None = None
) -> float:
    """The dropout rate to sample with (see the module docstring); ``ValueError`` naming the method and model.

    ``train_rate`` is the rate the model was fine-tuned with (its recipe's
    ``drop_rate`` in ``train.json``); None: the rate the model was built with.
    """
    where = f"{METHOD} of model {model_name!r}"
    if variant not in VARIANTS:
        raise ValueError(f"{where}: variant must be one of {list(VARIANTS)}, got {variant!r}")
    built = trained_rate(model)
    if built is None:
        raise ValueError(
            f"{METHOD} does not apply to model {model_name!r} ({type(model).__name__}): it has no dropout "
            "layer before its classifier (no timm 'drop_rate' or 'head_drop')"
        )
    trained = built if train_rate is None else float(train_rate)
    if variant == "post-hoc":
        if p is None:
            if trained == 0:
                raise ValueError(
                    f"{where}: variant post-hoc needs the dropout rate p (the model was trained without dropout)"
                )
            p = trained
        return _check_rate(p, "dropout rate p", where)
    if trained == 0:
        raise ValueError(
            f"{where}: the model was fine-tuned without dropout (drop_rate 0), and Gal & Ghahramani's MC "
            "dropout samples the dropout a model was trained with; set drop_rate in its recipe and retrain "
            "it, or name variant: post-hoc to switch dropout on at test time only"
        )
    if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float)) or float(p) != trained):
        raise ValueError(
            f"{where}: p={p!r} differs from the rate the model was trained with (drop_rate {trained:g}); "
            "leave p out (it defaults to that rate) or name variant: post-hoc"
        )
    return _check_rate(trained, "the training drop_rate", where)


class MCDropout(nn.Module):
    """(B, 3, S, S) -> (T, B, C) logits of ``T`` dropout samples (see the module docstring)."""

    def __init__(
        self,
        model: nn.Module,
        samples: int,
        p: float | None = None,
        *,
        seed: int = 0,
        model_name: str = "",
        variant: str = "trained",
        train_rate: float | None = None,
    ):
        super().__init__()
        name = model_name or type(model).__name__
        self.head = linear_head(model, METHOD, name)
        self.p = resolve_rate(model, p, name, variant=variant, train_rate=train_rate)
        self.variant = variant
        self.samples = check_samples(samples, name)
        self.seed = int(seed)
        self.model = model.eval()

    def train(self, mode: bool = True) -> MCDropout:
        """Dropout is always on in the wrapper; the wrapped model always stays in eval mode."""
        super().train(mode)
        self.model.eval()
        return self

    def forward(self, x: Tensor) -> Tensor:
        """Images (B, 3, S, S) -> (T, B, C): the head on T seeded dropout masks of the penultimate features."""
        f = penultimate(self.model, x)
        gen = torch.Generator(device=f.device).manual_seed(self.seed)
        keep = torch.rand((self.samples, *f.shape), generator=gen, device=f.device) >= self.p
        return self.head(f.unsqueeze(0) * keep / (1.0 - self.p))


# ---- the method: params.yaml baselines.mc_dropout.<key> -> one output (registered; see
# benchmark.methods.baselines) ----


@dataclass(frozen=True)
class MCDropoutConfig:
    model: str
    samples: int
    p: float | None = field(default=None, metadata=check(minimum=0))
    variant: str = "trained"
    seed: int = bl.seed_field()
    splits: list[str] | None = bl.splits_field()


def check_mc_dropout(ctx, cfg: MCDropoutConfig) -> list[str]:
    """The entry checked (applicability, variant and rate, before any checkpoint is read); the splits it covers."""
    name = bl.model(ctx, cfg.model)
    check_samples(cfg.samples, name)
    entry = ctx.entry(name)
    rate = recipe_of(
        ctx.recipes, entry.recipe, f"zoo entry {name!r}"
    ).drop_rate  # what train@<model> fine-tunes it with
    MCDropout(ctx.skeleton(name), cfg.samples, cfg.p, model_name=name, variant=cfg.variant, train_rate=rate)
    return ctx.splits(cfg.splits)


@register_method(
    kind="mc_dropout",
    family="mc_dropout",
    title=METHOD,
    config=MCDropoutConfig,
    needs=("checkpoints",),
    comment="MC dropout, T masks",
    example=lambda x: f"mcdrop-{x['base']}: {{model: {x['base']}, samples: 8, p: 0.1}}",
    fixture=lambda x: {f"mcd-{x['sidekick']}": {"model": x["sidekick"], "samples": 3}},
)  # its recipe's drop_rate
def mc_dropout(ctx, cfg: MCDropoutConfig, key: str) -> list[Output]:
    """MC dropout with ``samples`` masks on zoo model ``model`` -> ``results/methods/<key>``."""
    splits = check_mc_dropout(ctx, cfg)
    name = cfg.model
    entry, model = ctx.load_trained(name)
    trained = bl.train_drop_rate(ctx, name)
    wrapper = MCDropout(
        model, cfg.samples, cfg.p, seed=cfg.seed, model_name=name, variant=cfg.variant, train_rate=trained
    )
    ctx.set_threads()
    info = {
        "family": "mc_dropout",
        "method": f"T{wrapper.samples}-{wrapper.variant}",
        "base": name,
        "variant": wrapper.variant,
        "samples": wrapper.samples,
        "p": wrapper.p,
        "seed": wrapper.seed,
        "trained_drop_rate": trained,
        **mc_dropout_cost(model, wrapper.samples, entry.img_size),
        "gflops_as_run": costs.count_flops(wrapper, entry.img_size),
    }
    return [Output(key, info, model=wrapper, entry=entry, splits=splits)]


def mc_dropout_cost(model: nn.Module, samples: int, img_size: int) -> dict:
    """cost.json's ``gflops`` (``samples`` forwards: the paper convention), ``gflops_one_forward`` and ``params``."""
    one = costs.count_flops(model, img_size)
    return {"gflops": samples * one, "gflops_one_forward": one, "params": costs.count_params(model)}


@register_cost("mc_dropout")
def mc_dropout_output_cost(info: dict, entry, num_classes: int, members: int, cfg: MCDropoutConfig) -> dict:
    """:func:`mc_dropout_cost` of an output described by its cost record, the model built without weights."""
    from benchmark.models import factory

    samples = check_samples(info.get("samples"), entry.name)
    if members != samples:
        raise ValueError(f"samples {samples}, but the logits have {members} member(s)")
    return mc_dropout_cost(factory.create(entry, num_classes, load_weights=False), samples, entry.img_size)
