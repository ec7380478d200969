"""The leaderboard page: context building and Jinja2 rendering (autoescaped).

The page is one self-contained ``index.html`` (CSS and JavaScript inlined, no
network) next to its ``plots/`` folder; it works opened from the file system.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from benchmark.core.metric_info import METRICS
from benchmark.report.plots import PLOT_KINDS
from benchmark.report.provenance import anchor, model_provenance
from benchmark.report.tables import (
    EXTRA_COLUMNS,
    fmt_metric,
    fmt_num,
    match_any,
    member_names,
    method_label,
    metric_direction,
    preferred,
    sort_key,
    split_sort_key,
)

_HERE = Path(__file__).parent
_ARROW = {True: "↑", False: "↓", None: ""}


def metric_column(metric: str) -> dict:
    info = METRICS.get(metric)
    hib = metric_direction(metric)
    title = f"{info.description} {'Higher' if hib else 'Lower'} is better." if info else "Metric not in METRICS: direction unknown."
    return {"key": metric, "label": f"{info.label if info else metric} {_ARROW[hib]}".strip(), "num": True, "title": title, "metric": True}


def table_columns(metrics) -> list[dict]:
    """Column specs of a results table: ids, costs, one per metric, sample count."""
    cols = [
        {"key": "method", "label": "Method", "num": False, "title": "method family · method"},
        {"key": "models", "label": "Models", "num": False, "title": "base model + sidekick, or all members"},
        {"key": "variant", "label": "Fit / conf.", "num": False,
         "title": "temperature fit (converged or paper-exact) / confidence score (max = 1 - max p, or published)"},
        {"key": "gflops", "label": "GFLOPs", "num": True, "title": "inference GFLOPs per image, all members together"},
        {"key": "balance", "label": "Balance", "num": True, "title": "FLOPs balance = GFLOPs(sidekick) / GFLOPs(base)"},
        {"key": "params", "label": "Params (M)", "num": True, "title": "parameters of all members, millions"},
        {"key": "overhead_percent", "label": "Trainable %", "num": True,
         "title": "trainable parameters in % of the pretrained backbone (methods that report it, e.g. SVE)"},
        {"key": "throughput", "label": "img/s", "num": True, "title": "measured throughput on the reference CPU"},
    ]
    cols = [c | {"metric": False} for c in cols] + [metric_column(m) for m in metrics]
    cols.append({"key": "n", "label": "n", "num": True, "title": "number of evaluated samples", "metric": False})
    return cols


def _interval(r, m) -> str:
    lo, hi = r.get(f"{m}:lo", math.nan), r.get(f"{m}:hi", math.nan)
    if pd.isna(lo) or pd.isna(hi):
        return ""
    return f"[{fmt_metric(lo)}, {fmt_metric(hi)}]"


def _num(v) -> float:
    """A cost as float; NaN when missing (the schema uses -1 for a missing integer)."""
    return math.nan if v is None or pd.isna(v) or v < 0 else float(v)


def _text(t: str, title: str = "") -> dict:
    """A text cell; the page sorts it by its text."""
    return {"text": t, "sort": None, "cls": "t", "title": title}


def _cost(v, spec: str, scale: float = 1.0) -> dict:
    v = _num(v)
    return {"text": fmt_num(v, spec, scale), "sort": sort_key(v), "cls": ""}


def _extras(r: dict) -> str:
    """Row columns the table does not show (e.g. fitted temperatures), as 'name=value' text."""
    parts = []
    for c in EXTRA_COLUMNS:
        v = r.get(c)
        if isinstance(v, str) and v:
            parts.append(f"{c}={v}")
        elif isinstance(v, (int, float)) and not pd.isna(v):
            parts.append(f"{c}={v:.4g}")
    return ", ".join(parts)


def table_rows(rows: pd.DataFrame, metrics) -> list[dict]:
    """Row dicts for the template: filter attributes, cells (text + sort key), provenance."""
    out = []
    for r in rows.to_dict("records"):
        names = member_names(r["members"], r["base"], r["sidekick"])
        cells = [
            _text(method_label(r["family"], r["method"])),
            _text(" + ".join(names)),
            _text(f"{r['fit']} / {r['confidence']}", _extras(r)),
            _cost(r["gflops"], ".3g"),
            _cost(r["balance"], ".3f"),
            _cost(r["params"], ".1f", 1e6),
            _cost(r.get("overhead_percent"), ".2f"),
            _cost(r["throughput"], ".0f"),
        ]
        for m in metrics:
            v = float(r[m]) if m in r and not pd.isna(r[m]) else math.nan
            cells.append({"text": fmt_metric(v), "sort": sort_key(v), "ci": _interval(r, m), "cls": "nan" if math.isnan(v) else ""})
        cells.append(_cost(r["n"], ".0f"))
        out.append({
            "base": r["base"], "family": r["family"], "fit": r["fit"], "confidence": r["confidence"],
            "fit_pref": int(r["fit_pref"]), "conf_pref": int(r["conf_pref"]),
            "balance": sort_key(_num(r["balance"])), "cells": cells,
            "members": [{"name": n, "anchor": anchor("model", n)} for n in names],
            "hash": r["inputs_hash"],
        })
    return out


PREFERRED = "~preferred"  # filter value: the configured variant where the method has it


def _filter(key: str, label: str, values, preferred_value: str | None = None) -> dict:
    """A select: 'all', optionally '<value> where available' (the default), then each value."""
    vals = sorted(set(values))
    opts = [("", "all")] + [(v, v or "(none)") for v in vals]
    if preferred_value in vals:
        opts.insert(0, (PREFERRED, f"{preferred_value} where available"))
    return {"key": key, "label": label, "options": opts, "selected": opts[0][0] if preferred_value in vals else ""}


def suites_context(wide: pd.DataFrame, metrics, computed: dict, plots: dict, config) -> list[dict]:
    """Per suite: filter options and defaults; per tabulated split: columns, rows, plots.

    ``computed[(suite, split)]`` is the set of metrics with rows for that split:
    those get a column (a value that is NaN is shown as NaN).
    """
    wide = wide.assign(fit_pref=preferred(wide, "fit", config.fit, "confidence"),
                       conf_pref=preferred(wide, "confidence", config.confidence, "fit"))
    suites = []
    for suite, s in wide.groupby("suite", sort=True):
        splits = sorted((sp for sp in s["split"].unique() if match_any(sp, config.table_splits)), key=split_sort_key)
        sections = []
        for i, split in enumerate(splits):
            rows = s[s["split"] == split]
            present = [m for m in metrics if m in computed.get((suite, split), ())]
            figs = [{"metric": m, "label": METRICS[m].label, "kinds": plots[(suite, split)][m]}
                    for m in config.plot_metrics if m in plots.get((suite, split), {})]
            sections.append({"name": split, "anchor": anchor("split", f"{suite}/{split}"), "open": i == 0 or bool(figs),
                             "columns": table_columns(present), "rows": table_rows(rows, present), "plots": figs})
        suites.append({
            "name": suite, "anchor": anchor("suite", suite), "splits": sections,
            "filters": [_filter("base", "Base model", s["base"]), _filter("family", "Family", s["family"]),
                        _filter("fit", "Fit", s["fit"], config.fit),
                        _filter("confidence", "Confidence", s["confidence"], config.confidence)],
        })
    return suites


def repro_context(rows: list[dict], fits) -> dict:
    sources = sorted({r["source"] for r in rows})
    out = []
    for r in rows:
        c = r["cell"]
        ours = []
        for fit in fits:
            o = r["ours"][fit]
            if "status" in o:
                ours.append({"status": o["status"]})
            else:
                ours.append({"value": fmt_metric(o["value"]), "diff": f"{o['diff']:+.4f}", "detail": o["detail"],
                             "cls": {True: "better", False: "worse", None: ""}[o["better"]]})
        out.append({"suite": c.suite, "split": c.split, "models": r["models"], "method": r["label"],
                    "metric": METRICS[c.metric].label, "arrow": _ARROW[METRICS[c.metric].higher_is_better],
                    "published": f"{c.value:g}", "ours": ours, "source": sources.index(r["source"]) + 1, "note": c.note})
    return {"fits": list(fits), "rows": out, "sources": sources}


def metric_guide(metrics) -> list[dict]:
    return [{"label": METRICS[m].label, "arrow": _ARROW[METRICS[m].higher_is_better],
             "better": "higher" if METRICS[m].higher_is_better else "lower", "description": METRICS[m].description}
            for m in metrics if m in METRICS]


def page_context(inputs, wide: pd.DataFrame, metrics, plots: dict, repro_rows: list[dict], notices) -> dict:
    cfg = inputs.config
    used = {n for r in wide.to_dict("records") for n in member_names(r["members"], r["base"], r["sidekick"])}
    computed = inputs.results.groupby(["suite", "split"])["metric"].agg(set).to_dict() if len(wide) else {}
    return {
        "title": cfg.title,
        "notices": list(notices),
        "suites": suites_context(wide, metrics, computed, plots, cfg) if len(wide) else [],
        "guide": metric_guide(metrics),
        "repro": repro_context(repro_rows, cfg.reproduction_fits),
        "models": model_provenance(used, inputs.zoo, inputs.models, inputs.lock, cfg.logits_stages),
        "params_yaml": yaml.safe_dump(inputs.params, sort_keys=False, allow_unicode=True) if inputs.params else "",
        "sources": inputs.sources,
        "defaults": {"fit": cfg.fit, "confidence": cfg.confidence},
        "plot_kinds": PLOT_KINDS,
    }


def render_html(context: dict) -> str:
    """Render ``templates/index.html.j2`` with autoescaping; CSS and JS are inlined."""
    env = Environment(loader=FileSystemLoader(_HERE / "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    css = (_HERE / "static" / "leaderboard.css").read_text(encoding="utf-8")
    js = (_HERE / "static" / "leaderboard.js").read_text(encoding="utf-8")
    return env.get_template("index.html.j2").render(**context, css=css, js=js)
