"""Shallow ensemble: one shared backbone, ``M`` linear heads trained jointly.

``z_m = W_m f(x) + b_m`` for ``m = 1..M`` with ``f`` the penultimate features of a
timm classifier (see :mod:`benchmark.methods.last_layer`); the forward returns
(M, B, C) member logits (the ensemble prediction is the mean of the softmaxes).
The heads are initialised independently (``nn.Linear``'s default
``U(-1/sqrt(D), 1/sqrt(D))``, seeded) and trained together on the mean member
cross-entropy (:func:`benchmark.core.members.member_cross_entropy`).

Two ways to train (``backbone``):

* ``joint`` (the method as published): the backbone starts from the model's
  initial (pretrained) weights and trains together with the ``M`` heads, every
  head's loss flowing into the shared features; costs one fine-tune.
* ``frozen`` (the cheap profile): the backbone stays at a fine-tuned checkpoint
  and only the heads train, on its features (the backbone runs once per training
  image). The heads' only sources of diversity are then their initialisations
  and the shared mini-batch order, so expect less diversity.

Cost either way: one forward, with ``M`` heads in place of one classifier:
``GFLOPs = one forward + (M - 1) C D / 1e9``. Training budget (:mod:`benchmark.methods.budget`): the recipe's
epochs over the train split, one forward per image (the backbone is shared), the trainable parameters (backbone
and heads when ``joint``; the heads alone when ``frozen``, built on the model's fine-tune, whose budget it adds).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from benchmark.methods import baselines as bl
from benchmark.methods.last_layer import BackboneHead, linear_head
from benchmark.methods.registry import Output, Training, register_cost, register_method
from benchmark.models import cost as costs
from benchmark.models.recipe import recipe_of
from benchmark.storage import store

METHOD = "shallow ensemble"


def check_members(members, model_name: str = "") -> int:
    """``members`` as an integer >= 2; ``ValueError`` naming the model."""
    if isinstance(members, bool) or not isinstance(members, int) or members < 2:
        raise ValueError(f"{METHOD} of model {model_name!r}: members must be an integer >= 2, got {members!r}")
    return members


class EnsembleHeads(nn.Module):
    """``M`` linear heads: features (B, D) or (B, D, 1, 1) -> (M, B, C)."""

    def __init__(self, features: int, classes: int, members: int, *, seed: int = 0):
        super().__init__()
        check_members(members)
        bound = 1.0 / math.sqrt(features)
        gen = torch.Generator().manual_seed(int(seed))
        self.weight = nn.Parameter((torch.rand(members, features, classes, generator=gen) * 2 - 1) * bound)  # W_m^T
        self.bias = nn.Parameter((torch.rand(members, 1, classes, generator=gen) * 2 - 1) * bound)

    def forward(self, f: Tensor) -> Tensor:
        """Features (B, D) -> (M, B, C): every head's logits."""
        f = f.flatten(1)
        return torch.bmm(f.unsqueeze(0).expand(self.weight.shape[0], -1, -1), self.weight) + self.bias


BACKBONES = ("joint", "frozen")


class ShallowEnsemble(BackboneHead):
    """(B, 3, S, S) -> (M, B, C): the backbone of ``model`` and :class:`EnsembleHeads`.

    ``backbone="frozen"`` keeps the backbone in eval mode without gradients;
    ``"joint"`` trains it with the heads.
    """

    def __init__(self, model: nn.Module, heads: EnsembleHeads, *, model_name: str = "", backbone: str = "frozen"):
        if backbone not in BACKBONES:
            raise ValueError(f"{METHOD} of model {model_name!r}: backbone must be one of {BACKBONES}, got {backbone!r}")
        super().__init__(model, heads, METHOD, model_name, frozen=backbone == "frozen")
        model.get_classifier().requires_grad_(False)  # unused: the heads replace it
        if heads.weight.shape[1:] != (self.in_features, self.num_classes):
            raise ValueError(
                f"{METHOD} of model {model_name!r}: heads map {heads.weight.shape[1]} features to "
                f"{heads.weight.shape[2]} classes, the model has {self.in_features} -> {self.num_classes}"
            )


# ---- the method: params.yaml baselines.shallow.<key> -> one output (registered; see benchmark.methods.baselines) ----


@dataclass(frozen=True)
class ShallowConfig:
    model: str
    members: int
    recipe: str
    backbone: str = "joint"
    seed: int = bl.seed_field()
    splits: list[str] | None = bl.splits_field()


def check_shallow(ctx, cfg: ShallowConfig) -> list[str]:
    """The entry checked (members, backbone, recipe, a linear head); the splits it covers."""
    name = bl.model(ctx, cfg.model)
    check_members(cfg.members, name)
    if cfg.backbone not in BACKBONES:
        raise ValueError(
            f"{ctx.where}: {METHOD} of model {name!r}: backbone must be one of {list(BACKBONES)}, got {cfg.backbone!r}"
        )
    recipe = recipe_of(ctx.recipes, cfg.recipe, bl.who(ctx, name))
    if cfg.backbone == "frozen" and recipe.shift_pixels:
        raise ValueError(
            f"{bl.who(ctx, name)}: with a frozen backbone the heads train on "
            f"features, so recipe {cfg.recipe!r} must have shift_pixels: 0"
        )
    linear_head(ctx.skeleton(name), METHOD, name)
    return ctx.splits(cfg.splits)


def shallow_training(cfg: ShallowConfig, info: dict) -> Training:
    """Recipe ``recipe``, one forward per image; built on the model's fine-tune when the backbone is ``frozen`` (its
    checkpoint's features), on the pretrained init (nothing of the zoo) when ``joint``."""
    return Training(recipe=cfg.recipe, builds_on=(cfg.model,) if cfg.backbone == "frozen" else ())


def _train_shallow(ctx, cfg: ShallowConfig, key: str, entry, recipe, model, heads, wrapper, tr, va) -> dict:
    """Train :func:`shallow`'s ensemble (``wrapper``; the ``heads`` alone, on the features of the fine-tuned
    ``model``, when the backbone is frozen), resumable in its method folder; the ``train.json`` record."""
    name, m = cfg.model, cfg.members
    folder = ctx.method_folder(key)
    run = {"members": m, "seed": cfg.seed, "backbone": cfg.backbone}
    if cfg.backbone == "joint":
        fp = ctx.fingerprint(entry.as_dict(), asdict(recipe), run, store.array_hash(tr.ids), store.array_hash(va.ids))
        record = bl.train_once(
            wrapper.to(ctx.device()),
            tr.fit_data,
            va.fit_data,
            recipe,
            seed=cfg.seed,
            folder=folder,
            fingerprint=fp,
            params=[p for p in wrapper.parameters() if p.requires_grad],
            progress=ctx.progress,
            num_workers=ctx.source.num_workers,
        )
    else:  # the heads train on the checkpoint's features: its weights are part of the fingerprint
        weights = store.file_hash(ctx.checkpoint(name) / "model.safetensors")
        fp = ctx.fingerprint(
            entry.as_dict(), asdict(recipe), run, weights, store.array_hash(tr.ids), store.array_hash(va.ids)
        )
        f_tr, f_va = (bl.features(ctx, model, s)[:, :, None, None] for s in (tr, va))
        record = bl.train_once(
            heads,
            (f_tr, tr.labels),
            (f_va, va.labels),
            recipe,
            seed=cfg.seed,
            folder=folder,
            fingerprint=fp,
            progress=ctx.progress,
        )
    return record


@register_method(
    kind="shallow",
    family="shallow_ensemble",
    title=METHOD,
    config=ShallowConfig,
    needs=("checkpoints", "base-model"),
    persist=True,
    comment="one backbone, M heads (joint: from the init)",
    training=shallow_training,
    example=lambda x: f"shallow-{x['base']}: {{model: {x['base']}, members: 5, recipe: {x['train_recipe']}}}",
    fixture=lambda x: {f"sh-{x['sidekick']}": {"model": x["sidekick"], "members": 2, "recipe": x["train_recipe"]}},
)
def shallow(ctx, cfg: ShallowConfig, key: str) -> list[Output]:
    """Shallow ensemble of ``members`` heads on one backbone of zoo model ``model`` -> ``results/methods/<key>``.

    ``backbone: joint`` trains the backbone from the entry's initial (pretrained)
    weights together with the heads; ``frozen`` trains only the heads, on the
    features of the model's fine-tuned checkpoint (seconds). Either way with recipe
    ``recipe``, selected on validation, resumable in ``results/method_checkpoints/<key>``
    (the heads alone when frozen).
    """
    splits = check_shallow(ctx, cfg)
    name, m, joint = cfg.model, cfg.members, cfg.backbone == "joint"
    recipe = recipe_of(ctx.recipes, cfg.recipe, bl.who(ctx, name))
    if joint:
        entry = ctx.entry(name)
        model = ctx.create(entry, drop_rate=recipe.drop_rate)  # the pretrained init; fails fast
    else:
        entry, model = ctx.load_trained(name)
    head = linear_head(model, METHOD, name)
    c, d = head.out_features, head.in_features
    heads = EnsembleHeads(d, c, m, seed=cfg.seed)
    wrapper = ShallowEnsemble(model, heads, model_name=name, backbone=cfg.backbone)
    ctx.set_threads()
    cost = shallow_cost(model, m, entry.img_size, cfg.backbone)  # before training moves the model to its device
    tr, va = ctx.inputs(bl.TRAIN, entry, train=joint), ctx.inputs(bl.VAL, entry)
    record = _train_shallow(ctx, cfg, key, entry, recipe, model, heads, wrapper, tr, va)
    info = {
        "family": "shallow_ensemble",
        "method": f"m{m}" + ("" if joint else "-frozen"),
        "base": name,
        "members": m,
        "backbone": cfg.backbone,
        "recipe": cfg.recipe,
        "seed": cfg.seed,
        "best_epoch": record["best_epoch"],
        "val_score": record["best_score"],
        **cost,
    }
    return [Output(key, info, model=wrapper, entry=entry, splits=splits)]


def shallow_cost(model: nn.Module, members: int, img_size: int, backbone: str = "joint") -> dict:
    """cost.json's ``gflops`` (one forward + ``M - 1`` more heads), ``gflops_one_forward``, ``params`` and
    ``trainable_params`` (the ``M`` heads, and the backbone without its unused classifier when ``joint``)."""
    head = linear_head(model, METHOD, type(model).__name__)
    c, d = head.out_features, head.in_features
    one = costs.count_flops(model, img_size)
    heads = members * (c * d + c)
    total = costs.count_params(model) - (c * d + c) + heads
    return {
        "gflops": one + (members - 1) * c * d / 1e9,
        "gflops_one_forward": one,
        "params": total,
        "trainable_params": total if backbone == "joint" else heads,
    }


@register_cost("shallow_ensemble")
def shallow_output_cost(info: dict, entry, num_classes: int, members: int, cfg: ShallowConfig) -> dict:
    """:func:`shallow_cost` of an output described by its cost record, the model built without weights."""
    from benchmark.models import factory

    if info.get("members") != members:
        raise ValueError(f"members {info.get('members')!r}, but the logits have {members}")
    return shallow_cost(factory.create(entry, num_classes, load_weights=False), members, entry.img_size, cfg.backbone)
