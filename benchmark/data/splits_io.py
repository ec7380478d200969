"""One split of the embedded suite (:class:`Split`), written and read as a ``.npz`` file.

The file holds arrays ``images`` (N, H, W) uint8, ``labels`` (N,) int64,
``ids`` (N,) int64 and ``name`` (a 0-d string). Writes are atomic; reads never
unpickle and validate everything, naming the file in every error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmark.storage.store import StoreError, atomic_path, check_arrays

_KEYS = ("images", "labels", "ids", "name")
OOD_LABEL = -1


@dataclass(frozen=True, eq=False)  # arrays: compare splits field by field, not with ==
class Split:
    """One split: images (N, 28, 28) uint8, labels (N,) int64 (-1 = OOD), ids (N,) int64 unique."""

    images: np.ndarray
    labels: np.ndarray
    ids: np.ndarray
    name: str

    def __post_init__(self):
        def bad(msg: str) -> ValueError:
            return ValueError(f"Split {self.name!r}: {msg}")

        im, lab, ids = self.images, self.labels, self.ids
        if not (isinstance(im, np.ndarray) and im.ndim == 3 and im.dtype == np.uint8):
            raise bad(
                f"images must be a uint8 (N, H, W) array, got {getattr(im, 'dtype', type(im).__name__)} "
                f"{getattr(im, 'shape', '')}"
            )
        n = len(im)
        for key, arr in (("labels", lab), ("ids", ids)):
            if not (isinstance(arr, np.ndarray) and arr.dtype == np.int64 and arr.shape == (n,)):
                raise bad(
                    f"{key} must be an int64 array of shape ({n},), got {getattr(arr, 'dtype', type(arr).__name__)} "
                    f"{getattr(arr, 'shape', '')}"
                )
        if np.unique(ids).size != n:
            raise bad("ids are not unique")
        if n and lab.min() < OOD_LABEL:
            raise bad(f"labels must be >= 0, or {OOD_LABEL} for OOD; found {lab.min()}")

    def __len__(self) -> int:
        return len(self.labels)


def save_split(path: str | os.PathLike, split: Split) -> None:
    """Write ``split`` to ``path`` (must end in ``.npz``), compressed, atomically."""
    path = Path(path)
    if path.suffix != ".npz":
        raise StoreError(f"{path}: a split file must end in .npz")
    if not isinstance(split, Split):
        raise TypeError(f"save_split: expected a Split, got {type(split).__name__}")
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez_compressed(f, images=split.images, labels=split.labels, ids=split.ids, name=np.array(split.name))


def load_split(path: str | os.PathLike, name: str | None = None) -> Split:
    """Read a split file written by :func:`save_split`; if ``name`` is given, the file must hold that split."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: split file not found")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:  # not a zip, truncated, object arrays, ...
        raise StoreError(f"{path}: cannot read split file ({type(e).__name__}: {e})") from e
    check_arrays(path, arrays)
    missing = [k for k in _KEYS if k not in arrays]
    if missing:
        raise StoreError(
            f"{path}: missing array(s) {missing} (found {sorted(arrays)}); a split file needs {list(_KEYS)}"
        )
    stored = arrays["name"]
    if stored.ndim != 0 or stored.dtype.kind != "U":
        raise StoreError(f"{path}: 'name' must be a string, got {stored.dtype} {stored.shape}")
    if name is not None and str(stored) != name:
        raise StoreError(f"{path}: holds split {str(stored)!r}, expected {name!r}")
    try:
        return Split(images=arrays["images"], labels=arrays["labels"], ids=arrays["ids"], name=str(stored))
    except ValueError as e:
        raise StoreError(f"{path}: {e}") from e
