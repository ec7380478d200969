"""Build the whole report folder from loaded inputs, atomically.

Everything is written into a temporary folder next to ``out_dir`` that replaces
it at the end (:func:`benchmark.storage.store.atomic_dir`), so a failed run leaves the
previous report untouched. The static figures (matplotlib) are drawn only when asked
(the report stage, for ``dvc plots`` and papers); ``publish`` asks for none.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from benchmark.report.assets import PLOTLY, write_assets
from benchmark.report.headline import dvc_metrics
from benchmark.report.inputs import ReportInputs
from benchmark.report.leaderboard import page_context, render_html
from benchmark.report.published import Published, load_published, reproduction_rows
from benchmark.report.tables import (
    default_view,
    metric_order,
    metrics_in,
    missing_notices,
    wide_table,
)
from benchmark.storage.downloads import DownloadTable, write_downloads
from benchmark.storage.results_schema import COLUMNS
from benchmark.storage.store import StoreError, atomic_dir, write_json, write_text

MARKER = ".uq-report"  # marks a folder this module wrote, so it may replace it


def check_out_dir(out_dir) -> Path:
    """Refuse to replace a non-empty folder that is not a previous report."""
    out = Path(out_dir)
    if out.exists():
        if not out.is_dir():
            raise StoreError(f"{out}: output path exists and is not a folder")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise StoreError(
                f"{out}: output folder is not empty and holds no previous report ({MARKER}); refusing to replace it"
            )
    return out


def publishable(root: Path) -> None:
    """Temporary files and folders are private (0600/0700): give the report the umask's modes."""
    umask = os.umask(0)
    os.umask(umask)
    for d, _, files in os.walk(root):
        os.chmod(d, 0o777 & ~umask)
        for f in files:
            os.chmod(os.path.join(d, f), 0o666 & ~umask)


def default_rows(wide: pd.DataFrame, config) -> pd.DataFrame:
    """The rows of the preferred fit and confidence (what the tables show by default and the plots draw)."""
    return default_view(wide, config.fit, config.confidence)


def downloads_of(inputs: ReportInputs) -> dict[str, DownloadTable]:
    """The tables written to ``data/`` for download: ``inputs.downloads``, else the results table as ``rows``."""
    if inputs.downloads is not None:
        return inputs.downloads
    return {
        "rows": DownloadTable(inputs.results, COLUMNS, "the results table: one row per (suite, split, method, metric)")
    }


def build_report(
    inputs: ReportInputs,
    out_dir,
    *,
    published: Published | None = None,
    progress: bool = True,
    figures: bool = True,
    assets: str | None = None,
) -> Path:
    """Write ``index.html``, ``data/`` (the page's split tables as script files; the rows for download as
    Parquet and gzipped CSV with ``schema.json``), ``headline/`` (the compact headline that ``dvc metrics
    show`` prints) and, with ``figures``, ``plots/`` (static PNG/SVG figures of report.plot_metrics x
    report.plot_splits in report.formats) and ``plots/data/`` (their points and frontiers for ``dvc plots``)
    under ``out_dir``; return the page path.

    The page draws its Pareto charts itself (plotly.js): it needs none of the figures. ``assets`` is the
    URL (relative to the page, ending in '/') of a folder where the caller put the shared files of
    :mod:`benchmark.report.assets` (a site: one copy for all pages); None writes them to ``assets/``.
    ``published`` defaults to the package's ``published.yaml``. Raises
    ``ValueError`` for a results table with repeated rows and
    :class:`benchmark.storage.store.StoreError` for an output folder it may not replace.
    """
    cfg = inputs.config
    out = check_out_dir(out_dir)
    wide = wide_table(inputs.results)
    metrics = metric_order(metrics_in(wide), cfg.metrics)
    notices = list(inputs.notices) + missing_notices(inputs.results, cfg, inputs.models)
    pub = published if published is not None else load_published()
    repro = reproduction_rows(pub, wide, cfg.reproduction_fits)
    with atomic_dir(out) as tmp:
        if assets is None:
            write_assets(tmp / "assets")
        plots = {}
        if figures:
            from benchmark.report.plots import write_plots

            plots = write_plots(default_rows(wide, cfg), cfg, tmp, progress=progress)
        context, files = page_context(inputs, wide, metrics, plots, repro, notices)
        context["plotly"] = (assets if assets is not None else "assets/") + PLOTLY
        if figures and cfg.formats:
            from benchmark.report.curves_plot import write_curve_figures
            from benchmark.report.extra_plots import write_extra_figures

            context["figures"] = write_extra_figures(context["headline"], default_rows(wide, cfg), cfg, tmp)
            write_curve_figures(
                context["headline"],
                default_rows(wide, cfg),
                cfg,
                tmp,
                inputs.logits_dir,
                context["figures"],
                inputs.methods_dir,
            )
        data = write_downloads(tmp / "data", downloads_of(inputs), prefix="data/")
        context["downloads"], context["schema"] = data["tables"], data["schema"]
        for rel, text in files.items():
            write_text(tmp / rel, text)
        for rel, obj in dvc_metrics(context["headline"], cfg).items():
            write_json(tmp / rel, obj)
        write_text(tmp / "index.html", render_html(context))
        write_text(tmp / MARKER, "written by benchmark.report; this folder is replaced on every run\n")
        publishable(tmp)
    return out / "index.html"
