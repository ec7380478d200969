"""The reproducibility gate: row and summary comparisons within tolerances (hand-worked cases)."""
import math
from pathlib import Path

import pandas as pd
import pytest

from benchmark.config.typed import parse_config
from benchmark.reproduce import gate
from benchmark.stages.params_config import ReproduceParams


def tolerances(raw):
    """The gate's tolerances of a ``reproduce.tolerance`` mapping, parsed as the params file's block is."""
    return gate.of_params(None if raw is None else parse_config(ReproduceParams, {"tolerance": raw}, "params reproduce"))


TOL = tolerances({"default": {"atol": 0.01, "rtol": 0.0}, "nll": {"atol": 0.0, "rtol": 0.1}})


def rows(values: dict) -> pd.DataFrame:
    out = []
    for (model, metric), v in values.items():
        out.append(dict(suite="embedded", split="test", family="single", method="ts", base=model, sidekick="", members=model,
                        fit="converged", confidence="max", metric=metric, value=v, ci_low=math.nan, ci_high=math.nan))
    return pd.DataFrame(out)


def test_identical_tables_are_exact():
    a = rows({("m", "accuracy"): 0.9, ("m", "nll"): 0.3})
    rep = gate.compare(a, a.copy(), TOL)
    assert list(rep["status"]) == ["exact", "exact"]
    assert gate.summarize(rep)["reproduces"]


def test_absolute_and_relative_tolerances():
    a = rows({("m", "accuracy"): 0.90, ("m", "nll"): 0.30})
    # accuracy moves by 0.009 (< atol 0.01): within; nll by 0.029 (< 10% of 0.30 = 0.03): within
    b = rows({("m", "accuracy"): 0.909, ("m", "nll"): 0.329})
    rep = gate.compare(a, b, TOL).set_index("metric")
    assert rep.loc["accuracy", "status"] == "within" and rep.loc["nll", "status"] == "within"
    assert rep.loc["accuracy", "diff"] == pytest.approx(0.009)
    # just outside each: 0.011 > 0.01 and 0.031 > 0.03
    c = rows({("m", "accuracy"): 0.911, ("m", "nll"): 0.331})
    rep = gate.compare(a, c, TOL).set_index("metric")
    assert set(rep["status"]) == {"outside"}
    assert not gate.summarize(rep.reset_index())["reproduces"]


def test_missing_and_extra_rows_fail():
    a = rows({("m", "accuracy"): 0.9, ("k", "accuracy"): 0.8})
    b = rows({("m", "accuracy"): 0.9, ("j", "accuracy"): 0.8})
    rep = gate.compare(a, b, TOL)
    assert sorted(rep["status"]) == ["exact", "extra", "missing"]
    s = gate.summarize(rep)
    assert (s["missing"], s["extra"], s["reproduces"]) == (1, 1, False)


def test_interval_bounds_are_compared_too():
    a = rows({("m", "accuracy"): 0.9}).assign(ci_low=0.88, ci_high=0.92)
    b = a.assign(ci_high=0.95)  # same value, interval moved by 0.03 > atol
    assert gate.compare(a, b, TOL)["status"].item() == "outside"


def test_repeated_keys_are_refused():
    a = rows({("m", "accuracy"): 0.9})
    with pytest.raises(ValueError, match="repeat a key"):
        gate.compare(pd.concat([a, a]), a, TOL)


def test_summary_comparison_uses_the_metric_of_each_key():
    ref = {"single": {"m": {"accuracy": 0.9, "nll": 0.3}}, "units": {"computed": 5}}
    new = {"single": {"m": {"accuracy": 0.905, "nll": 0.35}}, "units": {"computed": 5}}
    rep = gate.compare_summary(ref, new, TOL).set_index("key")
    assert rep.loc["single/m/accuracy", "status"] == "within"
    assert rep.loc["single/m/nll", "status"] == "outside"  # 0.05 > 10% of 0.3
    assert rep.loc["units/computed", "status"] == "exact"


@pytest.mark.parametrize("raw, msg", [
    (None, "'default' entry"),
    ({"nll": {"atol": 0.1}}, "'default' entry"),
    ({"default": {"atol": "1e-3"}}, "1.0e-3"),
    ({"default": {"atol": 0.1, "foo": 1}}, r"tolerance.default: missing keys \[\], unknown keys \['foo'\]"),
    ({"default": {"atol": 0.1}, "nll": [0.1]}, r"tolerance.nll: must be a mapping"),
    ({"default": {"atol": -1}}, ">= 0"),
])
def test_bad_tolerances_name_the_field(raw, msg):
    with pytest.raises(ValueError, match=msg):
        tolerances(raw)


def test_params_tolerances_parse():
    from benchmark.stages.stage_config import load_params

    tol = gate.of_params(load_params(Path(__file__).resolve().parents[2] / "params.yaml").reproduce)
    assert "default" in tol and all(t.atol >= 0 and t.rtol >= 0 for t in tol.values())
