"""Figures beside the headline: the headline comparison and, for corruption suites, the severity view.

* ``headline_<suite>_<split>``: per base model (rows), the primary metric of
  the base alone, its best cheap duo, its best duo and every other method built
  on it (one marker each), so the papers' question (does a cheap sidekick buy
  most of an ensemble's gain?) is one glance;
* ``severity_<suite>_<metric>``: each headline method of the best base (ranked
  on the headline split) against corruption severity, averaged over the
  corruption types (left) and per type (small multiples): the corruption splits
  the tables leave out are shown here.

Same look as :mod:`benchmark.report.plots`: PNG and SVG, deterministic output.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from benchmark.core.metric_info import METRICS
from benchmark.report.plotaxes import clip_axis
from benchmark.report.plots import RC_PARAMS, axis_label, palette, plain_text, save_figure
from benchmark.report.provenance import file_slug
from benchmark.report.tables import match_any, member_names, method_label

_CORRUPT = re.compile(r"^corrupt-(.+)-(\d+)$")
# headline row kind -> marker (other rows: one marker per method label)
_KIND_MARKERS = {"alone": "*", "cheap": "o", "best": "s"}
_OTHER_MARKERS = ["D", "^", "v", "P", "X", "<", ">", "p", "h", "8"]


def _role_key(role: str) -> str:
    return (
        "cheap"
        if "≤" in role
        else ("best" if role.startswith("best duo") else "alone" if role == "base alone" else "other")
    )


def headline_points(split: dict, metric: str) -> pd.DataFrame:
    """One point per headline row for ``metric``: base, role, label, models, value, interval of the value."""
    rows = []
    for e, role in split["order"].get(metric, []):
        ent = split["entries"][e]
        key = _role_key(role)
        rows.append(
            {
                "base": ent["base"],
                "role": key,
                "legend": role if key != "other" else ent["label"],
                "label": ent["label"],
                "models": ent["models"],
                "value": ent["metrics"][metric]["value"],
            }
        )
    return pd.DataFrame(rows, columns=["base", "role", "legend", "label", "models", "value"])


def headline_figure(split: dict, metric: str, title: str) -> Figure | None:
    """Dot plot: bases on the y-axis, ``metric`` on the x-axis, one marker per headline row."""
    pts = headline_points(split, metric)
    pts = pts[np.isfinite(pts["value"].astype(float))]
    if pts.empty:
        return None
    bases = sorted(pts["base"].unique())
    others = sorted(pts.loc[pts["role"] == "other", "legend"].unique())
    legend_order = ["base alone", "cheap", "best"] + others
    colors = palette(legend_order)
    fig = Figure(figsize=(6.6, 1.2 + 0.45 * len(bases)), layout="constrained")
    ax = fig.add_subplot()
    ypos = {b: i for i, b in enumerate(bases)}
    seen = set()
    for r in pts.itertuples():
        kind = "other" if r.role == "other" else r.role
        mk = _KIND_MARKERS.get(kind) or _OTHER_MARKERS[others.index(r.legend) % len(_OTHER_MARKERS)]
        name = {"alone": "base alone", "cheap": "best duo, balance ≤ cap", "best": "best duo overall"}.get(
            kind, r.legend
        )
        ckey = {"alone": "base alone", "cheap": "cheap", "best": "best"}.get(kind, r.legend)
        ax.scatter(
            [r.value],
            [ypos[r.base]],
            marker=mk,
            s=110 if kind == "alone" else 45,
            color=colors[ckey],
            edgecolor="black",
            linewidth=0.5,
            zorder=3,
            label=None if name in seen else plain_text(name),
        )
        seen.add(name)
    for b, g in pts.groupby("base"):
        ax.plot([g["value"].min(), g["value"].max()], [ypos[b]] * 2, color="0.75", lw=1, zorder=1)
    clip_axis(
        ax,
        pts["value"],
        [f"{r.label} ({r.models})" for r in pts.itertuples()],
        x=[ypos[b] for b in pts["base"]],
        axis="x",
    )
    ax.set_yticks(range(len(bases)), [plain_text(b) for b in bases])
    ax.set_ylim(-0.6, len(bases) - 0.4)
    ax.set_xlabel(axis_label(metric))
    ax.set_title(plain_text(title), fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    return fig


def corruption_rows(view: pd.DataFrame) -> pd.DataFrame:
    """The corruption splits of ``view`` with their type and severity columns added."""
    m = view["split"].str.extract(_CORRUPT)
    ok = m[0].notna()
    return view[ok].assign(ctype=m.loc[ok, 0], severity=m.loc[ok, 1].astype(int))


def severity_table(rows: pd.DataFrame, wanted: list[tuple[str, str]], metric: str) -> pd.DataFrame:
    """Per (label, models) in ``wanted``: ``metric`` per corruption type and severity, long format."""
    cor = corruption_rows(rows)
    if cor.empty or metric not in cor.columns:
        return pd.DataFrame(columns=["label", "models", "ctype", "severity", "value"])
    cor = cor.assign(
        label=[method_label(f, m) for f, m in zip(cor["family"], cor["method"])],
        models=[" + ".join(member_names(a, b, c)) for a, b, c in zip(cor["members"], cor["base"], cor["sidekick"])],
        value=cor[metric].astype(float),
    )
    keep = pd.Series([(a, b) in set(wanted) for a, b in zip(cor["label"], cor["models"])], index=cor.index)
    return cor.loc[keep, ["label", "models", "ctype", "severity", "value"]].reset_index(drop=True)


def severity_figure(table: pd.DataFrame, metric: str, title: str) -> Figure | None:
    """Mean over corruption types against severity (left), and one small panel per type."""
    if table.empty or not np.isfinite(table["value"]).any():
        return None
    types = sorted(table["ctype"].unique())
    ncol = min(4, len(types))
    nrow = -(-len(types) // ncol)
    fig = Figure(figsize=(6.6 + 2.0 * ncol, max(3.2, 1.9 * nrow)), layout="constrained")
    grid = fig.add_gridspec(nrow, ncol + 2)
    main = fig.add_subplot(grid[:, :2])
    names = [f"{lab} ({mod})" for lab, mod in table[["label", "models"]].drop_duplicates().itertuples(index=False)]
    colors = palette(names)
    table = table.assign(name=[f"{lab} ({mod})" for lab, mod in zip(table["label"], table["models"])])
    mean = table.groupby(["name", "severity"], sort=True)["value"].mean().reset_index()
    for name, g in mean.groupby("name", sort=True):
        main.plot(g["severity"], g["value"], marker="o", ms=4, color=colors[name], label=plain_text(name))
    main.set_xlabel("corruption severity")
    main.xaxis.set_major_locator(MaxNLocator(integer=True))
    main.set_ylabel(axis_label(metric))
    main.set_title(plain_text(f"{title}: mean over {len(types)} corruption types"), fontsize=9)
    main.grid(True, alpha=0.3)
    main.legend(loc="upper left", bbox_to_anchor=(0.0, -0.14), fontsize=7, frameon=False)
    for i, t in enumerate(types):
        ax = fig.add_subplot(grid[i // ncol, 2 + i % ncol], sharey=main)
        for name, g in table[table["ctype"] == t].groupby("name", sort=True):
            g = g.sort_values("severity")
            ax.plot(g["severity"], g["value"], marker="o", ms=2.5, lw=1, color=colors[name])
        ax.set_title(plain_text(t), fontsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=6)
        ax.grid(True, alpha=0.3)
    lo, hi = np.nanmin(table["value"]), np.nanmax(table["value"])
    pad = 0.05 * (hi - lo if hi > lo else 1.0)
    main.set_ylim(lo - pad, hi + pad)
    return fig


def write_extra_figures(head: dict, view: pd.DataFrame, config, out_dir: Path) -> dict:
    """Headline and severity figures; ``{"suite/split": [{"caption", "files"}]}`` for the page."""
    out_dir = Path(out_dir)
    metric = config.headline_metric
    label = METRICS[metric].label
    figures: dict = {}
    with matplotlib.rc_context(RC_PARAMS):
        for suite in head["suites"]:
            for split in suite["splits"]:
                if not match_any(split["name"], config.plot_splits):
                    continue
                fig = headline_figure(
                    split, metric, f"{suite['name']} / {split['name']}: {label}, headline rows per base"
                )
                if fig is None:
                    continue
                stem = out_dir / "plots" / f"headline_{file_slug(suite['name'])}_{file_slug(split['name'])}"
                paths = save_figure(fig, stem, config.formats, config.dpi)
                figures.setdefault(f"{suite['name']}/{split['name']}", []).append(
                    {
                        "caption": f"{label} of the headline rows, per base model",
                        "files": {p.suffix[1:]: p.relative_to(out_dir).as_posix() for p in paths},
                    }
                )
            _severity(suite, view[view["suite"] == suite["name"]] if len(view) else view, config, out_dir, figures)
    return figures


def _severity(suite: dict, rows: pd.DataFrame, config, out_dir: Path, figures: dict) -> None:
    """The severity view of one suite, shown with the headline of its ``headline_split``."""
    split = next((s for s in suite["splits"] if s["name"] == config.headline_split), None)
    if split is None or rows.empty or corruption_rows(rows).empty:
        return
    order = split["order"].get(config.headline_metric, [])
    if not order:
        return
    top = split["entries"][order[0][0]]["base"]
    wanted = [(e["label"], e["models"]) for i, _ in order if (e := split["entries"][i])["base"] == top]
    for metric in dict.fromkeys(("accuracy", config.headline_metric)):
        table = severity_table(rows, wanted, metric)
        fig = severity_figure(table, metric, f"{suite['name']}: {METRICS[metric].label}, headline rows of {top}")
        if fig is None:
            continue
        paths = save_figure(
            fig,
            out_dir / "plots" / f"severity_{file_slug(suite['name'])}_{file_slug(metric)}",
            config.formats,
            config.dpi,
        )
        figures.setdefault(f"{suite['name']}/{split['name']}", []).append(
            {
                "caption": f"{METRICS[metric].label} against corruption severity (headline rows of {top})",
                "files": {p.suffix[1:]: p.relative_to(out_dir).as_posix() for p in paths},
            }
        )
