"""The headline's seed-noise judgements and noise-dominated splits, on hand-made rows whose answers are known.

Split ``test``: a seed group b0, b1, b2 (AURC alone 0.050, 0.051, 0.052) whose duos with sidekick s improve by
0.010, 0.012, 0.014 (seed sd of that difference: 0.002, the largest of the split: the fallback), and a base x of
no group whose duo with s improves by 0.006 (3 sd) and with t by 0.001 (0.5 sd). Split ``shift``: the same
differences, but the group's bases alone spread 0.10, 0.20, 0.15 (sd 0.05): seeds disagree more than methods.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchmark.config.report_config import ReportConfig
from benchmark.core import noise
from benchmark.report.headline import compact, headline, headline_context
from benchmark.report.headline_noise import noise_table, split_noise

ZOO = {
    "b0": {"arch": "b", "seed": 0},
    "b1": {"arch": "b", "seed": 1},
    "b2": {"arch": "b", "seed": 2},
    "x": {"arch": "x", "seed": 0},
    "s": {"arch": "s", "seed": 0},
    "t": {"arch": "t", "seed": 0},
}
CFG = ReportConfig(headline_metrics=("aurc",), headline_metric="aurc", plot_metrics=("aurc",))
ALONE = {
    "test": {"b0": 0.050, "b1": 0.051, "b2": 0.052, "x": 0.060},
    "shift": {"b0": 0.10, "b1": 0.20, "b2": 0.15, "x": 0.30},
}
DUOS = [
    ("b0", "s", 0.1, -0.010),
    ("b1", "s", 0.1, -0.012),
    ("b2", "s", 0.1, -0.014),
    ("x", "t", 0.1, -0.001),
    ("x", "s", 0.5, -0.006),
]  # (base, sidekick, balance, AURC difference)
SD = float(np.std([-0.010, -0.012, -0.014], ddof=1))  # 0.002


def _row(split, family, method, base, side, aurc, balance=math.nan):
    return {
        "suite": "s",
        "split": split,
        "family": family,
        "method": method,
        "base": base,
        "sidekick": side,
        "members": f"{base}+{side}" if side else base,
        "fit": "converged",
        "confidence": "max",
        "gflops": 1.0,
        "balance": balance,
        "aurc": aurc,
    }


def view(split: str) -> pd.DataFrame:
    rows = [_row(split, "single", "ts", b, "", v) for b, v in ALONE[split].items()]
    rows += [_row(split, "duo", "weighted", b, s, ALONE[split][b] + d, bal) for b, s, bal, d in DUOS]
    return pd.DataFrame(rows)


def _entries(head) -> dict:
    return {e["models"]: e["metrics"]["aurc"] for e in head["entries"]}


def test_a_difference_of_3_sd_is_a_finding_and_one_of_half_an_sd_is_within_noise():
    v = view("test")
    assert SD == pytest.approx(0.002)
    paired = {
        ("s", "test", "x", side, "converged", "weighted", "aurc"): (d, d - 0.0004, d + 0.0004)
        for _, side, _, d in DUOS[3:]
    }  # both intervals exclude 0
    head = headline(v, CFG, paired=paired, noise_=split_noise(v, noise.seed_groups(ZOO), "single", ["aurc"]))
    e = _entries(head)
    three, half = e["x + s"], e["x + t"]
    # x is in no seed group: the fallback, the largest seed sd of a difference on this split and metric
    assert three["seed_source"] == half["seed_source"] == "fallback" and three["sd_seed"] == pytest.approx(SD)
    assert three["diff"] / three["sd_seed"] == pytest.approx(-3) and three["sig"] == "better"
    assert three["within_seed"] is False and three["finding"] is True
    assert half["diff"] / half["sd_seed"] == pytest.approx(-0.5) and half["sig"] == "better"
    assert half["within_seed"] is True and half["finding"] is False  # the bootstrap alone is no finding
    # the group's bases: their own seed group's spread of the duo-minus-base difference
    for b in ("b0", "b1", "b2"):
        own = e[f"{b} + s"]
        assert (own["seed_source"], own["seeds"]) == ("own", 3) and own["sd_seed"] == pytest.approx(SD)
        assert own["within_seed"] is False and own["finding"] is False  # outside the noise, but no interval
    # page flags: 1 better, 4 within the seed noise, 8 own, 16 fallback
    ctx = headline_context({("s", "test"): v}, CFG, zoo=ZOO, paired=None)
    small = {e["o"]: e["m"][0] for e in compact(ctx)["suites"][0]["splits"][0]["entries"]}
    assert small["x + t"][4] == 4 + 16 and small["x + s"][4] == 16 and small["b0 + s"][4] == 8
    assert small["b0"][4] == 0 and small["x + s"][5] == pytest.approx(SD, rel=1e-3)


def test_fallback_on_values_when_no_difference_has_a_spread():
    v = view("test")
    v = v[~((v.family == "duo") & v.base.isin(["b1", "b2"]))]  # the group's duos lose their siblings
    judged = split_noise(v, noise.seed_groups(ZOO), "single", ["aurc"])
    got = _entries(headline(v, CFG, noise_=judged))
    sd_alone = float(np.std([0.050, 0.051, 0.052], ddof=1))
    for models in ("b0 + s", "x + s", "x + t"):
        assert got[models]["seed_source"] == "fallback" and got[models]["sd_seed"] == pytest.approx(sd_alone)
    none = _entries(headline(v, CFG, noise_=split_noise(v, [], "single", ["aurc"])))
    assert none["x + s"]["seed_source"] == "none" and none["x + s"]["within_seed"] is None
    assert np.isnan(none["x + s"]["sd_seed"]) and none["x + s"]["finding"] is False


def test_a_split_where_seeds_disagree_more_than_methods_is_noise_dominated_and_not_ranked():
    groups = noise.seed_groups(ZOO)
    heads = {
        sp: headline(view(sp), CFG, noise_=split_noise(view(sp), groups, "single", ["aurc"]))
        for sp in ("test", "shift")
    }
    ranked = [0.010, 0.012, 0.014, 0.001, 0.006]  # |diff| of the non-reference entries
    test, shift = heads["test"]["noise"]["aurc"], heads["shift"]["noise"]["aurc"]
    assert test["median"] == pytest.approx(np.median(ranked)) == shift["median"] and test["entries"] == 5
    assert test["sd"] == pytest.approx(0.001) and not test["dominated"]  # 0.010 >= 2 x 0.001
    assert shift["sd"] == pytest.approx(0.05) and shift["dominated"]  # 0.010 < 2 x 0.05
    # ranked: best first; noise-dominated: the fixed order of the bases and their rows
    vals = [heads["test"]["entries"][i]["metrics"]["aurc"]["value"] for i, _ in heads["test"]["order"]["aurc"]]
    assert vals == sorted(vals)
    got = [(heads["shift"]["entries"][i]["models"], role) for i, role in heads["shift"]["order"]["aurc"]]
    assert got == [
        ("b0", "base alone"),
        ("b0 + s", "best duo, balance ≤ 0.2 (also best overall)"),
        ("b1", "base alone"),
        ("b1 + s", "best duo, balance ≤ 0.2 (also best overall)"),
        ("b2", "base alone"),
        ("b2 + s", "best duo, balance ≤ 0.2 (also best overall)"),
        ("x", "base alone"),
        ("x + t", "best duo, balance ≤ 0.2"),
        ("x + s", "best duo overall"),
    ]
    vals = [heads["shift"]["entries"][i]["metrics"]["aurc"]["value"] for i, _ in heads["shift"]["order"]["aurc"]]
    assert vals != sorted(vals)
    ctx = headline_context({("s", "test"): view("test"), ("s", "shift"): view("shift")}, CFG, zoo=ZOO, paired=None)
    table = noise_table(ctx).set_index("split")
    assert table.loc["shift", "dominated"] and not table.loc["test", "dominated"]
    assert [sp["noise"][0][2] for sp in compact(ctx)["suites"][0]["splits"]] == [0, 1]


def test_the_page_data_marks_the_noise_dominated_split_and_keeps_its_fixed_order(tmp_path):
    from report_synth import SEEDED_ZOO, headline_json, make_inputs, noisy_results

    from benchmark.report import build_report

    cfg = ReportConfig(plot_metrics=("aurc",), plot_splits=("test",), formats=())
    build_report(make_inputs(noisy_results(), config=cfg, zoo=SEEDED_ZOO), tmp_path / "r", progress=False)
    head = headline_json(tmp_path / "r")
    i = [m["key"] for m in head["metrics"]].index("aurc")
    splits = {sp["name"]: sp for sp in head["suites"][0]["splits"]}
    assert splits["shift"]["noise"][i][2] == 1 and splits["test"]["noise"][i][2] == 0
    sd, median = splits["shift"]["noise"][i][:2]
    assert median < 2 * sd and sd == pytest.approx(np.std([0.0, 0.04, 0.08], ddof=1), rel=0.2)  # the offsets dominate
    for name, ranked in (("test", True), ("shift", False)):
        sp = splits[name]
        vals = [sp["entries"][e]["m"][i][0] for e, _ in sp["order"]["aurc"]]
        assert (vals == sorted(vals)) == ranked
    bases = [splits["shift"]["entries"][e]["b"] for e, _ in splits["shift"]["order"]["aurc"]]
    assert bases == sorted(bases)  # unranked: grouped by base, in name order
    # dvc metrics: the headline split's noise-dominated metrics are marked and left out of the rows' files
    import json

    files = {
        p.relative_to(tmp_path / "r").as_posix(): json.loads(p.read_text())
        for p in (tmp_path / "r" / "headline").rglob("*.json")
    }
    marks = files.pop("headline/noise-dominated.json")
    keys = [m["key"] for m in head["metrics"]]
    assert marks == {m: splits["test"]["noise"][keys.index(m)][2] for m in ("accuracy", "aurc", "auroc", "ece", "nll")}
    assert files and all(set(r) == {"gflops"} | {m for m, x in marks.items() if not x} for r in files.values())
