"""Tiny copies of every paper dataset in its exact official on-disk layout.

Images are small and carry their label in their colour (``colour(label)``), so
a test can check that a loader pairs each image with the right label. CIFAR
arrays encode (sample, label, column) in their channels to pin the
(N, 3072) -> (N, 32, 32, 3) conversion.
"""

from __future__ import annotations

import io
import pickle
import struct
from pathlib import Path

import numpy as np
from PIL import Image

from benchmark.gpu.fixture import CALTECH_CATEGORIES, colour, write_caltech256  # noqa: F401 (one definition, shared)

WNIDS = ("n01440764", "n01443537", "n01484850")


def label_of(img: Image.Image, n_labels: int) -> int:
    """The label whose colour is nearest to the image's mean colour (JPEG is lossy)."""
    mean = np.asarray(img, dtype=np.float64).reshape(-1, 3).mean(0)
    return int(np.argmin([np.abs(mean - colour(c)).sum() for c in range(n_labels)]))


def _img(path: Path, label: int, size=(12, 10), fmt=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour(label)).save(path, format=fmt or "JPEG", quality=95)


def write_imagenet(root: Path, per_class=(14, 15, 13)) -> Path:
    """``root/val/<wnid>/ILSVRC2012_val_<8 digits>.JPEG``; file numbers interleave classes like the real set."""
    k = 0
    for c, n in enumerate(per_class):
        for _ in range(n):
            k += 1
            _img(root / "val" / WNIDS[c] / f"ILSVRC2012_val_{(k * 7919) % 50000 + 1:08d}.JPEG", c)
    return root


def write_imagenet_v2(root: Path, classes=(0, 1, 2, 10), per_class=2) -> Path:
    """``root/<class index>/<sha1-like>.jpeg`` (folders named by ImageNet class index)."""
    for c in classes:
        for j in range(per_class):
            _img(root / str(c) / f"{(c * 131 + j * 17):040x}.jpeg", c % 20)
    return root


def write_iwildcam(root: Path, splits=None) -> Path:
    """``root/iwildcam_v2.0/metadata.csv`` + ``train/<file>.jpg`` + ``RELEASE_v2.0.txt``, the WILDS v2.0 release layout.

    Rows interleave the splits. Every class 0..max and every location/sequence 0..max
    appear (the wilds class asserts it).
    """
    import pandas as pd

    splits = splits or ["train"] * 8 + ["id_val"] * 3 + ["id_test"] * 3 + ["val"] * 2 + ["test"] * 4
    order = np.random.default_rng(0).permutation(len(splits))
    rows, seen = [], {}
    for i, k in enumerate(order):
        split = splits[k]
        j = seen[split] = seen.get(split, -1) + 1  # j-th row of its split
        loc = {"train": j % 3, "id_val": j % 3, "id_test": j % 3, "val": 3, "test": 4 + j % 2}[split]
        rows.append(
            {
                "split": split,
                "location_remapped": loc,
                "location": 100 + loc,
                "sequence_remapped": i,
                "sequence": f"seq{i:04d}",
                "y": i % 4,
                "category_id": 10 + i % 4,
                "datetime": f"2013-06-{1 + i % 28:02d} 12:{i % 60:02d}:00.000",
                "filename": f"{i:08x}.jpg",
                "image_id": f"img{i:05d}",
            }
        )
    base = root / "iwildcam_v2.0"
    base.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(base / "metadata.csv", index=False)
    (base / "RELEASE_v2.0.txt").write_text("v2.0\n")
    for r in rows:
        _img(base / "train" / r["filename"], r["y"])
    return root


def _cifar_rows(n: int, labels: np.ndarray, offset: int) -> np.ndarray:
    """(n, 3072) uint8: red = (offset + k) % 256, green = label, blue = 8 * column."""
    img = np.zeros((n, 3, 32, 32), np.uint8)
    img[:, 0] = ((offset + np.arange(n)) % 256)[:, None, None]
    img[:, 1] = labels[:, None, None]
    img[:, 2] = (8 * np.arange(32))[None, None, :]
    return img.reshape(n, 3072)


class _Py2Pickler(pickle._Pickler):
    """Protocol 2 with every ``bytes`` written as a Python 2 ``str`` (BINSTRING), as cPickle wrote the CIFAR files."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj: bytes) -> None:
        n = len(obj)
        head = pickle.SHORT_BINSTRING + bytes([n]) if n < 256 else pickle.BINSTRING + struct.pack("<i", n)
        self.write(head + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def _pickle(path: Path, obj) -> None:
    """The official format: a Python 2 pickle of a dict with str keys; arrays via numpy.core.multiarray._reconstruct."""
    buf = io.BytesIO()
    _Py2Pickler(buf, protocol=2).dump(obj)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n"))


def write_cifar100(root: Path, n_train=40, n_test=12) -> Path:
    """``root/cifar-100-python/{train,test,meta}`` in the official dict format (bytes keys)."""
    for name, n, off in (("train", n_train, 0), ("test", n_test, 100)):
        fine = (np.arange(n) * 7 + off) % 100
        _pickle(
            root / "cifar-100-python" / name,
            {
                b"filenames": [f"img_{k}.png".encode() for k in range(n)],
                b"batch_label": f"{name} batch".encode(),
                b"fine_labels": fine.tolist(),
                b"coarse_labels": (fine // 5).tolist(),
                b"data": _cifar_rows(n, fine, off),
            },
        )
    _pickle(
        root / "cifar-100-python" / "meta",
        {
            b"fine_label_names": [f"c{k}".encode() for k in range(100)],
            b"coarse_label_names": [f"s{k}".encode() for k in range(20)],
        },
    )
    return root


def write_cifar10(root: Path, per_batch=4, n_test=6) -> Path:
    """``root/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``."""
    for i, name in enumerate([f"data_batch_{b}" for b in range(1, 6)] + ["test_batch"]):
        n = n_test if name == "test_batch" else per_batch
        labels = (np.arange(n) + i) % 10
        _pickle(
            root / "cifar-10-batches-py" / name,
            {
                b"batch_label": name.encode(),
                b"labels": labels.tolist(),
                b"data": _cifar_rows(n, labels, 50 * i),
                b"filenames": [f"{name}_{k}.png".encode() for k in range(n)],
            },
        )
    _pickle(
        root / "cifar-10-batches-py" / "batches.meta",
        {b"label_names": [f"c{k}".encode() for k in range(10)], b"num_cases_per_batch": per_batch, b"num_vis": 3072},
    )
    return root


def write_cifar100_c(root: Path, test_labels: np.ndarray, corruptions=("gaussian_noise", "frost")) -> Path:
    """``root/CIFAR-100-C/<corruption>.npy`` (5 n, 32, 32, 3): red = severity, green = k, blue = corruption;
    labels.npy."""
    folder = root / "CIFAR-100-C"
    folder.mkdir(parents=True, exist_ok=True)
    n = len(test_labels)
    np.save(folder / "labels.npy", np.tile(np.asarray(test_labels, np.uint8), 5))
    for j, c in enumerate(corruptions):
        arr = np.zeros((5 * n, 32, 32, 3), np.uint8)
        arr[..., 0] = (np.arange(5 * n) // n + 1)[:, None, None]
        arr[..., 1] = (np.arange(5 * n) % n)[:, None, None]
        arr[..., 2] = j
        np.save(folder / f"{c}.npy", arr)
    return root


def write_flowers102(root: Path, n_images=18, splits=None) -> tuple[Path, np.ndarray]:
    """``root/flowers-102/{jpg/image_NNNNN.jpg, imagelabels.mat, setid.mat}``; returns (root, labels 1..102)."""
    from scipy.io import savemat

    base = root / "flowers-102"
    labels = (np.arange(n_images) % 5 + 1).astype(np.uint8)
    for k in range(1, n_images + 1):
        _img(base / "jpg" / f"image_{k:05d}.jpg", int(labels[k - 1]) - 1)
    ids = np.random.default_rng(1).permutation(np.arange(1, n_images + 1)).astype(np.uint16)
    splits = splits or {"trnid": ids[:5], "valid": ids[5:10], "tstid": ids[10:]}
    savemat(base / "imagelabels.mat", {"labels": labels[None, :]})
    savemat(base / "setid.mat", {k: v[None, :] for k, v in splits.items()})
    return root, labels


DTD_CLASSES = ("banded", "blotchy", "zigzagged")


def write_dtd(root: Path, per_class=6, partitions=(1, 2)) -> Path:
    """``root/dtd/dtd/images/<class>/<class>_NNNN.jpg`` and ``labels/{train,val,test}<p>.txt``."""
    data = root / "dtd" / "dtd"
    files = {c: [f"{c}/{c}_{k:04d}.jpg" for k in range(1, per_class + 1)] for c in DTD_CLASSES}
    for c, names in files.items():
        for name in names:
            _img(data / "images" / name, DTD_CLASSES.index(c))
    for p in partitions:
        lines = {"train": [], "val": [], "test": []}
        for names in files.values():
            rot = names[p:] + names[:p]
            third = len(rot) // 3
            lines["train"] += rot[:third]
            lines["val"] += rot[third : 2 * third]
            lines["test"] += rot[2 * third :]
        (data / "labels").mkdir(parents=True, exist_ok=True)
        for split, ls in lines.items():
            (data / "labels" / f"{split}{p}.txt").write_text("\n".join(ls) + "\n")
    return root


PET_BREEDS = (("Abyssinian", 1), ("american_bulldog", 2), ("Bengal", 1))  # (name, species 1 cat / 2 dog)


def write_pets(root: Path, trainval_per=7, test_per=3) -> Path:
    """``root/oxford-iiit-pet/images/<Breed>_<k>.jpg`` and ``annotations/{trainval,test,list}.txt``."""
    base = root / "oxford-iiit-pet"
    lines = {"trainval": [], "test": []}
    for b, (breed, species) in enumerate(PET_BREEDS):
        breed_id = 1 + sum(s == species for _, s in PET_BREEDS[:b])  # breed id within its species
        for k in range(1, trainval_per + test_per + 1):
            name = f"{breed}_{k}"
            _img(base / "images" / f"{name}.jpg", b)
            lines["trainval" if k <= trainval_per else "test"].append(f"{name} {b + 1} {species} {breed_id}")
    (base / "annotations").mkdir(parents=True, exist_ok=True)
    for split, ls in lines.items():
        (base / "annotations" / f"{split}.txt").write_text("\n".join(ls) + "\n")
    header = "#Image CLASS-ID SPECIES BREED ID\n#ID: 1:37 Class ids\n"
    (base / "annotations" / "list.txt").write_text(header + "\n".join(lines["trainval"] + lines["test"]) + "\n")
    return root
