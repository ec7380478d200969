"""The embedded suite's data source (params ``data.suite: embedded``): whole splits in ``results/data``, pixels
included, prepared for a model as one (N, 3, S, S) tensor in memory (the suite is small:
:func:`to_model_input`, the one place grayscale pixels become a model's input).

The model stages read the split files (:mod:`benchmark.data.splits_io`); the data stage alone builds them
(:data:`BUILDER`, imported by it at run time), so a change to how the splits are built (a corruption, a source)
re-runs the data stage, never a ``train@`` or ``logits@`` stage directly.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from benchmark.data.splits_io import load_split, save_split
from benchmark.models.preprocess import data_config
from benchmark.stages.suite_source import TRAIN, SplitInputs, split_file, split_index
from benchmark.storage import store

BUILDER = "benchmark.data.embedded"  # builds the splits from the params' data block (the data stage's)


def _triple(v: Sequence[float], name: str) -> torch.Tensor:
    t = torch.as_tensor(v, dtype=torch.float32).flatten()
    if t.numel() != 3 or not torch.isfinite(t).all():
        raise ValueError(f"to_model_input: {name} must be 3 finite numbers (one per RGB channel), got {v!r}")
    return t.view(1, 3, 1, 1)


def to_model_input(
    images: np.ndarray | torch.Tensor, img_size: int, mean: Sequence[float], std: Sequence[float]
) -> torch.Tensor:
    """uint8 (N, H, W) grayscale -> float32 (N, 3, S, S) with S = ``img_size``.

    ``x = (resize(images / 255) - mean[c]) / std[c]`` for each of the three
    (identical) channels c; resize is bilinear with antialiasing (PIL-style,
    ``align_corners=False``) and skipped when H = W = S.
    """
    t = torch.from_numpy(np.ascontiguousarray(images)) if isinstance(images, np.ndarray) else images
    if not isinstance(t, torch.Tensor) or t.ndim != 3 or t.dtype != torch.uint8:
        raise ValueError(
            f"to_model_input: images must be uint8 (N, H, W), got {getattr(t, 'dtype', type(t).__name__)} "
            f"{tuple(getattr(t, 'shape', ()))}"
        )
    if isinstance(img_size, bool) or not isinstance(img_size, (int, np.integer)) or img_size < 1:
        raise ValueError(f"to_model_input: img_size must be a positive integer, got {img_size!r}")
    m, s = _triple(mean, "mean"), _triple(std, "std")
    if (s <= 0).any():
        raise ValueError(f"to_model_input: std must be positive, got {std!r}")
    x = t.to(torch.float32).div_(255.0).unsqueeze(1)
    if tuple(x.shape[-2:]) != (img_size, img_size):
        x = F.interpolate(x, size=(int(img_size), int(img_size)), mode="bilinear", align_corners=False, antialias=True)
    return ((x - m.to(x.device)) / s.to(x.device)).contiguous()


def embedded_inputs(split, entry) -> tuple[torch.Tensor, torch.Tensor]:
    """An embedded :class:`~benchmark.data.splits_io.Split` as model input (N, 3, S, S) and labels."""
    cfg = data_config(entry)  # timm's normalisation for the entry (as for the paper suites)
    return to_model_input(split.images, entry.img_size, cfg["mean"], cfg["std"]), torch.from_numpy(split.labels)


class EmbeddedSource:
    """The embedded suite: whole splits in ``results/data``, prepared in memory."""

    kind = "embedded"
    num_workers = 0

    def __init__(self, params, data: dict | None = None):
        """``data``: the raw ``data`` block (the data stage's entry): its settings typed here
        (:class:`benchmark.data.embedded.EmbeddedData`), before any work."""
        self.settings = None if data is None else importlib.import_module(BUILDER).parse_data(data)

    @staticmethod
    def modules(data, *, data_stage: bool = False) -> list[str]:
        """What this source imports at run time: the builder, in the data stage."""
        return [BUILDER] if data_stage else []

    def prepare(self, out: Path) -> list[str]:
        """Build the splits (the data stage) and write ``<out>/<split>.npz`` + ``splits.json``, the folder
        atomically."""
        if self.settings is None:
            raise ValueError("the embedded data source was opened without the params' data block (the data stage's)")
        splits = importlib.import_module(BUILDER).build_embedded_suite(self.settings)
        with store.atomic_dir(out) as tmp:
            for name, split in splits.items():
                save_split(tmp / f"{name}.npz", split)
            store.write_json(tmp / "splits.json", {n: len(s) for n, s in splits.items()})
        return list(splits)

    def num_classes(self) -> int:
        """The classes of the suite: one more than the largest train label."""
        return int(split_index(TRAIN).labels.max()) + 1

    def check_recipe(self, name: str, recipe) -> None:
        """Any recipe fits the embedded suite."""

    def inputs(self, split: str, entry, *, train: bool = False) -> SplitInputs:
        """The whole split as one tensor (``train`` changes nothing: the recipe's shift augments in ``fine_tune``)."""
        s = load_split(split_file(split), split)
        x, y = embedded_inputs(s, entry)
        return SplitInputs(split, x, y, torch.from_numpy(s.ids))


Source = EmbeddedSource  # what benchmark.stages.suite_source.for_params opens for this kind
