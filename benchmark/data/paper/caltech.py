"""Caltech-256 (257 classes with ``257.clutter``), split 70/15/15 with seed 42 as published.

Read with ``torchvision.datasets.Caltech256`` (the class the published code
uses), so sample ``i`` is the same image: categories in sorted folder order,
inside a category the files ``NNN_0001.jpg`` .. ``NNN_<n>.jpg``. The split is the
published call ``random_split(dataset, [int(0.7 N), int(0.15 N), rest],
generator=torch.Generator().manual_seed(42))`` (30,607 images: 21,424 / 4,591 /
4,592). Samples keep random_split's order; ids are positions in the dataset.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from torchvision.datasets import Caltech256

from benchmark.data.paper.common import FileImages, Loader, layout_error, make_split, require_dir, seeded_split

CALTECH256_SKETCH = """
<root>/caltech256/256_ObjectCategories/001.ak47/001_0001.jpg
<root>/caltech256/256_ObjectCategories/001.ak47/001_0002.jpg ...
<root>/caltech256/256_ObjectCategories/257.clutter/257_0001.jpg ...
    (257 folders NNN.<name>, images NNN_MMMM.jpg numbered from 0001 without gaps;
     what torchvision.datasets.Caltech256(<root>, download=True) produces)
"""


def _check_files(base: Path, ds: Caltech256, root) -> list[str]:
    """Paths of every sample, after checking the files the torchvision class assumes exist."""
    paths = []
    counts = np.bincount(np.asarray(ds.y, dtype=np.int64), minlength=len(ds.categories))
    for c, (category, n) in enumerate(zip(ds.categories, counts)):
        folder = base / category
        if not folder.is_dir() or not category.startswith(f"{c + 1:03d}."):
            raise layout_error(
                "caltech256",
                root,
                f"entry {category!r} at position {c + 1} of {base} is not a folder named '{c + 1:03d}.<name>'",
                CALTECH256_SKETCH,
            )
        names = [f"{c + 1:03d}_{k:04d}.jpg" for k in range(1, n + 1)]
        missing = sorted(set(names) - set(os.listdir(folder)))
        if missing:
            raise layout_error(
                "caltech256",
                root,
                f"{folder} has {n} .jpg files but not {missing[0]!r} "
                "(files must be numbered NNN_0001.jpg .. without gaps)",
                CALTECH256_SKETCH,
            )
        paths.extend(str(folder / name) for name in names)
    return paths


def load_caltech256(root, *, fractions=(0.7, 0.15), seed: int = 42) -> dict:
    """Splits ``train``, ``val``, ``test`` (see the module docstring)."""
    train_frac, val_frac = (float(f) for f in fractions)
    if not (train_frac > 0 and val_frac > 0 and train_frac + val_frac < 1):
        raise ValueError(f"caltech256: fractions (train, val) must be positive with sum < 1, got {fractions!r}")
    root = Path(root)
    require_dir(root, "caltech256", root, CALTECH256_SKETCH)
    base = require_dir(root / "caltech256" / "256_ObjectCategories", "caltech256", root, CALTECH256_SKETCH)
    try:
        ds = Caltech256(str(root), download=False)
    except (OSError, RuntimeError) as e:
        raise layout_error("caltech256", root, f"torchvision cannot read {base} ({e})", CALTECH256_SKETCH) from None
    source = FileImages(_check_files(base, ds, root))
    labels = np.asarray(ds.y, dtype=np.int64)
    n = len(labels)
    n_train, n_val = int(train_frac * n), int(val_frac * n)
    parts = seeded_split(n, [n_train, n_val, n - n_train - n_val], seed)
    ids = np.arange(n, dtype=np.int64)
    return {
        name: make_split(name, "caltech256", source, pos, labels, ids)
        for name, pos in zip(("train", "val", "test"), parts)
    }


LOADERS = {  # the loaders of this module, by the name a suite file gives (benchmark.data.paper.suites.LOADERS)
    "caltech256": Loader(load_caltech256, CALTECH256_SKETCH),
}
