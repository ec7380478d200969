"""The work of the per-model DVC stages: prepare data, train, logits, cost.

Each function reads params + zoo, validates them before doing any work, and
writes its outputs atomically through :mod:`benchmark.store`.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from benchmark import cost as costs
from benchmark import models, store
from benchmark.data.embedded import build_embedded_suite
from benchmark.data.splits_io import load_split, save_split
from benchmark.data.transforms import to_model_input
from benchmark.infer import predict_logits
from benchmark.pipeline import config
from benchmark.train import fine_tune, load_weights

TRAIN, VAL = "train", "val"


def prepare_data(params: dict, out: Path | None = None) -> list[str]:
    """Build the suite's splits and write ``<out>/<split>.npz``; returns split names."""
    out = Path(out or config.paths()["data"])
    splits = build_embedded_suite(params["data"])
    for name, split in splits.items():
        save_split(out / f"{name}.npz", split)
    store.write_json(out / "splits.json", {n: len(s) for n, s in splits.items()})
    return list(splits)


def split_files(data_dir: Path | None = None) -> dict[str, Path]:
    data_dir = Path(data_dir or config.paths()["data"])
    files = {p.stem: p for p in sorted(data_dir.glob("*.npz"))}
    if TRAIN not in files or VAL not in files:
        raise store.StoreError(f"{data_dir}: no train/val split files; run the data stage first (dvc repro data)")
    return files


def num_classes(train_labels) -> int:
    return int(train_labels.max()) + 1


def _inputs(split, entry) -> tuple[torch.Tensor, torch.Tensor]:
    cfg = models.data_config(entry)
    return to_model_input(split.images, entry.img_size, cfg["mean"], cfg["std"]), torch.from_numpy(split.labels)


def train(params: dict, name: str, *, progress: bool = True, stop_after_epoch: int | None = None) -> dict:
    """Fine-tune zoo entry ``name``; checkpoint in ``results/checkpoints/<name>/``."""
    entry = config.entry(params, name)
    recipe = config.recipes(params)[entry.recipe]
    files = split_files()
    tr, va = load_split(files[TRAIN], TRAIN), load_split(files[VAL], VAL)
    model = models.create(entry, num_classes(tr.labels))  # fails fast on missing weights
    config.set_threads(params)
    fp = config.fingerprint(entry.as_dict(), asdict(recipe), store.array_hash(tr.ids), store.array_hash(va.ids))
    return fine_tune(model, _inputs(tr, entry), _inputs(va, entry), recipe, seed=entry.seed,
                     folder=config.paths(name)["checkpoint"], fingerprint=fp, progress=progress,
                     stop_after_epoch=stop_after_epoch)


def load_trained(params: dict, name: str):
    entry = config.entry(params, name)
    tr = load_split(split_files()[TRAIN], TRAIN)
    model = models.create(entry, num_classes(tr.labels), load_weights=False)
    load_weights(config.paths(name)["checkpoint"] / "model.safetensors", model)
    return entry, model.eval()


def logits(params: dict, name: str, *, progress: bool = True) -> list[str]:
    """Logits of the trained model on every split but train, one file per split."""
    entry, model = load_trained(params, name)
    config.set_threads(params)
    out = config.paths(name)["logits"]
    written = []
    for split_name, path in split_files().items():
        if split_name == TRAIN:
            continue
        split = load_split(path, split_name)
        x, y = _inputs(split, entry)
        z = predict_logits(model, x, batch_size=params["logits"]["batch_size"], desc=f"{name}/{split_name}", progress=progress)
        store.save_logits_file(out / f"{split_name}.safetensors", z, y, torch.from_numpy(split.ids),
                               meta={"model": name, "split": split_name, "arch": entry.arch})
        written.append(split_name)
    return written


def cost(params: dict, name: str, *, progress: bool = False) -> dict:
    """GFLOPs, params and CPU throughput of zoo entry ``name`` at its input size."""
    entry = config.entry(params, name)
    tr = load_split(split_files()[TRAIN], TRAIN)
    config.set_threads(params)
    model = models.create(entry, num_classes(tr.labels), load_weights=False)
    c = params["cost"]
    record = {
        "name": name, "arch": entry.arch, "init": entry.init, "img_size": entry.img_size, "seed": entry.seed,
        "role": entry.role, "gflops": costs.count_flops(model, entry.img_size), "params": costs.count_params(model),
        "throughput": costs.measure_throughput(model, entry.img_size, batch_size=c["throughput_batch"], iters=c["throughput_iters"]),
        "threads": torch.get_num_threads(),
    }
    store.write_json(config.paths(name)["cost"], record)
    return record
