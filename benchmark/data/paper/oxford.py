"""Oxford VGG transfer sets with official splits: Flowers102, DTD (partition 1), Oxford-IIIT Pets.

The root of each is the ``root`` torchvision's class takes (``download=True``
there produces exactly the layout below).

* Flowers102: ``train`` / ``val`` / ``test`` (1,020 / 1,020 / 6,149) from ``setid.mat``
  (``trnid``, ``valid``, ``tstid``), labels ``imagelabels.mat`` - 1. Read directly
  with scipy as ``torchvision.datasets.Flowers102`` does, because that class
  verifies the MD5 of the two official ``.mat`` files, which no fixture can
  reproduce. Id = the official image number (``image_00042.jpg`` -> 42).
* DTD: ``labels/{train,val,test}<p>.txt`` of the chosen partition (1,880 each),
  read as ``torchvision.datasets.DTD`` reads them (lines ``<class>/<file>``, class
  order = the sorted class names of the list), directly rather than through that
  class: its ``loader=`` argument (to list files without decoding images) exists
  only from torchvision 0.22. Id = position of ``<class>/<file>`` in the sorted
  union of the partition's three lists.
* Pets: the official ``trainval`` (3,680) and ``test`` (3,669) lists of
  ``annotations/``, labels = class id - 1 (what ``torchvision.datasets.OxfordIIITPet``
  reads; parsed here because the class exposes its file list only privately).
  There is no official validation split: ``val`` is a seeded hold-out of
  trainval (``random_split``, default 10 % = 368, seed 42) and ``train`` the rest.
  Id = position of the image name in the sorted union of both lists.

Inside each split samples keep the order of the official list (random_split's
order for the Pets hold-out).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmark.data.paper.common import (
    FileImages,
    Loader,
    layout_error,
    make_split,
    require_dir,
    require_file,
    seeded_split,
)

FLOWERS102_SKETCH = """
<root>/flowers-102/jpg/image_00001.jpg .. image_08189.jpg
<root>/flowers-102/imagelabels.mat   ('labels': class 1..102 of every image)
<root>/flowers-102/setid.mat         ('trnid', 'valid', 'tstid': image numbers per split)
"""
DTD_SKETCH = """
<root>/dtd/dtd/images/banded/banded_0002.jpg
<root>/dtd/dtd/images/<class>/*.jpg           (47 texture classes)
<root>/dtd/dtd/labels/train1.txt, val1.txt, test1.txt .. test10.txt   (lines '<class>/<file>.jpg')
    (the extracted dtd-r1.0.1.tar.gz placed in <root>/dtd/, as torchvision.datasets.DTD(<root>, download=True) leaves
    it)
"""
PETS_SKETCH = """
<root>/oxford-iiit-pet/images/Abyssinian_1.jpg ...
<root>/oxford-iiit-pet/annotations/trainval.txt   (lines '<image> <class id 1..37> <species> <breed id>')
<root>/oxford-iiit-pet/annotations/test.txt
"""


def load_flowers102(root) -> dict:
    """Splits ``train``, ``val``, ``test`` of Flowers102 (see the module docstring)."""
    from scipy.io import loadmat

    root = Path(root)
    require_dir(root, "flowers102", root, FLOWERS102_SKETCH)
    base = require_dir(root / "flowers-102", "flowers102", root, FLOWERS102_SKETCH)
    images = require_dir(base / "jpg", "flowers102", root, FLOWERS102_SKETCH)
    mats = {}
    for name in ("imagelabels.mat", "setid.mat"):
        path = require_file(base / name, "flowers102", root, FLOWERS102_SKETCH)
        try:
            mats[name] = loadmat(path, squeeze_me=True)
        except Exception as e:  # not a MATLAB file
            raise layout_error(
                "flowers102", root, f"cannot read {path} ({type(e).__name__}: {e})", FLOWERS102_SKETCH
            ) from None
    setid = mats["setid.mat"]
    missing = [k for k in ("trnid", "valid", "tstid") if k not in setid] + (
        ["labels"] if "labels" not in mats["imagelabels.mat"] else []
    )
    if missing:
        raise layout_error("flowers102", root, f"the .mat files lack {missing}", FLOWERS102_SKETCH)
    all_labels = np.atleast_1d(mats["imagelabels.mat"]["labels"]).astype(np.int64) - 1  # image k -> all_labels[k - 1]
    out = {}
    for split, key in (("train", "trnid"), ("val", "valid"), ("test", "tstid")):
        image_ids = np.atleast_1d(setid[key]).astype(np.int64)
        if image_ids.min() < 1 or image_ids.max() > len(all_labels):
            raise layout_error(
                "flowers102", root, f"setid.mat {key!r} names images outside 1..{len(all_labels)}", FLOWERS102_SKETCH
            )
        paths = [images / f"image_{i:05d}.jpg" for i in image_ids]
        absent = next((p for p in paths if not p.is_file()), None)
        if absent is not None:
            raise layout_error(
                "flowers102", root, f"image {str(absent)!r} listed in setid.mat not found", FLOWERS102_SKETCH
            )
        n = len(image_ids)
        out[split] = make_split(
            split, "flowers102", FileImages(paths), np.arange(n), all_labels[image_ids - 1], image_ids
        )
    return out


def _dtd_list(path: Path, root) -> list[str]:
    """The ``<class>/<file>`` lines of one DTD list file (as torchvision's DTD reads them)."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise layout_error("dtd", root, f"cannot read {path} ({type(e).__name__}: {e})", DTD_SKETCH) from None
    keys = []
    for n, line in enumerate(lines, 1):
        key = line.strip()
        if not key:
            continue
        parts = key.split("/")
        if len(parts) != 2 or not all(parts):
            raise layout_error("dtd", root, f"{path} line {n}: expected '<class>/<file>.jpg', got {line!r}", DTD_SKETCH)
        keys.append(key)
    if not keys:
        raise layout_error("dtd", root, f"{path} lists no images", DTD_SKETCH)
    return keys


def load_dtd(root, *, partition: int = 1) -> dict:
    """Splits ``train``, ``val``, ``test`` of DTD partition ``partition`` (see the module docstring)."""
    if isinstance(partition, bool) or partition not in range(1, 11):
        raise ValueError(f"dtd: partition must be an integer in 1..10, got {partition!r}")
    root = Path(root)
    require_dir(root, "dtd", root, DTD_SKETCH)
    data = require_dir(root / "dtd" / "dtd", "dtd", root, DTD_SKETCH)
    images = require_dir(data / "images", "dtd", root, DTD_SKETCH)
    keys = {
        split: _dtd_list(require_file(data / "labels" / f"{split}{partition}.txt", "dtd", root, DTD_SKETCH), root)
        for split in ("train", "val", "test")
    }
    classes = {split: sorted({k.split("/")[0] for k in ks}) for split, ks in keys.items()}
    if len({tuple(c) for c in classes.values()}) != 1:
        raise layout_error("dtd", root, f"train/val/test{partition}.txt must cover the same classes", DTD_SKETCH)
    class_to_idx = {c: i for i, c in enumerate(classes["train"])}
    order = {k: i for i, k in enumerate(sorted(set().union(*keys.values())))}
    out = {}
    for split, ks in keys.items():
        paths = [images / k for k in ks]
        absent = next((p for p in paths if not p.is_file()), None)
        if absent is not None:
            raise layout_error(
                "dtd", root, f"image {str(absent)!r} listed in {split}{partition}.txt not found", DTD_SKETCH
            )
        labels = np.array([class_to_idx[k.split("/")[0]] for k in ks], dtype=np.int64)
        ids = np.array([order[k] for k in ks], dtype=np.int64)
        out[split] = make_split(split, "dtd", FileImages(str(p) for p in paths), np.arange(len(ks)), labels, ids)
    return out


def _pets_list(path: Path, root) -> list[tuple[str, int]]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 4 or not parts[1].isdigit() or not 1 <= int(parts[1]) <= 37:
            raise layout_error(
                "pets",
                root,
                f"{path} line {n}: expected '<image> <class id 1..37> <species> <breed id>', got {line!r}",
                PETS_SKETCH,
            )
        rows.append((parts[0], int(parts[1]) - 1))
    return rows


def load_pets(root, *, val_fraction: float = 0.1, seed: int = 42) -> dict:
    """Splits ``trainval``, ``train``, ``val``, ``test`` of Oxford-IIIT Pets (see the module docstring)."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"pets: val_fraction must be in (0, 1), got {val_fraction!r}")
    root = Path(root)
    require_dir(root, "pets", root, PETS_SKETCH)
    base = require_dir(root / "oxford-iiit-pet", "pets", root, PETS_SKETCH)
    images = require_dir(base / "images", "pets", root, PETS_SKETCH)
    lists = {
        split: _pets_list(require_file(base / "annotations" / f"{split}.txt", "pets", root, PETS_SKETCH), root)
        for split in ("trainval", "test")
    }
    order = {name: i for i, name in enumerate(sorted({name for rows in lists.values() for name, _ in rows}))}
    out = {}
    for split, rows in lists.items():
        paths = [images / f"{name}.jpg" for name, _ in rows]
        absent = next((p for p in paths if not p.is_file()), None)
        if absent is not None:
            raise layout_error(
                "pets", root, f"image {str(absent)!r} listed in annotations/{split}.txt not found", PETS_SKETCH
            )
        labels = np.array([label for _, label in rows], dtype=np.int64)
        ids = np.array([order[name] for name, _ in rows], dtype=np.int64)
        out[split] = make_split(split, "pets", FileImages(paths), np.arange(len(rows)), labels, ids)
    trainval = out["trainval"]
    n_val = int(val_fraction * len(trainval))
    train_pos, val_pos = seeded_split(len(trainval), [len(trainval) - n_val, n_val], seed)
    out["train"] = trainval.subset(train_pos, "train")
    out["val"] = trainval.subset(val_pos, "val")
    return out


LOADERS = {  # the loaders of this module, by the name a suite file gives (benchmark.data.paper.suites.LOADERS)
    "flowers102": Loader(load_flowers102, FLOWERS102_SKETCH),
    "dtd": Loader(load_dtd, DTD_SKETCH),
    "pets": Loader(load_pets, PETS_SKETCH),
}
