"""The headline, the seed spread, the dvc-metrics files and the clipped plot axes, against direct pandas/numpy."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from report_synth import make_inputs, synthetic_results

from benchmark.config.report_config import ReportConfig as Cfg
from benchmark.core import noise
from benchmark.report import ReportConfig, build_report
from benchmark.report.extra_plots import headline_figure, severity_table
from benchmark.report.headline import NOISE_FILE, compact, dvc_metrics, headline, headline_context
from benchmark.report.headline_noise import spread_records
from benchmark.report.inputs import results_from_frame
from benchmark.report.plotaxes import outliers, robust_range
from benchmark.report.plots import balance_figure, gflops_figure, markers, palette, plot_points
from benchmark.report.tables import default_view, method_label, wide_table

MODELS = {"vit": 4.6, "vit_s1": 4.6, "vit_s2": 4.6, "res": 4.1, "eff": 0.39, "mnv3": 0.06}
ZOO = {
    "vit": {"arch": "vit", "seed": 0},
    "vit_s1": {"arch": "vit", "seed": 1},
    "vit_s2": {"arch": "vit", "seed": 2},
    "res": {"arch": "res", "seed": 0},
    "eff": {"arch": "eff", "seed": 0},
    "mnv3": {"arch": "mnv3", "seed": 0},
}
CFG = ReportConfig()


@pytest.fixture(scope="module")
def view():
    res, _ = results_from_frame(synthetic_results(models=MODELS, splits=("test", "corrupt-noise-1", "corrupt-noise-3")))
    return default_view(wide_table(res), CFG.fit, CFG.confidence)


def _test(view):
    return view[view.split == "test"]


def test_headline_rows_are_alone_best_duos_and_the_rest(view):
    rows = _test(view)
    head = headline(rows, CFG)
    ref = rows.family == "single"
    bases = sorted(set(rows.loc[~ref, "base"]))
    assert bases == ["eff", "res", "vit", "vit_s1", "vit_s2"]  # mnv3, the cheapest, is nobody's base
    for metric in ("aurc", "accuracy"):
        hib = metric == "accuracy"
        order = head["order"][metric]
        got = [(head["entries"][i], role) for i, role in order]
        vals = [e["metrics"][metric]["value"] for e, _ in got]
        assert vals == sorted(vals, reverse=hib)  # ranked best first
        for b in bases:
            mine = [(e, role) for e, role in got if e["base"] == b]
            assert sum(role == "base alone" for _, role in mine) == 1
            duos = rows[(rows.base == b) & (rows.family == "duo")]
            cheap = duos[duos.balance <= 0.2]
            best_cheap = cheap[metric].max() if hib else cheap[metric].min()
            best_all = duos[metric].max() if hib else duos[metric].min()
            roles = {role: e["metrics"][metric]["value"] for e, role in mine}
            cheap_role = [r for r in roles if r.startswith("best duo, balance ≤ 0.2")]
            assert len(cheap_role) == 1 and roles[cheap_role[0]] == pytest.approx(best_cheap)
            if "also best overall" in cheap_role[0]:
                assert best_cheap == pytest.approx(best_all) and "best duo overall" not in roles
            else:
                assert roles["best duo overall"] == pytest.approx(best_all)
        ens = [(e, role) for e, role in got if e["label"] == "deep_ensemble · mean"]
        assert len(ens) == 1 and ens[0][1] == "deep ensemble" and ens[0][0]["base"] == "vit"


def test_differences_to_the_base_and_paired_intervals(view):
    rows = _test(view)
    alone = rows[(rows.family == "single") & (rows.base == "res")].iloc[0]
    duo = rows[
        (rows.family == "duo") & (rows.base == "res") & (rows.method == "weighted") & (rows.sidekick == "eff")
    ].iloc[0]
    paired = {
        ("embedded", "test", "res", "eff", "converged", "weighted", "aurc"): (-0.01, -0.015, -0.005),
        ("embedded", "test", "res", "eff", "converged", "weighted", "accuracy"): (0.002, -0.001, 0.005),
    }
    cfg = Cfg(headline_balance=1.0)
    head = headline(
        rows[(rows.base == "res") & ((rows.family == "single") | (rows.sidekick == "eff"))], cfg, paired=paired
    )
    entries = {(e["label"], e["models"]): e for e in head["entries"]}
    w = entries[("duo · weighted", "res + eff")]["metrics"]
    assert (w["aurc"]["diff"], w["aurc"]["lo"], w["aurc"]["hi"], w["aurc"]["sig"]) == (-0.01, -0.015, -0.005, "better")
    assert w["accuracy"]["sig"] is None  # the interval contains 0
    u = entries[("duo · unweighted", "res + eff")]["metrics"]  # not in the paired table: plain difference, no interval
    row = rows[(rows.method == "unweighted") & (rows.base == "res") & (rows.sidekick == "eff")].iloc[0]
    assert (
        u["nll"]["diff"] == pytest.approx(row["nll"] - alone["nll"])
        and np.isnan(u["nll"]["lo"])
        and u["nll"]["sig"] is None
    )
    assert w["nll"]["diff"] == pytest.approx(duo["nll"] - alone["nll"])
    a = entries[("single · ts", "res")]["metrics"]["aurc"]
    assert a["value"] == alone["aurc"] and np.isnan(a["diff"])


def test_seed_spread_and_noise_judgements_match_numpy(view):
    groups = noise.seed_groups(ZOO)
    vit = list(groups[0].names)
    assert vit == ["vit", "vit_s1", "vit_s2"]
    rows = _test(view)
    spread = spread_records(rows, groups, "single", ["accuracy", "aurc"])
    alone = next(r for r in spread if r["what"] == "vit (3 seeds): base alone")
    single = rows[(rows.family == "single") & rows.base.isin(vit)].set_index("base")
    acc = single["accuracy"].to_numpy()
    s = alone["metrics"]["accuracy"]
    assert alone["seeds"] == 3 and s["mean"] == pytest.approx(acc.mean()) and s["sd"] == pytest.approx(acc.std(ddof=1))
    assert (s["min"], s["max"]) == (acc.min(), acc.max()) and alone["diff"] == {}
    duo = next(r for r in spread if r["what"] == "vit (3 seeds) + eff: duo · weighted")
    d = rows[(rows.method == "weighted") & (rows.sidekick == "eff") & rows.base.isin(vit)].set_index("base")
    assert duo["seeds"] == 3 and duo["metrics"]["aurc"]["mean"] == pytest.approx(d["aurc"].mean())
    diff = (d["aurc"] - single["aurc"]).to_numpy()
    assert duo["diff"]["aurc"]["sd"] == pytest.approx(diff.std(ddof=1)) and duo["diff"]["aurc"][
        "mean"
    ] == pytest.approx(diff.mean())

    # every entry's difference judged against the seed sd of its kind (own) or the largest one of its method, else of
    # the metric (fallback)
    alone_of = rows[rows.family == "single"].set_index("base")
    own = {}
    for (side, meth, _fam), g in rows[rows.base.isin(vit) & (rows.family != "single")].groupby(
        ["sidekick", "method", "family"]
    ):
        if g.base.nunique() == 3 and g.members.nunique() == 3:
            dd = g.set_index("base")["accuracy"] - alone_of.loc[g.base, "accuracy"].to_numpy()
            own[(side, meth)] = float(np.std(dd.to_numpy(), ddof=1))
    fallback = max(own.values())  # the largest of any kind, where no difference of the same method has a spread
    by_method = {}
    for (_side, meth), sd in own.items():  # the fallback of the same family and method (method names differ by family)
        by_method[meth] = max(by_method.get(meth, 0.0), sd)
    head = headline_context({("embedded", "test"): rows}, CFG, zoo=ZOO, paired=None)
    assert head["seed_notes"] and head["seed_notes"][0].startswith("vit (3 seeds): Accuracy ") and head["seeded"]
    sources = set()
    for e in head["suites"][0]["splits"][0]["entries"]:
        v = e["metrics"]["accuracy"]
        if e["kind"] == "alone":
            assert v["within_seed"] is None and v["seed_source"] == ""
            continue
        side = e["models"].split(" + ")[1] if e["kind"] == "duo" else ""
        meth = e["label"].split(" · ")[-1]
        want = own[(side, meth)] if e["base"] in vit and (side, meth) in own else by_method.get(meth, fallback)
        assert v["seed_source"] == ("own" if e["base"] in vit and (side, meth) in own else "fallback")
        assert v["sd_seed"] == pytest.approx(want) and v["within_seed"] == (abs(v["diff"]) <= 2 * want)
        sources.add(v["seed_source"])
    assert sources == {"own", "fallback"}
    none = headline_context({("embedded", "test"): rows}, CFG, zoo={}, paired=None)  # no seed group: no judgement
    ents = none["suites"][0]["splits"][0]["entries"]
    assert {e["metrics"]["aurc"]["seed_source"] for e in ents if e["kind"] != "alone"} == {"none"}
    assert all(e["metrics"]["aurc"]["within_seed"] is None for e in ents) and not none["seeded"]
    assert not any(v["dominated"] for v in none["suites"][0]["splits"][0]["noise"].values())


def test_compact_form_and_dvc_metric_files(view):
    head = headline_context({("embedded", "test"): _test(view)}, CFG, zoo=ZOO, paired=None)
    small = compact(head)
    e0, s0 = head["suites"][0]["splits"][0]["entries"][0], small["suites"][0]["splits"][0]["entries"][0]
    keys = [m["key"] for m in head["metrics"]]
    assert s0["m"][keys.index("aurc")][0] == pytest.approx(e0["metrics"]["aurc"]["value"], rel=1e-5)
    files = dvc_metrics(head, CFG)
    order = head["suites"][0]["splits"][0]["order"]["aurc"]
    verdict = head["suites"][0]["splits"][0]["noise"]
    assert files.pop(NOISE_FILE) == {
        m: int(verdict[m]["dominated"]) for m in ("accuracy", "aurc", "auroc", "ece", "nll")
    }
    assert len(files) == len(order) and all(p.startswith("headline/") and p.endswith(".json") for p in files)
    assert {"headline/vit/alone.json", "headline/res/alone.json"} <= set(files)
    rec = files["headline/vit/alone.json"]
    kept = {
        m for m in ("accuracy", "aurc", "auroc", "ece", "nll") if not verdict[m]["dominated"]
    }  # noise-dominated: left out
    assert set(rec) == {"gflops"} | kept and rec["gflops"] == 4.6 and len(kept) < 5
    # one line per file in `dvc metrics show`: path + six numbers fit in 120 columns
    assert max(len(p) for p in files) + 6 * 10 < 120


def test_report_writes_headline_files_and_json(tmp_path, view):
    res = synthetic_results(models=MODELS)
    cfg = ReportConfig(plot_metrics=("aurc",), plot_splits=("test",), formats=("png",), dpi=40)
    build_report(make_inputs(res, config=cfg, zoo=ZOO), tmp_path / "r", progress=False)
    recs = {
        p.relative_to(tmp_path / "r").as_posix(): json.loads(p.read_text())
        for p in (tmp_path / "r" / "headline").rglob("*.json")
    }
    assert set(recs.pop(NOISE_FILE).values()) <= {0, 1}
    assert "headline/vit/alone.json" in recs and all(isinstance(v, float) for r in recs.values() for v in r.values())
    assert (tmp_path / "r" / "plots" / "headline_embedded_test.png").stat().st_size > 1000


# ---- axes that show where the methods are -----------------------------------------------------------


def test_outliers_are_far_strays_only():
    vals = np.array([0.69, 0.010, 0.012, 0.015, 0.020, 0.030, 0.050, 0.080])
    assert outliers(vals).tolist() == [True] + [False] * 7
    assert not outliers([0.0385, 0.040, 0.0418, 0.0453, 0.0513, 0.0529, 0.0774, 0.0818]).any()  # a real spread
    assert not outliers([0.1, 0.2, 0.3]).any()  # too few to call
    lo, hi, out = robust_range(vals)
    assert lo < 0.010 and 0.080 < hi < 0.1 and out[0]


def _broken(view):
    """The test split plus a barely trained model: accuracy 0.22, AURC 0.69 (the case of the issue)."""
    rows = _test(view)
    bad = rows[(rows.family == "single") & (rows.base == "mnv3")].copy()
    bad[["base", "members", "gflops"]] = ["broken", "broken", 0.03]
    bad["accuracy"], bad["aurc"], bad["aurc:lo"], bad["aurc:hi"] = 0.22, 0.69, 0.68, 0.70
    return pd.concat([rows, bad], ignore_index=True)


@pytest.mark.parametrize("metric", ["aurc", "accuracy"])
def test_plot_y_range_holds_every_non_outlier_with_visible_spread(view, metric):
    rows = _broken(view)
    pts = plot_points(rows, metric)
    labels = sorted(pts["label"].unique())
    for fig in (
        gflops_figure(pts, metric, "t", palette(labels), markers(labels), "single"),
        balance_figure(pts, metric, "t", palette(rows["base"]), markers(labels), "single"),
    ):
        ax = fig.axes[0]
        lo, hi = ax.get_ylim()
        if ax.get_xlabel().startswith("total"):
            shown = pts
        else:  # duos and the singles of their bases (the broken model is nobody's base: not drawn)
            duo = pts[np.isfinite(pts.balance)]
            shown = pd.concat([duo, pts[(pts.family == "single") & pts.base.isin(duo.base)]])
        y = shown["value"].to_numpy()
        keep = ~outliers(y)
        assert ((y[keep] >= lo) & (y[keep] <= hi)).all()
        assert (y[keep].max() - y[keep].min()) >= 0.4 * (
            hi - lo
        )  # the methods fill the axis (the rest: intervals, margins)
        if metric == "aurc" and "broken" in set(shown["base"]):
            assert not keep[shown["base"].to_numpy() == "broken"].any() and 0.69 > hi
            assert any("outside the axis range" in t.get_text() and "0.69" in t.get_text() for t in ax.texts)


def test_headline_figure_and_severity_table(view):
    rows = _test(view)
    head = headline_context({("embedded", "test"): rows}, CFG, zoo=ZOO, paired=None)
    split = head["suites"][0]["splits"][0]
    fig = headline_figure(split, "aurc", "t")
    ax = fig.axes[0]
    vals = [split["entries"][i]["metrics"]["aurc"]["value"] for i, _ in split["order"]["aurc"]]
    lo, hi = ax.get_xlim()
    assert (
        lo <= min(vals)
        and max(vals) <= hi
        and [t.get_text() for t in ax.get_yticklabels()] == ["eff", "res", "vit", "vit_s1", "vit_s2"]
    )
    wanted = [(e["label"], e["models"]) for e in split["entries"] if e["base"] == "vit"]
    tab = severity_table(view, wanted, "accuracy")
    assert set(tab["severity"]) == {1, 3} and set(tab["ctype"]) == {"noise"}
    assert len(tab) == 2 * len(wanted)
    one = view[(view.split == "corrupt-noise-3") & (view.family == "single") & (view.base == "vit")]["accuracy"].iloc[0]
    assert (
        tab[(tab.label == method_label("single", "ts")) & (tab.models == "vit") & (tab.severity == 3)]["value"].iloc[0]
        == one
    )


def test_two_builds_are_byte_identical(tmp_path):
    """The publish step (benchmark.bundle) relies on it: no timestamps, fixed SVG ids, deterministic label placement."""
    import hashlib

    res = synthetic_results(models=MODELS, splits=("test", "corrupt-noise-1", "corrupt-noise-3"))
    cfg = ReportConfig(plot_metrics=("aurc",), plot_splits=("test",), formats=("png", "svg"), dpi=40)
    digests = []
    for i in range(2):
        out = build_report(make_inputs(res, config=cfg, zoo=ZOO), tmp_path / str(i) / "reports", progress=False).parent
        digests.append(
            {
                p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(out.rglob("*"))
                if p.is_file()
            }
        )
    assert digests[0] == digests[1] and any(k.startswith("plots/severity_") for k in digests[0])


def test_headline_splits_after_each_suites_first_go_to_data_files():
    """The page keeps each suite's first split whole; every other split becomes ``{name, file}`` and its data file is
    one ``UQ.put`` call whose key names the suite and split and whose JSON is that split less its name."""
    from benchmark.report.pagedata import defer_headline_splits

    def split(name, n):
        return {"name": name, "entries": [{"b": f"m{i}", "m": [[0.5 + i, None]]} for i in range(n)], "order": {}}

    head = {
        "default": "aurc",
        "suites": [
            {"name": "cifar100", "splits": [split("test", 2), split("corrupt-fog-3", 3), split("o d", 1)]},
            {"name": "one", "splits": [split("test", 1)]},
        ],
    }
    page, files = defer_headline_splits(head)
    assert page["default"] == "aurc" and [su["name"] for su in page["suites"]] == ["cifar100", "one"]
    assert page["suites"][0]["splits"][0] == head["suites"][0]["splits"][0]
    assert page["suites"][1]["splits"] == head["suites"][1]["splits"]
    deferred = page["suites"][0]["splits"][1:]
    assert [set(sp) for sp in deferred] == [{"name", "file"}] * 2
    assert [sp["name"] for sp in deferred] == ["corrupt-fog-3", "o d"]
    assert sorted(files) == sorted(sp["file"] for sp in deferred) and len(set(files)) == 2
    for sp, orig in zip(deferred, head["suites"][0]["splits"][1:], strict=True):
        assert sp["file"].startswith("data/headline/cifar100_") and " " not in sp["file"]
        text = files[sp["file"]]
        prefix = 'UQ.put("headline:cifar100/' + orig["name"] + '",'
        assert text.startswith(prefix) and text.endswith(");\n")
        assert json.loads(text[len(prefix) : -3]) == {k: v for k, v in orig.items() if k != "name"}
    assert len(head["suites"][0]["splits"][1]) == 3  # the input is left as it was
