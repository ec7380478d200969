"""Leaderboard page without a browser: tables, bad input, escaping, reproduction, provenance, CLI."""

from __future__ import annotations

import importlib.util
import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from report_synth import EVIL, make_inputs, models_table, page_rows, synthetic_results

from benchmark.report import (
    ReportConfig,
    build_report,
    parse_published,
    results_from_frame,
)
from benchmark.report.inputs import read_results, read_zoo
from benchmark.report.published import reproduction_rows
from benchmark.report.tables import KEY, default_view, wide_table
from benchmark.storage.results_schema import COLUMNS
from benchmark.storage.store import StoreError

ROOT = Path(__file__).resolve().parents[2]
FAST = ReportConfig(plot_metrics=("accuracy",), plot_splits=("test",), formats=("png",), dpi=40)


def _cli():
    spec = importlib.util.spec_from_file_location("report_stage", ROOT / "pipelines" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _render(tmp_path, results, **kw) -> str:
    page = build_report(make_inputs(results, config=kw.pop("config", FAST), **kw), tmp_path / "reports", progress=False)
    return page.read_text(encoding="utf-8")


def _body_rows(tmp_path) -> int:
    return len(page_rows(tmp_path / "reports"))


# ---- configuration --------------------------------------------------------------------------


def test_config_defaults_and_validation():
    assert ReportConfig.from_params({}) == ReportConfig()
    cfg = ReportConfig.from_params({"report": {"plot_splits": ["test", "corrupt-*-3"], "dpi": 80}})
    assert cfg.plot_splits == ("test", "corrupt-*-3") and cfg.dpi == 80
    with pytest.raises(ValueError, match="unknown keys \\['colour'\\]"):
        ReportConfig.from_params({"report": {"colour": "red"}})
    with pytest.raises(
        ValueError, match=r"params.yaml: report: metrics\[0\] must be text \(one of \[.*\]\), got 'acc'"
    ):
        ReportConfig.from_params({"report": {"metrics": ["acc"]}})
    with pytest.raises(ValueError, match="formats"):
        ReportConfig.from_params({"report": {"formats": ["gif"]}})
    with pytest.raises(ValueError, match="plot_splits must be a list, got 'test'"):
        ReportConfig.from_params({"report": {"plot_splits": "test"}})
    with pytest.raises(ValueError, match=r"headline_metric 'brier' must be one of headline_metrics"):
        ReportConfig.from_params({"report": {"headline_metric": "brier"}})
    with pytest.raises(ValueError, match=r"headline_balance must be a number, got the string '1e-1': YAML 1.1"):
        ReportConfig.from_params({"report": {"headline_balance": "1e-1"}})


# ---- tables ------------------------------------------------------------------------------------


def test_wide_table_holds_every_tidy_value():
    res, _ = results_from_frame(synthetic_results(models={"a": 1.0, "b": 3.0}))
    wide = wide_table(res)
    assert len(wide) == len(res.drop_duplicates(KEY))
    idx = wide.set_index(KEY)
    for r in res.sample(40, random_state=0).itertuples():
        key = tuple(getattr(r, k) for k in KEY)
        assert idx.loc[key, r.metric] == r.value
        assert idx.loc[key, f"{r.metric}:lo"] == r.ci_low


def test_repeated_rows_are_an_error():
    res = synthetic_results(models={"a": 1.0, "b": 3.0})
    with pytest.raises(ValueError, match="repeat the same"):
        wide_table(results_from_frame(pd.concat([res, res.iloc[:1]]))[0])


def test_default_view_prefers_configured_variant_but_keeps_lone_variants():
    res, _ = results_from_frame(synthetic_results(models={"a": 1.0, "b": 3.0}))
    view = default_view(wide_table(res), "converged", "max")
    # weighted has both confidences: only 'max'; uq_only exists only as 'published': kept
    expected = res[(res.fit == "converged") & ((res.confidence == "max") | (res.method == "uq_only"))].drop_duplicates(
        KEY
    )
    assert sorted(map(tuple, view[KEY].to_numpy())) == sorted(map(tuple, expected[KEY].to_numpy()))
    only_paper, _ = results_from_frame(synthetic_results(models={"a": 1.0, "b": 3.0}, fits=("paper-exact",)))
    assert set(default_view(wide_table(only_paper), "converged", "max")["fit"]) == {"paper-exact"}


# ---- bad input ----------------------------------------------------------------------------------


def test_empty_results_file_gives_a_page_that_says_so(tmp_path):
    f = tmp_path / "metrics.csv"
    f.write_text("")
    res, notes = read_results(f)
    assert res.empty and any("no result rows" in n for n in notes)
    html = build_report(make_inputs(res, config=FAST), tmp_path / "out", progress=False).read_text()
    assert "No results to show yet" in html and "Notes on this page" in html
    assert "not run" in html  # reproduction table


def test_header_only_results_file(tmp_path):
    f = tmp_path / "metrics.csv"
    f.write_text(",".join(COLUMNS) + "\n")
    res, notes = read_results(f)
    assert res.empty and notes


def test_partial_columns_are_reported_not_fatal(tmp_path):
    res = synthetic_results(models={"a": 1.0, "b": 3.0}).drop(
        columns=["ci_low", "ci_high", "throughput", "inputs_hash"]
    )
    html = _render(tmp_path, res)
    assert "missing columns [&#39;ci_low&#39;, &#39;ci_high&#39;, &#39;throughput&#39;, &#39;inputs_hash&#39;]" in html
    assert _body_rows(tmp_path) > 0


def test_missing_required_column_shows_what_is_missing(tmp_path):
    html = _render(tmp_path, synthetic_results(models={"a": 1.0, "b": 3.0}).drop(columns=["metric"]))
    assert "missing required columns [&#39;metric&#39;]" in html and _body_rows(tmp_path) == 0


def test_missing_metrics_and_splits_are_listed(tmp_path):
    res = synthetic_results(models={"a": 1.0, "b": 3.0}, splits=("val",))
    res = res[res.metric != "sac98"]
    html = _render(tmp_path, res, config=ReportConfig(plot_splits=("test",), formats=("png",)))
    assert "embedded / val: metrics not computed: sac98." in html
    assert "no results for split &#39;test&#39;" in html


def test_missing_results_file_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="results file not found"):
        read_results(tmp_path / "nope.csv")


def test_nan_metric_is_shown_as_nan(tmp_path):
    res = synthetic_results(models={"a": 1.0, "b": 3.0}, fits=("converged",))
    res.loc[(res.base == "b") & (res.family == "single") & (res.metric == "ece"), "value"] = np.nan
    _render(tmp_path, res)
    ece = [r["ece"] for r in page_rows(tmp_path / "reports") if r["_base"] == "b" and r["_family"] == "single"]
    assert len(ece) == 1 and np.isnan(ece[0])


def test_model_names_are_escaped(tmp_path):
    res = synthetic_results(models={EVIL: 1.0, "b": 3.0})
    zoo = {EVIL: {"arch": "<b>bold</b>", "seed": 0}}
    html = _render(tmp_path, res, zoo=zoo)
    assert EVIL not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert html.count("<script>") == 1  # only the page's own script (the data is JSON with < escaped)
    data = (tmp_path / "reports" / "data" / "embedded_test.js").read_text(encoding="utf-8")
    assert "<" not in data and EVIL in {r["_base"] for r in page_rows(tmp_path / "reports")}


# ---- reproduction --------------------------------------------------------------------------------

_TEST = {"split": "test", "base": "ResNet50", "source": "p"}
PUB = {
    "sources": {"p": "a paper"},
    "aliases": {"ResNet50": ["resnet50.tv_in1k"]},
    "cells": [
        {**_TEST, "suite": "imagenet", "family": "single", "method": "ts", "metric": "accuracy", "value": 0.80},
        {**_TEST, "suite": "imagenet", "family": "duo", "method": "weighted", "metric": "aurc", "value": 0.05},
        {**_TEST, "suite": "caltech256", "family": "single", "metric": "accuracy", "value": 0.88},
    ],
}


def test_reproduction_matches_by_name_and_reports_not_run():
    models = {"resnet50.tv_in1k": 4.09, "small_a": 0.4, "small_b": 0.9}
    res, _ = results_from_frame(synthetic_results(models=models, suite="imagenet", duo_variants=(("weighted", "max"),)))
    wide = wide_table(res)
    rows = reproduction_rows(parse_published(PUB), wide, ("paper-exact", "converged"))
    single, duo, caltech = rows
    rn50 = res[(res.base == "resnet50.tv_in1k") & (res.fit == "converged")]
    ours = rn50[(rn50.family == "single") & (rn50.metric == "accuracy")]["value"].item()
    assert single["ours"]["converged"]["value"] == ours
    assert single["ours"]["converged"]["diff"] == pytest.approx(ours - 0.80)
    # unnamed sidekick: the best (lowest AURC) of the two weighted duos of the base
    duo_rows = res[
        (res.family == "duo") & (res.base == "resnet50.tv_in1k") & (res.metric == "aurc") & (res.fit == "converged")
    ]
    assert len(duo_rows) == 2
    assert duo["ours"]["converged"]["value"] == duo_rows["value"].min()
    assert duo["ours"]["converged"]["detail"].startswith("best of 2")
    assert caltech["ours"] == {"paper-exact": {"status": "not run"}, "converged": {"status": "not run"}}


def test_reproduction_by_ensemble_size():
    res, _ = results_from_frame(
        synthetic_results(models={"ResNet50": 4.1, "s": 0.4}, suite="imagenet", duo_variants=())
    )
    cell = {
        "suite": "imagenet",
        "split": "test",
        "family": "deep_ensemble",
        "base": "ResNet50",
        "metric": "accuracy",
        "value": 0.8,
        "source": "p",
    }
    pub = parse_published({**PUB, "cells": [{**cell, "n_members": 3}, {**cell, "n_members": 5}]})
    three, five = reproduction_rows(pub, wide_table(res), ("converged",))
    ens = res[(res.family == "deep_ensemble") & (res.metric == "accuracy")]["value"].item()
    assert three["ours"]["converged"]["value"] == ens and three["models"] == "3 x ResNet50"
    assert five["ours"]["converged"] == {"status": "no matching row"}


def test_reproduction_table_on_the_page(tmp_path):
    res = synthetic_results(models={"ConvNeXt_Base": 15.36, "tiny": 0.4}, suite="imagenet", duo_variants=())
    html = _render(tmp_path, res)
    ours = res[(res.base == "ConvNeXt_Base") & (res.metric == "accuracy") & (res.fit == "paper-exact")]["value"].item()
    assert f"{ours - 0.8408:+.4f}" in html
    assert "Reproduction of published numbers" in html and "not run" in html  # caltech256


@pytest.mark.parametrize(
    "cell,msg",
    [
        ({"metric": "acc"}, "unknown metric"),
        ({"source": "nope"}, "source 'nope'"),
        ({"value": "high"}, "finite number"),
        ({"colour": 1}, "unknown keys \\['colour'\\]"),
    ],
)
def test_published_cells_are_validated(cell, msg):
    bad = {**PUB, "cells": [{**PUB["cells"][0], **cell}]}
    with pytest.raises(ValueError, match=msg):
        parse_published(bad)


def test_packaged_published_numbers_load():
    from benchmark.report import load_published

    pub = load_published()
    assert len(pub.cells) >= 30 and {c.suite for c in pub.cells} == {"imagenet", "caltech256"}


def test_zoo_under_models_key_with_anchors_and_missing_files(tmp_path):
    z = tmp_path / "zoo.yaml"
    z.write_text("models:\n  a: &a {arch: x, seed: 0}\n  b: {<<: *a, seed: 1}\n")
    zoo, notes = read_zoo([z, tmp_path / "none.yaml"])
    assert zoo == {"a": {"arch": "x", "seed": 0}, "b": {"arch": "x", "seed": 1}}
    assert notes == [f"{tmp_path / 'none.yaml'}: zoo file not found; provenance shows no zoo entries from it."]
    z.write_text("- a\n- b\n")
    with pytest.raises(StoreError, match="zoo must be a mapping"):
        read_zoo([z])
    z.write_text("a: [unclosed\n")
    with pytest.raises(StoreError, match="invalid YAML"):
        read_zoo([z])


# ---- provenance and CLI -----------------------------------------------------------------------------


def test_provenance_shows_zoo_entry_and_lock_hash(tmp_path):
    res = synthetic_results(models={"a": 1.0, "b": 3.0})
    lock = {
        "schema": "2.0",
        "stages": {
            "logits@a": {"outs": [{"path": "logits/a", "md5": "0123abcd.dir"}]},
            "train@a": {"outs": [{"path": "ckpt/a", "md5": "ffff"}]},
        },
    }
    html = _render(
        tmp_path,
        res,
        zoo={"a": {"arch": "resnet", "recipe": "lp"}},
        lock=lock,
        models=models_table({"a": 1.0, "b": 3.0}),
    )
    assert "0123abcd.dir" in html and "ffff" not in html
    assert "recipe: lp" in html
    a_anchor = re.search(r'<article class="model" id="([^"]+)">\s*<h3>a</h3>', html).group(1)
    assert f'"a":"{a_anchor}"' in html  # the table's links to the provenance (the page builds them from this map)


def test_cli_writes_report_and_refuses_foreign_folder(tmp_path, capsys):
    cli = _cli()
    res_path = tmp_path / "metrics.csv"
    synthetic_results(models={"a": 1.0, "b": 3.0}).to_csv(res_path, index=False)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"report": {"plot_metrics": ["accuracy"], "formats": ["png"], "dpi": 40}}))
    args = [
        "--results",
        str(res_path),
        "--models",
        str(tmp_path / "none.csv"),
        "--zoo",
        str(tmp_path / "zoo.yaml"),
        "--params",
        str(params),
        "--lock",
        str(tmp_path / "dvc.lock"),
        "--quiet",
    ]
    assert cli.main([*args, "--out", str(tmp_path / "reports")]) == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "reports" / "index.html").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "reports").stat().st_mode) == 0o777 & ~umask
    assert (tmp_path / "reports" / "plots" / "gflops_embedded_test_accuracy.png").exists()
    assert not (tmp_path / "reports" / "plots" / "gflops_embedded_test_accuracy.svg").exists()
    assert cli.main([*args, "--out", str(tmp_path / "reports")]) == 0  # replaces its own report
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    assert cli.main([*args, "--out", str(tmp_path / "mine")]) == 2
    assert "refusing to replace" in capsys.readouterr().err
    assert (tmp_path / "mine" / "keep.txt").exists()
    assert cli.main(["--results", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "r2")]) == 2
    assert "results file not found" in capsys.readouterr().err


def test_failed_build_leaves_previous_report(tmp_path, monkeypatch):
    res = synthetic_results(models={"a": 1.0, "b": 3.0})
    out = tmp_path / "reports"
    build_report(make_inputs(res, config=FAST), out, progress=False)
    before = (out / "index.html").read_text()
    import benchmark.report.build as build

    def boom(*a, **k):
        raise RuntimeError("render failed")

    monkeypatch.setattr(build, "render_html", boom)
    with pytest.raises(RuntimeError):
        build_report(make_inputs(res.iloc[:50], config=FAST), out, progress=False)
    assert (out / "index.html").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["reports"]  # no temporary folder left


def test_metric_that_is_nan_everywhere_keeps_its_column(tmp_path):
    res = synthetic_results(models={"a": 1.0, "b": 3.0}, fits=("converged",))
    res.loc[res.metric == "sac98", "value"] = np.nan
    html = _render(tmp_path, res)
    rows = page_rows(tmp_path / "reports")
    assert "SAC@98" in html and len(rows) == len(res.drop_duplicates(KEY))
    assert all("sac98" in r and np.isnan(r["sac98"]) for r in rows)
