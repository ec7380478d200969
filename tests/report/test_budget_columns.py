"""The training budget beside every row: the full tables' columns, the headline's entries, compact number format."""

from __future__ import annotations

import math

import pytest
from report_synth import headline_json, make_inputs, page_data, page_rows, synthetic_results

from benchmark.report import ReportConfig, build_report
from benchmark.report.tables import fmt_count

FAST = ReportConfig(plot_metrics=("accuracy",), plot_splits=("test",), formats=("png",), dpi=40)
MODELS = {"big": 4.0, "small": 0.4}


@pytest.mark.parametrize(
    "v, text",
    [
        (0, "0"),
        (7, "7"),
        (999, "999"),
        (1000, "1.0k"),
        (4000, "4.0k"),
        (12_500, "13k"),
        (16_000, "16k"),
        (999_499, "999k"),
        (999_600, "1.0M"),
        (3_400_000, "3.4M"),
        (5.76e8, "576M"),
        (2.5e9, "2.5G"),
        (math.nan, "—"),
        (-1, "—"),
        (None, "—"),
    ],
)
def test_counts_are_compact(v, text):
    assert fmt_count(v) == text


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    res = synthetic_results(models=MODELS, fits=("converged",))
    out = tmp_path_factory.mktemp("budget") / "reports"
    build_report(make_inputs(res, config=FAST), out, progress=False)
    return out, res


def test_every_table_row_shows_its_budget(report):
    out, res = report
    data = page_data(out)["embedded/test"]
    cols = {c["key"]: c for c in data["columns"]}
    assert cols["train_images"]["label"] == "Train img" and cols["train_params"]["label"] == "Trained params"
    assert cols["train_images"]["fmt"] == cols["train_params"]["fmt"] == "si"  # leaderboard.js fmtCount
    keys = [c["key"] for c in data["columns"]]
    assert keys.index("train_images") == keys.index("throughput") + 1  # beside the other costs
    rows = page_rows(out)
    assert rows
    for r in rows:
        n = len(r["models"].split(" + "))
        assert r["train_images"] == 4000.0 * n  # what the synthetic rows carry: 4,000 images per member
    single = next(r for r in rows if r["_family"] == "single" and r["_base"] == "big")
    assert single["train_params"] == 4.0 * 5e6


def test_headline_entries_carry_the_budget(report):
    out, _ = report
    head = headline_json(out)
    entries = [e for su in head["suites"] for sp in su["splits"] for e in sp["entries"]]
    assert entries
    for e in entries:
        assert e["ti"] == 4000.0 * len(e["o"].split(" + "))
        assert e["tp"] > 0


def test_a_row_without_a_budget_shows_none(tmp_path):
    res = synthetic_results(models=MODELS, fits=("converged",)).drop(columns=["train_images", "train_params"])
    build_report(make_inputs(res, config=FAST), tmp_path / "reports", progress=False)
    assert all(r["train_images"] != r["train_images"] for r in page_rows(tmp_path / "reports"))  # NaN: not recorded
    entries = [e for su in headline_json(tmp_path / "reports")["suites"] for sp in su["splits"] for e in sp["entries"]]
    assert entries and all(e["ti"] is None and e["tp"] is None for e in entries)
