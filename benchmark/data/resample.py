"""Separable 1-D resampling matrices for small grayscale images (pure numpy).

An image ``x`` (H, W) is resized to (h, w) as ``R_h @ x @ R_w.T`` where each
``R`` is an (n_out, n_in) matrix built here. Pixels are unit cells: input pixel
``j`` covers ``[j, j+1)`` and output pixel ``i`` covers ``[i*s, (i+1)*s)`` with
``s = n_in / n_out`` (the ``align_corners=False`` convention of torch / PIL).
"""

from __future__ import annotations

import numpy as np


def _check(n_in: int, n_out: int) -> None:
    if n_in < 1 or n_out < 1:
        raise ValueError(f"resample sizes must be >= 1, got n_in={n_in}, n_out={n_out}")


def bilinear_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Linear interpolation at source position ``(i + 0.5) * n_in / n_out - 0.5``, edges clamped."""
    _check(n_in, n_out)
    src = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = src - lo
    r = np.zeros((n_out, n_in))
    np.add.at(r, (np.arange(n_out), lo), 1 - frac)
    np.add.at(r, (np.arange(n_out), hi), frac)
    return r


def area_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Box filter: output pixel = mean of the input over its cell (overlap-weighted)."""
    _check(n_in, n_out)
    edges = np.arange(n_out + 1) * n_in / n_out
    j = np.arange(n_in)
    overlap = np.clip(np.minimum(edges[1:, None], j + 1) - np.maximum(edges[:-1, None], j), 0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


def nearest_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Nearest neighbour: output pixel ``i`` copies input pixel ``floor((i + 0.5) * n_in / n_out)``."""
    _check(n_in, n_out)
    r = np.zeros((n_out, n_in))
    r[np.arange(n_out), np.minimum(((np.arange(n_out) + 0.5) * n_in / n_out).astype(int), n_in - 1)] = 1.0
    return r


def resize(images: np.ndarray, size: tuple[int, int], kind: str = "bilinear") -> np.ndarray:
    """Resize a float batch (N, H, W) or image (H, W) to ``size`` = (h, w)."""
    make = {"bilinear": bilinear_matrix, "area": area_matrix, "nearest": nearest_matrix}.get(kind)
    if make is None:
        raise ValueError(f"unknown resample kind {kind!r}; use 'bilinear', 'area' or 'nearest'")
    rh = make(images.shape[-2], size[0])
    rw = make(images.shape[-1], size[1])
    return rh @ np.asarray(images, dtype=np.float64) @ rw.T
