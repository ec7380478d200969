"""The work of the per-model DVC stages: train, logits, cost (the data stage: :func:`benchmark.stages.suite_source.prepare_data`).

Each function takes the typed params (:class:`benchmark.stages.params_config.Params`, parsed once at the stage's
entry) and the zoo, validates them before doing any work, and writes its outputs atomically through
:mod:`benchmark.storage.store`. The suite's images come from the data source that params select
(:mod:`benchmark.stages.suite_source`: the embedded suite in memory, or a paper suite streamed from the data root).
"""
from __future__ import annotations

from dataclasses import asdict

import torch

from benchmark.models import distributed, factory
from benchmark.models import cost as costs
from benchmark.models.infer import amp_dtype, channels_last
from benchmark.models.train import fine_tune, load_weights
from benchmark.stages import stage_config, suite_source
from benchmark.stages.params_config import Params
from benchmark.stages.suite_source import TRAIN, VAL, split_files
from benchmark.storage import store


def train(params: Params, name: str, *, progress: bool = True, stop_after_epoch: int | None = None) -> dict:
    """Fine-tune zoo entry ``name``; checkpoint in ``results/checkpoints/<name>/``.

    A recipe with ``epochs: 0`` saves the initial (pretrained) weights as the checkpoint.
    In a torchrun worker the ranks train one DDP model (see :mod:`benchmark.models.train`); rank 0 writes.
    """
    entry = stage_config.entry(params, name)
    recipe = params.recipes[entry.recipe]
    src = suite_source.for_params(params)
    src.check_recipe(entry.recipe, recipe)
    dev = distributed.init(params.distributed, suite_source.device(params))
    model = factory.create(entry, src.num_classes(), drop_rate=recipe.drop_rate)  # fails fast on missing weights
    stage_config.set_threads(params)
    train_data = val_data = None
    data_fp = []
    if recipe.epochs:  # epochs 0: the initial weights are the checkpoint, no data is read
        tr, va = src.inputs(TRAIN, entry, train=True), src.inputs(VAL, entry)
        train_data, val_data, data_fp = tr.fit_data, va.fit_data, [store.array_hash(tr.ids), store.array_hash(va.ids)]
    fp = stage_config.fingerprint(entry.as_dict(), asdict(recipe), *data_fp)
    return fine_tune(channels_last(model.to(dev)), train_data, val_data, recipe, seed=entry.seed,
                     folder=stage_config.paths(name)["checkpoint"], fingerprint=fp, progress=progress,
                     stop_after_epoch=stop_after_epoch, num_workers=src.num_workers)


def load_trained(params: Params, name: str):
    """(zoo entry, its trained model in eval mode on the CPU), built with its recipe's ``drop_rate``."""
    entry = stage_config.entry(params, name)
    drop_rate = params.recipes[entry.recipe].drop_rate
    model = factory.create(entry, suite_source.for_params(params).num_classes(), load_weights=False, drop_rate=drop_rate)
    folder = stage_config.paths(name)["checkpoint"]
    if not (folder / "train.json").exists():
        raise store.StoreError(f"{folder}: training of {name!r} has not finished (no train.json); run `dvc repro train@{name}`")
    load_weights(folder / "model.safetensors", model)
    return entry, model.eval()


def logits(params: Params, name: str, *, progress: bool = True) -> list[str]:
    """Logits of the trained model on every split but train, one file per split.

    In a torchrun worker each rank computes its shard of every split; rank 0
    gathers them in sample order and writes the folder (atomically, after every
    rank has finished); the other ranks write nothing. params ``logits.amp``
    (optional, default off): ``bfloat16``/``float16`` autocast of the forward.
    """
    import contextlib

    amp = amp_dtype(params.logits.amp)  # optional, default off: the forward under torch.autocast
    entry, model = load_trained(params, name)
    channels_last(model)
    src = suite_source.for_params(params)
    device = distributed.init(params.distributed, suite_source.device(params))
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed batch shapes: the fastest convolution algorithms (as timm's benchmark)
    model.to(device)
    stage_config.set_threads(params)
    written = []
    with store.atomic_dir(stage_config.paths(name)["logits"]) if distributed.is_main() else contextlib.nullcontext() as out:
        for split_name in split_files():
            if split_name == TRAIN:
                continue
            s = src.inputs(split_name, entry)
            z = distributed.predict_logits(model, s.inputs, to_all=False, batch_size=params.logits.batch_size,
                                           desc=f"{name}/{split_name}", progress=progress, num_workers=src.num_workers, amp=amp)
            if out is not None:
                store.save_logits_file(out / f"{split_name}.safetensors", z, s.labels, s.ids,
                                       meta={"model": name, "split": split_name, "arch": entry.arch})
            written.append(split_name)
        distributed.barrier("every split is done before rank 0 writes the folder")
    return written


def budget(params: Params, name: str, trainable_params: int) -> dict:
    """The training budget of zoo entry ``name`` (:func:`benchmark.models.cost.train_budget`): its recipe's epochs over
    the train split (the images :func:`train` passes over), a full fine-tune of its ``trainable_params``."""
    recipe = params.recipes[stage_config.entry(params, name).recipe]
    return costs.train_budget(recipe.epochs, suite_source.train_size() if recipe.epochs else 0, trainable_params)


def cost(params: Params, name: str, *, progress: bool = False) -> dict:
    """GFLOPs, params and CPU throughput of zoo entry ``name`` at its input size, and its training budget."""
    entry = stage_config.entry(params, name)
    stage_config.set_threads(params)
    model = factory.create(entry, suite_source.for_params(params).num_classes(), load_weights=False)
    c = params.cost
    static = costs.static_cost(model, entry.img_size)
    record = {
        "name": name, "arch": entry.arch, "init": entry.init, "img_size": entry.img_size, "seed": entry.seed,
        "role": entry.role, **static, **budget(params, name, static["params"]),
        "throughput": costs.measure_throughput(model, entry.img_size, batch_size=c.throughput_batch, iters=c.throughput_iters),
        "threads": torch.get_num_threads(),
    }
    store.write_json(stage_config.paths(name)["cost"], record)
    return record
