"""The rows every method's predictions become: metrics per split as tidy rows, the shared kernel of evaluation.

Pure functions on logits tensors (no I/O; memory-mapped tensors work: single
models and duos read their logits in row blocks and never hold an (N, C)
probability matrix, see :mod:`benchmark.core.streaming`). The methods evaluated per
unit (:mod:`benchmark.methods.single`, :mod:`~benchmark.methods.duo`,
:mod:`~benchmark.methods.deep_ensemble`) build their rows from these helpers; a stored
method output (any method with a stage of its own) is evaluated by :func:`output_rows`.
The evaluate stage calls them per unit, caches each unit's rows and assembles the results table.

``logits`` arguments map split name -> (logits (N, C), labels (N,)). The
``val`` split fits temperatures, ``ood`` (labels -1) is scored against
``test`` with the OOD metrics, every other split gets the full metric set.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import isfinite

import torch

from benchmark.config.evaluate import EvalConfig
from benchmark.core.combine import Prediction, ensemble_prediction, single_prediction
from benchmark.core.evaluate import evaluate, evaluate_stats
from benchmark.core.groups import group_summary
from benchmark.core.members import member_uncertainty
from benchmark.core.ood import ood_evaluate
from benchmark.core.streaming import mixture_terms, terms_stats
from benchmark.core.temperature import fit_temperature
from benchmark.core.validation import InputError

VAL, TEST, OOD = "val", "test", "ood"
# confidence name -> member_uncertainty score (negated: higher = more confident)
MEMBER_CONFIDENCES = {"mutual_info": "mutual_information", "entropy": "predictive_entropy", "agreement": "disagreement"}
GROUP_METRICS = (
    "mean_group_accuracy",
    "worst_group_accuracy",
    "mean_group_macro_f1",
    "worst_group_macro_f1",
    "mean_group_macro_f1_wilds",
    "worst_group_macro_f1_wilds",
)


def eval_splits(logits: dict) -> list[str]:
    """The splits a unit's rows cover: every split of ``logits`` but val (and OOD); ``ValueError`` without val and
    test."""
    if VAL not in logits or TEST not in logits:
        raise ValueError(f"evaluation needs 'val' and 'test' splits, got {sorted(logits)}")
    return [s for s in logits if s not in (VAL, OOD)]


def _metric_rows(
    cfg: EvalConfig, ident: dict, split: str, res: dict, prediction: torch.Tensor, labels: torch.Tensor
) -> list[dict]:
    n = int(labels.shape[0])
    if split in cfg.groups:
        # one convention per name on every split: *_macro_f1 as scikit-learn's default (classes in
        # labels or predictions), *_macro_f1_wilds as WILDS' F1 (classes in the labels only)
        summary = group_summary(prediction, labels, cfg.groups[split], present="union")
        wilds = group_summary(prediction, labels, cfg.groups[split], present="true")
        summary |= {f"{m}_wilds": wilds[m] for m in ("mean_group_macro_f1", "worst_group_macro_f1")}
        res = dict(res, **{m: (summary[m], float("nan"), float("nan")) for m in GROUP_METRICS})
    return [
        dict(ident, suite=cfg.suite, split=split, metric=m, value=v, ci_low=lo, ci_high=hi, n=n)
        for m, (v, lo, hi) in res.items()
    ]


def _rows(cfg: EvalConfig, ident: dict, split: str, pred: Prediction, labels: torch.Tensor) -> list[dict]:
    res = evaluate(
        pred,
        labels,
        n_bootstrap=cfg.n_boot(split),
        seed=cfg.seed,
        level=cfg.bootstrap_level,
        ece_bins=cfg.ece_bins,
        sac_threshold=cfg.sac_threshold,
    )
    return _metric_rows(cfg, ident, split, res, pred.prediction, labels)


def _ood_rows(cfg: EvalConfig, ident: dict, conf_test: torch.Tensor, conf_ood: torch.Tensor) -> list[dict]:
    res = ood_evaluate(conf_test, conf_ood, n_bootstrap=cfg.n_boot(OOD), seed=cfg.seed, level=cfg.bootstrap_level)
    return [
        dict(ident, suite=cfg.suite, split=OOD, metric=m, value=v, ci_low=lo, ci_high=hi, n=int(conf_ood.shape[0]))
        for m, (v, lo, hi) in res.items()
    ]


def method_rows(cfg: EvalConfig, ident: dict, labels: dict, predict) -> list[dict]:
    """Rows of one method on every split: ``predict(split) -> Prediction``, ``labels[split]`` the labels."""
    preds = {s: predict(s) for s in eval_splits(labels)}
    rows = []
    for s, p in preds.items():
        rows += _rows(cfg, ident, s, p, labels[s])
    if OOD in labels:
        rows += _ood_rows(cfg, ident, preds[TEST].confidence, predict(OOD).confidence)
    return rows


def split_labels(logits: dict) -> dict:
    """Split -> the labels of ``logits`` (split -> (logits, labels))."""
    return {s: y for s, (_, y) in logits.items()}


@dataclass(frozen=True)
class Variant:
    """One row set of a softmax mixture: which mixture, which confidence and which prediction."""

    ident: dict
    mixture: int  # index into the mixtures' weights
    confidence: str  # "max": max_c p; "published": p[argmax_c z_base]
    prediction: str  # "top": argmax_c p; "base": argmax_c z_base


class ModelMemo:
    """Each model's own temperature per fit mode, fitted once for all its units (single rows,
    unweighted duo); keyed by the model's name, so one memo must see one content per name."""

    def __init__(self):
        self._temperature: dict[tuple[str, str], float] = {}

    def temperature(self, name: str, logits: dict, fit: str) -> float:
        """Model ``name``'s temperature fit on its validation logits with ``fit``, computed once per unit batch."""
        if (name, fit) not in self._temperature:
            self._temperature[name, fit] = single_temperature(logits, fit)
        return self._temperature[name, fit]


def inverse(t: float, name: str) -> float:
    """The mixture weight ``1 / T`` of a temperature, which must be finite and non-zero."""
    if not isfinite(t) or t == 0:
        raise InputError(f"{name}: must be a finite non-zero number, got {t!r}")
    return 1.0 / t


def mixture_rows(
    cfg: EvalConfig,
    members: list[dict],
    weights: list[list[float]],
    variants: list[Variant],
    *,
    keep: tuple[int, ...] = (),
    release=None,
) -> tuple[list[list[dict]], dict]:
    """Rows of each variant of the mixtures ``softmax(sum_j weights[k][j] z_j)`` of ``members`` on every split.

    Returns the rows per variant and the sample stats of the variants ``keep``
    on the evaluated splits, ``{(variant, split): SampleStats}``. ``release``:
    see :func:`~benchmark.core.streaming.mixture_terms`.
    """
    labels = split_labels(members[0])
    base = any(v.confidence == "published" or v.prediction == "base" for v in variants)
    rows: list[list[dict]] = [[] for _ in variants]
    conf_test, kept = {}, {}
    for split in eval_splits(labels):
        y = labels[split]
        terms, bp = mixture_terms([m[split][0] for m in members], weights, y, base_conf=base, release=release)
        for i, v in enumerate(variants):
            t = terms[v.mixture]
            conf = t.base_conf if v.confidence == "published" else None
            pred = bp if v.prediction == "base" else None
            stats = terms_stats(
                t, y, num_classes=members[0][split][0].shape[1], confidence=conf, prediction=pred, ece_bins=cfg.ece_bins
            )
            res = evaluate_stats(
                stats,
                n_bootstrap=cfg.n_boot(split),
                seed=cfg.seed,
                level=cfg.bootstrap_level,
                sac_threshold=cfg.sac_threshold,
            )
            rows[i] += _metric_rows(cfg, v.ident, split, res, t.top if pred is None else pred, y)
            if split == TEST:
                conf_test[i] = t.top_conf if conf is None else conf
            if i in keep:
                kept[i, split] = stats
    if OOD in labels:
        terms, _ = mixture_terms([m[OOD][0] for m in members], weights, base_conf=base, release=release)
        for i, v in enumerate(variants):
            t = terms[v.mixture]
            rows[i] += _ood_rows(cfg, v.ident, conf_test[i], t.base_conf if v.confidence == "published" else t.top_conf)
    return rows, kept


def multi_member_unit(cfg: EvalConfig, ident: dict, logits: dict) -> list[dict]:
    """Rows of a method whose stage wrote (N, C) logits or (M, N, C) member logits (SVE, MC dropout, ...).

    The prediction is the mean of member softmaxes. With two members or more the
    rows are repeated for each member-based confidence of :data:`MEMBER_CONFIDENCES`
    (low mutual information, entropy or disagreement = confident).
    """
    nan = float("nan")
    ident = dict(
        dict(
            sidekick="",
            fit="none",
            confidence="max",
            temperature_base=nan,
            temperature_side=nan,
            weight_base=nan,
            weight_side=nan,
        ),
        **ident,
    )

    def predict(s, score=None):
        z = logits[s][0]
        if z.ndim != 3:
            return single_prediction(z)
        p = ensemble_prediction(z, mode="probs")
        return (
            p if score is None else Prediction(p.probs, p.prediction, -member_uncertainty(z)[score].to(p.probs.dtype))
        )

    rows = method_rows(cfg, ident, split_labels(logits), predict)
    if logits[VAL][0].ndim == 3 and logits[VAL][0].shape[0] >= 2:
        for conf, score in MEMBER_CONFIDENCES.items():
            rows += method_rows(
                cfg, dict(ident, confidence=conf), split_labels(logits), lambda s, k=score: predict(s, k)
            )
    return rows


def single_temperature(logits: dict, fit: str) -> float:
    """Temperature of one model fitted on its ``val`` logits."""
    zv, yv = logits[VAL]
    return fit_temperature(zv, yv, mode=fit).temperature


def output_ident(name: str, info: dict) -> dict:
    """Rows of a method output name the zoo models it was built from (soup ingredients, or its base)."""
    ingredients = info.get("ingredients")
    members = "+".join(ingredients) if isinstance(ingredients, list) and ingredients else info["base"]
    return {"family": info["family"], "method": info["method"], "base": info["base"], "members": members}


def output_rows(
    cfg: EvalConfig, names: tuple, logits: list, *, info: dict, memo=None, release=None
) -> tuple[list, list]:
    """The unit rows of a stored method output ``names[0]`` (``info``: its ``cost.json``; no paired differences)."""
    return multi_member_unit(cfg, output_ident(names[0], info), logits[0]), []
