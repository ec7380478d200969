"""Evaluation units: a single model or a duo, on every split, as tidy rows.

Pure functions on logits tensors (no I/O; memory-mapped tensors work: single
models and duos read their logits in row blocks and never hold an (N, C)
probability matrix, see :mod:`benchmark.core.streaming`). The evaluate stage
calls these per unit, caches each unit's rows and assembles the results table.

``logits`` arguments map split name -> (logits (N, C), labels (N,)). The
``val`` split fits temperatures, ``ood`` (labels -1) is scored against
``test`` with the OOD metrics, every other split gets the full metric set.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import isfinite

import torch

from benchmark.core.combine import Prediction, duo_predicts_base, duo_weights, ensemble_prediction, single_prediction
from benchmark.core.evaluate import evaluate, evaluate_stats, paired_difference_stats
from benchmark.core.groups import group_summary
from benchmark.core.members import member_uncertainty
from benchmark.core.ood import ood_evaluate
from benchmark.core.streaming import mixture_terms, terms_stats
from benchmark.core.temperature import fit_duo, fit_temperature
from benchmark.core.validation import InputError
from benchmark.methods.duo import VARIANTS as DUO_VARIANTS  # the (method, confidence) variants reported for every pair

VAL, TEST, OOD = "val", "test", "ood"
# confidence name -> member_uncertainty score (negated: higher = more confident)
MEMBER_CONFIDENCES = {"mutual_info": "mutual_information", "entropy": "predictive_entropy", "agreement": "disagreement"}
GROUP_METRICS = ("mean_group_accuracy", "worst_group_accuracy", "mean_group_macro_f1", "worst_group_macro_f1",
                 "mean_group_macro_f1_wilds", "worst_group_macro_f1_wilds")


@dataclass(frozen=True)
class EvalConfig:
    """params.yaml ``evaluate`` (plus the suite name)."""

    suite: str
    fits: tuple[str, ...] = ("converged", "paper-exact")
    n_bootstrap: int = 1000
    bootstrap_splits: tuple[str, ...] = (TEST,)
    bootstrap_level: float = 0.95
    seed: int = 0
    ece_bins: int = 15
    sac_threshold: float = 0.98
    # split -> (N,) group id per sample (iWildCam locations): adds group-aware rows. Derived from
    # the data index, which the logits' ids already identify, so it is not part of the settings hash.
    groups: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_params(cls, suite: str, raw: dict) -> "EvalConfig":
        keys = set(cls.__dataclass_fields__) - {"suite"}
        kw = {k: raw[k] for k in keys if k in raw}
        for k in ("fits", "bootstrap_splits"):
            if k in kw:
                kw[k] = tuple(kw[k])
        return cls(suite=suite, **kw)

    @classmethod
    def from_typed(cls, suite: str, ev) -> "EvalConfig":
        """From the typed ``evaluate`` block (:class:`benchmark.stages.params_config.EvaluateParams`)."""
        return cls(suite=suite, fits=tuple(ev.fits), n_bootstrap=ev.n_bootstrap, bootstrap_splits=tuple(ev.bootstrap_splits),
                   bootstrap_level=ev.bootstrap_level, seed=ev.seed, ece_bins=ev.ece_bins, sac_threshold=ev.sac_threshold)

    def settings(self) -> dict:
        """The knobs that change results (what the unit cache is keyed on)."""
        return {k: v for k, v in self.__dict__.items() if k != "groups"}

    def n_boot(self, split: str) -> int:
        return self.n_bootstrap if split in self.bootstrap_splits else 0


def _eval_splits(logits: dict) -> list[str]:
    if VAL not in logits or TEST not in logits:
        raise ValueError(f"evaluation needs 'val' and 'test' splits, got {sorted(logits)}")
    return [s for s in logits if s not in (VAL, OOD)]


def _metric_rows(cfg: EvalConfig, ident: dict, split: str, res: dict, prediction: torch.Tensor, labels: torch.Tensor) -> list[dict]:
    n = int(labels.shape[0])
    if split in cfg.groups:
        # one convention per name on every split: *_macro_f1 as scikit-learn's default (classes in
        # labels or predictions), *_macro_f1_wilds as WILDS' F1 (classes in the labels only)
        summary = group_summary(prediction, labels, cfg.groups[split], present="union")
        wilds = group_summary(prediction, labels, cfg.groups[split], present="true")
        summary |= {f"{m}_wilds": wilds[m] for m in ("mean_group_macro_f1", "worst_group_macro_f1")}
        res = dict(res, **{m: (summary[m], float("nan"), float("nan")) for m in GROUP_METRICS})
    return [dict(ident, suite=cfg.suite, split=split, metric=m, value=v, ci_low=lo, ci_high=hi, n=n)
            for m, (v, lo, hi) in res.items()]


def _rows(cfg: EvalConfig, ident: dict, split: str, pred: Prediction, labels: torch.Tensor) -> list[dict]:
    res = evaluate(pred, labels, n_bootstrap=cfg.n_boot(split), seed=cfg.seed, level=cfg.bootstrap_level,
                   ece_bins=cfg.ece_bins, sac_threshold=cfg.sac_threshold)
    return _metric_rows(cfg, ident, split, res, pred.prediction, labels)


def _ood_rows(cfg: EvalConfig, ident: dict, conf_test: torch.Tensor, conf_ood: torch.Tensor) -> list[dict]:
    res = ood_evaluate(conf_test, conf_ood, n_bootstrap=cfg.n_boot(OOD), seed=cfg.seed, level=cfg.bootstrap_level)
    return [dict(ident, suite=cfg.suite, split=OOD, metric=m, value=v, ci_low=lo, ci_high=hi, n=int(conf_ood.shape[0]))
            for m, (v, lo, hi) in res.items()]


def method_rows(cfg: EvalConfig, ident: dict, labels: dict, predict) -> list[dict]:
    """Rows of one method on every split: ``predict(split) -> Prediction``, ``labels[split]`` the labels."""
    preds = {s: predict(s) for s in _eval_splits(labels)}
    rows = []
    for s, p in preds.items():
        rows += _rows(cfg, ident, s, p, labels[s])
    if OOD in labels:
        rows += _ood_rows(cfg, ident, preds[TEST].confidence, predict(OOD).confidence)
    return rows


def _labels(logits: dict) -> dict:
    return {s: y for s, (_, y) in logits.items()}


@dataclass(frozen=True)
class _Variant:
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
        if (name, fit) not in self._temperature:
            self._temperature[name, fit] = single_temperature(logits, fit)
        return self._temperature[name, fit]


def _inverse(t: float, name: str) -> float:
    """The mixture weight ``1 / T`` of a temperature, which must be finite and non-zero."""
    if not isfinite(t) or t == 0:
        raise InputError(f"{name}: must be a finite non-zero number, got {t!r}")
    return 1.0 / t


def _mixture_rows(cfg: EvalConfig, members: list[dict], weights: list[list[float]], variants: list[_Variant], *,
                  keep: tuple[int, ...] = (), release=None) -> tuple[list[list[dict]], dict]:
    """Rows of each variant of the mixtures ``softmax(sum_j weights[k][j] z_j)`` of ``members`` on every split.

    Returns the rows per variant and the sample stats of the variants ``keep``
    on the evaluated splits, ``{(variant, split): SampleStats}``. ``release``:
    see :func:`~benchmark.core.streaming.mixture_terms`.
    """
    labels = _labels(members[0])
    base = any(v.confidence == "published" or v.prediction == "base" for v in variants)
    rows: list[list[dict]] = [[] for _ in variants]
    conf_test, kept = {}, {}
    for split in _eval_splits(labels):
        y = labels[split]
        terms, bp = mixture_terms([m[split][0] for m in members], weights, y, base_conf=base, release=release)
        for i, v in enumerate(variants):
            t = terms[v.mixture]
            conf = t.base_conf if v.confidence == "published" else None
            pred = bp if v.prediction == "base" else None
            stats = terms_stats(t, y, num_classes=members[0][split][0].shape[1], confidence=conf, prediction=pred, ece_bins=cfg.ece_bins)
            res = evaluate_stats(stats, n_bootstrap=cfg.n_boot(split), seed=cfg.seed, level=cfg.bootstrap_level, sac_threshold=cfg.sac_threshold)
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


def single_unit(cfg: EvalConfig, name: str, logits: dict, *, memo: ModelMemo | None = None, release=None) -> list[dict]:
    """Rows of one temperature-scaled model, for every fit mode and split (``release``: see :func:`duo_unit`)."""
    memo = memo or ModelMemo()
    rows = []
    for fit in cfg.fits:
        t = memo.temperature(name, logits, fit)
        ident = dict(family="single", method="ts", base=name, sidekick="", members=name, fit=fit, confidence="max",
                     temperature_base=t, temperature_side=float("nan"), weight_base=1.0 / t, weight_side=0.0)
        rows += _mixture_rows(cfg, [logits], [[_inverse(t, "temperature")]], [_Variant(ident, 0, "max", "top")], release=release)[0][0]
    return rows


def ensemble_unit(cfg: EvalConfig, members: list[str], member_logits: list[dict], *, family: str = "deep_ensemble",
                  method: str | None = None) -> list[dict]:
    """Rows of an ensemble of cached models: mean of softmaxes and (``_logit``) softmax of mean logits.

    No temperature is fitted (``fit = "none"``), as for the published deep-ensemble baselines.
    """
    nan = float("nan")
    name = method or f"m{len(members)}"
    rows = []
    for mode, suffix in (("probs", ""), ("logits", "_logit")):
        ident = dict(family=family, method=name + suffix, base=members[0], sidekick="", members="+".join(members),
                     fit="none", confidence="max", temperature_base=nan, temperature_side=nan, weight_base=nan, weight_side=nan)
        rows += method_rows(cfg, ident, _labels(member_logits[0]),
                            lambda s, mode=mode: ensemble_prediction([m[s][0] for m in member_logits], mode=mode))
    return rows


def multi_member_unit(cfg: EvalConfig, ident: dict, logits: dict) -> list[dict]:
    """Rows of a method whose stage wrote (N, C) logits or (M, N, C) member logits (SVE, MC dropout, ...).

    The prediction is the mean of member softmaxes. With two members or more the
    rows are repeated for each member-based confidence of :data:`MEMBER_CONFIDENCES`
    (low mutual information, entropy or disagreement = confident).
    """
    nan = float("nan")
    ident = dict(dict(sidekick="", fit="none", confidence="max", temperature_base=nan, temperature_side=nan,
                      weight_base=nan, weight_side=nan), **ident)

    def predict(s, score=None):
        z = logits[s][0]
        if z.ndim != 3:
            return single_prediction(z)
        p = ensemble_prediction(z, mode="probs")
        return p if score is None else Prediction(p.probs, p.prediction, -member_uncertainty(z)[score].to(p.probs.dtype))

    rows = method_rows(cfg, ident, _labels(logits), predict)
    if logits[VAL][0].ndim == 3 and logits[VAL][0].shape[0] >= 2:
        for conf, score in MEMBER_CONFIDENCES.items():
            rows += method_rows(cfg, dict(ident, confidence=conf), _labels(logits), lambda s, k=score: predict(s, k))
    return rows


def single_temperature(logits: dict, fit: str) -> float:
    """Temperature of one model fitted on its ``val`` logits."""
    zv, yv = logits[VAL]
    return fit_temperature(zv, yv, mode=fit).temperature


def duo_unit(cfg: EvalConfig, base: str, side: str, logits_b: dict, logits_s: dict, *,
             memo: ModelMemo | None = None, release=None) -> tuple[list[dict], list[dict]]:
    """Rows of every duo variant of (base, side), and paired differences duo - base.

    The paired differences (weighted duo, same fit and ``max`` confidence, minus
    the temperature-scaled base) are computed on the bootstrap splits. ``memo``
    holds each member's own temperature (the unweighted variant); the evaluate
    stage shares one across all units of a worker. ``release(block)`` is called
    with each block of logits rows once used (see
    :func:`~benchmark.core.streaming.mixture_terms`).
    """
    for s in logits_b:
        if s not in logits_s:
            raise ValueError(f"split {s!r} has logits for {base!r} but not for {side!r}")
    memo = memo or ModelMemo()
    rows, paired = [], []
    (zb, yv), (zs, _) = logits_b[VAL], logits_s[VAL]
    weighted = DUO_VARIANTS.index(("weighted", "max"))
    boot = [s for s in _eval_splits(logits_b) if cfg.n_boot(s)]
    for fit in cfg.fits:
        duo = fit_duo(zb, zs, yv, mode=fit)
        singles = (memo.temperature(base, logits_b, fit), memo.temperature(side, logits_s, fit))
        variants = []
        for method, conf in DUO_VARIANTS:
            tb, ts = (duo.t_base, duo.t_side) if method != "unweighted" else singles
            ident = dict(family="duo", method=method, base=base, sidekick=side, members=f"{base}+{side}", fit=fit,
                         confidence=conf, temperature_base=tb, temperature_side=ts,
                         weight_base=1.0 / (2 * tb), weight_side=1.0 / (2 * ts))
            variants.append(_Variant(ident, int(method == "unweighted"), conf, "base" if duo_predicts_base(method) else "top"))
        weights = [duo_weights("weighted", fit=duo), duo_weights("unweighted", single_temperatures=singles)]
        unit_rows, kept = _mixture_rows(cfg, [logits_b, logits_s], weights, variants, keep=(weighted,) if boot else (),
                                        release=release)
        rows += [r for variant_rows in unit_rows for r in variant_rows]
        for s in boot:  # paired bootstrap: weighted duo vs the temperature-scaled base, same resamples
            z, y = logits_b[s]
            (terms,), _ = mixture_terms([z], [[_inverse(singles[0], "temperature")]], y, release=release)
            diff = paired_difference_stats(kept[weighted, s], terms_stats(terms, y, num_classes=z.shape[1], ece_bins=cfg.ece_bins),
                                           n_bootstrap=cfg.n_boot(s), seed=cfg.seed, level=cfg.bootstrap_level,
                                           sac_threshold=cfg.sac_threshold)
            paired += [dict(suite=cfg.suite, split=s, base=base, sidekick=side, fit=fit, method="weighted", metric=m, **d)
                       for m, d in diff.items()]
    return rows, paired
