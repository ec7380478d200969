"""The gate replayed on a real run of another CPU kind: the from-scratch run of 0ba6191 on an Intel Xeon (family 6,
model 167; ../shared/reference-runs/intel-xeon-avx512/) against the bundle that commit had committed (made on an AMD
EPYC). Data in tests/reproduce/data/intel-run/ (make_intel_run.py beside it says where each file comes from).

The Intel machine trained other checkpoints (its kernels parted from the AMD's: results/fingerprints/), so every
row takes the noise path; its greedy soup chose other ingredients. The gate must pass it, and still fail on a real
regression: a shift beyond the detection threshold it states for each headline metric (gate.detection)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark.core import noise
from benchmark.evaluation.stage import summary
from benchmark.methods.registry import chosen_rows
from benchmark.report.inputs import read_results
from benchmark.reproduce import gate, gate_summary

DATA = Path(__file__).resolve().parent / "data" / "intel-run"
HEADLINE = dict(split="test", family="single", fit="converged", confidence="max")
HEADLINE_METRICS = ["accuracy", "aurc", "auroc", "nll", "ece", "sac98"]


@pytest.fixture(scope="module")
def run():
    committed, _ = read_results(DATA / "committed-rows.csv.gz")
    intel, _ = read_results(DATA / "intel-metrics.csv.gz")
    manifest = json.loads((DATA / "committed-manifest.json").read_text())
    nz = noise.row_noise(
        committed, noise.seed_groups(manifest["zoo"]), level=manifest["params"]["evaluate"]["bootstrap_level"]
    )
    return committed, intel, nz


def _summary(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_the_intel_run_passes_the_gate_with_its_greedy_soup_matched_by_what_it_is(run):
    committed, intel, nz = run
    assert chosen_rows() == [("soup", "greedy")]  # declared by the soup method, not listed by the gate
    rep = gate.compare(committed, intel, nz, chosen=chosen_rows())
    s = gate.summarize(rep)
    assert s["reproduces"] and s["rows"] == len(committed) == len(intel) == 14_730
    assert s["within-noise"] == 14_730 and s["missing"] == s["extra"] == s["identical"] == 0
    soup = rep[(rep["family"] == "soup") & (rep["method"] == "greedy")]
    assert len(soup) == 15 and set(soup["choice"]) == {"lite0-s3 -> lite0-s0+lite0-s4"}  # the choice, as a value
    assert (soup["path"] == "noise").all() and soup["ok"].all()
    assert (rep.loc[rep["choice"] != "", "family"] == "soup").all()
    # the summary values follow their rows: all within tolerance (one identical: a value the retraining did not move)
    summ = gate_summary.compare_summary(
        _summary("committed-summary.json"),
        _summary("intel-summary.json"),
        rep,
        gate_summary.summary_sources(committed, lambda r: summary(r, "converged")),
    )
    t = gate_summary.summarize_summary(summ)
    assert t["reproduces"] and t["values"] == 420 and t["within"] + t["identical"] == 420


def test_without_matching_by_identity_the_same_run_fails_on_the_soup_alone(run):
    committed, intel, nz = run
    s = gate.summarize(gate.compare(committed, intel, nz))
    assert not s["reproduces"] and s["missing"] == s["extra"] == 15 and s["within-noise"] == 14_715


def test_when_both_runs_claim_byte_identity_other_logits_still_fail(run):
    committed, intel, nz = run
    s = gate.summarize(gate.compare(committed, intel, nz, inputs_must_match=True, chosen=chosen_rows()))
    assert not s["reproduces"] and s["inputs-differ"] == 14_730


def test_on_the_exact_path_the_same_logits_must_make_the_same_choice(run):
    committed, _, nz = run
    fresh = committed.copy()
    greedy = (fresh["family"] == "soup") & (fresh["method"] == "greedy")
    fresh.loc[greedy, "members"] = "lite0-s0+lite0-s4"  # same logits (inputs_hash), another choice: a regression
    rep = gate.compare(committed, fresh, nz, chosen=chosen_rows())
    bad = rep[~rep["ok"]]
    assert len(bad) == greedy.sum() and (bad["status"] == "differs").all() and (bad["detail"] == "choice").all()


def test_the_stated_detection_thresholds_are_the_gates_own(run):
    committed, _, nz = run
    det = gate.detection(committed, nz, metrics=HEADLINE_METRICS, **HEADLINE).set_index("metric")
    assert list(det.index) == HEADLINE_METRICS and (det["models"] == 9).all()
    assert (det["min"] > 0).all() and (det["min"] <= det["median"]).all() and (det["median"] <= det["max"]).all()
    # independent of gate.k_factor: 5 seeds, two-sided 1e-3, sqrt(2) t_4 -> 12.18 (scipy-free: t_4 quantile 8.610)
    acc = committed[
        (committed["split"] == "test")
        & (committed["family"] == "single")
        & (committed["fit"] == "converged")
        & (committed["confidence"] == "max")
        & (committed["metric"] == "accuracy")
    ]
    by_hand = 2**0.5 * 8.610302 * nz.loc[acc.index, "noise"].astype(float)
    assert det.loc["accuracy", "min"] == pytest.approx(by_hand.min(), rel=1e-5)


@pytest.mark.parametrize("metric", HEADLINE_METRICS)
def test_a_shift_just_beyond_the_stated_threshold_fails_and_just_within_passes(run, metric):
    committed, _, nz = run
    det = gate.detection(committed, nz, metrics=[metric], **HEADLINE).iloc[0]
    row = (
        (committed["split"] == "test")
        & (committed["family"] == "single")
        & (committed["fit"] == "converged")
        & (committed["confidence"] == "max")
        & (committed["metric"] == metric)
        & (committed["base"] == det["model_min"])
    )
    assert row.sum() == 1
    for factor, ok in ((0.99, True), (1.01, False)):
        fresh = committed.assign(inputs_hash="retrained")  # other logits: every row on the noise path
        fresh.loc[row, "value"] = pd.to_numeric(fresh.loc[row, "value"]) + factor * det["min"]
        rep = gate.compare(committed, fresh, nz, chosen=chosen_rows())
        assert bool(rep["ok"].all()) is ok, (metric, factor)
        if not ok:
            assert (~rep["ok"]).sum() == 1 and rep.loc[~rep["ok"], "status"].item() == "beyond-noise"


def test_a_real_regression_on_the_intel_rows_fails_and_a_small_one_is_beyond_the_noise_paths_sight(run):
    committed, intel, nz = run
    aurc = intel["metric"].isin(["aurc", "augrc", "eaurc"])
    doubled = intel.assign(value=np.where(aurc, 2 * pd.to_numeric(intel["value"]), pd.to_numeric(intel["value"])))
    rep = gate.compare(committed, doubled, nz, chosen=chosen_rows())  # an AURC computed twice too large everywhere
    assert not rep["ok"].all() and set(rep.loc[~rep["ok"], "metric"]) <= {"aurc", "augrc", "eaurc"}
    acc = intel["metric"] == "accuracy"
    lower = intel.assign(value=np.where(acc, pd.to_numeric(intel["value"]) - 0.02, pd.to_numeric(intel["value"])))
    assert gate.compare(committed, lower, nz, chosen=chosen_rows())["ok"].all()  # 2 points: within k x noise (~0.12)
