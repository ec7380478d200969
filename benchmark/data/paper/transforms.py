"""A model's own image transforms (timm data config) and the torch Dataset over a split.

The evaluation transform is timm's for the model's pretrained config (resize
to ``img_size / crop_pct`` with the model's interpolation, centre crop, normalise
with its mean/std), as the published code builds it with
``create_transform(**resolve_data_config({}, model=model))``. When ``img_size`` is
the config's ``test_input_size``, its ``test_crop_pct`` is used as well.
A ``torchvision:`` zoo entry (or a model built from one) gets its weights' own
transform, ``weights.transforms()`` (:mod:`benchmark.models.torchvision_zoo`), as the
published code uses for torchvision models.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from benchmark.data.paper.common import SampleSplit


def _pretrained_cfg(model_or_arch) -> tuple[dict, int | None]:
    """(pretrained config dict, default img_size) of a model, a timm name (``arch`` or ``arch.tag``) or a zoo entry."""
    import timm

    from benchmark.models.zoo import ZooEntry

    if isinstance(model_or_arch, nn.Module):
        cfg = getattr(model_or_arch, "pretrained_cfg", None)
        if not cfg:
            raise ValueError(f"{type(model_or_arch).__name__} has no timm pretrained_cfg; pass the timm architecture name instead")
        return dict(cfg), None
    if isinstance(model_or_arch, ZooEntry):
        e = model_or_arch
        name = f"{e.arch}.{e.init_source}" if e.init_kind == "timm" else e.arch
        return _pretrained_cfg(name)[0], e.img_size
    if not isinstance(model_or_arch, str) or not timm.is_model(model_or_arch):
        raise ValueError(f"unknown timm architecture {model_or_arch!r}")
    try:
        cfg = timm.get_pretrained_cfg(model_or_arch)
    except RuntimeError as e:  # unknown tag
        raise ValueError(f"{model_or_arch!r}: {e}") from None
    return (cfg.to_dict() if cfg is not None else {}), None


def _torchvision_weights(model_or_arch):
    """(weights member, default img_size) of a ``torchvision:`` zoo entry or a model built from one, else None."""
    from benchmark.models.zoo import ZooEntry

    if isinstance(model_or_arch, ZooEntry) and model_or_arch.init_kind == "torchvision":
        from benchmark.models.torchvision_zoo import entry_weights

        return entry_weights(model_or_arch), model_or_arch.img_size
    weights = getattr(model_or_arch, "tv_weights", None) if isinstance(model_or_arch, nn.Module) else None
    return (weights, None) if weights is not None else None


def _check_size(size) -> None:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"img_size must be a positive integer, got {size!r}")


def data_config(model_or_arch, img_size: int | None = None) -> dict:
    """timm's data config (input_size, interpolation, mean, std, crop_pct, crop_mode) at ``img_size``.

    ``img_size`` defaults to the zoo entry's, else the pretrained input size.
    For a torchvision model, the same keys describing its ``weights.transforms()``.
    """
    from timm.data import resolve_data_config

    tv = _torchvision_weights(model_or_arch)
    if tv is not None:
        from benchmark.models.torchvision_zoo import data_config as tv_config

        size = img_size if img_size is not None else tv[1]
        if size is not None:
            _check_size(size)
        return tv_config(tv[0], size)
    cfg, default = _pretrained_cfg(model_or_arch)
    size = img_size if img_size is not None else default
    if size is None:
        return resolve_data_config({}, pretrained_cfg=cfg)
    _check_size(size)
    shape = (3, int(size), int(size))
    use_test = tuple(cfg.get("test_input_size") or ()) == shape
    return resolve_data_config({"input_size": shape}, pretrained_cfg=cfg, use_test_size=use_test)


def eval_transform(model_or_arch, img_size: int | None = None):
    """PIL RGB image -> normalised (3, S, S) float tensor, the model's timm (or torchvision) evaluation transform."""
    from timm.data import create_transform

    tv = _torchvision_weights(model_or_arch)
    if tv is not None:
        from benchmark.models.torchvision_zoo import eval_transform as tv_transform

        size = img_size if img_size is not None else tv[1]
        if size is not None:
            _check_size(size)
        return tv_transform(tv[0], size)
    return create_transform(**data_config(model_or_arch, img_size), is_training=False)


def train_transform(model_or_arch, img_size: int | None = None):
    """The published fine-tuning augmentation: RandAugment, horizontal flip, then :func:`eval_transform`."""
    from torchvision import transforms

    return transforms.Compose([transforms.RandAugment(), transforms.RandomHorizontalFlip(p=0.5),
                               eval_transform(model_or_arch, img_size)])


class SplitDataset(torch.utils.data.Dataset):
    """``(transform(image), label, id)`` for each sample of a :class:`SampleSplit`, in split order.

    With the default collate a batch is (images (B, 3, S, S), labels (B,) int64, ids (B,) int64).
    """

    def __init__(self, split: SampleSplit, transform):
        if not isinstance(split, SampleSplit):
            raise TypeError(f"SplitDataset: expected a SampleSplit, got {type(split).__name__}")
        self.split = split
        self.transform = transform

    def __len__(self) -> int:
        return len(self.split)

    @property
    def labels(self):
        """Labels (N,) of the split, in order (what ``fine_tune`` reads)."""
        return self.split.labels

    def __getitem__(self, i: int):
        return self.transform(self.split.image(i)), int(self.split.labels[i]), int(self.split.ids[i])
