"""Pareto plots: files exist, decode, carry any family; frontier data is the true frontier."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest
from report_synth import MODELS, synthetic_results

from benchmark.config.report_config import ReportConfig
from benchmark.report.build import default_rows
from benchmark.report.plots import (
    gflops_figure,
    markers,
    palette,
    plot_points,
    write_plots,
)
from benchmark.report.tables import wide_table


def _view(results, cfg):
    return default_rows(wide_table(results), cfg)


def _check_png(path):
    assert path.stat().st_size > 1000
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    assert float(img[..., :3].std()) > 0.02  # not a blank canvas


def _check_svg(path) -> str:
    text = path.read_text(encoding="utf-8")
    root = ET.fromstring(text)
    assert root.tag.endswith("svg")
    return text


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    cfg = ReportConfig(plot_metrics=("accuracy", "aurc"), plot_splits=("test",), dpi=60)
    res = synthetic_results(splits=("test", "val"))
    out = tmp_path_factory.mktemp("plots")
    return out, write_plots(_view(res, cfg), cfg, out, progress=False), res


def test_every_plot_is_written_and_decodes(written):
    out, paths, _ = written
    assert set(paths) == {("embedded", "test")}  # 'val' is not in plot_splits
    assert set(paths[("embedded", "test")]) == {"accuracy", "aurc"}
    for metric in ("accuracy", "aurc"):
        for kind in ("gflops", "balance"):
            files = paths[("embedded", "test")][metric][kind]
            assert set(files) == {"png", "svg"}
            _check_png(out / files["png"])
            _check_svg(out / files["svg"])


def test_any_family_appears_in_the_plot_and_its_data(written):
    out, paths, _ = written
    svg = (out / paths[("embedded", "test")]["accuracy"]["gflops"]["svg"]).read_text(encoding="utf-8")
    for label in ("deep_ensemble · mean", "duo · weighted", "single · ts"):
        assert label in svg
    data = pd.read_csv(out / "plots" / "data" / "pareto_embedded_test.csv")
    assert {"deep_ensemble", "duo", "single"} == set(data["family"])
    assert set(data["metric"]) == {"accuracy", "aurc"}


def _dominated(cost, value, higher):
    """Brute force: i is dominated if some j is no worse in both and better in one."""
    v = value if higher else -value
    n = len(cost)
    return np.array(
        [
            any(cost[j] <= cost[i] and v[j] >= v[i] and (cost[j] < cost[i] or v[j] > v[i]) for j in range(n))
            for i in range(n)
        ]
    )


@pytest.mark.parametrize("metric,higher", [("accuracy", True), ("aurc", False)])
def test_frontier_csv_is_the_non_dominated_set(written, metric, higher):
    out, _, res = written
    shown = (res.fit == "converged") & (
        (res.confidence == "max") | (res.method == "uq_only")
    )  # uq_only: 'published' only
    rows = res[(res.split == "test") & shown & (res.metric == metric)]
    cost, value = rows["gflops"].to_numpy(float), rows["value"].to_numpy(float)
    expected = set(
        rows["members"][~_dominated(cost, value, higher)] + "|" + rows["method"][~_dominated(cost, value, higher)]
    )
    front = pd.read_csv(out / "plots" / "data" / "frontier" / f"embedded_test_{metric}.csv")
    assert list(front.columns) == ["gflops", "value", "label", "members"]
    assert front["gflops"].is_monotonic_increasing
    got = {f"{m}|{lab.split(' · ')[-1]}" for m, lab in zip(front["members"], front["label"])}
    assert got == expected
    # along the frontier the metric only improves
    steps = np.diff(front["value"].to_numpy())
    assert (steps > 0).all() if higher else (steps < 0).all()


def test_no_balance_rows_means_no_balance_plot(tmp_path):
    cfg = ReportConfig(plot_metrics=("auroc",), plot_splits=("test",), formats=("png",), dpi=50)
    res = synthetic_results(models={"a": 1.0, "b": 2.0}, duo_variants=(), ensemble=False)
    paths = write_plots(_view(res, cfg), cfg, tmp_path, progress=False)
    kinds = paths[("embedded", "test")]["auroc"]
    assert set(kinds) == {"gflops"}
    _check_png(tmp_path / kinds["gflops"]["png"])
    assert not list((tmp_path / "plots").glob("balance_*"))


def test_metric_that_is_all_nan_is_not_plotted(tmp_path):
    cfg = ReportConfig(plot_metrics=("accuracy", "ece"), plot_splits=("test",), formats=("png",), dpi=50)
    res = synthetic_results(models={"a": 1.0, "b": 2.0}, ensemble=False)
    res.loc[res.metric == "ece", "value"] = np.nan
    paths = write_plots(_view(res, cfg), cfg, tmp_path, progress=False)
    assert set(paths[("embedded", "test")]) == {"accuracy"}


def test_names_with_dollar_signs_are_not_mathtext():
    res = synthetic_results(models={"cost$1$": 1.0, "b": 2.0}, duo_variants=(), ensemble=False)
    pts = plot_points(_view(res, ReportConfig()), "accuracy")
    fig = gflops_figure(pts, "accuracy", "t", palette(pts["label"]), markers(pts["label"]), "single")
    buf = io.BytesIO()
    fig.savefig(buf, format="svg")
    assert "cost$1$" in buf.getvalue().decode()


def test_rows_without_gflops_are_left_out():
    res = synthetic_results(models=MODELS, duo_variants=(), ensemble=False)
    res.loc[res.base == "resnet50", "gflops"] = np.nan
    pts = plot_points(_view(res, ReportConfig()), "accuracy")
    assert "resnet50" not in set(pts["base"]) and len(pts) == len(MODELS) - 1


def test_drawing_processes_write_the_same_files(written, tmp_path):
    """``workers`` forked processes draw the same figures and data, byte for byte, in the same order."""
    import dataclasses

    out, paths, res = written
    cfg = ReportConfig(plot_metrics=("accuracy", "aurc"), plot_splits=("test",), dpi=60)
    par = write_plots(_view(res, cfg), dataclasses.replace(cfg, workers=2), tmp_path, progress=False)
    assert par == paths
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()) and len(files) > 4
    for f in files:
        assert (out / f).read_bytes() == (tmp_path / f).read_bytes(), f
