"""The headline of a split: per base model, what a cheap sidekick buys against the alternatives.

For every base model (a model that is the base of some non-reference row): the
base alone (the reference family, e.g. the temperature-scaled single), its best
duo with FLOPs balance at most ``headline_balance``, its best duo overall, and
every other row built on that base (deep ensembles, SVE sizes, other
baselines). "Best" depends on the primary metric, so :func:`headline` returns,
for each headline metric, the entries to show, best first.

Each entry carries the difference to the base alone; for rows that the evaluate
stage compared with a paired bootstrap (``results/paired.csv``: duo minus base
on the same resamples) the interval and whether it excludes 0.

Training-seed noise (:mod:`benchmark.report.headline_noise`, :mod:`benchmark.core.noise`):
zoo entries that differ only in ``seed`` are one model trained several times;
the spread of their metrics is the noise a single training run carries, which
the bootstrap interval (test-sample noise only) does not cover. Every entry's
difference is judged against the seed spread of that kind of difference
(``within_seed``: ``|diff| <= 2 sd``; ``seed_source``: own group, fallback or
none); an interval that excludes 0 is a *finding* only outside that noise. A
split whose ranked differences are typically within the seed spread of a model
alone is *noise-dominated* for that metric: its entries keep a fixed order.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from benchmark.core import noise
from benchmark.core.metric_info import METRICS
from benchmark.report.headline_noise import SplitNoise, seed_notes, split_noise, spread_records
from benchmark.report.pagedata import rounded
from benchmark.report.tables import member_names, method_label

PAIRED_KEY = ["suite", "split", "base", "sidekick", "fit", "method", "metric"]
PAIRED_CONFIDENCE = "max"  # the paired bootstrap compares the max-confidence rows (benchmark.methods.duo.duo_unit)


def _better(metric: str):
    """Key that sorts best first, NaN last."""
    hib = METRICS[metric].higher_is_better if metric in METRICS else False

    def key(v: float) -> float:
        return math.inf if v is None or not np.isfinite(v) else (-v if hib else v)

    return key


class _Columns:
    """What :func:`headline` reads of a split's rows, taken from the frame once: each row as a dict (by index
    label), each metric as floats and the tie-breaking text columns, by position."""

    def __init__(self, view: pd.DataFrame, metrics):
        self.labels = view.index
        self.rows = dict(zip(view.index, view.to_dict("records")))
        self.values = {m: view[m].to_numpy(dtype=float) for m in metrics if m in view.columns}
        self.text = [np.array([str(v) for v in view[c]], dtype=str) for c in ("method", "members")]

    def best(self, at: np.ndarray, metric: str):
        """Index label of the best of the rows at positions ``at`` for ``metric`` (None when no finite value): best
        value, then members, then method (text order); the first row of a tie."""
        if not len(at) or metric not in self.values:
            return None
        vals = self.values[metric][at]
        finite = np.isfinite(vals)
        if not finite.any():
            return None
        hib = METRICS[metric].higher_is_better if metric in METRICS else False
        key = np.where(finite, -vals if hib else vals, np.inf)
        return self.labels[at[np.lexsort((*(t[at] for t in self.text), key))[0]]]


def paired_lookup(paired: pd.DataFrame | None) -> dict:
    """``(suite, split, base, sidekick, fit, method, metric) -> (diff, lo, hi)``."""
    if paired is None or paired.empty:
        return {}
    keep = paired.dropna(subset=["diff"])
    return {
        tuple(k): (float(d), float(lo), float(hi))
        for k, d, lo, hi in zip(
            keep[PAIRED_KEY].itertuples(index=False, name=None), keep["diff"], keep["ci_low"], keep["ci_high"]
        )
    }


def _judge(i, m: str, d: float, split_noise_: SplitNoise | None) -> dict:
    """The seed-noise judgement of difference ``d`` of view row ``i`` for metric ``m``."""
    sd, seeds, source = (split_noise_.rows.get((i, m)) if split_noise_ is not None else None) or (math.nan, 0, "none")
    return {"within_seed": noise.within_noise(d, sd), "sd_seed": sd, "seeds": seeds, "seed_source": source}


def _entry(i, r: dict, role_kind: str, metrics, alone: dict | None, paired: dict, judged: SplitNoise | None) -> dict:
    """One headline row: ids, cost and, per metric, value, difference to the base alone, its paired-bootstrap
    interval and its seed-noise judgement."""
    vals = {}
    for m in metrics:
        v = float(r[m]) if m in r and r[m] is not None and not pd.isna(r[m]) else math.nan
        d = lo = hi = math.nan
        if alone is not None and role_kind != "alone":
            a = float(alone[m]) if m in alone and not pd.isna(alone[m]) else math.nan
            d = v - a
            if r["confidence"] == PAIRED_CONFIDENCE and alone["fit"] == r["fit"]:
                got = paired.get((r["suite"], r["split"], r["base"], r["sidekick"], r["fit"], r["method"], m))
                if got is not None:
                    d, lo, hi = got
        sig = None
        if np.isfinite(lo) and np.isfinite(hi) and (lo > 0 or hi < 0):
            hib = METRICS[m].higher_is_better if m in METRICS else None
            sig = "better" if hib is not None and (lo > 0) == hib else "worse"
        judge = (
            _judge(i, m, d, judged)
            if role_kind != "alone"
            else {"within_seed": None, "sd_seed": math.nan, "seeds": 0, "seed_source": ""}
        )
        vals[m] = {
            "value": v,
            "diff": d,
            "lo": lo,
            "hi": hi,
            "sig": sig,
            **judge,
            "finding": sig is not None and judge["within_seed"] is False,
        }
    return {
        "kind": role_kind,
        "base": r["base"],
        "label": method_label(r["family"], r["method"]),
        "models": " + ".join(member_names(r["members"], r["base"], r["sidekick"])),
        "gflops": float(r["gflops"]) if np.isfinite(float(r["gflops"])) else math.nan,
        "balance": float(r["balance"]) if np.isfinite(float(r["balance"])) else math.nan,
        **{k: _count(r.get(k)) for k in ("train_images", "train_params")},  # its training budget (NaN: not recorded)
        "variant": f"{r['fit']} / {r['confidence']}",
        "metrics": vals,
        **{k: r[k] for k in ("source", "conflict") if r.get(k)},  # a merged page: where the row comes from
    }


def _count(v) -> float:
    """A budget count as a float; NaN when missing or negative."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v if np.isfinite(v) and v >= 0 else math.nan


def headline(
    view: pd.DataFrame, config, *, paired: dict | None = None, noise_: SplitNoise | None = None, metrics=None
) -> dict:
    """The headline of one (suite, split).

    ``view``: that split's rows, one variant per method (the preferred fit and
    confidence); ``metrics``: default ``config.headline_metrics``. Returns ``{"metrics", "entries", "order":
    {metric: [[entry index, role text], ...]}, "noise": {metric: verdict}}``: each order best first (NaN
    last), unless the split is noise-dominated for that metric (``verdict["dominated"]``,
    :func:`benchmark.core.noise.noise_dominated` of the non-reference entries' differences against the reference
    family's seed spread in ``noise_``): then in the fixed order of the bases and their rows.
    """
    paired = paired or {}
    metrics = list(
        config.headline_metrics if metrics is None else metrics
    )  # a metric the split lacks is NaN (sorted last)
    ref = (view["family"] == config.reference_family).to_numpy()
    balance = view["balance"].to_numpy(dtype=float)
    has_balance = np.isfinite(balance) & ~ref
    by_base = {b: idx for b, idx in view.groupby("base", sort=True).indices.items()}  # positions of each base's rows
    bases = sorted(b for b, idx in by_base.items() if b != "" and (~ref[idx]).any())
    cols = _Columns(view, metrics)
    entries: list[dict] = []
    index: dict[tuple, int] = {}
    order: dict[str, list] = {m: [] for m in metrics}
    cap = config.headline_balance

    def add(i, kind, alone) -> int:
        if (i, kind) not in index:
            index[(i, kind)] = len(entries)
            entries.append(_entry(i, cols.rows[i], kind, metrics, alone, paired, noise_))
        return index[(i, kind)]

    for b in bases:
        idx = by_base[b]
        alone_at = idx[ref[idx]]
        alone = cols.rows[cols.labels[alone_at[0]]] if len(alone_at) else None
        fixed = []
        if alone is not None:
            fixed.append((add(cols.labels[alone_at[0]], "alone", None), "base alone"))
        for i in cols.labels[idx[~ref[idx] & ~has_balance[idx]]]:
            fixed.append((add(i, "other", alone), cols.rows[i]["family"].replace("_", " ")))
        duos = idx[has_balance[idx]]
        cheap_duos = duos[balance[duos] <= cap + 1e-12]
        for m in metrics:
            order[m] += fixed
            cheap = cols.best(cheap_duos, m)
            best = cols.best(duos, m)
            if cheap is not None:
                order[m].append(
                    (
                        add(cheap, "duo", alone),
                        f"best duo, balance ≤ {cap:g}" + (" (also best overall)" if cheap == best else ""),
                    )
                )
            if best is not None and best != cheap:
                order[m].append((add(best, "duo", alone), "best duo overall"))
    verdict = _verdict(view, entries, order, noise_)
    for m in metrics:
        key = _better(m)
        if not verdict.get(m, {}).get("dominated"):
            order[m] = sorted(order[m], key=lambda e: (key(entries[e[0]]["metrics"][m]["value"]), e[0]))
        order[m] = [list(e) for e in order[m]]
    return {"metrics": metrics, "entries": entries, "order": order, "noise": verdict}


def _verdict(view: pd.DataFrame, entries: list[dict], order: dict, noise_: SplitNoise | None) -> dict:
    """Per metric of ``order``: ``{"sd", "n", "median", "entries", "dominated"}``
    (:func:`benchmark.core.noise.noise_dominated`: the median ``|diff|`` of the non-reference entries ranked for
    that metric against ``FACTOR`` times the reference family's seed sd)."""
    split = str(view["split"].iloc[0]) if len(view) else ""
    ranked = pd.DataFrame(
        [
            (split, m, entries[e]["metrics"][m]["diff"])
            for m, es in order.items()
            for e, _ in es
            if entries[e]["kind"] != "alone"
        ],
        columns=["split", "metric", "diff"],
    )
    reference = pd.DataFrame(
        [(split, m, sd, n) for m, (sd, n) in (noise_.reference if noise_ else {}).items() if m in order],
        columns=["split", "metric", "sd", "n"],
    )
    out = noise.noise_dominated(ranked, reference)
    return {
        r.metric: {
            "sd": float(r.sd),
            "n": 0 if pd.isna(r.n) else int(r.n),
            "median": float(r.median),
            "entries": int(r.entries),
            "dominated": bool(r.dominated),
        }
        for r in out.itertuples(index=False)
    }


def headline_context(views: dict, config, *, zoo: dict, paired: pd.DataFrame | None) -> dict:
    """The headline, seed spread and noise verdicts of every ``(suite, split) -> rows`` in ``views`` (JSON-ready).

    Each split's ``judged`` is its :class:`~benchmark.report.headline_noise.SplitNoise` (what
    :func:`benchmark.report.summary.split_summary` needs; not part of the page's JSON); its ``noise`` holds the verdict
    (:func:`headline`) of the headline metrics and of the plot metrics it has (e.g. ``ood_auroc``). ``seed_notes``: the
    seed ranges of the first suite's ``headline_split`` (or its first split); ``seeded``: whether the zoo has a seed
    group at all.
    """
    lookup = paired_lookup(paired)
    groups = noise.seed_groups(zoo)
    metrics = list(config.headline_metrics)
    extra = [m for m in getattr(config, "plot_metrics", ()) if m not in metrics]
    suites: dict[str, list] = {}
    notes: list[str] = []
    for (suite, split), rows in views.items():
        more = [m for m in extra if m in rows.columns and rows[m].notna().any()]
        judged = split_noise(rows, groups, config.reference_family, metrics + more)
        head = headline(rows, config, paired=lookup, noise_=judged)
        verdict = head["noise"] | (
            headline(rows, config, paired=lookup, noise_=judged, metrics=more)["noise"] if more else {}
        )
        spread = spread_records(rows, groups, config.reference_family, metrics + more)
        suites.setdefault(suite, []).append(
            {
                "name": split,
                "entries": head["entries"],
                "order": head["order"],
                "spread": spread,
                "noise": verdict,
                "judged": judged,
            }
        )
        if not notes and split == config.headline_split:
            notes = seed_notes(spread, metrics)
    if not notes and views:
        first = next(iter(views.values()))
        notes = seed_notes(spread_records(first, groups, config.reference_family, metrics), metrics)
    return {
        "default": config.headline_metric,
        "balance": config.headline_balance,
        "factor": noise.FACTOR,
        "seeded": bool(groups),
        "metrics": [{"key": m, "label": METRICS[m].label, "hib": METRICS[m].higher_is_better} for m in metrics],
        "suites": [{"name": k, "splits": v} for k, v in suites.items()],
        "seed_notes": notes,
    }


DVC_METRICS = ("accuracy", "aurc", "auroc", "ece", "nll")
NOISE_FILE = "headline/noise-dominated.json"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-") or "x"


def dvc_metrics(head: dict, config) -> dict[str, dict]:
    """``headline/<base>/<row>.json`` files: one small JSON per headline row of the first suite's
    ``headline_split``, ranked by ``headline_metric``, so that ``dvc metrics show`` prints one
    line per method with a handful of columns. A metric that is noise-dominated on that split is left out of
    them; :data:`NOISE_FILE` marks each metric 1 (noise-dominated: left out) or 0."""
    split = next((sp for su in head["suites"] for sp in su["splits"] if sp["name"] == config.headline_split), None)
    if split is None:
        return {}
    dominated = {m for m, v in split.get("noise", {}).items() if v["dominated"]}
    out = {}
    for e, role in split["order"].get(config.headline_metric, []):
        ent = split["entries"][e]
        if ent["kind"] == "alone":
            name = "alone"
        elif ent["kind"] == "duo":
            name = "duo-cheap" if "≤" in role else "duo-best"
        else:
            name = _slug(f"{ent['label'].replace(' · ', '-')}-m{ent['models'].count(' + ') + 1}")
        rec = {"gflops": rounded(ent["gflops"], 4)}
        rec.update(
            {
                m: rounded(ent["metrics"][m]["value"], 4)
                for m in DVC_METRICS
                if m in ent["metrics"] and m not in dominated
            }
        )
        out[f"headline/{_slug(ent['base'])}/{name}.json"] = {k: v for k, v in rec.items() if v is not None}
    marks = {m: int(split["noise"][m]["dominated"]) for m in DVC_METRICS if m in split.get("noise", {})}
    if out and marks:
        out[NOISE_FILE] = marks
    return out


SOURCE_FLAGS = {"own": 8, "fallback": 16}


def compact(head: dict) -> dict:
    """``head`` for the page: per entry ``ti``, ``tp`` its training budget (images, parameters; null: not recorded),
    ``src`` and ``cf`` (a merged page only: the sources of its values and the other sources that disagree) and
    ``m`` = ``[value, diff, lo, hi, flags, sd_seed, seeds]`` in
    ``head["metrics"]`` order (flags: 1 = interval excludes 0 and better, 2 = and worse, 4 = within the seed
    noise, 8 = seed noise of its own seed group, 16 = the fallback; neither = no seed noise); per split
    ``noise`` = ``[sd, median, dominated]`` or null per metric; per spread record ``m`` = ``[mean, sd, min, max]``
    and ``d`` (the difference to the base alone) = ``[mean, sd]``, or null."""
    keys = [m["key"] for m in head["metrics"]]
    suites = [
        {"name": su["name"], "splits": [_compact_split(sp, keys) for sp in su["splits"]]} for su in head["suites"]
    ]
    return {k: v for k, v in head.items() if k != "suites"} | {"suites": suites}


def _compact_split(sp: dict, keys: list[str]) -> dict:
    """One split of :func:`compact`: its entries, order, spread records and seed-noise verdicts over ``keys``."""
    entries = [_compact_entry(e, keys) for e in sp["entries"]]
    spread = [
        {
            "w": r["what"],
            "n": r["seeds"],
            "m": [
                [rounded(s["mean"]), rounded(s["sd"], 3), rounded(s["min"]), rounded(s["max"])]
                if (s := r["metrics"].get(k))
                else None
                for k in keys
            ],
            "d": [[rounded(s["mean"], 3), rounded(s["sd"], 3)] if (s := r["diff"].get(k)) else None for k in keys],
        }
        for r in sp["spread"]
    ]
    verdict = [
        [rounded(v["sd"], 3), rounded(v["median"], 3), int(v["dominated"])] if (v := sp["noise"].get(k)) else None
        for k in keys
    ]
    return {"name": sp["name"], "entries": entries, "order": sp["order"], "spread": spread, "noise": verdict}


def _compact_entry(e: dict, keys: list[str]) -> dict:
    """One entry of :func:`compact`: its ids, costs, budget, sources and ``m`` (one list per metric of ``keys``)."""
    ms = []
    for k in keys:
        v = e["metrics"][k]
        flags = (
            {"better": 1, "worse": 2}.get(v["sig"], 0)
            + (4 if v["within_seed"] else 0)
            + SOURCE_FLAGS.get(v["seed_source"], 0)
        )
        ms.append(
            [
                rounded(v["value"]),
                rounded(v["diff"], 4),
                rounded(v["lo"], 3),
                rounded(v["hi"], 3),
                flags,
                rounded(v["sd_seed"], 3),
                v["seeds"],
            ]
        )
    return {
        "k": e["kind"],
        "b": e["base"],
        "l": e["label"],
        "o": e["models"],
        "g": rounded(e["gflops"], 4),
        "ti": rounded(e.get("train_images"), 7),
        "tp": rounded(e.get("train_params"), 7),
        "v": e["variant"],
        "m": ms,
        **{short: e[k] for short, k in (("src", "source"), ("cf", "conflict")) if e.get(k)},
    }
