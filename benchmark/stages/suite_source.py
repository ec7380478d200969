"""Where a suite's images come from: one small interface for the stage functions.

``params.yaml`` picks the source through its ``data`` block:

* :class:`EmbeddedSource` (``data.suite: embedded``): the data stage writes whole
  splits, pixels included, to ``results/data/<split>.npz``; a split is prepared
  for a model as one (N, 3, S, S) tensor in memory (the suite is small).
* :class:`PaperSource` (``data.spec: <suite file>``, see
  :mod:`benchmark.data.paper.suites`): the data stage reads the datasets under the
  data root (params ``data_root``, else ``$UQBENCH_DATA``) and writes an *index*
  ``results/data/<split>.npz`` (``labels``, ``ids``, ``name``, optional
  ``groups``; no pixels) plus ``splits.json``; a split is a torch Dataset that
  streams the images with the model's own timm transform (the training
  augmentation for training, the evaluation transform otherwise).

Either way ``source.inputs(split, entry)`` gives a :class:`SplitInputs` whose
labels and ids are those of ``results/data``, so fingerprints and the alignment
of logits files work the same for both kinds of suite.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from benchmark.stages import stage_config
from benchmark.stages.params_config import Params
from benchmark.storage import store

TRAIN, VAL = "train", "val"
INDEX_KEYS = ("labels", "ids", "name")  # + optional "groups"


def split_files(data_dir: Path | None = None) -> dict[str, Path]:
    """``{split: results/data/<split>.npz}`` (split files or indexes); the val split must exist."""
    data_dir = Path(data_dir or stage_config.paths()["data"])
    files = {p.stem: p for p in store.listing(data_dir, "*.npz")}
    if VAL not in files:
        raise store.StoreError(f"{data_dir}: no val split file; run the data stage first (dvc repro data)")
    return files


@dataclass(frozen=True)
class SplitIndex:
    """Labels (N,) int64 (-1 = OOD), ids (N,) int64 and groups (N,) int64 or None of one split."""

    name: str
    labels: np.ndarray
    ids: np.ndarray
    groups: np.ndarray | None = None


def save_index(path: Path, index: SplitIndex) -> None:
    """Write a split index (no pixels) as a compressed ``.npz``, atomically."""
    arrays = {"labels": index.labels, "ids": index.ids, "name": np.array(index.name)}
    if index.groups is not None:
        arrays["groups"] = index.groups
    with store.atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)


def read_index(path: Path, name: str) -> SplitIndex:
    """Labels, ids (and groups) of a split file or a split index; checks shapes, dtypes and the split name."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:  # members are read lazily: never the pixels here
            missing = [k for k in INDEX_KEYS if k not in z.files]
            if missing:
                raise store.StoreError(f"{path}: missing array(s) {missing}; a split index needs {list(INDEX_KEYS)}")
            arrays = {k: z[k] for k in (*INDEX_KEYS, "groups") if k in z.files}
    except store.StoreError:
        raise
    except Exception as e:  # not a zip, truncated, object arrays, ...
        raise store.StoreError(f"{path}: cannot read split file ({type(e).__name__}: {e})") from e
    store.check_arrays(path, arrays)
    if str(arrays["name"]) != name:
        raise store.StoreError(f"{path}: holds split {str(arrays['name'])!r}, expected {name!r}")
    n = len(arrays["ids"])
    for key in ("labels", "ids", "groups"):
        a = arrays.get(key)
        if a is not None and not (a.dtype == np.int64 and a.shape == (n,)):
            raise store.StoreError(f"{path}: {key} must be int64 of shape ({n},), got {a.dtype} {a.shape}")
    return SplitIndex(name, arrays["labels"], arrays["ids"], arrays.get("groups"))


@dataclass(frozen=True)
class SplitInputs:
    """One split prepared for one model: ``inputs`` a (N, 3, S, S) tensor or a Dataset of (x, label, id)."""

    name: str
    inputs: torch.Tensor | Dataset
    labels: torch.Tensor
    ids: torch.Tensor

    @property
    def fit_data(self):
        """What :func:`benchmark.models.train.fine_tune` takes: ``(inputs, labels)`` tensors or the Dataset."""
        return (self.inputs, self.labels) if isinstance(self.inputs, torch.Tensor) else self.inputs

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, keep) -> "SplitInputs":
        """The samples at positions ``keep`` (in that order)."""
        keep = torch.as_tensor(np.asarray(keep), dtype=torch.long)
        inputs = self.inputs[keep] if isinstance(self.inputs, torch.Tensor) else LabelledSubset(self.inputs, keep)
        return SplitInputs(self.name, inputs, self.labels[keep], self.ids[keep])


class LabelledSubset(torch.utils.data.Subset):
    """A ``Subset`` that keeps the ``labels`` attribute :func:`benchmark.models.train.fine_tune` reads."""

    @property
    def labels(self) -> np.ndarray:
        return np.asarray(self.dataset.labels)[np.asarray(self.indices)]


def embedded_inputs(split, entry) -> tuple[torch.Tensor, torch.Tensor]:
    """An embedded :class:`~benchmark.data.embedded.Split` as model input (N, 3, S, S) and labels."""
    from benchmark.data.model_input import to_model_input
    from benchmark.data.paper.transforms import data_config

    cfg = data_config(entry)  # timm's normalisation for the entry (as for the paper suites)
    return to_model_input(split.images, entry.img_size, cfg["mean"], cfg["std"]), torch.from_numpy(split.labels)


class EmbeddedSource:
    """The embedded suite: whole splits in ``results/data``, prepared in memory."""

    num_workers = 0

    def __init__(self, params):
        self.data = params.data  # the data block (benchmark.data.embedded.EmbeddedData)

    def prepare(self, out: Path) -> list[str]:
        from benchmark.data.embedded import build_embedded_suite
        from benchmark.data.splits_io import save_split

        splits = build_embedded_suite(self.data)
        with store.atomic_dir(out) as tmp:
            for name, split in splits.items():
                save_split(tmp / f"{name}.npz", split)
            store.write_json(tmp / "splits.json", {n: len(s) for n, s in splits.items()})
        return list(splits)

    def num_classes(self) -> int:
        return int(_index(TRAIN).labels.max()) + 1

    def check_recipe(self, name: str, recipe) -> None:
        """Any recipe fits the embedded suite."""

    def inputs(self, split: str, entry, *, train: bool = False) -> SplitInputs:
        """The whole split as one tensor (``train`` changes nothing: the recipe's shift augments in ``fine_tune``)."""
        from benchmark.data.splits_io import load_split

        s = load_split(_file(split), split)
        x, y = embedded_inputs(s, entry)
        return SplitInputs(split, x, y, torch.from_numpy(s.ids))


class PaperSource:
    """A paper suite: images streamed from the data root, indexed by ``results/data``."""

    def __init__(self, params):
        from benchmark.data.paper.suites import load_suite

        self.spec = load_suite(params.data["spec"])
        if params.suite != self.spec.name:
            raise stage_config.ConfigError(f"params 'suite' is {params.suite!r} but data.spec {params.data['spec']!r} "
                                     f"is suite {self.spec.name!r}; they must agree (the results are labelled with it)")
        self.data_root = params.data_root
        self.num_workers = params.num_workers
        self._splits = None

    def splits(self) -> dict:
        """The suite's splits read from the data root (once per source)."""
        if self._splits is None:
            self._splits = self.spec.load_splits(self.data_root)
        return self._splits

    def prepare(self, out: Path) -> list[str]:
        splits = self.splits()
        with store.atomic_dir(out) as tmp:
            for name, s in splits.items():
                save_index(tmp / f"{name}.npz", SplitIndex(name, s.labels, s.ids, s.groups))
            store.write_json(tmp / "splits.json", {n: len(s) for n, s in splits.items()})
        return list(splits)

    def num_classes(self) -> int:
        return self.spec.num_classes

    def check_recipe(self, name: str, recipe) -> None:
        """Models are selected by the suite's validation score (``select_by``)."""
        if recipe.epochs and recipe.select_by != self.spec.select_by:
            raise stage_config.ConfigError(f"recipe {name!r} selects by {recipe.select_by!r} but suite {self.spec.name!r} by "
                                     f"{self.spec.select_by!r}; set recipes.{name}.select_by: {self.spec.select_by}")

    def inputs(self, split: str, entry, *, train: bool = False) -> SplitInputs:
        """A Dataset streaming the split with the entry's timm transform (``train``: the fine-tuning augmentation)."""
        from benchmark.data.paper.transforms import SplitDataset, eval_transform, train_transform

        index = _index(split)
        s = self.splits().get(split)
        if s is None or not (np.array_equal(s.ids, index.ids) and np.array_equal(s.labels, index.labels)):
            raise store.StoreError(f"suite {self.spec.name!r} split {split!r}: the data under the data root no longer match "
                                   f"{_file(split)} (the data stage's index); rerun the data stage (dvc repro)")
        ds = SplitDataset(s, (train_transform if train else eval_transform)(entry))
        return SplitInputs(split, ds, torch.from_numpy(index.labels), torch.from_numpy(index.ids))


def resolve_splits(patterns: list[str] | None, available: list[str], where: str, required=(VAL, "test")) -> list[str]:
    """Split names matching ``patterns`` (names or shell patterns; None = all of ``available``), in data order.

    Raises ``ValueError`` starting with ``where`` (e.g. ``params.yaml sve.splits``) when a pattern matches nothing or a ``required`` split is left out.
    """
    if patterns is None:
        chosen = list(available)
    else:
        if isinstance(patterns, str) or not isinstance(patterns, list) or not patterns:
            raise ValueError(f"{where} must be a non-empty list of split names or patterns, got {patterns!r}")
        hits = set()
        for pat in patterns:
            found = [s for s in available if fnmatch.fnmatchcase(s, str(pat))]
            if not found:
                raise ValueError(f"{where}: split {pat!r} matches none of {available}")
            hits.update(found)
        chosen = [s for s in available if s in hits]
    missing = [s for s in required if s not in chosen]
    if missing:
        raise ValueError(f"{where} must include {list(required)}; missing {missing}")
    return chosen


def train_size(data_dir: Path | None = None) -> int:
    """Images of the train split (its file or index in ``results/data``): what one epoch of a recipe passes over
    (:func:`benchmark.stages.per_model.train`), the images of a training budget (:func:`benchmark.models.cost.train_budget`)."""
    files = split_files(data_dir)
    if TRAIN not in files:
        raise store.StoreError(f"{Path(data_dir or stage_config.paths()['data'])}: no train split file; rerun the data stage (dvc repro data)")
    return len(read_index(files[TRAIN], TRAIN).ids)


def _file(split: str) -> Path:
    files = split_files()
    if split not in files:
        raise store.StoreError(f"{stage_config.paths()['data']}: no split {split!r} (the suite has {sorted(files)})")
    return files[split]


def _index(split: str) -> SplitIndex:
    return read_index(_file(split), split)


def prepare_data(params: Params, out: Path | None = None) -> list[str]:
    """The data stage: build the suite's splits and write ``<out>/<split>.npz`` + ``splits.json`` (whole folder
    atomically; default ``results/data``)."""
    return for_params(params).prepare(Path(out or stage_config.paths()["data"]))


def for_params(params: Params) -> EmbeddedSource | PaperSource:
    """The data source ``params`` select: ``data.spec`` -> paper suite, ``data.suite: embedded`` -> embedded."""
    data = params.data
    if isinstance(data, dict) and data.get("spec"):
        return PaperSource(params)
    if isinstance(data, dict) and data.get("suite", "embedded") == "embedded":
        return EmbeddedSource(params)
    raise stage_config.ConfigError(f"params 'data' must have 'spec: <suite file>' (a paper suite) or 'suite: embedded', got {data!r}")


def device(params: Params) -> torch.device:
    """params ``device``: ``cpu`` (the default), ``cuda``, or ``auto`` (cuda when available)."""
    want = params.device  # one of params_config.DEVICES
    if want == "cuda" and not torch.cuda.is_available():
        raise stage_config.ConfigError("params 'device' is cuda but torch sees no CUDA device; use auto or cpu")
    return torch.device("cuda" if want == "cuda" or (want == "auto" and torch.cuda.is_available()) else "cpu")
