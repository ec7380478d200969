"""Group-aware classification metrics (e.g. per camera trap on iWildCam), pure torch.

Inputs are predicted classes ``yhat`` (N,), true classes ``y`` (N,) and group
ids ``g`` (N,) (non-negative integers; group ``k`` is every sample with
``g_i = k``). Per group ``k`` and class ``c``: ``TP_kc`` = #{i in k: yhat_i = y_i = c},
``T_kc`` = #{i in k: y_i = c}, ``P_kc`` = #{i in k: yhat_i = c}; then

* ``accuracy_k = sum_c TP_kc / n_k``
* ``F1_kc = 2 TP_kc / (T_kc + P_kc)`` and ``macro_F1_k`` = mean of ``F1_kc`` over the
  classes present in group ``k``: in ``y`` or ``yhat`` (``present="union"``,
  scikit-learn ``f1_score(average="macro")``, the paper's model selection) or in
  ``y`` only (``present="true"``, the WILDS convention ``labels=unique(y_true)``).
* ``worst group`` = the minimum over groups with at least ``min_count`` samples.

Counting and the F1 itself are :mod:`benchmark.core.f1`'s (``bincount`` over ``k * C + c``, no ``torch_scatter``;
:func:`~benchmark.core.f1.macro_f1_table`, as for the bootstrap).
"""

from __future__ import annotations

import torch

from benchmark.core.f1 import PRESENT, class_counts, labelled, macro_f1, macro_f1_of
from benchmark.core.validation import InputError, TensorLike, check_choice


def group_accuracy(pred: TensorLike, labels: TensorLike, groups: TensorLike) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group accuracy (G,) float64 (NaN for an empty group id) and group sizes (G,) int64, G = max(groups) + 1."""
    yhat, y, g = labelled(pred, labels, groups)
    n = torch.bincount(g)
    correct = torch.bincount(g[yhat == y], minlength=n.numel()).double()
    return torch.where(n > 0, correct / n.clamp_min(1), torch.full_like(correct, float("nan"))), n


def group_macro_f1(
    pred: TensorLike, labels: TensorLike, groups: TensorLike, *, present: str = "union"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group macro F1 (G,) float64 (NaN for an empty group id) and group sizes (G,) int64."""
    check_choice(present, "present", PRESENT)
    tp, true, predicted, n = class_counts(*labelled(pred, labels, groups))
    return macro_f1_of(tp, true, predicted, present), n


def worst_group(values: torch.Tensor, counts: torch.Tensor, *, min_count: int = 1) -> tuple[float, int]:
    """(lowest value, its group id) over the groups with ``counts >= min_count``."""
    v, c = torch.as_tensor(values, dtype=torch.float64), torch.as_tensor(counts)
    if v.shape != c.shape or v.ndim != 1:
        raise InputError(
            f"worst_group: values and counts must be (G,) of the same shape, got {tuple(v.shape)} and {tuple(c.shape)}"
        )
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise InputError(f"worst_group: min_count must be a positive integer, got {min_count!r}")
    keep = c >= min_count
    if not keep.any():
        raise InputError(
            f"worst_group: no group has at least {min_count} samples (largest has {int(c.max()) if c.numel() else 0})"
        )
    masked = torch.where(keep, v, torch.full_like(v, float("inf")))
    k = int(torch.argmin(masked))
    return float(v[k]), k


def group_summary(
    pred: TensorLike, labels: TensorLike, groups: TensorLike, *, min_count: int = 1, present: str = "union"
) -> dict[str, float]:
    """Overall and group-aware scores: accuracy, macro_f1, mean/worst group accuracy and macro F1, n_groups.

    Means and minima are over the groups with at least ``min_count`` samples.
    """
    acc, n = group_accuracy(pred, labels, groups)
    f1, _ = group_macro_f1(pred, labels, groups, present=present)
    keep = n >= min_count
    yhat, y, _ = labelled(pred, labels, groups)
    return {
        "accuracy": float((yhat == y).double().mean()),
        "macro_f1": macro_f1(pred, labels, present=present),
        "mean_group_accuracy": float(acc[keep].mean()) if keep.any() else float("nan"),
        "worst_group_accuracy": worst_group(acc, n, min_count=min_count)[0],
        "mean_group_macro_f1": float(f1[keep].mean()) if keep.any() else float("nan"),
        "worst_group_macro_f1": worst_group(f1, n, min_count=min_count)[0],
        "n_groups": int(keep.sum()),
    }
