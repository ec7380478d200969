"""The leaderboard page: context building and Jinja2 rendering (autoescaped).

The page is one ``index.html`` (CSS and JavaScript inlined) next to its ``data/``
folder and the charting library (:mod:`benchmark.report.assets`); it works opened
from the file system and loads nothing from a network (its Content-Security-Policy
forbids it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from benchmark.core.metric_info import METRICS
from benchmark.report.headline import compact, headline_context, paired_lookup
from benchmark.report.pagedata import data_script, defer_headline_splits, table_data, to_json
from benchmark.report.provenance import anchor, file_slug, model_provenance
from benchmark.report.summary import split_summary
from benchmark.report.tables import (
    KEY,
    default_view,
    fmt_metric,
    match_any,
    metric_direction,
    models_used,
    preferred,
    split_sort_key,
)

_HERE = Path(__file__).parent
_ARROW = {True: "↑", False: "↓", None: ""}
# what the page may load: its own files only (file:// or the site's host), never a network resource
CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self'; connect-src 'none'; base-uri 'none'; form-action 'none'"
)


def metric_column(metric: str) -> dict:
    """The leaderboard table's column of ``metric``: its label with the arrow of its direction and its description."""
    info = METRICS.get(metric)
    hib = metric_direction(metric)
    title = (
        f"{info.description} {'Higher' if hib else 'Lower'} is better."
        if info
        else "Metric not in METRICS: direction unknown."
    )
    return {
        "key": metric,
        "label": f"{info.label if info else metric} {_ARROW[hib]}".strip(),
        "num": True,
        "title": title,
        "metric": True,
    }


SHOWN = ("models", "gflops", "balance")  # the full tables' columns shown by default besides the method and metrics


def _id_columns() -> list[dict]:
    """The columns of a results table that are not metrics: the method, its models and variant, costs, budget."""
    return [
        {"key": "method", "label": "Method", "num": False, "title": "method family · method"},
        {"key": "models", "label": "Models", "num": False, "title": "base model + sidekick, or all members"},
        {
            "key": "variant",
            "label": "Fit / conf.",
            "num": False,
            "title": "temperature fit (converged or paper-exact) / confidence score (max = 1 - max p, or published)",
        },
        {"key": "gflops", "label": "GFLOPs", "num": True, "title": "inference GFLOPs per image, all members together"},
        {"key": "balance", "label": "Balance", "num": True, "title": "FLOPs balance = GFLOPs(sidekick) / GFLOPs(base)"},
        {"key": "params", "label": "Params (M)", "num": True, "title": "parameters of all members, millions"},
        {
            "key": "overhead_percent",
            "label": "Trainable %",
            "num": True,
            "title": "trainable parameters of all M members and their heads, in % of the pretrained backbone "
            "(methods that report it, e.g. SVE)",
        },
        {
            "key": "extra_params_percent",
            "label": "Extra %",
            "num": True,
            "title": "parameters added over one model, in % of the pretrained backbone: the SVE paper's overhead "
            "((M - 1) members' singular values and biases, no heads; 5 (M - 1) / (4 d) for a ViT)",
        },
        {"key": "throughput", "label": "img/s", "num": True, "title": "measured throughput on the reference CPU"},
        {
            "key": "train_images",
            "label": "Train img",
            "num": True,
            "title": "training budget: training images processed to make the row's models (epochs x images x members "
            "that each run the whole network), summed over every training run behind it, the fine-tunes a method "
            "builds "
            "on included; 0 for pretrained weights used as they are",
        },
        {
            "key": "train_params",
            "label": "Trained params",
            "num": True,
            "title": "training budget: parameters trained, summed over the training runs behind the row (all of a full "
            "fine-tune; the trainable subset of a method that trains one, e.g. SVE's singular values, biases "
            "and heads)",
        },
    ]


def table_columns(metrics, *, source: bool = False, ranked: str | None = None, shown=None) -> list[dict]:
    """Column specs of a results table: the method (the row's name), the ``ranked`` metric next to it, ids, costs,
    the other metrics, sample count, and (``source``) where the row comes from. ``show``: whether the column is on
    by default (the page's column chooser turns the others on): the method, the ranked metric and the keys of
    ``shown`` (default: :data:`SHOWN` and every metric)."""
    ids = [c | {"metric": False} for c in _id_columns()]
    cols = (
        ids[:1]
        + [metric_column(m) for m in metrics if m == ranked]
        + ids[1:]
        + [metric_column(m) for m in metrics if m != ranked]
    )
    cols.append({"key": "n", "label": "n", "num": True, "title": "number of evaluated samples", "metric": False})
    if source:
        cols.append(
            {
                "key": "source",
                "label": "Source",
                "num": False,
                "metric": False,
                "title": "the bundle the row's values come from (its contributor and status: hover); ⚠ another bundle "
                "of the same status gives other values for it",
            }
        )
    shown = (set(SHOWN) | set(metrics) if shown is None else set(shown)) | {"method", ranked}
    return [c | {"show": c["key"] in shown} for c in cols]


PREFERRED = "~preferred"  # filter value: the configured variant where the method has it


def _filter(key: str, label: str, values, preferred_value: str | None = None) -> dict:
    """A select: 'all', optionally '<value> where available' (the default), then each value."""
    vals = sorted(set(values))
    opts = [("", "all")] + [(v, v or "(none)") for v in vals]
    if preferred_value in vals:
        opts.insert(0, (PREFERRED, f"{preferred_value} where available"))
    return {"key": key, "label": label, "options": opts, "selected": opts[0][0] if preferred_value in vals else ""}


def suites_context(
    wide: pd.DataFrame, metrics, computed: dict, plots: dict, config, sources: dict | None = None
) -> tuple[list[dict], dict]:
    """Per suite: filter options and defaults; per tabulated split: row count, data file, plots.

    ``computed[(suite, split)]`` is the set of metrics with rows for that split:
    those get a column (a value that is NaN is shown as NaN). Returns the
    suites and ``{relative path: content}`` of the split data files.
    """
    wide = wide.assign(
        fit_pref=preferred(wide, "fit", config.fit, "confidence"),
        conf_pref=preferred(wide, "confidence", config.confidence, "fit"),
    )
    suites, files = [], {}
    # on by default: the costs and ids of SHOWN, the headline's metrics, and where a row comes from when that varies
    shown = {*SHOWN, *config.headline_metrics, *(["source"] if sources and len(sources) > 1 else [])}
    for suite, s in wide.groupby("suite", sort=True):
        splits = sorted((sp for sp in s["split"].unique() if match_any(sp, config.table_splits)), key=split_sort_key)
        sections, chooser = [], {}
        for i, split in enumerate(splits):
            rows = s[s["split"] == split]
            present = [m for m in metrics if m in computed.get((suite, split), ())]
            figs = [
                {"metric": m, "label": METRICS[m].label, "kinds": plots[(suite, split)][m]}
                for m in config.plot_metrics
                if plots.get((suite, split), {}).get(m)
            ]
            key = f"{suite}/{split}"
            path = f"data/{file_slug(suite)}_{file_slug(split)}.js"
            cols = table_columns(present, source=sources is not None, ranked=config.headline_metric, shown=shown)
            chooser.update({c["key"]: c for c in cols if c["key"] != "method" and c["key"] not in chooser})
            files[path] = data_script(
                key, table_data(rows, cols, fit_pref=rows["fit_pref"], conf_pref=rows["conf_pref"], sources=sources)
            )
            sections.append(
                {
                    "name": split,
                    "anchor": anchor("split", key),
                    "open": i == 0,
                    "key": key,
                    "file": path,
                    "total": len(rows),
                    "plots": figs,
                }
            )
        charted = [sp["key"] for sp in sections if match_any(sp["name"], config.plot_splits)] + [
            sp["key"] for sp in sections
        ]
        suites.append(
            {
                "name": suite,
                "anchor": anchor("suite", suite),
                "splits": sections,
                "chart_split": charted[0] if charted else "",
                "columns": [{"key": c["key"], "label": c["label"], "show": c["show"]} for c in chooser.values()],
                "static": [{"split": sp["name"], "plots": sp["plots"]} for sp in sections if sp["plots"]],
                "filters": [
                    _filter("base", "Base model", s["base"]),
                    _filter("family", "Family", s["family"]),
                    _filter("fit", "Fit", s["fit"], config.fit),
                    _filter("confidence", "Confidence", s["confidence"], config.confidence),
                ],
            }
        )
    return suites, files


def repro_context(rows: list[dict], fits) -> dict:
    """The reproduction page's values: each published number of ``rows`` beside ours for each of ``fits`` (the
    difference and whether ours is better), and the sources cited."""
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
                ours.append(
                    {
                        "value": fmt_metric(o["value"]),
                        "diff": f"{o['diff']:+.4f}",
                        "detail": o["detail"],
                        "cls": {True: "better", False: "worse", None: ""}[o["better"]],
                    }
                )
        out.append(
            {
                "suite": c.suite,
                "split": c.split,
                "models": r["models"],
                "method": r["label"],
                "metric": METRICS[c.metric].label,
                "arrow": _ARROW[METRICS[c.metric].higher_is_better],
                "published": f"{c.value:g}",
                "ours": ours,
                "source": sources.index(r["source"]) + 1,
                "note": c.note,
            }
        )
    return {"fits": list(fits), "rows": out, "sources": sources}


def metric_guide(metrics) -> list[dict]:
    """The metric guide of the page: label, arrow, direction and description of each of ``metrics``."""
    return [
        {
            "label": METRICS[m].label,
            "arrow": _ARROW[METRICS[m].higher_is_better],
            "better": "higher" if METRICS[m].higher_is_better else "lower",
            "description": METRICS[m].description,
        }
        for m in metrics
        if m in METRICS
    ]


def headline_views(view: pd.DataFrame, config) -> dict:
    """``(suite, split) -> rows`` of the default view for the tabulated splits, in page order."""
    if view.empty:
        return {}
    out = {}
    for suite, s in view.groupby("suite", sort=True):
        for split in sorted(
            (sp for sp in s["split"].unique() if match_any(sp, config.table_splits)), key=split_sort_key
        ):
            out[(suite, split)] = s[s["split"] == split]
    return out


def page_context(
    inputs, wide: pd.DataFrame, metrics, plots: dict, repro_rows: list[dict], notices, extra_figures: dict | None = None
) -> tuple[dict, dict]:
    """The template's context and the data files ``{relative path: content}``: the split tables and the headline's
    splits after each suite's first (:func:`benchmark.report.pagedata.defer_headline_splits`)."""
    cfg = inputs.config
    used = models_used(wide)
    origin = inputs.origin
    if origin is not None and len(wide):  # the source of every row, beside it in the headline and the tables
        wide = wide.merge(origin.rows[KEY + ["source", "conflict"]], on=KEY, how="left", validate="one_to_one")
        wide[["source", "conflict"]] = wide[["source", "conflict"]].fillna("")
    computed = inputs.results.groupby(["suite", "split"])["metric"].agg(set).to_dict() if len(wide) else {}
    sources = origin.sources if origin is not None else None
    suites, files = suites_context(wide, metrics, computed, plots, cfg, sources) if len(wide) else ([], {})
    views = headline_views(default_view(wide, cfg.fit, cfg.confidence), cfg)
    head = headline_context(views, cfg, zoo=inputs.zoo, paired=inputs.paired)
    head["anchors"] = {n: anchor("model", n) for n in sorted(used)}
    lookup = paired_lookup(inputs.paired)
    heads = {(su["name"], sp["name"]): sp for su in head["suites"] for sp in su["splits"]}
    for suite in suites:  # the answer first: each split's sentence beside the suite's chart
        for sp in suite["splits"]:
            key = (suite["name"], sp["name"])
            sp["summary"] = (
                split_summary(views[key], cfg, paired=lookup, noise_=heads[key]["judged"], head=heads[key])
                if key in views
                else None
            )
    if origin is not None:
        head["sources"] = origin.sources
        head["conflicts"] = int((wide["conflict"] != "").sum()) if len(wide) else 0
    page_head, head_files = defer_headline_splits(compact(head))
    files = files | head_files
    return {
        "title": cfg.title,
        "notices": list(notices),
        "headline": head,
        "headline_json": to_json(page_head),
        "figures": extra_figures or {},
        "suites": suites,
        "guide": metric_guide(metrics),
        "repro": repro_context(repro_rows, cfg.reproduction_fits),
        "models": model_provenance(used, inputs.zoo, inputs.models, inputs.lock, cfg.logits_stages),
        "params_yaml": yaml.safe_dump(inputs.params, sort_keys=False, allow_unicode=True) if inputs.params else "",
        "sources": inputs.sources,
        "defaults": {"fit": cfg.fit, "confidence": cfg.confidence},
        "plot_kinds": _plot_kinds() if plots else {},
        "chart_metric": cfg.headline_metric,
        "charts_json": to_json(
            {
                "reference": cfg.reference_family,
                "metrics": {m: [METRICS[m].label, METRICS[m].higher_is_better] for m in metrics if m in METRICS},
            }
        ),
        "csp": CSP,
    }, files


def _plot_kinds() -> dict:
    from benchmark.report.plots import PLOT_KINDS  # matplotlib: only where static figures were drawn

    return PLOT_KINDS


def render_html(context: dict) -> str:
    """Render ``templates/index.html.j2`` with autoescaping; CSS and JS are inlined (``context["plotly"]``: the URL
    of plotly.js, relative to the page)."""
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    static = {
        name: (_HERE / "static" / f).read_text(encoding="utf-8")
        for name, f in (
            ("css", "leaderboard.css"),
            ("js", "leaderboard.js"),
            ("headline_js", "headline.js"),
            ("charts_js", "charts.js"),
        )
    }
    charts = json.loads(context["charts_json"]) | {"plotly": context["plotly"]}
    return env.get_template("index.html.j2").render(**(context | static | {"charts_json": to_json(charts)}))
