"""Turn grayscale uint8 image batches into normalised model input."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F


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
