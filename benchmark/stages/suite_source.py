"""Where a suite's images come from: one small interface for the stage functions.

``params.yaml`` picks the source through its ``data`` block (:class:`benchmark.stages.model_params.DataRef`), and a
stage's entry opens it once (:func:`for_params`); its kind's module is imported then, and only that one
(:data:`SOURCES`):

* :mod:`benchmark.stages.embedded_source` (``data.suite: embedded``): the data stage writes whole
  splits, pixels included, to ``results/data/<split>.npz``; a split is prepared
  for a model as one (N, 3, S, S) tensor in memory (the suite is small).
* :mod:`benchmark.stages.paper_source` (``data.spec: <suite file>``, see
  :mod:`benchmark.data.paper.suites`): the data stage reads the datasets under the data root and writes an
  *index* of each split (no pixels); a split is a torch Dataset that streams the images with the model's own timm
  transform.

Either way ``source.inputs(split, entry)`` gives a :class:`SplitInputs` whose
labels and ids are those of ``results/data``, so fingerprints and the alignment
of logits files work the same for both kinds of suite. This module holds what both share: the split files and
indexes of ``results/data``, :class:`SplitInputs`, the choice of splits and of the device.
"""

from __future__ import annotations

import fnmatch
import importlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from benchmark.stages import stage_config
from benchmark.stages.model_params import load_model_params
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

    def subset(self, keep) -> SplitInputs:
        """The samples at positions ``keep`` (in that order)."""
        keep = torch.as_tensor(np.asarray(keep), dtype=torch.long)
        inputs = self.inputs[keep] if isinstance(self.inputs, torch.Tensor) else LabelledSubset(self.inputs, keep)
        return SplitInputs(self.name, inputs, self.labels[keep], self.ids[keep])


class LabelledSubset(torch.utils.data.Subset):
    """A ``Subset`` that keeps the ``labels`` attribute :func:`benchmark.models.train.fine_tune` reads."""

    @property
    def labels(self) -> np.ndarray:
        """The labels of the subset's images."""
        return np.asarray(self.dataset.labels)[np.asarray(self.indices)]


def resolve_splits(patterns: list[str] | None, available: list[str], where: str, required=(VAL, "test")) -> list[str]:
    """Split names matching ``patterns`` (names or shell patterns; None = all of ``available``), in data order.

    Raises ``ValueError`` starting with ``where`` (e.g. ``params.yaml sve.splits``) when a pattern matches nothing or
    a ``required`` split is left out.
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
    (:func:`benchmark.stages.per_model.train`), the images of a training budget
    (:func:`benchmark.core.costs.train_budget`)."""
    files = split_files(data_dir)
    if TRAIN not in files:
        raise store.StoreError(
            f"{Path(data_dir or stage_config.paths()['data'])}: no train split file; rerun the data stage (dvc repro "
            "data)"
        )
    return len(read_index(files[TRAIN], TRAIN).ids)


def split_file(split: str) -> Path:
    """The data stage's file of ``split``; :class:`StoreError` naming the suite's splits when it has none of that
    name."""
    files = split_files()
    if split not in files:
        raise store.StoreError(f"{stage_config.paths()['data']}: no split {split!r} (the suite has {sorted(files)})")
    return files[split]


def split_index(split: str) -> SplitIndex:
    """The labels, ids (and groups) of ``results/data/<split>.npz``."""
    return read_index(split_file(split), split)


SOURCES = {"embedded": "benchmark.stages.embedded_source", "paper": "benchmark.stages.paper_source"}
"""Suite kind (params ``data``: :attr:`benchmark.stages.model_params.DataRef.kind`) -> the module of its data source
(its ``Source``), imported for the kind the params select: a stage of the embedded suite neither runs nor depends on
the paper suites' code, and one of a paper suite on neither the embedded suite's nor another suite's loaders."""


def for_params(params, data: dict | None = None):
    """The data source ``params`` select (``data.spec`` -> a paper suite, ``data.suite: embedded`` -> the embedded
    suite), opened once at a stage's entry and handed down. ``data``: the raw ``data`` block, given by the data stage's
    entry alone (the embedded suite's settings, typed there: what the data stage builds the splits with)."""
    return importlib.import_module(SOURCES[params.data.kind]).Source(params, data)


def source_modules(data, *, data_stage: bool = False) -> list[str]:
    """The dotted modules a stage that opens the data source of params ``data`` (a
    :class:`~benchmark.stages.model_params.DataRef`) imports at run time, besides its own imports (what
    :mod:`benchmark.dvcgen.stage_deps` adds to its dependencies): the kind's source module and the modules it imports
    in turn (a paper suite's loaders; the data stage of the embedded suite: its builder)."""
    module = SOURCES[data.kind]
    return [module, *importlib.import_module(module).Source.modules(data, data_stage=data_stage)]


def data_source(path="params.yaml"):
    """The data stage's entry: the model stages' params blocks of params file ``path`` and the suite's data source
    opened with the ``data`` block (the embedded suite's settings typed here), before any work."""
    return for_params(load_model_params(path), data=stage_config.params_data(path).get("data"))


def prepare_data(source, out: Path | None = None) -> list[str]:
    """The data stage: build the suite's splits and write ``<out>/<split>.npz`` + ``splits.json`` (whole folder
    atomically; default ``results/data``). ``source``: opened by the stage's entry with the ``data`` block."""
    return source.prepare(Path(out or stage_config.paths()["data"]))


def device(params) -> torch.device:
    """params ``device``: ``cpu`` (the default), ``cuda``, or ``auto`` (cuda when available)."""
    want = params.device  # one of model_params.DEVICES
    if want == "cuda" and not torch.cuda.is_available():
        raise stage_config.ConfigError("params 'device' is cuda but torch sees no CUDA device; use auto or cpu")
    return torch.device("cuda" if want == "cuda" or (want == "auto" and torch.cuda.is_available()) else "cpu")
