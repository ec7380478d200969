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

Training-seed spread (:func:`seed_groups`, :func:`seed_spread`): zoo entries
that differ only in ``seed`` are one model trained several times; the spread of
their metrics is the noise a single training run carries, which the bootstrap
interval (test-sample noise only) does not cover.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from benchmark.core.metric_info import METRICS
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


def _best(rows: pd.DataFrame, metric: str):
    """Index of the best row for ``metric`` (None when no finite value)."""
    if rows.empty or metric not in rows.columns:
        return None
    vals = rows[metric].to_numpy(dtype=float)
    finite = np.isfinite(vals)
    if not finite.any():
        return None
    hib = METRICS[metric].higher_is_better if metric in METRICS else False
    key = np.where(finite, -vals if hib else vals, np.inf)
    # best value, then members, then method (text order); the first row of a tie
    text = [np.array([str(v) for v in rows[c]], dtype=str) for c in ("method", "members")]
    return rows.index[np.lexsort((*text, key))[0]]


def paired_lookup(paired: pd.DataFrame | None) -> dict:
    """``(suite, split, base, sidekick, fit, method, metric) -> (diff, lo, hi)``."""
    if paired is None or paired.empty:
        return {}
    keep = paired.dropna(subset=["diff"])
    return {tuple(k): (float(d), float(lo), float(hi))
            for k, d, lo, hi in zip(keep[PAIRED_KEY].itertuples(index=False, name=None), keep["diff"], keep["ci_low"],
                                    keep["ci_high"])}


def seed_groups(zoo: dict) -> dict[str, list[str]]:
    """Zoo entries that differ only in ``seed``: label -> names (sorted); groups of two or more."""
    groups: dict[str, list[str]] = {}
    for name, entry in zoo.items():
        if not isinstance(entry, dict) or "seed" not in entry:
            continue
        key = json.dumps({k: v for k, v in entry.items() if k != "seed"}, sort_keys=True, default=str)
        groups.setdefault(key, []).append(str(name))
    out = {}
    for key, names in groups.items():
        if len(names) >= 2:
            arch = json.loads(key).get("arch")
            label = f"{arch or names[0]} ({len(names)} seeds)"
            while label in out:
                label += "'"
            out[label] = sorted(names)
    return dict(sorted(out.items()))


def _stats(vals: pd.Series) -> dict | None:
    v = vals.astype(float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return None
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)), "min": float(v.min()), "max": float(v.max()), "n": int(len(v))}


def seed_spread(view: pd.DataFrame, groups: dict[str, list[str]], metrics, reference_family: str) -> list[dict]:
    """Mean and spread across seeds, for each seed group alone and for its duos with the same sidekick and method.

    ``view``: the rows of one split (one variant per method). Returns
    ``{"what", "group", "seeds", "metrics": {m: {mean, sd, min, max, n}}}`` records.
    """
    out = []
    for label, names in groups.items():
        alone = view[(view["family"] == reference_family) & view["base"].isin(names)]
        if alone["base"].nunique() >= 2:
            mets = {m: s for m in metrics if m in alone.columns and (s := _stats(alone[m])) is not None}
            if mets:
                out.append({"what": f"{label}: base alone", "group": label, "seeds": int(alone["base"].nunique()), "metrics": mets})
        duo = view[(view["family"] != reference_family) & view["base"].isin(names) & (view["sidekick"] != "")]
        for (side, fam, meth), g in duo.groupby(["sidekick", "family", "method"], sort=True):
            if side in names or g["base"].nunique() < 2:
                continue
            mets = {m: s for m in metrics if m in g.columns and (s := _stats(g[m])) is not None}
            if mets:
                out.append({"what": f"{label} + {side}: {method_label(fam, meth)}", "group": label,
                            "seeds": int(g["base"].nunique()), "metrics": mets})
    return out


def seed_ranges(spread: list[dict], groups: dict[str, list[str]]) -> dict[tuple[str, str], float]:
    """``(model, metric) -> max - min`` across the seeds of the model's group alone."""
    out = {}
    for rec in spread:
        if not rec["what"].endswith(": base alone"):
            continue
        for name in groups[rec["group"]]:
            for m, s in rec["metrics"].items():
                out[(name, m)] = s["max"] - s["min"]
    return out


def _entry(r: dict, role_kind: str, metrics, alone: dict | None, paired: dict, ranges: dict) -> dict:
    """One headline row: ids, cost and, per metric, value and difference to the base alone."""
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
        rng = ranges.get((r["base"], m))
        within = bool(rng is not None and np.isfinite(d) and abs(d) <= rng)
        vals[m] = {"value": v, "diff": d, "lo": lo, "hi": hi, "sig": sig, "within_seed": within}
    return {
        "kind": role_kind, "base": r["base"], "label": method_label(r["family"], r["method"]),
        "models": " + ".join(member_names(r["members"], r["base"], r["sidekick"])),
        "gflops": float(r["gflops"]) if np.isfinite(float(r["gflops"])) else math.nan,
        "balance": float(r["balance"]) if np.isfinite(float(r["balance"])) else math.nan,
        "variant": f"{r['fit']} / {r['confidence']}", "metrics": vals,
    }


def headline(view: pd.DataFrame, config, *, paired: dict | None = None, ranges: dict | None = None) -> dict:
    """The headline of one (suite, split).

    ``view``: that split's rows, one variant per method (the preferred fit and
    confidence). Returns ``{"entries": [...], "order": {metric: [[entry index,
    role text], ...]}}``, each order best first (NaN last).
    """
    paired, ranges = paired or {}, ranges or {}
    metrics = list(config.headline_metrics)  # a metric the split lacks is NaN (sorted last)
    ref = (view["family"] == config.reference_family).to_numpy()
    has_balance = np.isfinite(view["balance"].to_numpy(dtype=float)) & ~ref
    by_base = {b: idx for b, idx in view.groupby("base", sort=True).indices.items()}  # positions of each base's rows
    bases = sorted(b for b, idx in by_base.items() if b != "" and (~ref[idx]).any())
    entries: list[dict] = []
    index: dict[tuple, int] = {}
    order: dict[str, list] = {m: [] for m in metrics}
    cap = config.headline_balance

    def add(i, kind, alone) -> int:
        if (i, kind) not in index:
            index[(i, kind)] = len(entries)
            entries.append(_entry(view.loc[i].to_dict(), kind, metrics, alone, paired, ranges))
        return index[(i, kind)]

    for b in bases:
        idx = by_base[b]
        alone_rows = view.iloc[idx[ref[idx]]]
        alone = alone_rows.iloc[0].to_dict() if len(alone_rows) else None
        fixed = []
        if alone is not None:
            fixed.append((add(alone_rows.index[0], "alone", None), "base alone"))
        for i in view.index[idx[~ref[idx] & ~has_balance[idx]]]:
            fixed.append((add(i, "other", alone), view.at[i, "family"].replace("_", " ")))
        duos = view.iloc[idx[has_balance[idx]]]
        cheap_duos = duos[duos["balance"].to_numpy(dtype=float) <= cap + 1e-12]
        for m in metrics:
            order[m] += fixed
            cheap = _best(cheap_duos, m)
            best = _best(duos, m)
            if cheap is not None:
                order[m].append((add(cheap, "duo", alone), f"best duo, balance ≤ {cap:g}" + (" (also best overall)" if cheap == best else "")))
            if best is not None and best != cheap:
                order[m].append((add(best, "duo", alone), "best duo overall"))
    for m in metrics:
        key = _better(m)
        order[m] = [list(e) for e in sorted(order[m], key=lambda e: (key(entries[e[0]]["metrics"][m]["value"]), e[0]))]
    return {"metrics": metrics, "entries": entries, "order": order}


def _fmt(v: float) -> str:
    return f"{v:.5f}" if abs(v) < 0.1 else f"{v:.4f}"


def seed_notes(spread: list[dict], metrics) -> list[str]:
    """Sentences for "how to read": the range of each metric across the seeds of each group alone."""
    notes = []
    for rec in spread:
        if not rec["what"].endswith(": base alone"):
            continue
        parts = [f"{METRICS[m].label if m in METRICS else m} {_fmt(s['min'])}–{_fmt(s['max'])} (range {_fmt(s['max'] - s['min'])})"
                 for m in metrics if (s := rec["metrics"].get(m))]
        notes.append(f"{rec['group']}: " + ", ".join(parts))
    return notes


def headline_context(views: dict, config, *, zoo: dict, paired: pd.DataFrame | None) -> dict:
    """The headline and seed spread of every ``(suite, split) -> rows`` in ``views`` (JSON-ready).

    ``seed_notes``: the seed ranges of the first suite's ``headline_split`` (or its first split).
    """
    lookup = paired_lookup(paired)
    groups = seed_groups(zoo)
    metrics = [m for m in config.headline_metrics]
    suites: dict[str, list] = {}
    notes: list[str] = []
    for (suite, split), rows in views.items():
        spread = seed_spread(rows, groups, metrics, config.reference_family)
        head = headline(rows, config, paired=lookup, ranges=seed_ranges(spread, groups))
        suites.setdefault(suite, []).append({"name": split, "entries": head["entries"], "order": head["order"],
                                             "spread": spread})
        if not notes and split == config.headline_split:
            notes = seed_notes(spread, metrics)
    if not notes and views:
        first = next(iter(views.values()))
        notes = seed_notes(seed_spread(first, groups, metrics, config.reference_family), metrics)
    return {
        "default": config.headline_metric, "balance": config.headline_balance,
        "metrics": [{"key": m, "label": METRICS[m].label, "hib": METRICS[m].higher_is_better} for m in metrics],
        "suites": [{"name": k, "splits": v} for k, v in suites.items()],
        "seed_notes": notes,
    }


DVC_METRICS = ("accuracy", "aurc", "auroc", "ece", "nll")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-") or "x"


def dvc_metrics(head: dict, config) -> dict[str, dict]:
    """``headline/<base>/<row>.json`` files: one small JSON per headline row of the first suite's
    ``headline_split``, ranked by ``headline_metric``, so that ``dvc metrics show`` prints one
    line per method with a handful of columns."""
    split = next((sp for su in head["suites"] for sp in su["splits"] if sp["name"] == config.headline_split), None)
    if split is None:
        return {}
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
        rec.update({m: rounded(ent["metrics"][m]["value"], 4) for m in DVC_METRICS if m in ent["metrics"]})
        out[f"headline/{_slug(ent['base'])}/{name}.json"] = {k: v for k, v in rec.items() if v is not None}
    return out


def compact(head: dict) -> dict:
    """``head`` for the page: per entry ``m`` = ``[value, diff, lo, hi, flags]`` in ``head["metrics"]``
    order (flags: 1 = interval excludes 0 and better, 2 = and worse, 4 = within the seed spread);
    per spread record ``m`` = ``[mean, sd, min, max]`` or null."""
    keys = [m["key"] for m in head["metrics"]]
    suites = []
    for su in head["suites"]:
        splits = []
        for sp in su["splits"]:
            entries = []
            for e in sp["entries"]:
                ms = []
                for k in keys:
                    v = e["metrics"][k]
                    flags = {"better": 1, "worse": 2}.get(v["sig"], 0) + (4 if v["within_seed"] else 0)
                    ms.append([rounded(v["value"]), rounded(v["diff"], 4), rounded(v["lo"], 3), rounded(v["hi"], 3), flags])
                entries.append({"k": e["kind"], "b": e["base"], "l": e["label"], "o": e["models"], "g": rounded(e["gflops"], 4),
                                "v": e["variant"], "m": ms})
            spread = [{"w": r["what"], "n": r["seeds"],
                       "m": [[rounded(s["mean"]), rounded(s["sd"], 3), rounded(s["min"]), rounded(s["max"])]
                             if (s := r["metrics"].get(k)) else None for k in keys]} for r in sp["spread"]]
            splits.append({"name": sp["name"], "entries": entries, "order": sp["order"], "spread": spread})
        suites.append({"name": su["name"], "splits": splits})
    return {k: v for k, v in head.items() if k != "suites"} | {"suites": suites}
