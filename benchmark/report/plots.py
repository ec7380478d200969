"""Pareto plots of a metric against cost, and their data files for ``dvc plots``.

Three views per (suite, split, metric) (:data:`PLOT_KINDS`):

* ``gflops``: every method (any family) against total GFLOPs, log scale, with
  the Pareto frontier over all of them;
* ``balance``: the rows that have a FLOPs balance (duos), per base model, with
  each base alone at balance 0 and the frontier of each base;
* ``overhead``: the rows that report ``overhead_percent`` (trainable parameters
  in % of the pretrained backbone, e.g. SVE), log scale, with their frontier.

Points carry their bootstrap interval as error bars. Colours and markers come
from the labels found in the table, so a new family needs no code.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from adjustText import adjust_text
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import LogFormatter
from tqdm import tqdm

from benchmark.core.metric_info import METRICS
from benchmark.core.pareto import pareto_front
from benchmark.report.plotaxes import clip_axis
from benchmark.report.provenance import file_slug
from benchmark.report.tables import match_any, method_label
from benchmark.storage.downloads import write_csv
from benchmark.storage.store import atomic_path

_MARKERS = ["o", "s", "D", "^", "v", "P", "X", "<", ">", "p", "h", "8"]
RC_PARAMS = {"svg.hashsalt": "uq-benchmark-report", "svg.fonttype": "none", "font.size": 9}
_META = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}
# kind -> (x axis in words, caption)
PLOT_KINDS = {
    "gflops": ("total GFLOPs", "total GFLOPs, every method"),
    "balance": ("FLOPs balance", "FLOPs balance, per base model"),
    "overhead": ("trainable parameters", "trainable parameters in % of the backbone, methods that report them"),
}


def palette(names) -> dict[str, tuple]:
    """Stable, distinct colour per name (sorted): tab10 up to 10 names, then husl."""
    names = sorted(set(names))
    colors = sns.color_palette("tab10" if len(names) <= 10 else "husl", max(len(names), 1))
    return dict(zip(names, colors))


def markers(names) -> dict[str, str]:
    """A marker per name, the same for a name on every plot."""
    return {n: _MARKERS[i % len(_MARKERS)] for i, n in enumerate(sorted(set(names)))}


def plot_points(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The points of one metric: label, ids, costs, value and interval; no GFLOPs = dropped."""
    cols = ["family", "method", "base", "sidekick", "members", "gflops", "balance", "overhead_percent"]
    if metric not in rows.columns or rows.empty:
        return pd.DataFrame(columns=["label", *cols, "value", "ci_low", "ci_high"])
    p = rows.reindex(columns=cols)  # a table without the optional overhead column gets NaN
    p.insert(0, "label", [method_label(f, m) for f, m in zip(rows["family"], rows["method"])])
    p["value"] = rows[metric].astype(float)
    p["ci_low"] = rows.get(f"{metric}:lo", np.nan)
    p["ci_high"] = rows.get(f"{metric}:hi", np.nan)
    return p[np.isfinite(p["gflops"].astype(float)) & (p["gflops"].astype(float) > 0)].reset_index(drop=True)


def plain_text(s: str) -> str:
    """Matplotlib text that never turns into mathtext."""
    return str(s).replace("$", r"\$")


def _yerr(p: pd.DataFrame):
    lo = (p["value"] - p["ci_low"]).to_numpy(dtype=float)
    hi = (p["ci_high"] - p["value"]).to_numpy(dtype=float)
    return np.vstack([np.nan_to_num(lo, nan=0.0).clip(0), np.nan_to_num(hi, nan=0.0).clip(0)])


def _frontier(ax, x, y, hib: bool, **kw):
    ok = pareto_front(x, y, hib)
    if ok.any():
        order = np.argsort(x[ok], kind="stable")
        ax.step(x[ok][order], y[ok][order], where="post", zorder=1, **kw)
    return ok


def axis_label(metric: str) -> str:
    """A metric's axis label with its direction."""
    info = METRICS[metric]
    return f"{info.label} ({'higher' if info.higher_is_better else 'lower'} is better)"


class _PlainLog(LogFormatter):
    """Log-axis tick labels as plain numbers; matplotlib still picks which ticks get one."""

    def _num_to_string(self, x, vmin, vmax):
        return f"{x:g}"


def _cost_figure(
    points: pd.DataFrame, metric: str, title: str, colors, marks, reference_family: str, cost: str, xlabel: str
) -> Figure:
    """Metric against the cost column ``cost`` (> 0, log scale) with the frontier; reference rows are stars named by
    base."""
    hib = METRICS[metric].higher_is_better
    fig = Figure(figsize=(6.6, 4.4), layout="constrained")
    ax = fig.add_subplot()
    x = points[cost].to_numpy(dtype=float)
    y = points["value"].to_numpy(dtype=float)
    on = _frontier(ax, x, y, hib, color="black", lw=2.0, ls="--", label="Pareto frontier")
    names = []
    for label, g in points.groupby("label", sort=True):
        is_ref = (g["family"] == reference_family).all()
        c = colors[label]
        front = on[points.index.get_indexer(g.index)]
        ax.errorbar(g[cost], g["value"], yerr=_yerr(g), fmt="none", ecolor=c, alpha=0.4, lw=1, zorder=2)
        ax.scatter(
            g[cost],
            g["value"],
            color=c,
            marker="*" if is_ref else marks[label],
            s=110 if is_ref else 30,
            alpha=np.where(front | is_ref, 1.0, 0.45),
            edgecolor="black" if is_ref else "white",
            linewidth=0.6,
            label=plain_text(label),
            zorder=3,
        )
        if is_ref:  # name each base model (placed apart by adjustText once the axes are final)
            names += [
                ax.text(xi, yi, plain_text(base), fontsize=7, zorder=5)
                for xi, yi, base in g.sort_values(cost)[[cost, "value", "base"]].itertuples(index=False)
            ]
    ax.scatter(x[on], y[on], s=90, facecolor="none", edgecolor="0.2", lw=0.8, zorder=4, label="on the frontier")
    clip_axis(
        ax,
        y,
        [f"{lab} ({mem})" for lab, mem in zip(points["label"], points["members"])],
        lows=points["ci_low"],
        highs=points["ci_high"],
        x=x,
    )
    if (x > 0).all():
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(_PlainLog())  # "0.1", "2", not "10^-1", "2 x 10^0"
        ax.xaxis.set_minor_formatter(_PlainLog(labelOnlyBase=False))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(axis_label(metric))
    ax.set_title(plain_text(title), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ref = (points["family"] == reference_family).to_numpy()
    place_labels(ax, names, x[ref | on], y[ref | on])  # labels keep off the stars and the frontier
    return fig


def place_labels(ax, texts, x, y) -> None:
    """Move point labels apart and off the points (adjustText), with a thin leader line; labels of
    points outside the axis range are dropped (the note under the axes names them)."""
    lo, hi = ax.get_ylim()
    keep = []
    for t in texts:
        if lo <= t.get_position()[1] <= hi:
            keep.append(t)
        else:
            t.remove()
    if keep:
        FigureCanvasAgg(ax.figure)  # adjustText measures the texts with a renderer
        ok = np.isfinite(x) & np.isfinite(y) & (y >= lo) & (y <= hi)
        adjust_text(
            keep,
            x=x[ok],
            y=y[ok],
            ax=ax,
            expand=(1.15, 1.3),
            iter_lim=100,  # deterministic (no time limit)
            arrowprops=dict(arrowstyle="-", color="0.45", lw=0.5),
        )


def gflops_figure(points: pd.DataFrame, metric: str, title: str, colors, marks, reference_family: str) -> Figure:
    """Metric against total GFLOPs for every method; reference rows are stars named by base."""
    return _cost_figure(
        points, metric, title, colors, marks, reference_family, "gflops", "total GFLOPs per image (log scale)"
    )


def overhead_points(points: pd.DataFrame) -> pd.DataFrame:
    """The points that report a trainable-parameter overhead (finite, > 0)."""
    x = points["overhead_percent"].astype(float)
    return points[np.isfinite(x) & (x > 0)]


def overhead_figure(
    points: pd.DataFrame, metric: str, title: str, colors, marks, reference_family: str
) -> Figure | None:
    """Metric against trainable parameters in % of the backbone; None when no row reports them."""
    pts = overhead_points(points)
    if pts.empty:
        return None
    return _cost_figure(
        pts,
        metric,
        title,
        colors,
        marks,
        reference_family,
        "overhead_percent",
        "trainable parameters, % of the pretrained backbone (log scale)",
    )


def _balance_base(ax, g: pd.DataFrame, alone: pd.DataFrame, hib: bool, c, marks) -> None:
    """One base's points of :func:`balance_figure` in colour ``c``: its duos ``g`` (frontier line, error bars, the
    points off the frontier faded) and the base alone (``alone``: a star at balance 0 and a dotted line)."""
    x = np.concatenate([g["balance"].to_numpy(dtype=float), np.zeros(len(alone))])
    y = np.concatenate([g["value"].to_numpy(dtype=float), alone["value"].to_numpy(dtype=float)])
    on = _frontier(ax, x, y, hib, color=c, lw=1.3)
    for label, h in g.groupby("label", sort=True):
        keep = on[: len(g)][g.index.get_indexer(h.index)]
        ax.errorbar(h["balance"], h["value"], yerr=_yerr(h), fmt="none", ecolor=c, alpha=0.4, lw=1, zorder=2)
        for front, alpha in ((True, 1.0), (False, 0.35)):
            sel = h[keep == front]
            ax.scatter(
                sel["balance"],
                sel["value"],
                color=c,
                marker=marks[label],
                s=30,
                alpha=alpha,
                edgecolor="white",
                linewidth=0.5,
                zorder=3,
            )
    for r in alone.itertuples():
        ax.axhline(r.value, color=c, ls=":", lw=0.8, zorder=1)
        ax.scatter([0.0], [r.value], color=c, marker="*", s=130, edgecolor="black", linewidth=0.6, zorder=4)


def _side_legend(ax, handles, title: str, loc: str, y: float):
    """A small frameless legend of ``handles`` right of the axes, anchored at height ``y``."""
    return ax.legend(
        handles=handles,
        title=title,
        loc=loc,
        bbox_to_anchor=(1.01, y),
        fontsize=7,
        title_fontsize=7,
        frameon=False,
    )


def balance_figure(
    points: pd.DataFrame, metric: str, title: str, colors, marks, reference_family: str
) -> Figure | None:
    """Metric against FLOPs balance, one colour per base; None when no row has a balance."""
    hib = METRICS[metric].higher_is_better
    duo = points[np.isfinite(points["balance"].astype(float))]
    if duo.empty:
        return None
    ref = points[(points["family"] == reference_family) & ~np.isfinite(points["balance"].astype(float))]
    fig = Figure(figsize=(6.6, 4.4), layout="constrained")
    ax = fig.add_subplot()
    for base, g in duo.groupby("base", sort=True):
        _balance_base(ax, g, ref[ref["base"] == base], hib, colors[base], marks)
    bases = [Line2D([], [], color=colors[b], lw=1.3, label=plain_text(b)) for b in sorted(duo["base"].unique())]
    kinds = [
        Line2D([], [], color="0.4", marker=marks[m], ls="none", label=plain_text(m))
        for m in sorted(duo["label"].unique())
    ]
    kinds.append(Line2D([], [], color="0.4", marker="*", ms=10, ls="none", label="base alone (balance 0)"))
    ax.add_artist(_side_legend(ax, bases, "base (frontier line)", "upper left", 1.0))
    _side_legend(ax, kinds, "method", "lower left", 0.0)
    shown = pd.concat([duo, ref[ref["base"].isin(duo["base"])]])
    clip_axis(
        ax,
        shown["value"],
        [f"{lab} ({mem})" for lab, mem in zip(shown["label"], shown["members"])],
        lows=shown["ci_low"],
        highs=shown["ci_high"],
        x=np.nan_to_num(shown["balance"].to_numpy(dtype=float), nan=0.0),
    )
    ax.set_xlabel("FLOPs balance = GFLOPs(sidekick) / GFLOPs(base)")
    ax.set_ylabel(axis_label(metric))
    ax.set_title(plain_text(title), fontsize=10)
    ax.set_xlim(left=-0.02)
    ax.grid(True, alpha=0.3)
    return fig


def save_figure(fig: Figure, stem: Path, formats, dpi: int) -> list[Path]:
    """Write ``stem.<fmt>`` for every format, each atomically."""
    paths = []
    with matplotlib.rc_context(RC_PARAMS):
        for fmt in formats:
            path = stem.with_name(f"{stem.name}.{fmt}")
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=fmt, dpi=dpi, metadata=_META[fmt], facecolor="white")
            paths.append(path)
    return paths


def frontier_table(points: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The GFLOPs frontier of one metric, cheapest first: gflops, value, label, members.

    Keeps the index of ``points``.
    """
    hib = METRICS[metric].higher_is_better
    on = pareto_front(points["gflops"].to_numpy(dtype=float), points["value"].to_numpy(dtype=float), hib)
    f = points.loc[on, ["gflops", "value", "label", "members"]]
    return f.sort_values(["gflops", "value"], ascending=[True, not hib], kind="stable")


def _draw_metric(job) -> tuple[dict, pd.DataFrame] | None:
    """The figures and frontier file of one (suite, split, metric); ``(entry, points with on_front)``."""
    suite, split, rows, metric, colors, marks, base_colors, config, out_dir = job
    with matplotlib.rc_context(RC_PARAMS):
        pts = plot_points(rows, metric)
        if pts["value"].notna().sum() == 0:
            return None
        name = f"{file_slug(suite)}_{file_slug(split)}_{file_slug(metric)}"
        entry: dict = {}
        label = METRICS[metric].label
        figs = (
            {}
            if not config.formats
            else {
                "gflops": gflops_figure(
                    pts, metric, f"{suite} / {split}: {label} vs cost", colors, marks, config.reference_family
                ),
                "balance": balance_figure(
                    pts,
                    metric,
                    f"{suite} / {split}: {label} vs FLOPs balance",
                    base_colors,
                    marks,
                    config.reference_family,
                ),
                "overhead": overhead_figure(
                    pts,
                    metric,
                    f"{suite} / {split}: {label} vs trainable parameters",
                    colors,
                    marks,
                    config.reference_family,
                ),
            }
        )
        for kind, fig in figs.items():
            if fig is not None:
                paths = save_figure(fig, out_dir / "plots" / f"{kind}_{name}", config.formats, config.dpi)
                entry[kind] = {p.suffix[1:]: p.relative_to(out_dir).as_posix() for p in paths}
        front = frontier_table(pts, metric)
        write_csv(out_dir / "plots" / "data" / "frontier" / f"{name}.csv", front.reset_index(drop=True))
        return entry, pts.assign(metric=metric, on_front=pts.index.isin(front.index))


def _pool(workers: int, jobs: int):
    """A pool of forked drawing processes, or None (one worker, one job, or no fork on this platform)."""
    if workers <= 1 or jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    return ProcessPoolExecutor(min(workers, jobs), mp_context=multiprocessing.get_context("fork"))


def write_plots(view: pd.DataFrame, config, out_dir: Path, *, progress: bool = True) -> dict:
    """Draw every (suite, split, metric) of ``view`` whose split matches ``config.plot_splits``.

    ``view`` is the wide table restricted to the default fit and confidence.
    Writes ``plots/<kind>_<suite>_<split>_<metric>.<fmt>``,
    ``plots/data/pareto_<suite>_<split>.csv`` (every point, long format) and
    ``plots/data/frontier/<suite>_<split>_<metric>.csv`` (the GFLOPs frontier,
    the curves for ``dvc plots``). Returns ``{(suite, split): {metric: {kind:
    {fmt: path relative to out_dir}}}}``. ``config.workers`` processes draw the
    figures; every figure is drawn alone, so the files do not depend on it.
    """
    out_dir = Path(out_dir)
    view = view[[match_any(s, config.plot_splits) for s in view["split"]]] if len(view) else view
    metrics = [m for m in config.plot_metrics if m in view.columns]
    labels = [method_label(f, m) for f, m in zip(view["family"], view["method"])]
    colors, marks = palette(labels), markers(labels)
    base_colors = {su: palette(g["base"]) for su, g in view.groupby("suite")}  # per suite: fewer, more distinct colours
    jobs = [
        (su, sp, g, m, colors, marks, base_colors[su], config, out_dir)
        for (su, sp), g in view.groupby(["suite", "split"], sort=True)
        for m in metrics
    ]
    written: dict = {}
    long_parts: dict = {}
    pool = _pool(getattr(config, "workers", 1), len(jobs))
    try:
        done = pool.map(_draw_metric, jobs) if pool is not None else map(_draw_metric, jobs)
        for job, got in zip(
            jobs, tqdm(done, total=len(jobs), desc="report plots", unit="metric", disable=not progress)
        ):
            if got is None:
                continue
            suite, split, metric = job[0], job[1], job[3]
            written.setdefault((suite, split), {})[metric] = got[0]
            long_parts.setdefault((suite, split), []).append(got[1])
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    for (suite, split), parts in long_parts.items():
        write_csv(
            out_dir / "plots" / "data" / f"pareto_{file_slug(suite)}_{file_slug(split)}.csv",
            pd.concat(parts, ignore_index=True),
        )
    return written
