"""A tiny fake ``results/`` tree (data splits, zoo, checkpoints) for the baseline stage tests.

Imported by the test modules (``from baseline_tree import ...``); a unique name
because the test folders are not packages.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch
import yaml

from benchmark.data.embedded import Split
from benchmark.data.splits_io import save_split
from benchmark.models import factory
from benchmark.models.train import save_weights
from benchmark.models.zoo import parse_entry
from benchmark.stages import method_stage
from benchmark.stages.params_config import Params, parse_params
from benchmark.storage import store

CLASSES = 3
SIZES = {"train": 48, "val": 24, "test": 24, "shift": 16, "ood": 12}
ZOO = {
    **{
        f"t-s{i}": {"arch": "test_efficientnet", "init": "scratch", "img_size": 32, "seed": i, "recipe": "scratch"}
        for i in range(3)
    },
    "r": {"arch": "test_resnet", "init": "scratch", "img_size": 32, "seed": 0, "recipe": "scratch"},
}
VIT = {"vit": {"arch": "test_vit", "init": "scratch", "img_size": 160, "seed": 0, "recipe": "scratch"}}
LEVIT = {
    "levit": {"arch": "levit_128s", "init": "scratch", "img_size": 32, "seed": 0, "recipe": "scratch"}
}  # no nn.Linear head


def params(root: Path, **baselines) -> dict:
    return {
        "suite": "t",
        "zoo": str(root / "zoo.yaml"),
        "threads": 1,
        "data": {},
        "recipes": {
            "scratch": {"epochs": 1, "batch_size": 16, "lr": 0.01, "shift_pixels": 1},
            "heads": {"epochs": 2, "batch_size": 16, "lr": 0.01},
        },
        "logits": {"batch_size": 16},
        "cost": {"throughput_batch": 4, "throughput_iters": 1},
        "evaluate": {"fits": ["converged"], "n_bootstrap": 0, "deep_ensembles": [2, 3]},
        "baselines": {"splits": ["val", "test", "ood"], **baselines},
    }


def typed(p: dict) -> Params:
    """The typed params a stage hands down (what ``load_params`` parses at a stage's entry)."""
    return parse_params(p, "params")


def run_method(p: dict, kind: str, key: str) -> dict:
    """The stage of method ``kind``'s entry ``key`` (``pipelines/method.py --kind <kind> --key <key>``), in this
    process."""
    return method_stage.run(typed(p), kind, key, progress=False)


def make_tree(root: Path, *, zoo: dict = ZOO, checkpoints=("t-s0", "t-s1", "t-s2", "r")) -> None:
    """Zoo file, data splits and checkpoints under ``root`` (the stages then run with ``root`` as cwd).

    The seeded ``t-s*`` checkpoints are one random init plus small seeded noise,
    like fine-tunes of one pretrained model.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "zoo.yaml").write_text(yaml.safe_dump({"models": zoo}))
    rng = np.random.default_rng(0)
    data = root / "results" / "data"
    data.mkdir(parents=True, exist_ok=True)
    start = 0
    for name, n in SIZES.items():
        labels = np.full(n, -1, np.int64) if name == "ood" else np.arange(n, dtype=np.int64) % CLASSES
        save_split(
            data / f"{name}.npz",
            Split(
                images=rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
                labels=labels,
                ids=np.arange(start, start + n, dtype=np.int64),
                name=name,
            ),
        )
        start += n
    base = factory.create(parse_entry("t-s0", ZOO["t-s0"]), CLASSES, load_weights=False)
    for name in checkpoints:
        entry = parse_entry(name, ZOO[name])
        if entry.arch == "test_efficientnet":
            model = copy.deepcopy(base)
            g = torch.Generator().manual_seed(entry.seed)
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(torch.randn(p.shape, generator=g) * 0.02)
        else:
            model = factory.create(entry, CLASSES, load_weights=False)
        folder = root / "results" / "checkpoints" / name
        save_weights(folder / "model.safetensors", model)
        store.write_json(folder / "train.json", {"seed": entry.seed})
