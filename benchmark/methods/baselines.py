"""Shared helpers of the weight-based methods (soups, MC dropout, Laplace, shallow and LoRA ensembles, SVE).

Each method is one module of :mod:`benchmark.methods` holding its algorithm, its typed
params entry (a frozen dataclass) and the function it registers with
:func:`benchmark.methods.registry.register_method`. Its stage parses one entry of
``params.yaml`` ``baselines.<kind>.<key>``; the method validates it (and that it applies to
the model's architecture) before loading any checkpoint, builds itself from the trained
checkpoints (or the pretrained init) and returns its outputs, which the stage writes to
``results/methods/<output>/`` (the evaluate stage picks them up). ``ctx`` below is what the
stage hands down (:class:`benchmark.stages.method_stage.MethodContext`).

``splits`` (``baselines.splits``, or per entry) lists the splits a method output
covers: names or shell patterns (``corrupt-*-3``); ``val`` and ``test`` are required.

The methods follow their publications by default; another variant must be named
(``variant:``) and shows in the method name on the leaderboard: MC dropout
``T<T>-trained`` (samples the dropout the model was fine-tuned with, its recipe's
``drop_rate``) or ``T<T>-post-hoc`` (dropout switched on at test time only);
LoRA-Ensemble ``m<M>-r<r>-published`` (q, k, v and output projection adapted
separately, Xavier gain 10) or ``m<M>-r<r>-fused-qkv``. The greedy soup adds an
ingredient only on a strict validation improvement (the released code).

Training budgets (:mod:`benchmark.methods.budget`): soups, MC dropout and last-layer
Laplace train nothing themselves (the registry's default :class:`~benchmark.methods.registry.Training`)
and build on the fine-tunes of their ``model`` or ``models`` (every soup candidate: the
greedy soup needs them all trained); SVE, shallow and LoRA ensembles declare their own
training (``training=``) and return ``trainable_params`` from their cost function.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from torch import Tensor

from benchmark.config.typed import check
from benchmark.methods.last_layer import penultimate_batched
from benchmark.models.train import fine_tune, load_weights, selection_score  # noqa: F401 (re-exported for the method modules)
from benchmark.storage import store

TRAIN, VAL = "train", "val"


def model(ctx, name) -> str:
    """``name``, a model of the zoo; else ``ValueError`` naming the entry and the method."""
    if not isinstance(name, str) or name not in ctx.zoo:
        raise ValueError(f"{ctx.where}: {ctx.title} of unknown model {name!r}; the zoo has {sorted(ctx.zoo)}")
    return name


def who(ctx, model_name: str) -> str:
    """How a message names this entry's method on zoo model ``model_name`` (``baselines.<kind>.<key>: <title> of
    model '<name>'``), e.g. for :func:`benchmark.models.recipe.recipe_of`."""
    return f"{ctx.where}: {ctx.title} of model {model_name!r}"


def train_drop_rate(ctx, name: str) -> float:
    """The dropout rate zoo model ``name`` was fine-tuned with, from its ``train.json`` (0 before recipes had it)."""
    record = store.read_json(ctx.checkpoint(name) / "train.json")
    return float((record.get("recipe") or {}).get("drop_rate", 0.0))


def features(ctx, model, split) -> Tensor:
    """(N, D) penultimate features of ``model`` on a split (:class:`~benchmark.stages.suite_source.SplitInputs`), on
    the CPU."""
    return penultimate_batched(model, split.inputs, batch_size=ctx.batch_size, num_workers=ctx.source.num_workers)


def train_once(model, train, val, recipe, *, seed: int, folder: Path, fingerprint: str, **kwargs) -> dict:
    """:func:`~benchmark.models.train.fine_tune` a method's model unless ``folder/train.json`` records a
    finished run with this ``fingerprint``; loads the selected weights and returns the record."""
    done = Path(folder) / "train.json"
    record = store.read_json(done) if done.exists() else None
    if record is None or record.get("fingerprint") != fingerprint:
        record = fine_tune(model, train, val, recipe, seed=seed, folder=folder, fingerprint=fingerprint, **kwargs)
    load_weights(Path(folder) / "model.safetensors", model)
    return record


# ---- typed params entries: fields every weight-based method shares ----


def splits_field():
    """``splits``: names or shell patterns; ``None``: ``baselines.splits``."""
    return field(default=None, metadata=check(min_len=1))


def seed_field():
    """A method config's ``seed`` field: an integer >= 0, default 0."""
    return field(default=0, metadata=check(minimum=0))
