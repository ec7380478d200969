"""Input checks at the boundary of the numeric core.

Every public function of :mod:`benchmark.core` converts its array arguments
with these helpers first. They accept torch tensors and numpy arrays (or
anything ``torch.as_tensor`` takes), never broadcast, and raise
:class:`InputError` with a message that names the offending argument.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, TypeAlias

import numpy as np
import torch

# what the core accepts as an array: a tensor, a NumPy array or nested sequences of numbers
TensorLike: TypeAlias = "torch.Tensor | np.ndarray | Sequence[Any]"

_CHUNK_ROWS = 4096


class InputError(ValueError):
    """An argument of the numeric core has the wrong shape, type or values."""


def _tensor(x: TensorLike, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    try:
        arr = np.asarray(x)
    except Exception as e:  # ragged lists, exotic objects
        raise InputError(f"{name}: cannot convert to an array ({type(e).__name__}: {e})") from e
    if arr.dtype == object:
        raise InputError(f"{name}: cannot convert to a numeric array (got dtype object)")
    return torch.from_numpy(np.ascontiguousarray(arr))


def _raise_non_finite(block: torch.Tensor, start: int, name: str) -> None:
    bad = ~torch.isfinite(block)
    if bad.any():
        row = start + int(bad.reshape(bad.shape[0], -1).any(dim=1).nonzero()[0])
        kind = "NaN" if torch.isnan(block).any() else "Inf"
        raise InputError(f"{name}: contains {kind} (first non-finite value in row {row})")


def _check_finite(t: torch.Tensor, name: str) -> None:
    """Raise unless ``t`` is finite. Scans row chunks: a NaN or Inf makes the
    chunk's sum non-finite (an overflowing sum of finite values is re-checked)."""
    for start in range(0, t.shape[0], _CHUNK_ROWS):
        block = t[start : start + _CHUNK_ROWS]
        if not torch.isfinite(block.sum()):
            _raise_non_finite(block, start, name)


def as_float_matrix(x: TensorLike, name: str, *, ndim: int = 2, check_finite: bool = True) -> torch.Tensor:
    """Return ``x`` as a finite floating tensor with ``ndim`` dims and no empty axis."""
    t = _tensor(x, name)
    if not torch.is_floating_point(t):
        if t.dtype == torch.bool or torch.is_complex(t):
            raise InputError(f"{name}: must be real floating point, got {t.dtype}")
        t = t.to(torch.float32)
    if t.ndim != ndim:
        shape = {2: "(N, C)", 3: "(M, N, C)"}.get(ndim, f"{ndim}-D")
        raise InputError(f"{name}: must be {shape}, got shape {tuple(t.shape)}")
    if any(s == 0 for s in t.shape):
        raise InputError(f"{name}: is empty (shape {tuple(t.shape)})")
    if check_finite:
        _check_finite(t, name)
    return t


def as_logits(x: TensorLike, name: str = "logits") -> torch.Tensor:
    """(N, C) finite floating logits."""
    return as_float_matrix(x, name)


def as_probs(x: TensorLike, name: str = "probs", *, atol: float = 1e-3) -> torch.Tensor:
    """(N, C) probabilities: finite, in [0, 1], rows summing to 1 within ``atol``."""
    t = as_float_matrix(x, name, check_finite=False)
    for start in range(0, t.shape[0], _CHUNK_ROWS):
        block = t[start : start + _CHUNK_ROWS]
        rows = block.sum(dim=1)
        if not torch.isfinite(rows).all():
            _raise_non_finite(block, start, name)
        lo, hi = torch.aminmax(block)
        if lo < 0 or hi > 1:
            raise InputError(f"{name}: probabilities must lie in [0, 1] (were logits passed as probabilities?)")
        dev = (rows - 1).abs()
        if dev.max() > atol:
            row = start + int(dev.argmax())
            raise InputError(
                f"{name}: row {row} sums to {float(rows[row - start]):.6g}, not 1 (were logits passed as "
                "probabilities?)"
            )
    return t


def as_labels(
    y: TensorLike, name: str = "labels", *, n: int | None = None, num_classes: int | None = None
) -> torch.Tensor:
    """(N,) int64 class indices in ``[0, num_classes)``; ``N == n`` when given."""
    t = _tensor(y, name)
    if t.ndim != 1:
        raise InputError(f"{name}: must be 1-D (N,), got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise InputError(f"{name}: is empty")
    if t.dtype == torch.bool or torch.is_floating_point(t) or torch.is_complex(t):
        raise InputError(f"{name}: must be integer class indices, got {t.dtype}")
    t = t.to(torch.int64)
    if n is not None and t.shape[0] != n:
        raise InputError(f"{name}: has N={t.shape[0]} but the predictions have N={n}")
    lo, hi = int(t.min()), int(t.max())
    if lo < 0 or (num_classes is not None and hi >= num_classes):
        limit = f"[0, {num_classes})" if num_classes is not None else ">= 0"
        raise InputError(f"{name}: values must be in {limit}, found range [{lo}, {hi}]")
    return t


def as_scores(x: TensorLike, name: str, *, n: int | None = None) -> torch.Tensor:
    """(N,) finite floating scores (e.g. a confidence); ``N == n`` when given."""
    t = _tensor(x, name)
    if t.ndim != 1:
        raise InputError(f"{name}: must be 1-D (N,), got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise InputError(f"{name}: is empty")
    if t.dtype == torch.bool or torch.is_complex(t):
        raise InputError(f"{name}: must be real numbers, got {t.dtype}")
    if n is not None and t.shape[0] != n:
        raise InputError(f"{name}: has N={t.shape[0]} but the predictions have N={n}")
    t = t.to(torch.float64)
    _check_finite(t, name)
    return t


def check_same_shape(a: torch.Tensor, b: torch.Tensor, name_a: str, name_b: str) -> None:
    """Raise unless ``a`` and ``b`` have identical shapes (no broadcasting)."""
    if a.shape != b.shape:
        what = "number of samples N" if a.shape[:1] != b.shape[:1] else "number of classes C"
        raise InputError(f"{name_a} has shape {tuple(a.shape)} but {name_b} has {tuple(b.shape)}: different {what}")


def check_choice(value: str, name: str, choices: Collection[str]) -> str:
    """Raise unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise InputError(f"{name}: unknown value {value!r}; choose one of {sorted(choices)}")
    return value
