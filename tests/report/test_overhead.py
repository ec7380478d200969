"""The optional ``overhead_percent`` column: schema, leaderboard column, plots against it."""

from __future__ import annotations

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest
from report_synth import make_inputs, page_data, page_rows, synthetic_results

from benchmark.report import ReportConfig, build_report, results_from_frame
from benchmark.report.build import default_rows
from benchmark.report.plots import overhead_points, plot_points, write_plots
from benchmark.report.tables import wide_table
from benchmark.storage.results_schema import COLUMNS, OPTIONAL_COLUMNS, validate_results

MODELS = {"big": 4.0, "small": 0.5}
SVE = {1: 0.84, 2: 1.69, 4: 3.37}  # members -> overhead in %


def with_sve(res: pd.DataFrame) -> pd.DataFrame:
    """``res`` plus SVE rows built from the converged single rows of 'big' (metrics shifted by M)."""
    single = res[(res.family == "single") & (res.base == "big") & (res.fit == "converged")]
    parts = [res.assign(overhead_percent=np.nan)]
    for m, pct in SVE.items():
        parts.append(
            single.assign(
                family="sve",
                method=f"m{m}",
                members=f"sve-m{m}",
                fit="none",
                gflops=m * MODELS["big"],
                overhead_percent=pct,
                value=single["value"] + 0.001 * m,
            )
        )
    return pd.concat(parts, ignore_index=True)


def test_optional_column_is_added_empty_and_required_ones_still_raise():
    res = synthetic_results(models=MODELS).drop(columns=list(OPTIONAL_COLUMNS))
    out = validate_results(res)
    assert (
        list(out.columns[-len(OPTIONAL_COLUMNS) :]) == list(OPTIONAL_COLUMNS) and out["overhead_percent"].isna().all()
    )
    assert set(COLUMNS) <= set(out.columns)
    with pytest.raises(ValueError, match=r"missing columns \['gflops'\]"):
        validate_results(res.drop(columns=["gflops"]))


def test_old_results_without_the_column_give_no_notice():
    res, notes = results_from_frame(synthetic_results(models=MODELS).drop(columns=["overhead_percent"]))
    assert not any("missing columns" in n for n in notes)
    assert list(res.columns) == list(COLUMNS) and res["overhead_percent"].isna().all()


def test_leaderboard_shows_the_trainable_percent_of_methods_that_report_it(tmp_path):
    cfg = ReportConfig(plot_metrics=("accuracy",), plot_splits=("test",), formats=("png",), dpi=50)
    build_report(make_inputs(with_sve(synthetic_results(models=MODELS)), config=cfg), tmp_path / "r", progress=False)
    rows = page_rows(tmp_path / "r")
    data = page_data(tmp_path / "r")["embedded/test"]
    assert "Trainable %" in [c["label"] for c in data["columns"]]
    assert sorted(r["overhead_percent"] for r in rows if r["_family"] == "sve") == sorted(SVE.values())
    assert not any(
        "overhead_percent=" in s for s in data["s"]
    )  # a column of its own, not in the tooltip of other columns


def test_overhead_plot_draws_only_the_rows_that_report_it(tmp_path):
    cfg = ReportConfig(plot_metrics=("accuracy", "aurc"), plot_splits=("test",), formats=("png", "svg"), dpi=50)
    res, _ = results_from_frame(with_sve(synthetic_results(models=MODELS)))
    view = default_rows(wide_table(res), cfg)
    paths = write_plots(view, cfg, tmp_path, progress=False)
    for metric in ("accuracy", "aurc"):
        files = paths[("embedded", "test")][metric]["overhead"]
        img = mpimg.imread(tmp_path / files["png"])
        assert img.shape[0] > 100 and float(img[..., :3].std()) > 0.02
        svg = (tmp_path / files["svg"]).read_text(encoding="utf-8")
        assert all(f"sve · m{m}" in svg for m in SVE) and "duo · weighted" not in svg
        assert "trainable parameters, % of the pretrained backbone" in svg
    pts = overhead_points(plot_points(view[view.split == "test"], "accuracy"))
    assert sorted(pts["overhead_percent"]) == sorted(SVE.values()) and set(pts["family"]) == {"sve"}
    data = pd.read_csv(tmp_path / "plots" / "data" / "pareto_embedded_test.csv")
    assert sorted(data.loc[data.family == "sve", "overhead_percent"].unique()) == sorted(SVE.values())


def test_no_row_with_overhead_means_no_overhead_plot(tmp_path):
    cfg = ReportConfig(plot_metrics=("accuracy",), plot_splits=("test",), formats=("png",), dpi=50)
    res, _ = results_from_frame(synthetic_results(models=MODELS))
    paths = write_plots(default_rows(wide_table(res), cfg), cfg, tmp_path, progress=False)
    assert "overhead" not in paths[("embedded", "test")]["accuracy"]
    assert not list((tmp_path / "plots").glob("overhead_*"))
