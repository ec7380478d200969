"""Training-seed noise (benchmark/core/noise.py): seed groups, seed spread and each row's noise, against
hand-computed values (numpy's sample sd, the normal quantile 1.959964 of a 95% interval)."""

import math

import numpy as np
import pandas as pd
import pytest

from benchmark.core import noise
from benchmark.models.zoo import ZooEntry

ZOO = {
    "b-s1": {"arch": "b", "init": "x", "seed": 1, "role": "base"},
    "b-s0": {"arch": "b", "init": "x", "seed": 0, "role": "the first"},  # role is free text: same group
    "b-s2": {"arch": "b", "init": "x", "seed": 2},
    "c": {"arch": "c", "init": "x", "seed": 0, "role": "sidekick"},
    "d": {"arch": "c", "init": "y", "seed": 0},
}  # another init: another model


def row(
    split, family, method, base, side, members, metric, value, lo=math.nan, hi=math.nan, fit="converged", conf="max"
):
    return dict(
        suite="s",
        split=split,
        family=family,
        method=method,
        base=base,
        sidekick=side,
        members=members,
        fit=fit,
        confidence=conf,
        metric=metric,
        value=value,
        ci_low=lo,
        ci_high=hi,
    )


def test_seed_groups_differ_only_in_seed_and_role():
    groups = noise.seed_groups(ZOO)
    assert [(g.label, g.names) for g in groups] == [("b (3 seeds)", ("b-s0", "b-s1", "b-s2"))]  # by seed, not by name
    assert groups[0].first == "b-s0"
    assert noise.seed_groups({"a": {"arch": "x", "seed": 0}, "b": {"arch": "y", "seed": 1}}) == []
    # two groups of one arch get distinct labels; entries without a seed belong to none
    two = noise.seed_groups(
        {
            "p0": {"arch": "x", "img_size": 8, "seed": 0},
            "p1": {"arch": "x", "img_size": 8, "seed": 1},
            "q0": {"arch": "x", "img_size": 9, "seed": 0},
            "q1": {"arch": "x", "img_size": 9, "seed": 1},
            "r": {"arch": "x", "img_size": 8},
        }
    )
    assert [(g.label, g.names) for g in two] == [("x (2 seeds)", ("p0", "p1")), ("x (2 seeds)'", ("q0", "q1"))]


def test_seed_groups_of_typed_zoo_entries_keep_zoo_order_and_seed_order():
    mk = lambda n, s, arch="t": ZooEntry(name=n, arch=arch, init="scratch", img_size=32, seed=s, recipe="r")  # noqa: E731
    zoo = {
        "z-s3": mk("z-s3", 3),
        "y": mk("y", 0, "u"),
        "z-s1": mk("z-s1", 1),
        "y2": mk("y2", 5, "u"),
        "z-s2": mk("z-s2", 2),
    }
    assert [g.names for g in noise.seed_groups(zoo)] == [
        ("z-s1", "z-s2", "z-s3"),
        ("y", "y2"),
    ]  # deep ensembles: names[:m]


@pytest.fixture
def table():
    rows = []
    acc = {"b-s0": 0.90, "b-s1": 0.86, "b-s2": 0.95, "c": 0.5, "d": 0.6}
    for m, v in acc.items():
        rows.append(row("test", "single", "ts", m, "", m, "accuracy", v, v - 0.02, v + 0.02))
        rows.append(row("shift", "single", "ts", m, "", m, "accuracy", v - 0.3))
    duo = {"b-s0": 0.91, "b-s1": 0.89, "b-s2": 0.96}
    for m, v in duo.items():  # the group's bases with the same sidekick
        rows.append(row("test", "duo", "weighted", m, "c", f"{m}+c", "accuracy", v, v - 0.01, v + 0.01))
    rows.append(row("test", "duo", "weighted", "b-s0", "d", "b-s0+d", "accuracy", 0.99))  # another sidekick, alone
    rows.append(row("test", "deep_ensemble", "m2", "b-s0", "", "b-s0+b-s1", "accuracy", 0.97, 0.96, 0.98, fit="none"))
    rows.append(row("test", "sve", "m4", "b-s0", "", "sve-m4", "accuracy", 0.93, fit="none"))
    return pd.DataFrame(rows)


def test_seed_spread_is_the_sample_sd_over_rows_that_differ_only_by_seed(table):
    sp = noise.seed_spread(table, noise.seed_groups(ZOO)).set_index(["split", "family", "members"])
    label = "b (3 seeds)"
    assert sp.loc[("test", "single", label), "sd"] == pytest.approx(np.std([0.90, 0.86, 0.95], ddof=1))
    assert sp.loc[("test", "single", label), ["n", "min", "max"]].tolist() == [3, 0.86, 0.95]
    assert sp.loc[("shift", "single", label), "sd"] == pytest.approx(np.std([0.60, 0.56, 0.65], ddof=1))
    assert sp.loc[("test", "duo", f"{label}+c"), "sd"] == pytest.approx(np.std([0.91, 0.89, 0.96], ddof=1))
    # one duo with sidekick d, the deep ensemble and SVE have no seed siblings; c and d are in no group
    assert len(sp) == 3


def test_row_noise_own_fallback_and_bootstrap_error(table):
    groups = noise.seed_groups(ZOO)
    nz = pd.concat([table, noise.row_noise(table, groups, level=0.95)], axis=1).set_index(
        ["split", "family", "members"]
    )
    z = 1.959964  # 97.5% normal quantile
    sd_single = np.std([0.90, 0.86, 0.95], ddof=1)
    sd_duo = np.std([0.91, 0.89, 0.96], ddof=1)
    r = nz.loc[("test", "single", "b-s1")]  # every model in a group, with siblings: its own spread
    assert (r["seed_source"], r["seeds"]) == ("own", 3)
    assert r["se_boot"] == pytest.approx(0.04 / (2 * z), rel=1e-6)
    assert r["noise"] == pytest.approx(math.hypot(sd_single, 0.04 / (2 * z)), rel=1e-6)
    # the duo's siblings vary the base only (the sidekick c is in no group): the largest test accuracy spread
    r = nz.loc[("test", "duo", "b-s1+c")]
    assert r["seed_source"] == "fallback" and r["sd_seed"] == pytest.approx(max(sd_single, sd_duo))
    assert r["noise"] == pytest.approx(math.hypot(max(sd_single, sd_duo), 0.02 / (2 * z)), rel=1e-6)
    for members in ("b-s0+b-s1", "sve-m4", "c", "b-s0+d"):  # no siblings: fallback
        assert nz.loc[("test", slice(None), members), "seed_source"].tolist() == ["fallback"]
    r = nz.loc[("shift", "single", "c")]  # no interval on the shift split: the seed spread alone
    assert r["se_boot"] == 0 and r["noise"] == pytest.approx(np.std([0.60, 0.56, 0.65], ddof=1))


def test_without_a_seed_group_the_noise_is_the_bootstrap_error_alone(table):
    zoo = {k: v for k, v in ZOO.items() if k in ("b-s0", "c", "d")}
    nz = noise.row_noise(table, noise.seed_groups(zoo), level=0.9)
    assert set(nz["seed_source"]) == {"none"} and nz["sd_seed"].isna().all()
    has_ci = table["ci_low"].notna()
    assert np.allclose(
        nz.loc[has_ci, "noise"], (table["ci_high"] - table["ci_low"])[has_ci] / (2 * 1.644854), rtol=1e-6
    )
    assert nz.loc[~has_ci, "noise"].isna().all()  # nothing known: the gate cannot pass a changed value
    assert noise.describe(nz, []).startswith("no seed group in the zoo")


def test_describe_counts_the_sources(table):
    groups = noise.seed_groups(ZOO)
    line = noise.describe(noise.row_noise(table, groups, level=0.95), groups)
    assert line.startswith("seed groups b (3 seeds): b-s0, b-s1, b-s2;") and "own seeds for 6 rows" in line


@pytest.mark.parametrize("level", [0, 1, 1.5])
def test_a_bootstrap_level_outside_0_1_is_refused(level):
    with pytest.raises(ValueError, match="bootstrap level must be in"):
        noise.z_of(level)


# ---- differences to the base alone ------------------------------------------------------------------


def test_differences_subtract_the_base_alone_of_the_same_split_and_metric(table):
    d = noise.differences(table, "single").set_index(["split", "members"])
    assert d.loc[("test", "b-s1+c"), "value"] == pytest.approx(0.89 - 0.86)
    assert d.loc[("test", "b-s0+b-s1"), "value"] == pytest.approx(0.97 - 0.90)  # deep ensemble minus its base b-s0
    assert d["ci_low"].isna().all() and "single" not in set(d["family"])
    orphan = pd.DataFrame([row("test", "duo", "weighted", "zz", "c", "zz+c", "accuracy", 0.5)])
    assert (
        noise.differences(pd.concat([table, orphan], ignore_index=True), "single")["base"].ne("zz").all()
    )  # no base alone


def test_difference_noise_own_spread_for_a_group_base_with_a_sidekick_of_no_group(table):
    groups = noise.seed_groups(ZOO)
    dn = noise.difference_noise(table, groups, "single")
    members = table.loc[dn.index, "members"]
    sd_c = np.std([0.91 - 0.90, 0.89 - 0.86, 0.96 - 0.95], ddof=1)
    for m in ("b-s0+c", "b-s1+c", "b-s2+c"):  # the gate's row_noise gives these the fallback; differences: own
        r = dn[members == m].iloc[0]
        assert (r["seed_source"], r["seeds"]) == ("own", 3) and r["sd_seed"] == pytest.approx(sd_c)
        assert r["within"] == (abs(r["diff"]) <= 2 * sd_c)
    for m in ("b-s0+d", "sve-m4", "b-s0+b-s1"):  # no siblings: the largest difference spread of (test, accuracy)
        r = dn[members == m].iloc[0]
        assert r["seed_source"] == "fallback" and r["sd_seed"] == pytest.approx(sd_c)
    assert dn[members == "b-s0+d"].iloc[0]["within"] is False  # 0.09 > 2 x 0.0153


def test_noise_dominated_is_median_abs_diff_under_twice_the_reference_sd():
    ranked = pd.DataFrame(
        {"split": ["a"] * 3 + ["b"] * 3 + ["c"], "metric": "m", "diff": [0.01, -0.03, 0.02, 0.001, -0.002, 0.003, 0.5]}
    )
    ref = pd.DataFrame({"split": ["a", "b", "d"], "metric": "m", "sd": [0.005, 0.005, 0.1], "n": [5, 5, 5]})
    out = noise.noise_dominated(ranked, ref).set_index("split")
    assert out.loc["a", "median"] == pytest.approx(0.02) and not out.loc["a", "dominated"]  # 0.02 >= 0.01
    assert out.loc["b", "median"] == pytest.approx(0.002) and out.loc["b", "dominated"]  # 0.002 < 0.01
    assert not out.loc["c", "dominated"] and not out.loc["d", "dominated"]  # one side unknown: no verdict
    assert out.loc["d", "entries"] == 0 and out.loc["a", "entries"] == 3


def test_seed_sd_refuses_an_unknown_rule(table):
    with pytest.raises(ValueError, match="own must be"):
        noise.seed_sd(table, noise.seed_groups(ZOO), own="some")
