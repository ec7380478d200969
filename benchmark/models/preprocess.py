"""A model's input preprocessing as timm describes it: its data config (input size, interpolation, mean, std, crop) for
a zoo entry, a timm name or a built model.

What the embedded suite normalises its in-memory splits with (:mod:`benchmark.stages.embedded_source`) and the paper
suites build their image transforms from (:mod:`benchmark.data.paper.transforms`). A ``torchvision:`` zoo entry (or a
model built from one) gets its weights' own transform's settings from its family's module
(:data:`benchmark.models.zoo.FAMILIES`), imported only for such an entry.
"""

from __future__ import annotations

import numpy as np
from torch import nn

from benchmark.models.zoo import ZooEntry, family


def pretrained_cfg(model_or_arch) -> tuple[dict, int | None]:
    """(pretrained config dict, default img_size) of a model, a timm name (``arch`` or ``arch.tag``) or a zoo entry."""
    import timm

    if isinstance(model_or_arch, nn.Module):
        cfg = getattr(model_or_arch, "pretrained_cfg", None)
        if not cfg:
            raise ValueError(
                f"{type(model_or_arch).__name__} has no timm pretrained_cfg; pass the timm architecture name instead"
            )
        return dict(cfg), None
    if isinstance(model_or_arch, ZooEntry):
        e = model_or_arch
        name = f"{e.arch}.{e.init_source}" if e.init_kind == "timm" else e.arch
        return pretrained_cfg(name)[0], e.img_size
    if not isinstance(model_or_arch, str) or not timm.is_model(model_or_arch):
        raise ValueError(f"unknown timm architecture {model_or_arch!r}")
    try:
        cfg = timm.get_pretrained_cfg(model_or_arch)
    except RuntimeError as e:  # unknown tag
        raise ValueError(f"{model_or_arch!r}: {e}") from None
    return (cfg.to_dict() if cfg is not None else {}), None


def torchvision_weights(model_or_arch):
    """(weights member, default img_size) of a ``torchvision:`` zoo entry or a model built from one, else None."""
    if isinstance(model_or_arch, ZooEntry) and model_or_arch.init_kind == "torchvision":
        return family("torchvision").entry_weights(model_or_arch), model_or_arch.img_size
    weights = getattr(model_or_arch, "tv_weights", None) if isinstance(model_or_arch, nn.Module) else None
    return (weights, None) if weights is not None else None


def check_size(size) -> None:
    """``ValueError`` unless ``size`` (an image size) is a positive integer."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"img_size must be a positive integer, got {size!r}")


def data_config(model_or_arch, img_size: int | None = None) -> dict:
    """timm's data config (input_size, interpolation, mean, std, crop_pct, crop_mode) at ``img_size``.

    ``img_size`` defaults to the zoo entry's, else the pretrained input size.
    For a torchvision model, the same keys describing its ``weights.transforms()``.
    """
    from timm.data import resolve_data_config

    tv = torchvision_weights(model_or_arch)
    if tv is not None:
        size = img_size if img_size is not None else tv[1]
        if size is not None:
            check_size(size)
        return family("torchvision").data_config(tv[0], size)
    cfg, default = pretrained_cfg(model_or_arch)
    size = img_size if img_size is not None else default
    if size is None:
        return resolve_data_config({}, pretrained_cfg=cfg)
    check_size(size)
    shape = (3, int(size), int(size))
    use_test = tuple(cfg.get("test_input_size") or ()) == shape
    return resolve_data_config({"input_size": shape}, pretrained_cfg=cfg, use_test_size=use_test)
