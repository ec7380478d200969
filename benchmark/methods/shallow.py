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
``GFLOPs = one forward + (M - 1) C D / 1e9``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from benchmark.methods import baselines as bl
from benchmark.methods.last_layer import BackboneHead, linear_head
from benchmark.models import factory
from benchmark.models import cost as costs
from benchmark.stages import per_model, stage_config, suite_source
from benchmark.stages.registry import register_cost, register_method
from benchmark.storage import store

METHOD = "shallow ensemble"


def check_members(members, model_name: str = "") -> int:
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
            raise ValueError(f"{METHOD} of model {model_name!r}: heads map {heads.weight.shape[1]} features to "
                             f"{heads.weight.shape[2]} classes, the model has {self.in_features} -> {self.num_classes}")


# ---- the stage: params.yaml baselines.shallow.<key> -> results/methods/ (registered; see benchmark.methods.baselines) ----

@dataclass(frozen=True)
class ShallowConfig:
    model: str
    members: int
    recipe: str
    backbone: str = "joint"
    seed: int = bl.seed_field()
    splits: list[str] | None = bl.splits_field()


def check_shallow(params: dict, key: str) -> dict:
    item = bl.item(params, "shallow", key)
    name = bl.model(item, "shallow", item["model"])
    check_members(item["members"], name)
    if item["backbone"] not in BACKBONES:
        raise ValueError(f"{item['where']}: {METHOD} of model {name!r}: backbone must be one of {list(BACKBONES)}, "
                         f"got {item['backbone']!r}")
    if item["backbone"] == "frozen" and bl.recipe(params, item, "shallow").shift_pixels:
        raise ValueError(f"{item['where']}: {METHOD} of model {name!r}: with a frozen backbone the heads train on "
                         f"features, so recipe {item['recipe']!r} must have shift_pixels: 0")
    bl.recipe(params, item, "shallow")
    linear_head(bl.skeleton(params, name), METHOD, name)
    item["splits"] = bl.splits(params, item)
    return item


@register_method(kind="shallow", script="shallow", family="shallow_ensemble", title=METHOD, config=ShallowConfig,
                 needs=("checkpoints", "base-model"), persist=True, comment="one backbone, M heads (joint: from the init)",
                 example=lambda x: f"shallow-{x['base']}: {{model: {x['base']}, members: 5, recipe: {x['train_recipe']}}}")
def shallow(params: dict, key: str, *, progress: bool = True) -> dict:
    """Shallow ensemble of ``members`` heads on one backbone of zoo model ``model`` -> ``results/methods/<key>``.

    ``backbone: joint`` trains the backbone from the entry's initial (pretrained)
    weights together with the heads; ``frozen`` trains only the heads, on the
    features of the model's fine-tuned checkpoint (seconds). Either way with recipe
    ``recipe``, selected on validation, resumable in ``results/method_checkpoints/<key>``
    (the heads alone when frozen).
    """
    item = check_shallow(params, key)
    name, m, joint = item["model"], item["members"], item["backbone"] == "joint"
    recipe = bl.recipe(params, item, "shallow")
    src = suite_source.for_params(params)
    if joint:
        entry = stage_config.entry(params, name)
        model = factory.create(entry, src.num_classes(), drop_rate=recipe.drop_rate)  # the pretrained init; fails fast
    else:
        entry, model = per_model.load_trained(params, name)
    head = linear_head(model, METHOD, name)
    c, d = head.out_features, head.in_features
    heads = EnsembleHeads(d, c, m, seed=item["seed"])
    wrapper = ShallowEnsemble(model, heads, model_name=name, backbone=item["backbone"])
    stage_config.set_threads(params)
    cost = shallow_cost(model, m, entry.img_size)  # before training moves the model to its device
    tr, va = bl.split(params, entry, per_model.TRAIN, train=joint), bl.split(params, entry, per_model.VAL)
    folder = stage_config.RESULTS / "method_checkpoints" / key
    run = {"members": m, "seed": item["seed"], "backbone": item["backbone"]}
    if joint:
        fp = stage_config.fingerprint(entry.as_dict(), asdict(recipe), run, store.array_hash(tr.ids), store.array_hash(va.ids))
        record = per_model.train_once(wrapper.to(suite_source.device(params)), tr.fit_data, va.fit_data, recipe, seed=item["seed"],
                                   folder=folder, fingerprint=fp, params=[p for p in wrapper.parameters() if p.requires_grad],
                                   progress=progress, num_workers=src.num_workers)
    else:  # the heads train on the checkpoint's features: its weights are part of the fingerprint
        weights = store.file_hash(stage_config.paths(name)["checkpoint"] / "model.safetensors")
        fp = stage_config.fingerprint(entry.as_dict(), asdict(recipe), run, weights, store.array_hash(tr.ids), store.array_hash(va.ids))
        f_tr, f_va = (bl.features(params, model, s)[:, :, None, None] for s in (tr, va))
        record = per_model.train_once(heads, (f_tr, tr.labels), (f_va, va.labels), recipe, seed=item["seed"], folder=folder,
                                   fingerprint=fp, progress=progress)
    info = {"family": "shallow_ensemble", "method": f"m{m}" + ("" if joint else "-frozen"), "base": name, "members": m,
            "backbone": item["backbone"], "recipe": item["recipe"], "seed": item["seed"], "best_epoch": record["best_epoch"],
            "val_score": record["best_score"], **cost,
            "trainable_params": sum(p.numel() for p in wrapper.parameters() if p.requires_grad)}
    return per_model.method_output(params, key, wrapper, entry, info, splits=item["splits"], progress=progress)


def shallow_cost(model: nn.Module, members: int, img_size: int) -> dict:
    """cost.json's ``gflops`` (one forward + ``M - 1`` more heads), ``gflops_one_forward`` and ``params``."""
    head = linear_head(model, METHOD, type(model).__name__)
    c, d = head.out_features, head.in_features
    one = costs.count_flops(model, img_size)
    return {"gflops": one + (members - 1) * c * d / 1e9, "gflops_one_forward": one,
            "params": costs.count_params(model) + (members - 1) * (c * d + c)}


@register_cost("shallow_ensemble")
def shallow_output_cost(info: dict, entry, num_classes: int, members: int, params: dict) -> dict:
    """:func:`shallow_cost` of an output described by its cost record, the model built without weights."""
    if info.get("members") != members:
        raise ValueError(f"members {info.get('members')!r}, but the logits have {members}")
    return shallow_cost(factory.create(entry, num_classes, load_weights=False), members, entry.img_size)
