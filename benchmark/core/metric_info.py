"""What each reported metric means and which direction is better.

One place for this knowledge: the results tables, the Pareto plots and the
leaderboard all read it from here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricInfo:
    name: str
    label: str
    higher_is_better: bool
    description: str


METRICS: dict[str, MetricInfo] = {
    m.name: m
    for m in [
        MetricInfo("accuracy", "Accuracy", True, "Fraction of correct top-1 predictions."),
        MetricInfo(
            "macro_f1",
            "Macro F1",
            True,
            "Unweighted mean of the per-class F1 over the classes present in the labels or the predictions "
            "(scikit-learn's default, as in the Asymmetric Duos code).",
        ),
        MetricInfo(
            "macro_f1_wilds",
            "Macro F1 (WILDS)",
            True,
            "Unweighted mean of the per-class F1 over the classes present in the labels only (WILDS' F1 metric, "
            "labels=unique(y_true)).",
        ),
        MetricInfo(
            "brier",
            "Brier",
            False,
            "Mean over samples of the squared error between the probability vector and the one-hot label, summed "
            "over classes (0..2).",
        ),
        MetricInfo("nll", "NLL", False, "Mean negative log-likelihood of the true class."),
        MetricInfo(
            "ece",
            "ECE",
            False,
            "Expected calibration error: 15 equal-width bins of top-label confidence, |accuracy - confidence| "
            "weighted by bin size.",
        ),
        MetricInfo(
            "auroc",
            "AUROC",
            True,
            "Area under the ROC curve of the confidence separating correct from wrong predictions.",
        ),
        MetricInfo(
            "aurc",
            "AURC",
            False,
            "Area under the risk-coverage curve: mean over k of the error rate among the k most confident samples.",
        ),
        MetricInfo(
            "aurc_trapezoid",
            "AURC (trapezoid)",
            False,
            "AURC as TorchUncertainty defines it: trapezoid over coverage, divided by (1 - 1/N).",
        ),
        MetricInfo("eaurc", "E-AURC", False, "AURC minus the AURC of an oracle ordering (all errors ranked last)."),
        MetricInfo(
            "augrc",
            "AUGRC",
            False,
            "Area under the generalised risk-coverage curve (error rate times coverage), Traub et al. 2024.",
        ),
        MetricInfo(
            "sac98", "SAC@98", True, "Largest coverage at which the selective accuracy is at least 98% (0 if none)."
        ),
        MetricInfo(
            "mean_group_accuracy",
            "Mean group acc.",
            True,
            "Accuracy averaged over groups (e.g. iWildCam camera locations).",
        ),
        MetricInfo("worst_group_accuracy", "Worst group acc.", True, "Lowest per-group accuracy."),
        MetricInfo(
            "mean_group_macro_f1",
            "Mean group F1",
            True,
            "Macro F1 (scikit-learn's default classes, as macro_f1) of each group, averaged over groups.",
        ),
        MetricInfo(
            "worst_group_macro_f1",
            "Worst group F1",
            True,
            "Lowest per-group macro F1 (scikit-learn's default classes, as macro_f1).",
        ),
        MetricInfo(
            "mean_group_macro_f1_wilds",
            "Mean group F1 (WILDS)",
            True,
            "Macro F1 over each group's true classes (as macro_f1_wilds), averaged over groups.",
        ),
        MetricInfo(
            "worst_group_macro_f1_wilds",
            "Worst group F1 (WILDS)",
            True,
            "Lowest per-group macro F1 over the group's true classes (as macro_f1_wilds).",
        ),
        MetricInfo(
            "ood_auroc",
            "OOD AUROC",
            True,
            "AUROC of the confidence separating in-distribution from out-of-distribution samples.",
        ),
        MetricInfo("ood_aupr", "OOD AUPR", True, "Average precision of detecting OOD samples by low confidence."),
        MetricInfo(
            "ood_fpr95",
            "OOD FPR@95TPR",
            False,
            "Fraction of OOD samples accepted when 95% of in-distribution samples are accepted.",
        ),
    ]
}


def higher_is_better(metric: str) -> bool:
    """Direction of ``metric``; raises ``KeyError`` naming the metric if unknown."""
    try:
        return METRICS[metric].higher_is_better
    except KeyError:
        raise KeyError(f"unknown metric {metric!r}; known: {sorted(METRICS)}") from None
