"""A paper suite's data source (params ``data.spec: <suite file>``, :mod:`benchmark.data.paper.suites`).

The data stage reads the datasets under the data root (params ``data_root``, else ``$UQBENCH_DATA``) and writes an
*index* ``results/data/<split>.npz`` (``labels``, ``ids``, ``name``, optional ``groups``; no pixels) plus
``splits.json``; a split is a torch Dataset that streams the images with the model's own timm transform (the
training augmentation for training, the evaluation transform otherwise). The suite file is parsed once, when a
stage's entry opens the source; its loaders are imported then, and only its own
(:func:`benchmark.data.paper.suites.loader_modules`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from benchmark.data.paper.suites import load_suite, loader_modules
from benchmark.data.paper.transforms import SplitDataset, eval_transform, train_transform
from benchmark.stages.stage_config import ConfigError
from benchmark.stages.suite_source import SplitIndex, SplitInputs, save_index, split_file, split_index
from benchmark.storage import store


class PaperSource:
    """A paper suite: images streamed from the data root, indexed by ``results/data``."""

    kind = "paper"

    def __init__(self, params, data: dict | None = None):
        self.spec = load_suite(params.data.spec)
        if params.suite != self.spec.name:
            raise ConfigError(
                f"params 'suite' is {params.suite!r} but data.spec {params.data.spec!r} "
                f"is suite {self.spec.name!r}; they must agree (the results are labelled with it)"
            )
        self.data_root = params.data_root
        self.num_workers = params.num_workers
        self._splits = None

    @staticmethod
    def modules(data, *, data_stage: bool = False) -> list[str]:
        """What this source imports at run time: the loaders of the suite params ``data`` select."""
        return loader_modules(load_suite(data.spec))

    def splits(self) -> dict:
        """The suite's splits read from the data root (once per source)."""
        if self._splits is None:
            self._splits = self.spec.load_splits(self.data_root)
        return self._splits

    def prepare(self, out: Path) -> list[str]:
        """Read the suite's splits (the data stage) and write their indexes and ``splits.json``, the folder
        atomically."""
        splits = self.splits()
        with store.atomic_dir(out) as tmp:
            for name, s in splits.items():
                save_index(tmp / f"{name}.npz", SplitIndex(name, s.labels, s.ids, s.groups))
            store.write_json(tmp / "splits.json", {n: len(s) for n, s in splits.items()})
        return list(splits)

    def num_classes(self) -> int:
        """The classes of the suite (its suite file's)."""
        return self.spec.num_classes

    def check_recipe(self, name: str, recipe) -> None:
        """Models are selected by the suite's validation score (``select_by``)."""
        if recipe.epochs and recipe.select_by != self.spec.select_by:
            raise ConfigError(
                f"recipe {name!r} selects by {recipe.select_by!r} but suite {self.spec.name!r} by "
                f"{self.spec.select_by!r}; set recipes.{name}.select_by: {self.spec.select_by}"
            )

    def inputs(self, split: str, entry, *, train: bool = False) -> SplitInputs:
        """A Dataset streaming the split with the entry's timm transform (``train``: the fine-tuning augmentation)."""
        index = split_index(split)
        s = self.splits().get(split)
        if s is None or not (np.array_equal(s.ids, index.ids) and np.array_equal(s.labels, index.labels)):
            raise store.StoreError(
                f"suite {self.spec.name!r} split {split!r}: the data under the data root no longer match "
                f"{split_file(split)} (the data stage's index); rerun the data stage (dvc repro)"
            )
        ds = SplitDataset(s, (train_transform if train else eval_transform)(entry))
        return SplitInputs(split, ds, torch.from_numpy(index.labels), torch.from_numpy(index.ids))


Source = PaperSource  # what benchmark.stages.suite_source.for_params opens for this kind
