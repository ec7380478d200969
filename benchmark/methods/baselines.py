"""Shared helpers of the weight-based baseline stages (soups, MC dropout, Laplace, shallow and LoRA ensembles).

Each method is one module of :mod:`benchmark.methods` holding its algorithm, its typed
params entry (a frozen dataclass), the check of an entry and the stage function it
registers with :func:`benchmark.stages.registry.register_method`. The stage reads one
entry of ``params.yaml`` ``baselines.<kind>.<key>``, validates it (and that the method
applies to the model's architecture) before loading any checkpoint, builds the method from
the trained checkpoints and writes ``results/methods/<output>/`` through
:func:`benchmark.stages.per_model.method_output` (the evaluate stage picks it up).

``splits`` (``baselines.splits``, or per entry) lists the splits a method output
covers: names or shell patterns (``corrupt-*-3``); ``val`` and ``test`` are required.

The methods follow their publications by default; another variant must be named
(``variant:``) and shows in the method name on the leaderboard: MC dropout
``T<T>-trained`` (samples the dropout the model was fine-tuned with, its recipe's
``drop_rate``) or ``T<T>-post-hoc`` (dropout switched on at test time only);
LoRA-Ensemble ``m<M>-r<r>-published`` (q, k, v and output projection adapted
separately, Xavier gain 10) or ``m<M>-r<r>-fused-qkv``. The greedy soup adds an
ingredient only on a strict validation improvement (the released code).
"""
from __future__ import annotations

from dataclasses import asdict, field

from torch import Tensor

from benchmark.methods.last_layer import penultimate_batched
from benchmark.models import factory
from benchmark.models.train import selection_score  # noqa: F401 (re-exported for the method modules)
from benchmark.models.zoo import NAME_RE
from benchmark.stages import per_model, registry, stage_config, suite_source
from benchmark.stages.registry import check
from benchmark.stages.suite_source import SplitInputs
from benchmark.storage import store

SECTION = "baselines"


def title(kind: str) -> str:
    return registry.get_method(kind).title


def item(params: dict, kind: str, key: str) -> dict:
    """``baselines.<kind>.<key>`` with defaults filled in; unknown/missing keys are errors."""
    section = params.get(SECTION) or {}
    entries = section.get(kind) or {}
    where = f"{SECTION}.{kind}.{key}"
    if key not in entries:
        raise ValueError(f"{where}: no such {title(kind)} entry in params.yaml (known: {sorted(entries)})")
    spec = registry.get_method(kind)
    cfg = registry.parse_config(spec.config, entries[key], where)
    zoo = stage_config.zoo(params)
    for name in spec.output_names(key):
        if not NAME_RE.match(name) or name in zoo:
            raise ValueError(f"{where}: output name {name!r} must be a valid name (letters, digits, '_', '.', '-') "
                             "and differ from every zoo model")
    item = {**asdict(cfg), "where": where, "zoo": zoo}
    return item


def model(item: dict, kind: str, name) -> str:
    if not isinstance(name, str) or name not in item["zoo"]:
        raise ValueError(f"{item['where']}: {title(kind)} of unknown model {name!r}; the zoo has {sorted(item['zoo'])}")
    return name


def splits(params: dict, item: dict) -> list[str]:
    """The split names the output covers (patterns expanded against the data folder)."""
    patterns = item["splits"] if item["splits"] is not None else (params.get(SECTION) or {}).get("splits")
    return suite_source.resolve_splits(patterns, [s for s in per_model.split_files() if s != per_model.TRAIN], f"{item['where']}: splits")


def skeleton(params: dict, name: str):
    """The architecture of zoo entry ``name`` without weights (to check applicability before any work)."""
    entry = stage_config.entry(params, name)
    return factory.create(entry, suite_source.for_params(params).num_classes(), load_weights=False,
                         drop_rate=stage_config.recipes(params)[entry.recipe].drop_rate)


def train_drop_rate(name: str) -> float:
    """The dropout rate zoo model ``name`` was fine-tuned with, from its ``train.json`` (0 before recipes had it)."""
    record = store.read_json(stage_config.paths(name)["checkpoint"] / "train.json")
    return float((record.get("recipe") or {}).get("drop_rate", 0.0))


def split(params: dict, entry, split: str, *, train: bool = False) -> SplitInputs:
    """One split prepared for ``entry`` by the suite's data source (``train``: with the fine-tuning augmentation)."""
    return suite_source.for_params(params).inputs(split, entry, train=train)


def features(params: dict, model, split: SplitInputs) -> Tensor:
    """(N, D) penultimate features of ``model`` on a split, on the CPU."""
    return penultimate_batched(model, split.inputs, batch_size=stage_config.typed(params).logits.batch_size,
                               num_workers=suite_source.for_params(params).num_workers)


def recipe(params: dict, item: dict, kind: str):
    recipes = stage_config.recipes(params)
    if item["recipe"] not in recipes:
        raise ValueError(f"{item['where']}: {title(kind)} of model {item['model']!r}: unknown recipe {item['recipe']!r}; "
                         f"define it in params.yaml 'recipes' (known: {sorted(recipes)})")
    return recipes[item["recipe"]]


# ---- typed params entries: fields every weight-based method shares ----

def splits_field():
    """``splits``: names or shell patterns; ``None``: ``baselines.splits``."""
    return field(default=None, metadata=check(min_len=1))


def seed_field():
    return field(default=0, metadata=check(minimum=0))
