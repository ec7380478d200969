"""Risk-coverage and reliability figures rebuilt from logits: their areas equal the evaluate stage's AURC/ECE."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from benchmark.config.evaluate import EvalConfig
from benchmark.core.curves import aurc_from_curve, ece_from_bins
from benchmark.methods.deep_ensemble import ensemble_unit
from benchmark.methods.duo import duo_unit
from benchmark.methods.rows import multi_member_unit
from benchmark.methods.single import single_unit
from benchmark.report import ReportConfig
from benchmark.report.curves_plot import PANELS, curves_figure, method_folders, split_curves, write_curve_figures
from benchmark.report.headline import headline_context
from benchmark.report.inputs import results_from_frame
from benchmark.report.tables import default_view, wide_table
from benchmark.storage import store

COST = {"big": (4.0, 4_000_000), "small": (1.0, 1_000_000)}


def _logits(tmp_path):
    g = torch.Generator().manual_seed(0)
    files = {}
    for name, strength in (("big", 2.5), ("small", 1.5)):
        files[name] = {}
        for split, n in (("val", 300), ("test", 500)):
            y = torch.randint(0, 5, (n,), generator=torch.Generator().manual_seed(n))
            z = torch.randn(n, 5, generator=g)
            z[torch.arange(n), y] += strength
            path = tmp_path / "logits" / name / f"{split}.safetensors"
            store.save_logits_file(path, z, y, ids=torch.arange(n))
            f = store.load_logits_file(path)
            files[name][split] = (f.logits, f.labels)
    return files


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("curves")
    files = _logits(tmp)
    cfg = EvalConfig(suite="embedded", fits=("converged",), n_bootstrap=0)
    rows = single_unit(cfg, "big", files["big"]) + single_unit(cfg, "small", files["small"])
    rows += duo_unit(cfg, "big", "small", files["big"], files["small"])[0]
    rows += ensemble_unit(cfg, ["big", "small"], [files["big"], files["small"]])
    # a method output with three members (an SVE size), as its stage writes it
    g = torch.Generator().manual_seed(7)
    sve = {}
    for split, (z, y) in files["big"].items():
        zs = torch.stack([z + 0.4 * torch.randn(z.shape, generator=g) for _ in range(3)])
        store.save_logits_file(tmp / "methods" / "sve-m3" / f"{split}.safetensors", zs, y, ids=torch.arange(len(y)))
        sve[split] = (zs, y)
    store.write_json(
        tmp / "methods" / "sve-m3" / "cost.json",
        {"family": "sve", "method": "m3", "base": "big", "gflops": 4.0, "params": 4_000_000, "throughput": 1.0},
    )
    rows += multi_member_unit(cfg, {"family": "sve", "method": "m3", "base": "big", "members": "big"}, sve)
    df = pd.DataFrame(rows)
    df["gflops"] = [COST[b][0] + (COST[s][0] if s else 0) for b, s in zip(df["base"], df["sidekick"])]
    df["params"] = [COST[b][1] + (COST[s][1] if s else 0) for b, s in zip(df["base"], df["sidekick"])]
    df["balance"] = [COST[s][0] / COST[b][0] if s else np.nan for b, s in zip(df["base"], df["sidekick"])]
    df["throughput"], df["inputs_hash"] = np.nan, ""
    df["n"] = df.get("n", 500)
    res, _ = results_from_frame(df)
    rcfg = ReportConfig(headline_balance=0.5, plot_splits=("test",), formats=("png", "svg"), dpi=50)
    view = default_view(wide_table(res), rcfg.fit, rcfg.confidence)
    head = headline_context({("embedded", "test"): view[view.split == "test"]}, rcfg, zoo={}, paired=None)
    return tmp, view, head, rcfg


def test_curves_match_the_evaluated_aurc_and_ece(setup):
    tmp, view, head, cfg = setup
    split = head["suites"][0]["splits"][0]
    curves = split_curves(split, view[view.split == "test"], "aurc", tmp / "logits", "test", "single")
    assert {c["name"].split(":\n")[0] for c in curves} == {
        "base alone",
        "best duo, balance ≤ 0.5 (also best overall)",
        "deep_ensemble · m2 (big + small)",
        "deep_ensemble · m2_logit (big + small)",
    }
    for c in curves:  # no method outputs given: the SVE row has no curve
        label = c["name"].split(":\n", 1)[-1]
        e = next(e for e in split["entries"] if f"{e['label']} ({e['models']})" == label)
        assert aurc_from_curve(c["curve"]) == pytest.approx(e["metrics"]["aurc"]["value"], abs=1e-6)  # float32 logits
        assert ece_from_bins(c["bins"]) == pytest.approx(e["metrics"]["ece"]["value"], abs=1e-6)
    fig = curves_figure(curves, "t")
    assert len(fig.axes) == 4  # risk-coverage over reliability, columns: duos, deep ensembles
    assert sum(len(ax.lines) for ax in fig.axes[:2]) == len(curves) + 1  # the base alone in both columns


def _direct_aurc(confidence: np.ndarray, correct: np.ndarray) -> float:
    """AURC by its definition: mean over k of the error rate among the k most confident (no ties here)."""
    order = np.argsort(-confidence, kind="stable")
    errors = np.cumsum(1.0 - correct[order])
    return float(np.mean(errors / np.arange(1, len(order) + 1)))


def test_one_curve_per_headline_method_with_the_rows_aurc(setup):
    """Every headline row of the top base gets its curve (duos, deep ensembles, an SVE size), in its
    family's column; each curve's area equals the evaluated row's AURC and AURC computed directly."""
    from benchmark.report.curves_plot import _find_row, predict_row

    tmp, view, head, cfg = setup
    split = head["suites"][0]["splits"][0]
    rows = view[view.split == "test"]
    methods = method_folders(tmp / "methods")
    assert list(methods.values()) == [tmp / "methods" / "sve-m3"]
    curves = split_curves(split, rows, "aurc", tmp / "logits", "test", "single", methods=methods)
    top = split["entries"][split["order"]["aurc"][0][0]]["base"]
    wanted = [split["entries"][i] for i, _ in split["order"]["aurc"] if split["entries"][i]["base"] == top]
    assert len(curves) == len(wanted) == 5  # base alone, duo, deep ensembles m2 and m2_logit, SVE m3
    kinds = {c["panel"] for c in curves}
    assert kinds == {PANELS[0], PANELS[1], PANELS[2]}
    for c, e in zip(curves, wanted):
        assert f"{e['label']} ({e['models']})" in c["name"]
        assert aurc_from_curve(c["curve"]) == pytest.approx(e["metrics"]["aurc"]["value"], abs=1e-6)
        r = _find_row(rows, e["label"], e["models"])
        pred, y = predict_row(r, tmp / "logits", "test", "single", methods)
        direct = _direct_aurc(pred.confidence.double().numpy(), (pred.prediction == y).double().numpy())
        assert aurc_from_curve(c["curve"]) == pytest.approx(direct, abs=1e-12)
    fig = curves_figure(curves, "t")
    top_axes = fig.axes[:3] if len(fig.axes) == 6 else None
    assert top_axes is not None, "two rows of three family columns"
    alone = sum(c["alone"] for c in curves)
    assert sum(len(ax.lines) for ax in top_axes) == len(curves) + 2 * alone  # the base alone in every column


def test_figures_are_written_and_missing_logits_are_skipped(setup, tmp_path):
    tmp, view, head, cfg = setup
    figures = {}
    write_curve_figures(head, view, cfg, tmp_path, tmp / "logits", figures)
    assert [f["files"] for f in figures["embedded/test"]] == [
        {"png": "plots/curves_embedded_test.png", "svg": "plots/curves_embedded_test.svg"}
    ]
    assert (tmp_path / "plots" / "curves_embedded_test.png").stat().st_size > 1000
    empty = {}
    write_curve_figures(head, view, cfg, tmp_path, tmp / "nowhere", empty)
    assert empty == {}
