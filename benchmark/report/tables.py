"""Views of the tidy results table: one row per evaluated method, metrics as columns.

Nothing here knows the method families: they are read from the table.
"""

from __future__ import annotations

import fnmatch
import math
import re

import numpy as np
import pandas as pd

from benchmark.core.metric_info import METRICS
from benchmark.storage.results_schema import COLUMNS

# One leaderboard row = one value of these columns.
KEY = ["suite", "split", "family", "method", "base", "sidekick", "members", "fit", "confidence"]
GROUP = KEY[:-2]  # one method, all its variants
_PER_METRIC = ["metric", "value", "ci_low", "ci_high"]
# Per-row columns: every other schema column (costs, hash, fitted temperatures, ...).
COST = [c for c in COLUMNS if c not in KEY + _PER_METRIC]
# Those the leaderboard has no column for: shown as a tooltip.
EXTRA_COLUMNS = [
    c
    for c in COST
    if c
    not in (
        "gflops",
        "params",
        "throughput",
        "balance",
        "overhead_percent",
        "extra_params_percent",
        "n",
        "inputs_hash",
        "train_images",
        "train_params",
    )
]
_SPLIT_ORDER = {"test": 0, "shift": 1, "ood": 2, "val": 3}
_CORRUPT = re.compile(r"^corrupt-(.+)-(\d+)$")


def method_label(family: str, method: str) -> str:
    """'duo · weighted'; just the family when the method is empty or repeats it."""
    return family if method in ("", family) else f"{family} · {method}"


def member_names(members: str, base: str = "", sidekick: str = "") -> list[str]:
    """Models of a row: the '+'-joined ``members``, else base and sidekick."""
    names = [m for m in members.split("+") if m] if members else []
    return names or [m for m in (base, sidekick) if m]


def models_used(rows: pd.DataFrame) -> set[str]:
    """Every model name behind the rows (:func:`member_names` of each distinct members, base, sidekick)."""
    if rows.empty:
        return set()
    combos = rows[["members", "base", "sidekick"]].drop_duplicates()
    return {n for m, b, k in combos.itertuples(index=False, name=None) for n in member_names(m, b, k)}


def split_sort_key(split: str):
    """test, shift, ood, val, then corruptions by type and severity, then the rest."""
    if split in _SPLIT_ORDER:
        return (0, _SPLIT_ORDER[split], "", 0)
    m = _CORRUPT.match(split)
    if m:
        return (1, 0, m.group(1), int(m.group(2)))
    return (2, 0, split, 0)


def match_any(name: str, patterns) -> bool:
    """Whether ``name`` matches one of the shell ``patterns``."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def metric_order(metrics_present, preferred) -> list[str]:
    """``preferred`` metrics first (those present), then the others alphabetically."""
    present = set(metrics_present)
    return [m for m in preferred if m in present] + sorted(present - set(preferred))


def metric_direction(metric: str) -> bool | None:
    """True if higher is better, False if lower, None for a metric not in METRICS."""
    info = METRICS.get(metric)
    return None if info is None else info.higher_is_better


def wide_table(results: pd.DataFrame) -> pd.DataFrame:
    """Pivot the tidy table to one row per ``KEY``.

    Columns: ``KEY``, ``COST`` (first value of the group), then for every metric
    ``m``: ``m`` (value), ``m:lo`` and ``m:hi`` (bootstrap interval). Raises
    ``ValueError`` listing the first duplicated (key, metric) rows.
    """
    if results.empty:
        return pd.DataFrame(columns=KEY + COST)
    dup = results.duplicated(KEY + ["metric"], keep=False)
    if dup.any():
        shown = results.loc[dup, KEY + ["metric"]].drop_duplicates().head(5).to_dict("records")
        raise ValueError(f"results table: {int(dup.sum())} rows repeat the same (method, metric); first: {shown}")
    out = results.groupby(KEY, sort=False, dropna=False)[COST].first()
    for col, suffix in (("value", ""), ("ci_low", ":lo"), ("ci_high", ":hi")):
        p = results.pivot(index=KEY, columns="metric", values=col)
        p.columns = [f"{m}{suffix}" for m in p.columns]
        out = out.join(p)
    out = out.reset_index()
    return out.sort_values(["suite", "split", "gflops", "family", "method", "members"], kind="stable").reset_index(
        drop=True
    )


def metrics_in(wide: pd.DataFrame) -> list[str]:
    """The metric columns of a wide table (not a key, a cost or an interval column)."""
    return [c for c in wide.columns if c not in KEY + COST and ":" not in c]


def preferred(wide: pd.DataFrame, col: str, want: str, other: str) -> pd.Series:
    """True where ``col`` is ``want``, or where the method (same ``GROUP`` and ``other``
    column) has no row with ``want`` at all, so that a method that exists only in
    another variant (e.g. a duo scored only with the published confidence) still shows."""
    has = (wide[col] == want).groupby([wide[c] for c in GROUP + [other]], dropna=False).transform("any")
    return (wide[col] == want) | ~has


def default_view(wide: pd.DataFrame, fit: str, confidence: str) -> pd.DataFrame:
    """Rows of the preferred fit and the preferred confidence (see :func:`preferred`)."""
    if wide.empty:
        return wide
    return wide[preferred(wide, "fit", fit, "confidence") & preferred(wide, "confidence", confidence, "fit")]


def missing_notices(results: pd.DataFrame, config, models: pd.DataFrame | None) -> list[str]:
    """What the page should say is missing, given the configured metrics and splits."""
    if results.empty:
        return []
    notes = []
    for (suite, split), g in results.groupby(["suite", "split"], sort=True):
        present = set(g["metric"].unique())
        absent = [m for m in config.metrics if m not in present]
        if absent and present & set(config.metrics):  # a split with none of them (e.g. OOD) is another kind
            notes.append(f"{suite} / {split}: metrics not computed: {', '.join(absent)}.")
    for suite, g in results.groupby("suite", sort=True):
        splits = set(g["split"].unique())
        for pat in config.plot_splits:
            if not any(fnmatch.fnmatchcase(s, pat) for s in splits):
                notes.append(f"{suite}: no results for split {pat!r} (report.plot_splits), so no plots for it.")
        hidden = sorted(s for s in splits if not match_any(s, config.table_splits))
        if hidden:
            shown = ", ".join(hidden[:8]) + (" ..." if len(hidden) > 8 else "")
            cor = any(_CORRUPT.match(h) for h in hidden)
            notes.append(
                f"{suite}: {len(hidden)} further splits are not tabulated here, to keep the page light "
                f"({shown}); their numbers are in the results table (results/metrics.csv)"
                + ("; the corruption splits are drawn in the severity view of the headline." if cor else ".")
                + " The report.table_splits setting chooses the tabulated ones."
            )
        fams = set(g["family"])
        if config.reference_family not in fams:
            notes.append(
                f"{suite}: no '{config.reference_family}' rows (report.reference_family): base models alone are not "
                "marked."
            )
    unknown = sorted(set(results["metric"]) - set(METRICS))
    if unknown:
        notes.append(f"results: metrics not in benchmark.core.metric_info.METRICS (direction unknown): {unknown}.")
    no_cost = results[~np.isfinite(results["gflops"])]
    if len(no_cost):
        n_methods = len(no_cost.drop_duplicates(KEY))
        notes.append(f"results: {n_methods} methods have no GFLOPs and are left out of the plots.")
    if models is not None:
        used = models_used(results)
        absent = sorted(used - set(models["name"]))
        if absent:
            notes.append(f"model table: no entry for {', '.join(absent)}.")
    return notes


def fmt_short(x, digits: int = 3) -> str:
    """``digits`` significant digits below 0.1, ``digits`` decimals otherwise; '—' for NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    x = float(x)
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if abs(x) < 0.1 else f"{x:.{digits}f}"


def fmt_metric(v: float) -> str:
    """4 decimals, 5 under 0.1 (AURC-sized numbers); 'NaN' for a missing value."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "NaN"
    return f"{v:.5f}" if abs(v) < 0.1 else f"{v:.4f}"


def fmt_num(v: float, spec: str, scale: float = 1.0) -> str:
    """Cost columns: '—' when missing."""
    if v is None or not np.isfinite(v) or v < 0:
        return "—"
    return format(v / scale, spec)


_UNITS = ("", "k", "M", "G", "T", "P")


def fmt_count(v) -> str:
    """A count in compact form, as the page's ``si`` format (leaderboard.js ``fmtCost``): ``0``, ``500``, ``4.0k``,
    ``16k``, ``3.4M``, ``576M`` (thousands, millions, ...: one decimal under 10); '—' when missing."""
    if v is None or not np.isfinite(v) or v < 0:
        return "—"
    v, i = float(v), 0
    while v >= 999.5 and i < len(_UNITS) - 1:
        v, i = v / 1000, i + 1
    d = 1 if i and v < 9.95 else 0
    return f"{math.floor(v * 10**d + 0.5) / 10**d:.{d}f}" + _UNITS[i]  # half up, as the page's Math.round


def sort_key(v) -> str:
    """What the page sorts on: the number (7 significant digits), 'NaN' when missing."""
    if v is None or not np.isfinite(v):
        return "NaN"
    return f"{float(v):.7g}"
