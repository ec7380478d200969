"""Macro F1, the one definition in the package: of the metrics (:mod:`benchmark.core.metrics`, per bootstrap weighting),
of the group metrics (:mod:`benchmark.core.groups`, per group) and of model selection by validation macro F1
(:func:`benchmark.models.train.selection_score`, a recipe's ``select_by: macro_f1``). Pure torch.

Per group ``k`` and class ``c`` (one group: every sample): ``TP_kc`` = #{i in k: yhat_i = y_i = c},
``T_kc`` = #{i in k: y_i = c}, ``P_kc`` = #{i in k: yhat_i = c}; ``F1_kc = 2 TP_kc / (T_kc + P_kc)``, averaged over
the classes present: in ``y`` or ``yhat`` (``present="union"``, scikit-learn ``f1_score(average="macro")``) or in
``y`` only (``present="true"``, the WILDS convention ``labels=unique(y_true)``). Its own module so that training,
which selects by it, depends on this definition and not on the rest of the metrics.
"""

from __future__ import annotations

import torch

from benchmark.core.validation import TensorLike, as_labels, check_choice


def macro_f1_table(tp: torch.Tensor, true: torch.Tensor, predicted: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Macro F1 of each row of (R, C) per-class counts: rows are weightings of the samples (the
    bootstrap) or groups (:mod:`benchmark.core.groups`); the one definition of macro F1 in the package.

    ``tp`` = #{yhat = y = c}, ``true`` = #{y = c}, ``predicted`` = #{yhat = c} (weighted counts
    allowed). ``F1_c = 2 TP_c / (T_c + P_c)``, averaged over the classes with ``T_c + P_c > 0``
    (scikit-learn ``f1_score(average="macro")``: ``macro_f1``) and over those with ``T_c > 0``
    (WILDS' ``labels=unique(y)``: ``macro_f1_wilds``). Returns both, float64 (R,), NaN where
    no class counts.
    """
    tp, true, predicted = tp.to(torch.float64), true.to(torch.float64), predicted.to(torch.float64)
    denom = true + predicted
    f1 = torch.where(denom > 0, 2 * tp / denom.clamp_min(1e-300), torch.zeros_like(denom))
    return f1.sum(1) / (denom > 0).sum(1), f1.sum(1) / (true > 0).sum(1)


PRESENT = ("union", "true")


def labelled(
    pred: TensorLike, labels: TensorLike, groups: TensorLike | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``pred``, ``labels`` and ``groups`` (None: one group) checked as (N,) integer tensors."""
    y = as_labels(labels, "labels")
    yhat = as_labels(pred, "pred", n=y.shape[0])
    if groups is None:
        return yhat, y, torch.zeros_like(y)
    return yhat, y, as_labels(groups, "groups", n=y.shape[0])


def class_counts(
    yhat: torch.Tensor, y: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(TP, T, P) as (G, C) int64 tables and n (G,)."""
    n_groups, n_cls = int(g.max()) + 1, int(torch.maximum(y.max(), yhat.max())) + 1
    size = n_groups * n_cls
    key_true, key_pred = g * n_cls + y, g * n_cls + yhat
    true = torch.bincount(key_true, minlength=size).view(n_groups, n_cls)
    predicted = torch.bincount(key_pred, minlength=size).view(n_groups, n_cls)
    tp = torch.bincount(key_true[yhat == y], minlength=size).view(n_groups, n_cls)
    return tp, true, predicted, torch.bincount(g, minlength=n_groups)


def macro_f1_of(tp: torch.Tensor, true: torch.Tensor, predicted: torch.Tensor, present: str) -> torch.Tensor:
    """Per-row macro F1 of (G, C) counts over the classes ``present`` says."""
    union, wilds = macro_f1_table(tp, true, predicted)
    return union if present == "union" else wilds


def macro_f1(pred: TensorLike, labels: TensorLike, *, present: str = "union") -> float:
    """Macro F1 of predicted classes ``pred`` against ``labels`` over all samples (one group)."""
    check_choice(present, "present", PRESENT)
    tp, true, predicted, _ = class_counts(*labelled(pred, labels, None))
    return float(macro_f1_of(tp, true, predicted, present)[0])
