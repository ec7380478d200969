"""Evaluation units: a single model or a duo, on every split, as tidy rows.

Pure functions on already-loaded logits (no I/O): the evaluate stage loads
the logits store, calls these per unit, caches each unit's rows and
assembles the results table.

``logits`` arguments map split name -> (logits (N, C), labels (N,)). The
``val`` split fits temperatures, ``ood`` (labels -1) is scored against
``test`` with the OOD metrics, every other split gets the full metric set.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from benchmark.core.combine import Prediction, duo_prediction, ensemble_prediction, single_prediction
from benchmark.core.evaluate import evaluate, paired_difference
from benchmark.core.groups import group_summary
from benchmark.core.members import member_uncertainty
from benchmark.core.ood import ood_evaluate
from benchmark.core.temperature import fit_duo, fit_temperature

VAL, TEST, OOD = "val", "test", "ood"
# confidence name -> member_uncertainty score (negated: higher = more confident)
MEMBER_CONFIDENCES = {"mutual_info": "mutual_information", "entropy": "predictive_entropy", "agreement": "disagreement"}
GROUP_METRICS = ("mean_group_accuracy", "worst_group_accuracy", "mean_group_macro_f1", "worst_group_macro_f1")
# (method, confidence) of the duo variants reported for every pair
DUO_VARIANTS = (("weighted", "max"), ("weighted", "published"), ("unweighted", "max"), ("uq_only", "published"))


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

    def settings(self) -> dict:
        """The knobs that change results (what the unit cache is keyed on)."""
        return {k: v for k, v in self.__dict__.items() if k != "groups"}

    def n_boot(self, split: str) -> int:
        return self.n_bootstrap if split in self.bootstrap_splits else 0


def _eval_splits(logits: dict) -> list[str]:
    if VAL not in logits or TEST not in logits:
        raise ValueError(f"evaluation needs 'val' and 'test' splits, got {sorted(logits)}")
    return [s for s in logits if s not in (VAL, OOD)]


def _rows(cfg: EvalConfig, ident: dict, split: str, pred: Prediction, labels: torch.Tensor) -> list[dict]:
    res = evaluate(pred, labels, n_bootstrap=cfg.n_boot(split), seed=cfg.seed, level=cfg.bootstrap_level,
                   ece_bins=cfg.ece_bins, sac_threshold=cfg.sac_threshold)
    n = int(labels.shape[0])
    if split in cfg.groups:
        # WILDS convention for groups unseen in training (OOD split): macro F1 over the true classes only
        present = "true" if split != TEST else "union"
        summary = group_summary(pred.prediction, labels, cfg.groups[split], present=present)
        res = dict(res, **{m: (summary[m], float("nan"), float("nan")) for m in GROUP_METRICS})
    return [dict(ident, suite=cfg.suite, split=split, metric=m, value=v, ci_low=lo, ci_high=hi, n=n)
            for m, (v, lo, hi) in res.items()]


def _ood_rows(cfg: EvalConfig, ident: dict, conf_test: torch.Tensor, conf_ood: torch.Tensor) -> list[dict]:
    res = ood_evaluate(conf_test, conf_ood, n_bootstrap=cfg.n_boot(OOD), seed=cfg.seed, level=cfg.bootstrap_level)
    return [dict(ident, suite=cfg.suite, split=OOD, metric=m, value=v, ci_low=lo, ci_high=hi, n=int(conf_ood.shape[0]))
            for m, (v, lo, hi) in res.items()]


def method_rows(cfg: EvalConfig, ident: dict, labels: dict, predict) -> tuple[list[dict], dict]:
    """Rows of one method on every split: ``predict(split) -> Prediction``, ``labels[split]`` the labels.

    Returns the rows and the predictions of the evaluated splits (for paired comparisons).
    """
    preds = {s: predict(s) for s in _eval_splits(labels)}
    rows = []
    for s, p in preds.items():
        rows += _rows(cfg, ident, s, p, labels[s])
    if OOD in labels:
        rows += _ood_rows(cfg, ident, preds[TEST].confidence, predict(OOD).confidence)
    return rows, preds


def _labels(logits: dict) -> dict:
    return {s: y for s, (_, y) in logits.items()}


def single_unit(cfg: EvalConfig, name: str, logits: dict) -> list[dict]:
    """Rows of one temperature-scaled model, for every fit mode and split."""
    rows = []
    for fit in cfg.fits:
        t = single_temperature(logits, fit)
        ident = dict(family="single", method="ts", base=name, sidekick="", members=name, fit=fit, confidence="max",
                     temperature_base=t, temperature_side=float("nan"), weight_base=1.0 / t, weight_side=0.0)
        rows += method_rows(cfg, ident, _labels(logits), lambda s, t=t: single_prediction(logits[s][0], t))[0]
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
                            lambda s, mode=mode: ensemble_prediction([m[s][0] for m in member_logits], mode=mode))[0]
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

    rows = method_rows(cfg, ident, _labels(logits), predict)[0]
    if logits[VAL][0].ndim == 3 and logits[VAL][0].shape[0] >= 2:
        for conf, score in MEMBER_CONFIDENCES.items():
            rows += method_rows(cfg, dict(ident, confidence=conf), _labels(logits), lambda s, k=score: predict(s, k))[0]
    return rows


def single_temperature(logits: dict, fit: str) -> float:
    """Temperature of one model fitted on its ``val`` logits."""
    zv, yv = logits[VAL]
    return fit_temperature(zv, yv, mode=fit).temperature


def duo_unit(cfg: EvalConfig, base: str, side: str, logits_b: dict, logits_s: dict, *,
             temperature=single_temperature) -> tuple[list[dict], list[dict]]:
    """Rows of every duo variant of (base, side), and paired differences duo - base.

    The paired differences (weighted duo, same fit and ``max`` confidence, minus
    the temperature-scaled base) are computed on the bootstrap splits.
    ``temperature(logits, fit)`` gives each member's own temperature (the
    unweighted variant); the evaluate stage passes a per-model memo of it.
    """
    for s in logits_b:
        if s not in logits_s:
            raise ValueError(f"split {s!r} has logits for {base!r} but not for {side!r}")
    rows, paired = [], []
    (zb, yv), (zs, _) = logits_b[VAL], logits_s[VAL]
    for fit in cfg.fits:
        duo = fit_duo(zb, zs, yv, mode=fit)
        singles = (temperature(logits_b, fit), temperature(logits_s, fit))
        for method, conf in DUO_VARIANTS:
            tb, ts = (duo.t_base, duo.t_side) if method != "unweighted" else singles
            ident = dict(family="duo", method=method, base=base, sidekick=side, members=f"{base}+{side}", fit=fit,
                         confidence=conf, temperature_base=tb, temperature_side=ts,
                         weight_base=1.0 / (2 * tb), weight_side=1.0 / (2 * ts))

            def pred(split, method=method, conf=conf):
                return duo_prediction(logits_b[split][0], logits_s[split][0], variant=method, fit=duo,
                                      single_temperatures=singles, confidence=conf)

            unit_rows, preds = method_rows(cfg, ident, _labels(logits_b), pred)
            rows += unit_rows
            if (method, conf) == ("weighted", "max"):
                for s in _eval_splits(logits_b):
                    if cfg.n_boot(s) == 0:
                        continue
                    diff = paired_difference(preds[s], single_prediction(logits_b[s][0], singles[0]), logits_b[s][1],
                                             n_bootstrap=cfg.n_boot(s), seed=cfg.seed, level=cfg.bootstrap_level,
                                             ece_bins=cfg.ece_bins, sac_threshold=cfg.sac_threshold)
                    paired += [dict(suite=cfg.suite, split=s, base=base, sidekick=side, fit=fit, method=method, metric=m, **d)
                               for m, d in diff.items()]
    return rows, paired
