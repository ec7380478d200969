"""CIFAR-100 (+ CIFAR-100-C corruptions, CIFAR-10 as OOD), the Singular Value Ensembles setting.

CIFAR-100 / CIFAR-10 are read from their official python pickles (the folders
``cifar-100-python/`` and ``cifar-10-batches-py/`` that the archives extract
to, which is also what ``torchvision.datasets.CIFAR100(root, download=True)``
leaves). We do not call the torchvision classes: they verify the MD5 of every
file (no test fixture can pass) and unpickle with plain ``pickle.load``, which
runs whatever a file names. We unpickle with an allow-list of the numpy array
globals (:data:`benchmark.data.safe_pickle.ALLOWED_GLOBALS`), the same images
and labels in the same order.

Splits and ids:

* CIFAR-100 ``train`` / ``val``: the official 50,000 training images split by
  ``random_split(range(N), [N - int(val_fraction N), int(val_fraction N)], generator=manual_seed(seed))``
  (default 45,000 / 5,000: val_fraction 0.1, seed 42; random_split's order); ``test``: the official
  10,000 in file order. Ids: train position ``k`` -> ``k``, test -> ``CIFAR100_TEST_ID_OFFSET + k``.
* CIFAR-10 ``train`` / ``test`` (file order), ids offset by ``CIFAR10_TRAIN_ID_OFFSET`` /
  ``CIFAR10_TEST_ID_OFFSET`` so they never collide with CIFAR-100's.
* CIFAR-100-C: ``<corruption>.npy`` holds the 10,000 test images for severity 1,
  then 2, .. 5 (50,000 rows); ``labels.npy`` the labels in the same order. Split
  ``corrupt-<corruption>-<severity>`` keeps the id of its clean test image, so clean
  and corrupted predictions pair up. The files are memory-mapped.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np

from benchmark.data.embedded import corrupt_split_name
from benchmark.data.paper.common import (
    ArrayImages,
    Loader,
    layout_error,
    make_split,
    require_dir,
    require_file,
    seeded_split,
)
from benchmark.data.safe_pickle import ALLOWED_GLOBALS, UnsafePickleError

CIFAR100_TEST_ID_OFFSET = 100_000
CIFAR10_TRAIN_ID_OFFSET = 200_000
CIFAR10_TEST_ID_OFFSET = 300_000
CIFAR_C_CORRUPTIONS = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "speckle_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "gaussian_blur",
    "snow",
    "frost",
    "fog",
    "spatter",
    "brightness",
    "contrast",
    "saturate",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)  # the 15 benchmark corruptions + 4 extra (speckle_noise, gaussian_blur, spatter, saturate) = 19
SEVERITIES = (1, 2, 3, 4, 5)

CIFAR100_SKETCH = """
<root>/cifar-100-python/train   (python pickle: b'data' uint8 (50000, 3072), b'fine_labels', ...)
<root>/cifar-100-python/test    (the same for the 10,000 test images)
<root>/cifar-100-python/meta
    (the extracted cifar-100-python.tar.gz, as torchvision.datasets.CIFAR100(<root>, download=True) leaves it)
"""
CIFAR10_SKETCH = """
<root>/cifar-10-batches-py/data_batch_1 .. data_batch_5   (pickles: b'data' uint8 (10000, 3072), b'labels')
<root>/cifar-10-batches-py/test_batch
<root>/cifar-10-batches-py/batches.meta
    (the extracted cifar-10-python.tar.gz, as torchvision.datasets.CIFAR10(<root>, download=True) leaves it)
"""
CIFAR100_C_SKETCH = """
<root>/CIFAR-100-C/labels.npy            (50,000 labels: the test labels for severities 1..5)
<root>/CIFAR-100-C/gaussian_noise.npy    (uint8 (50000, 32, 32, 3): severity 1 rows 0..9999, then 2, .. 5)
<root>/CIFAR-100-C/<corruption>.npy      (one file per corruption; the extracted CIFAR-100-C.tar from Zenodo)
"""


class _CifarUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, source: str):
        super().__init__(io.BytesIO(data), encoding="latin1")  # the files are Python 2 pickles
        self._source = source

    def find_class(self, module: str, name: str):
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"{self._source}: refusing to unpickle global {module}.{name}; "
                "a CIFAR batch only holds numpy arrays, lists and strings"
            ) from None

    def persistent_load(self, pid):
        raise UnsafePickleError(f"{self._source}: refusing persistent id {pid!r}")


def read_batch(path: Path, label_key: str, dataset: str, root, sketch: str) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 32, 32, 3) uint8 and labels (N,) int64 of one official CIFAR batch file."""
    require_file(path, dataset, root, sketch)
    try:
        raw = _CifarUnpickler(path.read_bytes(), str(path)).load()
    except UnsafePickleError:
        raise
    except Exception as e:  # truncated, not a pickle
        raise layout_error(dataset, root, f"{path} is not a CIFAR pickle ({type(e).__name__}: {e})", sketch) from None
    batch = (
        {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in raw.items()} if isinstance(raw, dict) else {}
    )
    data, labels = batch.get("data"), batch.get(label_key)
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2 and data.shape[1] == 3072):
        raise layout_error(dataset, root, f"{path}: expected a dict with 'data' uint8 (N, 3072)", sketch)
    if not isinstance(labels, (list, np.ndarray)) or len(labels) != len(data):
        raise layout_error(dataset, root, f"{path}: expected {label_key!r} with one label per image", sketch)
    images = np.ascontiguousarray(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    return images, np.asarray(labels, dtype=np.int64)


def _read(folder: Path, files, label_key, dataset, root, sketch):
    parts = [read_batch(folder / f, label_key, dataset, root, sketch) for f in files]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def load_cifar100(root, *, val_fraction: float = 0.1, seed: int = 42) -> dict:
    """Splits ``train``, ``val``, ``test`` of CIFAR-100 (see the module docstring)."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"cifar100: val_fraction must be in (0, 1), got {val_fraction!r}")
    root = Path(root)
    require_dir(root, "cifar100", root, CIFAR100_SKETCH)
    folder = require_dir(root / "cifar-100-python", "cifar100", root, CIFAR100_SKETCH)
    x_train, y_train = _read(folder, ["train"], "fine_labels", "cifar100", root, CIFAR100_SKETCH)
    x_test, y_test = _read(folder, ["test"], "fine_labels", "cifar100", root, CIFAR100_SKETCH)
    n = len(y_train)
    val_size = int(val_fraction * n)
    train_pos, val_pos = seeded_split(n, [n - val_size, val_size], seed)
    train_src, test_src = ArrayImages(x_train), ArrayImages(x_test)
    ids = np.arange(n, dtype=np.int64)
    return {
        "train": make_split("train", "cifar100", train_src, train_pos, y_train, ids),
        "val": make_split("val", "cifar100", train_src, val_pos, y_train, ids),
        "test": make_split(
            "test",
            "cifar100",
            test_src,
            np.arange(len(y_test)),
            y_test,
            CIFAR100_TEST_ID_OFFSET + np.arange(len(y_test)),
        ),
    }


def load_cifar10(root) -> dict:
    """Splits ``train`` and ``test`` of CIFAR-10 (file order)."""
    root = Path(root)
    require_dir(root, "cifar10", root, CIFAR10_SKETCH)
    folder = require_dir(root / "cifar-10-batches-py", "cifar10", root, CIFAR10_SKETCH)
    out = {}
    for name, files, offset in (
        ("train", [f"data_batch_{i}" for i in range(1, 6)], CIFAR10_TRAIN_ID_OFFSET),
        ("test", ["test_batch"], CIFAR10_TEST_ID_OFFSET),
    ):
        x, y = _read(folder, files, "labels", "cifar10", root, CIFAR10_SKETCH)
        out[name] = make_split(name, "cifar10", ArrayImages(x), np.arange(len(y)), y, offset + np.arange(len(y)))
    return out


def load_cifar100_c(root, *, corruptions=CIFAR_C_CORRUPTIONS, severities=SEVERITIES) -> dict:
    """Splits ``corrupt-<corruption>-<severity>`` of CIFAR-100-C (see the module docstring)."""
    unknown = sorted(set(corruptions) - set(CIFAR_C_CORRUPTIONS))
    bad_sev = [s for s in severities if isinstance(s, bool) or s not in SEVERITIES]
    if unknown or bad_sev or not corruptions or not severities:
        raise ValueError(
            f"cifar100_c: corruptions must be among {list(CIFAR_C_CORRUPTIONS)} and severities in 1..5; "
            f"got unknown {unknown}, severities {list(severities)}"
        )
    root = Path(root)
    require_dir(root, "cifar100_c", root, CIFAR100_C_SKETCH)
    folder = require_dir(root / "CIFAR-100-C", "cifar100_c", root, CIFAR100_C_SKETCH)
    labels = np.load(require_file(folder / "labels.npy", "cifar100_c", root, CIFAR100_C_SKETCH), allow_pickle=False)
    if labels.ndim != 1 or labels.dtype.kind not in "iu" or len(labels) % 5:
        raise layout_error(
            "cifar100_c",
            root,
            f"labels.npy must be 1-D integers, 5 x (test size), got {labels.dtype} {labels.shape}",
            CIFAR100_C_SKETCH,
        )
    n = len(labels) // 5
    labels = labels.astype(np.int64)
    blocks = labels.reshape(5, n)
    if not (blocks == blocks[0]).all():
        raise layout_error(
            "cifar100_c", root, "labels.npy must repeat the test labels once per severity", CIFAR100_C_SKETCH
        )
    ids = CIFAR100_TEST_ID_OFFSET + np.arange(5 * n) % n
    out = {}
    for c in corruptions:
        path = require_file(folder / f"{c}.npy", "cifar100_c", root, CIFAR100_C_SKETCH)
        try:
            source = ArrayImages(path=path)
        except (ValueError, OSError) as e:  # not a .npy file, wrong dtype or shape
            raise layout_error("cifar100_c", root, f"{path}: {e}", CIFAR100_C_SKETCH) from None
        if len(source) != 5 * n:
            raise layout_error(
                "cifar100_c", root, f"{path} has {len(source)} images, labels.npy {5 * n}", CIFAR100_C_SKETCH
            )
        for s in severities:
            name = corrupt_split_name(c, s)
            out[name] = make_split(name, "cifar100_c", source, (s - 1) * n + np.arange(n), labels, ids)
    return out


LOADERS = {  # the loaders of this module, by the name a suite file gives (benchmark.data.paper.suites.LOADERS)
    "cifar100": Loader(load_cifar100, CIFAR100_SKETCH),
    "cifar10": Loader(load_cifar10, CIFAR10_SKETCH),
    "cifar100_c": Loader(load_cifar100_c, CIFAR100_C_SKETCH),
}
