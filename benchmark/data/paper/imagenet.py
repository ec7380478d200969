"""ImageNet (ILSVRC-2012 validation set) and ImageNet-V2, as the Asymmetric Duos paper uses them.

ImageNet: the models keep their pretrained 1000-class heads (no fine-tuning).
The official 50,000 validation images, read with ``torchvision.datasets.ImageFolder``
(sorted WordNet-id folders = the standard class order), are split by the
published call ``random_split(dataset, [int(0.05 N), N - int(0.05 N)],
generator=torch.Generator().manual_seed(42))``: ``val`` = 2,500 images (temperature
fitting), ``test`` = 47,500. Samples keep random_split's order; the id of a
sample is its position in the ImageFolder order.

ImageNet-V2 (matched frequency): 10,000 images in folders ``0`` .. ``999`` named by
class index. Samples are ordered by (class, path); ids are
``IMAGENET_V2_ID_OFFSET + position``, disjoint from the ImageNet ids.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from torchvision.datasets import ImageFolder

from benchmark.data.paper.common import FileImages, Loader, layout_error, make_split, require_dir, seeded_split

IMAGENET_V2_ID_OFFSET = 1_000_000

IMAGENET_SKETCH = """
<root>/val/n01440764/ILSVRC2012_val_00000293.JPEG
<root>/val/n01443537/ILSVRC2012_val_00000236.JPEG
<root>/val/<wnid>/*.JPEG    (1,000 WordNet-id folders, 50,000 images: the
                            validation set sorted into class folders, e.g. by valprep.sh)
"""

IMAGENET_V2_SKETCH = """
<root>/0/7e4e8ad4e7dbd3d2b3f0e23ba4b6d1c5b2a9c0e1.jpeg
<root>/1/...
<root>/999/*.jpeg   (folders 0..999 named by ImageNet class index, 10 images each;
                    e.g. imagenetv2-matched-frequency-format-val)
"""


def _image_folder(folder: Path, dataset: str, root, sketch: str, cls=ImageFolder) -> ImageFolder:
    try:
        return cls(str(folder))
    except (FileNotFoundError, RuntimeError, ValueError) as e:  # no class folder, empty class, bad name
        raise layout_error(dataset, root, f"{folder} is not an image-folder tree ({e})", sketch) from None


def load_imagenet(root, *, val_fraction: float = 0.05, seed: int = 42) -> dict:
    """Splits ``val`` and ``test`` of the ImageNet validation set (see the module docstring)."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"imagenet: val_fraction must be in (0, 1), got {val_fraction!r}")
    root = Path(root)
    require_dir(root, "imagenet", root, IMAGENET_SKETCH)
    folder = require_dir(root / "val", "imagenet", root, IMAGENET_SKETCH)
    ds = _image_folder(folder, "imagenet", root, IMAGENET_SKETCH)
    labels = np.asarray(ds.targets, dtype=np.int64)
    n = len(labels)
    val_size = int(val_fraction * n)  # the published rule: 2,500 of 50,000
    val_pos, test_pos = seeded_split(n, [val_size, n - val_size], seed)
    source = FileImages(path for path, _ in ds.samples)
    ids = np.arange(n, dtype=np.int64)
    return {
        "val": make_split("val", "imagenet", source, val_pos, labels, ids),
        "test": make_split("test", "imagenet", source, test_pos, labels, ids),
    }


class _ClassIndexFolders(ImageFolder):
    """ImageFolder whose class folders are named by their class index (``0`` .. ``999``)."""

    def find_classes(self, directory):
        names = sorted(e.name for e in Path(directory).iterdir() if e.is_dir())
        bad = [n for n in names if not n.isdigit()]
        if not names or bad:
            raise ValueError(f"class folders must be named 0..999, found {bad[:5] or 'none'}")
        return names, {n: int(n) for n in names}


def load_imagenet_v2(root) -> dict:
    """Split ``test`` of ImageNet-V2 (labels = folder names)."""
    root = Path(root)
    require_dir(root, "imagenet_v2", root, IMAGENET_V2_SKETCH)
    ds = _image_folder(root, "imagenet_v2", root, IMAGENET_V2_SKETCH, cls=_ClassIndexFolders)
    samples = sorted(ds.samples, key=lambda s: (s[1], s[0]))
    labels = np.array([label for _, label in samples], dtype=np.int64)
    n = len(samples)
    source = FileImages(path for path, _ in samples)
    ids = IMAGENET_V2_ID_OFFSET + np.arange(n, dtype=np.int64)
    return {"test": make_split("test", "imagenet_v2", source, np.arange(n), labels, ids)}


LOADERS = {  # the loaders of this module, by the name a suite file gives (benchmark.data.paper.suites.LOADERS)
    "imagenet": Loader(load_imagenet, IMAGENET_SKETCH),
    "imagenet_v2": Loader(load_imagenet_v2, IMAGENET_V2_SKETCH),
}
