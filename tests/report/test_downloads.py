"""Downloads: CSV cells that a spreadsheet would run as formulas are neutralised, numbers stay numbers,
Parquet keeps typed values, gzip is byte-reproducible, the schema is derived from the column dictionaries."""

from __future__ import annotations

import csv
import gzip
import io
import json

import numpy as np
import pandas as pd
import pytest
from report_synth import make_inputs, synthetic_results

import benchmark.report.plots
from benchmark.report import ReportConfig, build_report
from benchmark.storage.downloads import (
    DownloadTable,
    csv_bytes,
    neutralise,
    neutralised,
    table_schema,
    typed,
    write_downloads,
)
from benchmark.storage.results_schema import COLUMNS

FORMULAS = [
    "=1+1",
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A2)",
    "\tTAB",
    "\r=x",
    '=HYPERLINK("http://x","y")',
    "-",
    "+",
    "-inf",
    "- 1",
    "-1-1",
    "+.e3",
    "-1e-3x",
    "+1_000",
]
NUMBERS = ["-0.5", "1e-3", "+3", "-12.5E+3", ".5", "-.5", "0", "42", "3.", "-1e5"]
PLAIN = ["resnet50", "", "a=b", "x-1", " =1", "duo · weighted", "'=already"]


@pytest.mark.parametrize("cell", FORMULAS)
def test_formula_cells_get_a_leading_quote(cell):
    assert neutralise(cell) == "'" + cell


@pytest.mark.parametrize("cell", NUMBERS + PLAIN)
def test_numbers_and_plain_text_are_unchanged(cell):
    assert neutralise(cell) == cell


@pytest.mark.parametrize("value", [-0.5, 1e-3, -3, np.float64(-2.5), None, np.nan, True])
def test_non_text_values_are_unchanged(value):
    got = neutralise(value)
    assert got is value or (isinstance(value, float) and np.isnan(got))


def _spreadsheet_safe(text: str) -> bool:
    """What a spreadsheet sees: a cell is safe unless it starts a formula and is not a number."""
    if not text or text[0] not in "=+-@\t\r":
        return True
    try:
        float(text)
    except ValueError:
        return False
    return set(text) <= set("0123456789+-.eE")  # a number as written, not 'inf' or '1_000' (Python-only spellings)


def test_every_csv_cell_is_safe_and_the_original_is_recoverable():
    rng = np.random.default_rng(0)
    alphabet = list("=+-@\t\r'ab1.e ")
    cells = ["".join(rng.choice(alphabet, size=rng.integers(0, 6))) for _ in range(3000)] + FORMULAS + NUMBERS + PLAIN
    df = pd.DataFrame({"text": cells, "number": rng.normal(size=len(cells)) * 1e-3})
    rows = list(csv.reader(io.StringIO(csv_bytes(df).decode("utf-8"), newline="")))
    assert rows[0] == ["text", "number"] and len(rows) == len(cells) + 1
    for original, (text, number) in zip(cells, rows[1:]):
        assert _spreadsheet_safe(text), repr(text)
        assert text == original or (text == "'" + original and not _spreadsheet_safe(original))
        assert float(number) == float(repr(float(number)))  # numeric columns are written as plain numbers
    assert (df["number"] < 0).any()  # negative numbers (a leading '-') stayed numbers above


def test_neutralised_leaves_its_input_and_numeric_columns_alone():
    df = pd.DataFrame({"a": ["=x", None, "ok"], "b": [-1.5, np.nan, 2.0], "c": [1, -2, 3]})
    out = neutralised(df)
    assert df["a"].iloc[0] == "=x" and df["a"].isna().tolist() == [False, True, False]
    assert out["a"].iloc[0] == "'=x" and out["a"].iloc[2] == "ok" and out["a"].isna().tolist() == [False, True, False]
    pd.testing.assert_frame_equal(out[["b", "c"]], df[["b", "c"]])


def _table(n: int = 50) -> pd.DataFrame:
    res = synthetic_results(models={'=HYPERLINK("x")': 2.0, "@b": 1.0, "-c": 0.5}, n=n)
    return make_inputs(res).results


def test_parquet_keeps_typed_values_and_csv_is_neutralised_and_reproducible(tmp_path):
    rows = _table()
    tables = {"rows": DownloadTable(rows, COLUMNS, "results")}
    info = write_downloads(tmp_path / "a", tables)
    write_downloads(tmp_path / "b", tables)
    for name in ("rows.parquet", "rows.csv.gz", "schema.json"):  # same table, same bytes (gzip without a timestamp)
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    raw = (tmp_path / "a" / "rows.csv.gz").read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip MTIME
    back = pd.read_parquet(tmp_path / "a" / "rows.parquet")
    assert list(back.columns) == list(COLUMNS)
    pd.testing.assert_frame_equal(back, rows.reset_index(drop=True), check_dtype=False)
    assert {c: str(back[c].dtype) for c in ("value", "n", "params")} == {
        "value": "float64",
        "n": "int64",
        "params": "int64",
    }
    assert set(back["base"]) == {'=HYPERLINK("x")', "@b", "-c"}  # typed values as they are
    text = pd.read_csv(tmp_path / "a" / "rows.csv.gz", dtype=str, keep_default_na=False)
    assert set(text["base"]) == {'\'=HYPERLINK("x")', "'@b", "'-c"}
    assert np.allclose(text["value"].astype(float), rows["value"])  # numbers stay numbers
    assert info["tables"][0] | {"fields": None} == {
        "name": "rows",
        "title": "results",
        "rows": len(rows),
        "parquet": "rows.parquet",
        "csv": "rows.csv.gz",
        "fields": None,
    }


def test_schema_is_derived_from_the_columns(tmp_path):
    write_downloads(tmp_path, {"rows": DownloadTable(_table(), COLUMNS, "results")})
    schema = json.loads((tmp_path / "schema.json").read_text())
    fields = schema["rows"]["fields"]
    assert [f["name"] for f in fields] == list(COLUMNS)
    kinds = {"string": "string", "float64": "number", "int64": "integer"}
    assert all(f["type"] == kinds[COLUMNS[f["name"]][0]] and f["description"] == COLUMNS[f["name"]][1] for f in fields)
    assert table_schema({"x": ("int64", "a count")}, title="t") == {
        "title": "t",
        "fields": [{"name": "x", "type": "integer", "description": "a count"}],
    }


def test_report_writes_the_downloads_and_only_the_figures_asked_for(tmp_path, monkeypatch):
    rows = _table(n=30)
    cfg = ReportConfig(plot_metrics=("aurc",), plot_splits=("test",), formats=("svg",), dpi=40)
    build_report(make_inputs(rows, config=cfg), tmp_path / "with", progress=False)
    svgs = sorted(p.name for p in (tmp_path / "with" / "plots").glob("*.svg"))
    assert svgs and all("aurc" in n or n.startswith(("headline_", "severity_")) for n in svgs)
    assert not list((tmp_path / "with" / "plots").glob("*.png"))  # report.formats: svg only
    assert '<details class="static-figs">' in (tmp_path / "with" / "index.html").read_text(encoding="utf-8")  # linked
    frontier = next((tmp_path / "with" / "plots" / "data" / "frontier").glob("*.csv")).read_text()
    points = next((tmp_path / "with" / "plots" / "data").glob("pareto_*.csv")).read_text()
    assert "'=HYPERLINK" in points and "\n=HYPERLINK" not in points and ",=" not in points and ",=" not in frontier
    import dataclasses

    build_report(make_inputs(rows, config=dataclasses.replace(cfg, formats=())), tmp_path / "data_only", progress=False)
    drawn = [p for p in (tmp_path / "data_only").rglob("*") if p.suffix in (".png", ".svg", ".pdf")]
    assert drawn == [] and list(
        (tmp_path / "data_only" / "plots" / "data" / "frontier").glob("*.csv")
    )  # dvc plots' data
    assert '<details class="static-figs">' not in (tmp_path / "data_only" / "index.html").read_text(encoding="utf-8")
    monkeypatch.setattr(benchmark.report.plots, "write_plots", lambda *a, **k: pytest.fail("drew figures"))
    build_report(make_inputs(rows, config=cfg), tmp_path / "without", progress=False, figures=False)
    assert not (tmp_path / "without" / "plots").exists()
    back = pd.read_parquet(tmp_path / "without" / "data" / "rows.parquet")
    assert len(back) == len(rows) and (tmp_path / "without" / "assets" / "plotly-basic.min.js").is_file()
    with gzip.open(tmp_path / "without" / "data" / "rows.csv.gz", "rt") as f:
        assert "'@b" in f.read()


@pytest.mark.parametrize("dtype", ["str", "string", object])
def test_typed_text_is_the_same_from_arrow_text_and_from_python_objects(dtype):
    """A text column: '' for a missing cell, the default text dtype, whatever the column held it as (arrow text takes
    a path without Python objects)."""
    df = pd.DataFrame({"name": pd.Series(["a", None, "=b", ""], dtype=dtype), "n": ["1", None, "x", "2.5"]})
    out = typed(df, {"name": ("string", ""), "n": ("float64", "")})
    assert out["name"].tolist() == ["a", "", "=b", ""] and out["name"].dtype == pd.Series(["x"]).astype(str).dtype
    assert out["n"].tolist()[0] == 1.0 and np.isnan(out["n"].tolist()[1]) and out["n"].dtype == np.float64
