"""The common currency of the paper datasets: a split as (image source, labels, ids).

A loader reads one dataset in its official on-disk layout and returns
``{split name: SampleSplit}``. A :class:`SampleSplit` holds no pixels: it
holds the positions of its samples in an image source (files on disk or an
array, possibly memory-mapped), their labels and their ids, and returns one
image at a time as an RGB ``PIL.Image``. Sample order inside a split is fixed
by the loader (documented per dataset) and never depends on the file system's
listing order; ids are unique inside a dataset and stable across loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image

OOD_LABEL = -1


@dataclass(frozen=True)
class Loader:
    """One dataset loader: ``fn(root, **options) -> {split: SampleSplit}`` and the layout sketch of its root. Each
    loader module lists its loaders as ``LOADERS = {name: Loader(...)}``; a suite file names them
    (:data:`benchmark.data.paper.suites.LOADERS`: which module holds which loader, imported when a suite uses it)."""

    fn: Callable[..., dict]
    sketch: str


class DatasetLayoutError(FileNotFoundError):
    """A dataset root is missing or not laid out as its loader expects."""


def layout_error(dataset: str, root, problem: str, sketch: str) -> DatasetLayoutError:
    """One error that names the dataset, the problem, where the data must be and its layout."""
    lines = "\n".join(f"    {line}" for line in sketch.strip("\n").splitlines())
    return DatasetLayoutError(
        f"{dataset}: {problem}.\n"
        f"  The {dataset} data must be under the configured root {str(root)!r}, laid out as:\n{lines}"
    )


def require_dir(path: Path, dataset: str, root, sketch: str) -> Path:
    """``path`` when it is a folder, else the dataset's layout error naming it and showing the expected layout
    (``sketch``)."""
    if not path.is_dir():
        what = "root folder" if Path(path) == Path(root) else "folder"
        raise layout_error(dataset, root, f"{what} {str(path)!r} not found", sketch)
    return path


def require_file(path: Path, dataset: str, root, sketch: str) -> Path:
    """``path`` when it is a file, else the dataset's layout error naming it and showing the expected layout
    (``sketch``)."""
    if not path.is_file():
        raise layout_error(dataset, root, f"file {str(path)!r} not found", sketch)
    return path


class FileImages:
    """Images stored one per file; ``image(i)`` opens ``paths[i]`` as RGB."""

    def __init__(self, paths):
        self.paths = tuple(os.fspath(p) for p in paths)

    def __len__(self) -> int:
        return len(self.paths)

    def image(self, i: int) -> Image.Image:
        """Image ``i`` as RGB."""
        with Image.open(self.paths[i]) as im:
            return im.convert("RGB")


class ArrayImages:
    """Images in a uint8 (N, H, W, 3) array, or in a ``.npy`` file memory-mapped on first use.

    Only the file path is pickled (DataLoader workers map the file again).
    """

    def __init__(self, array: np.ndarray | None = None, *, path=None):
        if (array is None) == (path is None):
            raise ValueError("ArrayImages: give exactly one of array or path")
        self.path = None if path is None else os.fspath(path)
        self._array = array
        arr = self.array
        if arr.ndim != 4 or arr.shape[-1] != 3 or arr.dtype != np.uint8:
            raise ValueError(f"ArrayImages {self.path or ''}: expected uint8 (N, H, W, 3), got {arr.dtype} {arr.shape}")

    @property
    def array(self) -> np.ndarray:
        """The images' array, memory-mapped once."""
        if self._array is None:
            self._array = np.load(self.path, mmap_mode="r", allow_pickle=False)
        return self._array

    def __getstate__(self):
        state = dict(self.__dict__)
        if self.path is not None:
            state["_array"] = None
        return state

    def __len__(self) -> int:
        return len(self.array)

    def image(self, i: int) -> Image.Image:
        """Image ``i`` of the array."""
        return Image.fromarray(np.ascontiguousarray(self.array[i]))


@dataclass(frozen=True, eq=False)  # arrays: compare field by field
class SampleSplit:
    """One split of a dataset: sample ``k`` is image ``source.image(index[k])`` with ``labels[k]`` and ``ids[k]``.

    ``labels`` (N,) int64 (``-1`` = out-of-distribution), ``ids`` (N,) int64
    unique, ``groups`` (N,) int64 or None (e.g. the camera trap of iWildCam).
    """

    name: str
    dataset: str
    source: FileImages | ArrayImages
    index: np.ndarray
    labels: np.ndarray
    ids: np.ndarray
    groups: np.ndarray | None = None

    def __post_init__(self):
        where = f"{self.dataset} split {self.name!r}"
        n = len(self.index)
        arrays = {"index": self.index, "labels": self.labels, "ids": self.ids}
        if self.groups is not None:
            arrays["groups"] = self.groups
        for key, arr in arrays.items():
            if not (isinstance(arr, np.ndarray) and arr.dtype == np.int64 and arr.shape == (n,)):
                raise ValueError(
                    f"{where}: {key} must be an int64 array of shape ({n},), got "
                    f"{getattr(arr, 'dtype', type(arr).__name__)} {getattr(arr, 'shape', '')}"
                )
        if n and (self.index.min() < 0 or self.index.max() >= len(self.source)):
            raise ValueError(f"{where}: index outside the {len(self.source)} images of its source")
        if n and self.labels.min() < OOD_LABEL:
            raise ValueError(f"{where}: labels must be >= 0 (or {OOD_LABEL} for OOD), found {self.labels.min()}")
        if np.unique(self.ids).size != n:
            raise ValueError(f"{where}: ids are not unique")

    def __len__(self) -> int:
        return len(self.index)

    def image(self, i: int) -> Image.Image:
        """The ``i``-th sample's image, RGB."""
        return self.source.image(int(self.index[i]))

    def subset(self, positions, name: str | None = None) -> SampleSplit:
        """The samples at ``positions`` (in that order)."""
        pos = np.asarray(positions, dtype=np.int64)
        return replace(
            self,
            name=name or self.name,
            index=self.index[pos],
            labels=self.labels[pos],
            ids=self.ids[pos],
            groups=None if self.groups is None else self.groups[pos],
        )

    def renamed(self, name: str, *, ood: bool = False) -> SampleSplit:
        """The same samples under another split name; ``ood=True`` sets every label to -1."""
        labels = np.full_like(self.labels, OOD_LABEL) if ood else self.labels
        return replace(self, name=name, labels=labels)


def seeded_split(n: int, lengths, seed: int) -> list[np.ndarray]:
    """Positions of ``torch.utils.data.random_split(range(n), lengths, generator=Generator().manual_seed(seed))``.

    The very call of the published code, so a dataset of the same size and
    order is split into the same index sets (in random_split's order).
    """
    gen = torch.Generator().manual_seed(int(seed))
    parts = torch.utils.data.random_split(range(n), list(lengths), generator=gen)
    return [np.asarray(p.indices, dtype=np.int64) for p in parts]


def make_split(name, dataset, source, positions, labels, ids, groups=None) -> SampleSplit:
    """A split of the samples at ``positions`` of full-dataset arrays ``labels``/``ids``/``groups``."""
    pos = np.asarray(positions, dtype=np.int64)
    return SampleSplit(
        name=name,
        dataset=dataset,
        source=source,
        index=pos,
        labels=np.asarray(labels, dtype=np.int64)[pos],
        ids=np.asarray(ids, dtype=np.int64)[pos],
        groups=None if groups is None else np.asarray(groups, dtype=np.int64)[pos],
    )
