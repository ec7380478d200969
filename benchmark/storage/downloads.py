"""Tables offered for download: CSV that a spreadsheet opens safely, gzipped CSV, typed Parquet, and their schema.

* **CSV** (:func:`csv_bytes`, :func:`write_csv`, :func:`write_csv_gz`; RFC 4180): every text cell that a spreadsheet
  would read as a formula (one beginning with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets a
  leading single quote (:func:`neutralise`, the OWASP rule against CSV injection); numbers stay numbers, in
  numeric columns and as text (``-0.5``, ``1e-3``). Gzip without a timestamp, so the same table gives the same
  bytes.
* **Parquet** (:func:`write_parquet`, pyarrow, zstd): typed columns (text, float64, int64) exactly as the
  table holds them. A Parquet reader never evaluates a cell, so nothing is neutralised there.
* **Schema** (:func:`table_schema`): the columns with their type and meaning, as a Frictionless Table Schema,
  derived from the column dictionaries the tables are built from (e.g.
  :data:`benchmark.storage.results_schema.COLUMNS`), never typed twice.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.storage.atomic import PathLike, atomic_path

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# a cell that is a plain decimal number (what a spreadsheet reads as a number, not as a formula)
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_SCHEMA_TYPES = {"string": "string", "float64": "number", "int64": "integer"}


def neutralise(value: Any) -> Any:
    """``value`` with a leading ``'`` if it is text a spreadsheet would read as a formula; anything else unchanged.

    >>> neutralise("=HYPERLINK(1)"), neutralise("-0.5"), neutralise("resnet50"), neutralise(-0.5)
    ("'=HYPERLINK(1)", '-0.5', 'resnet50', -0.5)
    """
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def neutralised(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells went through :func:`neutralise` (numeric columns untouched)."""
    out = df.copy()
    for c in out.columns:
        s = out[c]
        if pd.api.types.is_numeric_dtype(s):
            continue
        try:
            starts = s.str.startswith(FORMULA_START)  # NaN for missing or non-text cells
        except AttributeError:  # no text in this column
            continue
        starts = starts.fillna(False).astype(bool)
        if not starts.any():
            continue
        number = s[starts].str.fullmatch(_NUMBER.pattern).fillna(False).astype(bool)
        risky = number.index[~number.to_numpy()]
        if len(risky):
            out[c] = s.astype(object)
            out.loc[risky, c] = "'" + s[risky].astype(str)
    return out


def csv_bytes(df: pd.DataFrame) -> bytes:
    """The table as UTF-8 CSV (no index; pyarrow's writer, many times faster than pandas' on large tables), formula
    cells neutralised, text quoted, lines ending with CRLF (RFC 4180), numbers in their shortest exact form."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pa.Table.from_pandas(neutralised(df).reset_index(drop=True), preserve_index=False)
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(quoting_style="needed", eol="\r\n"))
    return sink.getvalue().to_pybytes()


def write_csv(path: PathLike, df: pd.DataFrame) -> None:
    """``path`` (CSV), atomically, formula cells neutralised."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(csv_bytes(df))


def write_csv_gz(path: PathLike, df: pd.DataFrame) -> None:
    """``path`` (gzipped CSV, no timestamp: same table, same bytes), atomically, formula cells neutralised."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(gzip.compress(csv_bytes(df), compresslevel=6, mtime=0))


def write_parquet(path: PathLike, df: pd.DataFrame) -> None:
    """``path`` (Parquet, zstd, no index), atomically; typed values as they are (a Parquet cell is never a formula)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def table_schema(columns: dict[str, tuple[str, str]], *, title: str = "", description: str = "") -> dict:
    """A Frictionless Table Schema of ``columns`` (name -> (dtype: string | float64 | int64, meaning)), in order."""
    fields = [
        {"name": name, "type": _SCHEMA_TYPES[dtype], "description": meaning}
        for name, (dtype, meaning) in columns.items()
    ]
    return {k: v for k, v in (("title", title), ("description", description)) if v} | {"fields": fields}


@dataclass(frozen=True)
class DownloadTable:
    """A table offered for download: its rows, its columns (name -> (dtype, meaning), in order) and a title."""

    frame: pd.DataFrame
    columns: dict[str, tuple[str, str]]
    title: str = ""


SCHEMA_FILE = "schema.json"


def write_downloads(folder: PathLike, tables: dict[str, DownloadTable], *, prefix: str = "") -> dict:
    """``<folder>/<name>.parquet`` and ``<name>.csv.gz`` of every table, and ``schema.json`` describing them all.

    Returns ``{"schema": prefix + "schema.json", "tables": [{name, title, rows, parquet, csv, fields}]}`` (paths
    with ``prefix``, as a page next to ``folder`` links them)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    schemas, out = {}, []
    for name, t in tables.items():
        table = typed(t.frame, t.columns)
        write_parquet(folder / f"{name}.parquet", table)
        write_csv_gz(folder / f"{name}.csv.gz", table)
        schemas[name] = table_schema(t.columns, title=t.title)
        out.append(
            {
                "name": name,
                "title": t.title,
                "rows": len(table),
                "parquet": f"{prefix}{name}.parquet",
                "csv": f"{prefix}{name}.csv.gz",
                "fields": schemas[name]["fields"],
            }
        )
    write_schema(folder / SCHEMA_FILE, schemas)
    return {"schema": prefix + SCHEMA_FILE, "tables": out}


def typed(df: pd.DataFrame, columns: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """``df``'s ``columns`` in order, each with its dtype (text: '' for missing; numbers: NaN; integers: -1)."""
    out: dict[str, pd.Series] = {}
    for c, (dtype, _) in columns.items():
        s = df[c] if c in df.columns else pd.Series([None] * len(df), index=df.index, dtype=object)
        if dtype == "string" and isinstance(s.dtype, pd.StringDtype):
            out[c] = s.fillna("").astype(str)  # text already: no round trip through Python objects
        elif dtype == "string":
            out[c] = s.astype(object).where(s.notna(), "").astype(str)
        else:
            num = pd.to_numeric(s, errors="coerce")
            out[c] = num.fillna(-1).astype("int64") if dtype == "int64" else num.astype("float64")
    return pd.DataFrame(out, index=df.index).reset_index(drop=True)


def write_schema(path: PathLike, tables: dict[str, dict]) -> None:
    """``path``: JSON ``{table name: table schema}`` (sorted keys, so the same schema gives the same bytes)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(tables, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
