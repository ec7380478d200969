"""The work of the per-model DVC stages: prepare data, train, logits, cost.

Each function reads params + zoo, validates them before doing any work, and
writes its outputs atomically through :mod:`benchmark.storage.store`. The suite's
images come from the data source that params select
(:mod:`benchmark.stages.suite_source`: the embedded suite in memory, or a paper
suite streamed from the data root).
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from benchmark.models import factory
from benchmark.models import cost as costs
from benchmark.models.infer import channels_last, predict_logits
from benchmark.models.train import fine_tune, load_weights
from benchmark.stages import stage_config, suite_source
from benchmark.stages.suite_source import TRAIN, VAL, split_files  # noqa: F401 (re-exported for the method stages)
from benchmark.storage import store


def prepare_data(params: dict, out: Path | None = None, *, progress: bool = True) -> list[str]:
    """Build the suite's splits and write ``<out>/<split>.npz`` + ``splits.json`` (whole folder atomically)."""
    return suite_source.for_params(params).prepare(Path(out or stage_config.paths()["data"]))


def train(params: dict, name: str, *, progress: bool = True, stop_after_epoch: int | None = None) -> dict:
    """Fine-tune zoo entry ``name``; checkpoint in ``results/checkpoints/<name>/``.

    A recipe with ``epochs: 0`` saves the initial (pretrained) weights as the checkpoint.
    In a torchrun worker the ranks train one DDP model (see :mod:`benchmark.models.train`); rank 0 writes.
    """
    from benchmark.models import distributed

    entry = stage_config.entry(params, name)
    recipe = stage_config.recipes(params)[entry.recipe]
    src = suite_source.for_params(params)
    src.check_recipe(entry.recipe, recipe)
    dev = distributed.init(params, suite_source.device(params))
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


def load_trained(params: dict, name: str):
    """(zoo entry, its trained model in eval mode on the CPU), built with its recipe's ``drop_rate``."""
    entry = stage_config.entry(params, name)
    drop_rate = stage_config.recipes(params)[entry.recipe].drop_rate
    model = factory.create(entry, suite_source.for_params(params).num_classes(), load_weights=False, drop_rate=drop_rate)
    folder = stage_config.paths(name)["checkpoint"]
    if not (folder / "train.json").exists():
        raise store.StoreError(f"{folder}: training of {name!r} has not finished (no train.json); run `dvc repro train@{name}`")
    load_weights(folder / "model.safetensors", model)
    return entry, model.eval()


def logits(params: dict, name: str, *, progress: bool = True) -> list[str]:
    """Logits of the trained model on every split but train, one file per split.

    In a torchrun worker each rank computes its shard of every split; rank 0
    gathers them in sample order and writes the folder (atomically, after every
    rank has finished); the other ranks write nothing. params ``logits.amp``
    (optional, default off): ``bfloat16``/``float16`` autocast of the forward.
    """
    import contextlib

    from benchmark.models import distributed
    from benchmark.models.infer import amp_dtype

    amp = amp_dtype(params["logits"].get("amp"))  # optional, default off: the forward under torch.autocast
    entry, model = load_trained(params, name)
    channels_last(model)
    src = suite_source.for_params(params)
    device = distributed.init(params, suite_source.device(params))
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
            z = distributed.predict_logits(model, s.inputs, to_all=False, batch_size=stage_config.typed(params).logits.batch_size,
                                           desc=f"{name}/{split_name}", progress=progress, num_workers=src.num_workers, amp=amp)
            if out is not None:
                store.save_logits_file(out / f"{split_name}.safetensors", z, s.labels, s.ids,
                                       meta={"model": name, "split": split_name, "arch": entry.arch})
            written.append(split_name)
        distributed.barrier("every split is done before rank 0 writes the folder")
    return written


def cost(params: dict, name: str, *, progress: bool = False) -> dict:
    """GFLOPs, params and CPU throughput of zoo entry ``name`` at its input size."""
    entry = stage_config.entry(params, name)
    stage_config.set_threads(params)
    model = factory.create(entry, suite_source.for_params(params).num_classes(), load_weights=False)
    c = stage_config.typed(params).cost
    record = {
        "name": name, "arch": entry.arch, "init": entry.init, "img_size": entry.img_size, "seed": entry.seed,
        "role": entry.role, **costs.static_cost(model, entry.img_size),
        "throughput": costs.measure_throughput(model, entry.img_size, batch_size=c.throughput_batch, iters=c.throughput_iters),
        "threads": torch.get_num_threads(),
    }
    store.write_json(stage_config.paths(name)["cost"], record)
    return record


def train_once(model, train, val, recipe, *, seed: int, folder: Path, fingerprint: str, **kwargs) -> dict:
    """:func:`~benchmark.models.train.fine_tune` a method's model unless ``folder/train.json`` records a
    finished run with this ``fingerprint``; loads the selected weights and returns the record."""
    done = Path(folder) / "train.json"
    record = store.read_json(done) if done.exists() else None
    if record is None or record.get("fingerprint") != fingerprint:
        record = fine_tune(model, train, val, recipe, seed=seed, folder=folder, fingerprint=fingerprint, **kwargs)
    load_weights(Path(folder) / "model.safetensors", model)
    return record


def method_output(params: dict, name: str, model, entry, info: dict, *, splits=None, batch_size: int | None = None,
                  progress: bool = True) -> dict:
    """Write a method stage's output: ``results/methods/<name>/<split>.safetensors`` + ``cost.json``.

    ``model`` maps (B, 3, S, S) inputs (prepared for zoo entry ``entry``) to (B, C)
    or (M, B, C) logits. ``splits`` defaults to every split but train and must
    include val and test. ``info`` holds at least ``family``, ``method`` and
    ``base``; ``gflops``, ``params`` and ``throughput`` are measured unless given.
    The evaluate stage picks the folder up as one more method.
    """
    files = output_splits(name, info, splits)
    record = dict(info)
    model.cpu()  # costs are measured on the CPU, logits computed on params' device
    record.update({k: v for k, v in model_costs(params, model, entry.img_size).items() if k not in record})
    predictions = predict_splits(params, model, entry, files, batch_size=batch_size, desc=name, progress=progress)
    return write_method_output(params, name, predictions, record)


def output_splits(name: str, info: dict, splits=None) -> list[str]:
    """The splits a method output ``name`` covers (default: every split but train); checks ``info``'s keys."""
    for key in ("family", "method", "base"):
        if key not in info:
            raise ValueError(f"method output {name!r}: info needs {key!r}")
    files = [s for s in split_files() if s != TRAIN and (splits is None or s in splits)]
    missing = sorted({VAL, "test"} - set(files))
    if missing or (splits is not None and set(splits) - set(files)):
        raise ValueError(f"method output {name!r}: splits {sorted(set(splits or []) - set(files)) or missing} do not exist in {stage_config.paths()['data']}")
    return files


def model_costs(params: dict, model, img_size: int) -> dict:
    """``gflops``, ``params`` and CPU ``throughput`` (params ``cost``) of ``model`` at ``img_size`` (on the CPU)."""
    stage_config.set_threads(params)
    c = stage_config.typed(params).cost
    model.cpu()
    return {**costs.static_cost(model, img_size),
            "throughput": costs.measure_throughput(model, img_size, batch_size=c.throughput_batch, iters=c.throughput_iters)}


def predict_splits(params: dict, model, entry, splits, *, batch_size: int | None = None, desc: str = "",
                   progress: bool = True) -> dict[str, tuple]:
    """split -> (logits, labels, ids) of ``model`` on each of ``splits`` (inputs prepared for ``entry``), on params' device."""
    src = suite_source.for_params(params)
    stage_config.set_threads(params)
    model.to(suite_source.device(params))
    out = {}
    for split_name in splits:
        s = src.inputs(split_name, entry)
        z = predict_logits(model, s.inputs, batch_size=batch_size or stage_config.typed(params).logits.batch_size, desc=f"{desc}/{split_name}",
                           progress=progress, num_workers=src.num_workers)
        out[split_name] = (z, s.labels, s.ids)
    return out


def write_method_output(params: dict, name: str, predictions: dict[str, tuple], record: dict) -> dict:
    """``results/methods/<name>/``: one logits file per split of ``predictions`` (split -> logits, labels, ids)
    and ``cost.json`` = ``record``, the folder written atomically; returns ``record``."""
    with store.atomic_dir(stage_config.paths()["methods"] / name) as out:
        for split_name, (z, labels, ids) in predictions.items():
            store.save_logits_file(out / f"{split_name}.safetensors", z, labels, ids,
                                   meta={"model": name, "split": split_name, "family": record["family"]})
        store.write_json(out / "cost.json", record)
    return record
