"""The page's data as compact JSON: the full tables (one file per split, loaded when opened) and the headline.

The full table of a split can hold thousands of rows; shipping it as HTML made
the page several megabytes. Instead ``data/<suite>_<split>.js`` holds the rows
as JSON (strings dictionary-encoded, numbers rounded) wrapped in one call
``UQ.put(key, {...})``: a ``<script>`` the page adds when the split is opened,
which works from the file system too (``fetch`` of ``file://`` does not). The
page renders and pages the rows itself. The headline likewise: the page holds each suite's first split inline (the
one shown first) and ``data/headline/<suite>_<split>.js`` every other split's, loaded when a reader chooses it.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from benchmark.report.provenance import file_slug
from benchmark.report.tables import EXTRA_COLUMNS, member_names, method_label

# number format of the cost columns (Python format spec or "si", divisor), read by the page's script; "si": a count in
# compact form, 4.0k, 3.4M (benchmark.report.tables.fmt_count)
COST_FORMATS = {
    "gflops": (".3g", 1.0),
    "balance": (".3f", 1.0),
    "params": (".1f", 1e6),
    "overhead_percent": (".2f", 1.0),
    "extra_params_percent": (".2f", 1.0),
    "throughput": (".0f", 1.0),
    "n": (".0f", 1.0),
    "train_images": ("si", 1.0),
    "train_params": ("si", 1.0),
}
TEXT_COLUMNS = ("method", "models", "variant")
CELLS = 9  # fields of a table row before its cells (leaderboard.js: CELLS)


def rounded(v, digits: int = 6):
    """A finite number to ``digits`` significant digits (as float), else None (JSON null)."""
    if v is None:
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    return float(f"{v:.{digits}g}")


def _cost(v):
    """A cost as a number; None when missing (the schema uses -1 for a missing integer)."""
    v = rounded(v, 7)
    return None if v is None or v < 0 else v


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


class Strings:
    """Dictionary encoding: each distinct string once, rows hold indices."""

    def __init__(self):
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, s) -> int:
        s = "" if s is None or (isinstance(s, float) and math.isnan(s)) else str(s)
        if s not in self._index:
            self._index[s] = len(self.items)
            self.items.append(s)
        return self._index[s]


def source_text(source: str, conflict: str, sources: dict) -> tuple[str, str]:
    """(cell, tooltip) of a row's source: its bundle ids (⚠ when another source gives other values) and, per id, the
    contributor and status (``sources``: id -> {"contributor", "status"})."""
    ids = source.split()
    tip = "; ".join(
        f"{i}: {sources.get(i, {}).get('contributor', '')} ({sources.get(i, {}).get('status', '')})" for i in ids
    )
    if conflict:
        tip += f"; other values for this row in: {', '.join(conflict.split())}"
    return " + ".join(ids) + (" ⚠" if conflict else ""), tip


def table_data(rows: pd.DataFrame, columns: list[dict], *, fit_pref, conf_pref, sources: dict | None = None) -> dict:
    """One split's full table: ``{"s": strings, "columns": [...], "rows": [...]}``.

    A row is ``[base, family, fit, confidence, preferred, balance, hash, [members], sidekick, cells...]``
    (strings as indices into ``s``; ``preferred`` = 1 if the preferred fit + 2 if
    the preferred confidence; :data:`CELLS` fields before the cells). Cells follow ``columns``: text columns as string
    indices (``variant`` and ``source`` as ``[text, tooltip]``; ``sources``: :func:`source_text`), costs as numbers,
    metrics as ``[value, lo, hi]`` (null when missing).
    """
    s = Strings()
    cols = []
    for c in columns:
        spec = {k: c[k] for k in ("key", "label", "num", "title", "metric")}
        if c["key"] in COST_FORMATS:
            spec["fmt"], spec["scale"] = COST_FORMATS[c["key"]][0], COST_FORMATS[c["key"]][1]
        cols.append(spec)
    out = []
    fp, cp = np.asarray(fit_pref, dtype=bool), np.asarray(conf_pref, dtype=bool)
    for i, r in enumerate(rows.to_dict("records")):
        names = member_names(r["members"], r["base"], r["sidekick"])
        row = [
            s(r["base"]),
            s(r["family"]),
            s(r["fit"]),
            s(r["confidence"]),
            int(fp[i]) + 2 * int(cp[i]),
            _cost(r.get("balance")),
            s(r.get("inputs_hash") or ""),
            [s(n) for n in names],
            s(r.get("sidekick") or ""),
        ]
        for c in columns:
            k = c["key"]
            if k == "method":
                row.append(s(method_label(r["family"], r["method"])))
            elif k == "models":
                row.append(s(" + ".join(names)))
            elif k == "variant":
                row.append([s(f"{r['fit']} / {r['confidence']}"), s(_extras(r))])
            elif k == "source":
                row.append([s(x) for x in source_text(r.get("source") or "", r.get("conflict") or "", sources or {})])
            elif c.get("metric"):
                row.append([rounded(r.get(k)), rounded(r.get(f"{k}:lo"), 4), rounded(r.get(f"{k}:hi"), 4)])
            else:
                row.append(_cost(r.get(k)))
        out.append(row)
    return {"s": s.items, "columns": cols, "rows": out}


def to_json(obj) -> str:
    """Compact JSON that is safe inside ``<script>`` (``<``, ``>``, ``&`` escaped); NaN -> null."""
    text = json.dumps(_clean(obj), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _clean(o):
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, (float, np.floating)):
        return rounded(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.bool_):
        return bool(o)
    return o


def data_script(key: str, obj) -> str:
    """The content of a data file: one ``UQ.put`` call."""
    return f"UQ.put({json.dumps(key)},{to_json(obj)});\n"


def defer_headline_splits(head: dict) -> tuple[dict, dict[str, str]]:
    """The page's headline data (:func:`benchmark.report.headline.compact`) with each suite's first split inline and
    ``{relative path: content}``: a data file for every other split, whose place in ``head`` keeps ``{name, file}``.

    The page loads such a file when a reader chooses its split (``UQ.put("headline:<suite>/<split>", data)``): a page
    of many splits (CIFAR-100-C: 21, ~50 kB each at the papers' scale) loads one split's headline before its first
    render, not all of them."""
    files: dict[str, str] = {}
    suites = []
    for su in head["suites"]:
        splits = su["splits"][:1]
        for sp in su["splits"][1:]:
            path = f"data/headline/{file_slug(su['name'])}_{file_slug(sp['name'])}.js"
            data = {k: v for k, v in sp.items() if k != "name"}
            files[path] = data_script(f"headline:{su['name']}/{sp['name']}", data)
            splits.append({"name": sp["name"], "file": path})
        suites.append(su | {"splits": splits})
    return head | {"suites": suites}, files
