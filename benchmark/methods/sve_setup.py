"""What an SVE run is made of (:mod:`benchmark.methods.sve_stage` runs it): params ``sve`` typed
(:class:`SveConfig`) and checked against the zoo and recipes, the base entry, the train subset, the model
(:func:`build`), its cost record and training budget, and the members' loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from benchmark.config.typed import check as bounds
from benchmark.core.members import member_cross_entropy
from benchmark.data.stratified import stratified_order
from benchmark.methods.registry import Training, register_cost
from benchmark.methods.sve import SIGMA_INIT, SingularValueEnsemble, check_diversity, check_members
from benchmark.models import cost as costs
from benchmark.models import factory
from benchmark.models.recipe import Recipe, recipe_of
from benchmark.models.zoo import ZooEntry

SECTION = "sve"
IMAGES_PER_CALL = 64  # member images per forward when writing logits (M x B beyond ~64 gets slower on CPU)


@dataclass(frozen=True)
class SveConfig:
    """params.yaml ``sve`` (the fields: the module docstring)."""

    base: str  # zoo entry whose arch, pretrained init and img_size SVE starts from
    members: tuple[int, ...] = field(metadata=bounds(minimum=1, unique=True))  # the ensemble sizes M ([] = no SVE)
    recipe: str  # a recipe of params.yaml recipes (checked against them by the SVE stage)
    sigma_init: float = field(default=SIGMA_INIT, metadata=bounds(minimum=0))  # the authors' released init_std
    seed: int = field(default=0, metadata=bounds(minimum=0))
    patterns: tuple[str, ...] | None = field(default=None, metadata=bounds(min_len=1))  # null: the default layers
    train_subset: int | None = field(default=None, metadata=bounds(minimum=1))  # null: the whole train split
    splits: tuple[str, ...] | None = field(default=None, metadata=bounds(min_len=1))  # null: every split but train
    nested: bool = True  # train the largest size once; sve-m<M> = its first M members


def output_name(members: int) -> str:
    """The output of an ``M``-member SVE: ``sve-m<M>``."""
    return f"sve-m{members}"


def check_config(ctx, cfg: SveConfig) -> SveConfig:
    """``cfg`` against the rest of params: sizes to run, a known recipe."""
    if not cfg.members:
        raise ValueError(
            f"params.yaml {SECTION}.members is [] (no SVE: the pipeline has no SVE stage); list the sizes M "
            f"to run, e.g. [1, 2, 4, 8]"
        )
    recipe_of(ctx.recipes, cfg.recipe, f"params.yaml {SECTION}.recipe")
    return cfg


def base_entry(ctx, cfg: SveConfig) -> ZooEntry:
    """The zoo entry named by ``sve.base``; it must exist, have pretrained weights and not clash with the outputs."""
    zoo = ctx.zoo
    base = cfg.base
    if base not in zoo:
        raise ValueError(
            f"params.yaml {SECTION}.base: unknown zoo entry {base!r}; the zoo {ctx.params.zoo} has {sorted(zoo)}"
        )
    entry = zoo[base]
    if not entry.pretrained:
        raise ValueError(
            f"params.yaml {SECTION}.base: zoo entry {base!r} has init 'scratch'; SVE needs a pretrained "
            "backbone (its singular vectors are the members' shared basis)"
        )
    clash = sorted(output_name(m) for m in cfg.members if output_name(m) in zoo)
    if clash:
        raise ValueError(f"params.yaml {SECTION}: output names {clash} are zoo entries; rename those entries")
    return entry


def train_subset(split, n: int | None, seed: int):
    """A stratified seeded subset of ``n`` samples (in split order) of ``split`` (the stage's
    :class:`~benchmark.stages.suite_source.SplitInputs`); the split itself if ``n`` is None."""
    if n is None:
        return split
    if n > len(split):
        raise ValueError(
            f"params.yaml {SECTION}.train_subset: {n} exceeds the {len(split)} images of split {split.name!r}"
        )
    return split.subset(np.sort(stratified_order(split.labels.numpy(), np.random.default_rng([seed, 0x5E5E]))[:n]))


def build(
    entry: ZooEntry, cfg: SveConfig, members: int, num_classes: int, *, load_weights: bool = True
) -> SingularValueEnsemble:
    """The entry's pretrained timm model wrapped in an ``M``-member SVE with fresh heads.

    The backbone is built with a 1000-class linear head (the ImageNet one where the
    weights have it, so nothing is reset); SVE removes it and keeps its place for
    :meth:`~benchmark.methods.sve.SingularValueEnsemble.export_member`. ``load_weights=False``:
    a random backbone of the same shapes (costs and parameter counts only, e.g. ``verify``).
    """
    backbone = factory.create(entry, 1000, load_weights=load_weights)
    return SingularValueEnsemble(
        backbone,
        members=members,
        num_classes=num_classes,
        patterns=cfg.patterns,
        sigma_init=cfg.sigma_init,
        seed=cfg.seed,
        pretrained=load_weights,
        allow_random_init=not load_weights,
        member_streams=cfg.nested,
    )


def cost_info(model: SingularValueEnsemble, img_size: int, one: float | None = None) -> dict:
    """GFLOPs (``M x`` one dense member: ``one``, counted when not given) and parameter counts of an SVE
    (see the module docstring)."""
    one = costs.count_flops(model.export_member(0), img_size) if one is None else one
    ov = model.overhead()
    return {
        "gflops": model.members * one,
        "gflops_one_forward": one,
        "trainable_params": ov["trainable"],
        "backbone_params": ov["backbone"],
        "params": ov["backbone"] + ov["trainable"],
        "overhead_percent": ov["percent"],
        "extra_params_percent": ov["percent_extra"],
    }


@register_cost("sve")
def sve_output_cost(info: dict, entry: ZooEntry, num_classes: int, members: int, cfg: SveConfig) -> dict:
    """:func:`cost_info` of output ``sve-m<members>`` (params ``sve``: ``cfg``; base ``entry``), rebuilt without
    weights."""
    if info.get("members") != members:
        raise ValueError(f"members {info.get('members')!r}, but the logits have {members}")
    model = build(entry, cfg, members, num_classes, load_weights=False)
    if info.get("adapted_layers") != len(model.layer_names):
        raise ValueError(
            f"adapted_layers {info.get('adapted_layers')!r}, but params {SECTION} adapts {len(model.layer_names)}"
        )
    c = cost_info(model, entry.img_size)
    return {
        k: c[k]
        for k in (
            "gflops",
            "gflops_one_forward",
            "params",
            "trainable_params",
            "overhead_percent",
            "extra_params_percent",
        )
    }


def sve_training(cfg: SveConfig, info: dict) -> Training:
    """The training of output ``sve-m<M>`` (``info["members"]``): recipe ``sve.recipe``, M members, ``sve.train_subset``
    images per epoch (None: the train split), from the pretrained backbone (no zoo fine-tune)."""
    members = info.get("members")
    if isinstance(members, bool) or not isinstance(members, int) or members < 1:
        raise ValueError(f"members must be an integer >= 1, got {members!r}")
    return Training(recipe=cfg.recipe, members=members, images=cfg.train_subset)


def check(ctx, cfg: SveConfig, members) -> tuple[ZooEntry, Recipe, list[str]]:
    """Everything the stage needs, validated before any work: base entry, recipe, splits."""
    try:
        members = check_members(members)
    except ValueError as e:
        raise ValueError(f"sve stage: {e} (--members)") from None
    check_config(ctx, cfg)
    entry = base_entry(ctx, cfg)
    recipe = recipe_of(ctx.recipes, cfg.recipe, f"params.yaml {SECTION}.recipe")
    splits = ctx.resolve_splits(cfg.splits, f"params.yaml {SECTION}.splits")
    # build() gives the backbone its 1000-class head; SVE copies it into every member when the suite has 1000 classes
    check_diversity(members, cfg.sigma_init, ctx.source.num_classes() == 1000, f"params.yaml {SECTION} (sve@{members})")
    return entry, recipe, splits


def summed_member_cross_entropy(logits, labels, label_smoothing: float = 0.0):
    """Sum over members of each member's mean cross-entropy on the batch, for (M, B, C) logits.

    Member ``m``'s gradient is that of its own loss, whatever ``M`` (the mean over
    members would scale it by ``1 / M``): with AdamW's per-parameter updates, the
    first ``k`` members of an ``M``-member run are the ``k``-member run (nested SVE).
    """
    if logits.dim() == 2:
        return member_cross_entropy(logits, labels, label_smoothing)
    return sum(member_cross_entropy(z, labels, label_smoothing) for z in logits.unbind(0))
