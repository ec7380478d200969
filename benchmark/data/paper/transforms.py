"""A model's own image transforms and the torch Dataset over a split (the paper suites'; the data config they are built
from: :func:`benchmark.models.preprocess.data_config`).

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

import torch

from benchmark.data.paper.common import SampleSplit
from benchmark.models.preprocess import check_size, data_config, torchvision_weights
from benchmark.models.zoo import family


def eval_transform(model_or_arch, img_size: int | None = None):
    """PIL RGB image -> normalised (3, S, S) float tensor, the model's timm (or torchvision) evaluation transform."""
    from timm.data import create_transform

    tv = torchvision_weights(model_or_arch)
    if tv is not None:
        size = img_size if img_size is not None else tv[1]
        if size is not None:
            check_size(size)
        return family("torchvision").eval_transform(tv[0], size)
    return create_transform(**data_config(model_or_arch, img_size), is_training=False)


def train_transform(model_or_arch, img_size: int | None = None):
    """The published fine-tuning augmentation: RandAugment, horizontal flip, then :func:`eval_transform`."""
    from torchvision import transforms

    return transforms.Compose(
        [transforms.RandAugment(), transforms.RandomHorizontalFlip(p=0.5), eval_transform(model_or_arch, img_size)]
    )


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
