"""What the gate reads: dvc.lock stage outputs (measured ones left out), whether each run pinned the numerics,
and ``reproduce check`` end to end on the committed bundle."""

import json
import subprocess
from pathlib import Path

import pytest

from benchmark.cli.main import main
from benchmark.dvcutil import lockfile
from benchmark.reproduce import provenance

ROOT = Path(__file__).resolve().parents[2]


def lock(**stages) -> str:
    return "schema: '2.0'\nstages:\n" + "".join(
        f"  {name}:\n    cmd: x\n    outs:\n"
        + "".join(f"    - path: {p}\n      hash: md5\n      md5: {m}\n" for p, m in outs.items())
        for name, outs in stages.items()
    )


def test_outputs_compared_by_md5_measured_ones_left_out():
    a = lockfile.parse(
        lock(
            data={"results/data": "1.dir"},
            **{
                "train@m": {"results/checkpoints/m": "2.dir"},
                "logits@m": {"results/logits/m": "3.dir", "results/cost/m.json": "4"},
                "cost@m": {"results/cost/m.json": "5"},
                "evaluate": {"results/metrics.csv": "6", "results/paired.csv": "7"},
            },
        ),
        "a",
    )
    b = lockfile.parse(
        lock(
            data={"results/data": "1.dir"},
            **{
                "train@m": {"results/checkpoints/m": "X.dir"},
                "logits@m": {"results/logits/m": "3.dir", "results/cost/m.json": "Y"},
                "cost@m": {"results/cost/m.json": "5"},
                "evaluate": {"results/metrics.csv": "Z"},
            },
        ),
        "b",
    )
    rep = lockfile.compare_outputs(a, b, stages={"data", "train@m", "logits@m", "evaluate"}).set_index(
        ["stage", "path"]
    )
    assert rep["status"].to_dict() == {
        ("cost@m", "results/cost/m.json"): "stale",
        ("data", "results/data"): "identical",
        ("evaluate", "results/metrics.csv"): "measured",
        ("evaluate", "results/paired.csv"): "missing",
        ("logits@m", "results/cost/m.json"): "measured",
        ("logits@m", "results/logits/m"): "identical",
        ("train@m", "results/checkpoints/m"): "different",
    }
    s = lockfile.summarize(rep.reset_index())
    assert (s["identical"], s["compared"], s["failing_stages"]) == (2, 3, ["evaluate", "train@m"])


def test_every_measured_output_has_a_reason_and_plain_outputs_none():
    assert lockfile.measured("results/methods/sve-m8") and lockfile.measured("reports")
    assert "last_run.json" in lockfile.measured("results/units")
    for path in (
        "results/data",
        "results/logits/lite0-s0",
        "results/checkpoints/lite1",
        "results/paired.csv",
        "results/summary.json",
        "results/units/x.csv",
    ):
        assert lockfile.measured(path) is None, path


def test_a_unit_cache_of_another_run_is_not_a_differing_output():
    """The evaluate stage's persisted unit cache differs between a from-scratch run (every unit computed) and the
    committed one (made by a rerun that reused them: last_run.json's counts), with the same rows: a fresh clone's
    plain ``reproduce check`` failed on it. A differing results table still fails."""
    outs = {"results/units": "U1.dir", "results/metrics.csv": "M1", "results/paired.csv": "P"}
    a = lockfile.parse(lock(evaluate=outs), "a")
    b = lockfile.parse(lock(evaluate={**outs, "results/units": "U2.dir", "results/metrics.csv": "M2"}), "b")
    s = lockfile.summarize(lockfile.compare_outputs(a, b, stages={"evaluate"}))
    assert (s["identical"], s["measured"], s["failing_stages"]) == (1, 2, [])
    c = lockfile.parse(lock(evaluate={**outs, "results/units": "U2.dir", "results/paired.csv": "P2"}), "c")
    assert lockfile.summarize(lockfile.compare_outputs(a, c, stages={"evaluate"}))["failing_stages"] == ["evaluate"]


def test_a_lock_that_is_not_a_lock_is_one_clear_error():
    with pytest.raises(ValueError, match="x.lock: not a dvc.lock"):
        lockfile.parse("a: 1\n", "x.lock")


def test_the_committed_lock_defines_current_stages_only_of_dvc_yaml():
    stages = lockfile.current_stages(ROOT)
    assert stages and "data" in stages and "evaluate" in stages and not any(s.startswith("cost@") for s in stages)


def test_numerics_of_the_fresh_run_from_its_records(tmp_path):
    res = tmp_path / "results"
    (res / "checkpoints" / "a").mkdir(parents=True)
    (res / "checkpoints" / "b").mkdir()
    (res / "checkpoints" / "a" / "train.json").write_text(json.dumps({"numerics": {"pinned": True}}))
    (res / "checkpoints" / "b" / "train.json").write_text(json.dumps({"numerics": {"pinned": False}}))
    assert provenance.fresh_numerics(res, tmp_path) == (False, f"{res / 'checkpoints'}/*/train.json (1 of 2 pinned)")
    (res / "timings.json").write_text(json.dumps({"machine": {"pinned": True}}))  # not a git checkout: the run's own
    assert provenance.fresh_numerics(res, tmp_path) == (True, str(res / "timings.json"))


def test_numerics_of_the_committed_run_from_its_manifest_else_unknown(tmp_path):
    assert provenance.committed_numerics({"numerics": {"pinned": True}}, tmp_path) == (
        True,
        "bundle manifest 'numerics'",
    )
    assert provenance.committed_numerics({"device": {"numerics": {"pinned": False}}}, tmp_path)[0] is False
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert provenance.committed_numerics({}, tmp_path) == (False, "nothing recorded: treated as not pinned")


def test_cpu_kinds_of_the_fresh_run_from_its_timings_and_of_the_committed_run_from_head(tmp_path):
    res = tmp_path / "results"
    res.mkdir()
    assert provenance.cpu_kinds(res, tmp_path)[1] == ("?", "nothing recorded")  # not a git checkout
    assert provenance.cpu_kinds(res, tmp_path)[0] == (provenance.numerics.cpu()["kind"], "this process")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    amd = json.dumps({"machine": {"cpu_kind": "AuthenticAMD-f25-m17", "pinned": True}})
    (res / "timings.json").write_text(amd)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    fresh, ref = provenance.cpu_kinds(res, tmp_path)
    assert ref == ("AuthenticAMD-f25-m17", "HEAD:results/timings.json") and fresh[1] == "this process"  # committed file
    (res / "timings.json").write_text(amd.replace("AuthenticAMD-f25-m17", "GenuineIntel-f6-m167"))
    assert provenance.cpu_kinds(res, tmp_path)[0] == ("GenuineIntel-f6-m167", str(res / "timings.json"))
    assert provenance.vendor("GenuineIntel-f6-m167") == "GenuineIntel" != provenance.vendor("AuthenticAMD-f25-m17")


@pytest.mark.parametrize("allow", [False, True])
def test_check_of_another_vendors_run_judges_rows_with_the_same_logits_by_noise_when_allowed(
    tmp_path, monkeypatch, capsys, allow
):
    """The committed rows as an Intel run's (its timings.json says so; the committed run is an AMD EPYC's), one value
    nudged by 1e-7: with --allow-other-inputs that row is judged by its noise and passes; without, it fails."""
    from benchmark.reproduce.gate import committed_bundle

    monkeypatch.chdir(ROOT)
    bundle = committed_bundle(ROOT)
    rows = bundle.rows.copy()
    i = rows.index[(rows["split"] == "test") & (rows["family"] == "single") & (rows["metric"] == "nll")][0]
    rows.loc[i, "value"] += 1e-7
    res = tmp_path / "results"
    res.mkdir()
    rows.to_csv(res / "metrics.csv", index=False)
    (res / "summary.json").write_text(lockfile.committed_text("results/summary.json", ROOT))
    timing = {"command": "python -m benchmark run --jobs 2", "repro_wall_s": 427.7, "install_s": 108.9}
    timing |= {"floor_ratio": 1.116, "compute_floor_s": 383.2, "cpu_s": 768.8}
    (res / "timings.json").write_text(
        json.dumps({**timing, "machine": {"cpu_kind": "GenuineIntel-f6-m167", "pinned": True}})
    )
    (tmp_path / "dvc.lock").write_text(lockfile.committed_text("dvc.lock", ROOT))
    args = ["reproduce", "check", "--results", str(res), "--summary", str(res / "summary.json")]
    args += ["--lock", str(tmp_path / "dvc.lock"), "--bundle", str(bundle.path), "--record", str(tmp_path / "x.json")]
    code = main(args + ["--allow-other-inputs"] * allow)
    out = capsys.readouterr().out
    assert f"CPU kinds: fresh run GenuineIntel-f6-m167 ({res / 'timings.json'}), committed run " in out
    assert "-> two vendors: the evaluation's MKL kernels part" in out
    n = len(rows)
    (run,) = json.loads((tmp_path / "x.json").read_text())
    assert run["kind"] == "GenuineIntel-f6-m167"  # the run's own record, not this machine's
    assert run["timing"] == {k: v for k, v in timing.items() if k != "cpu_s"}  # its own timing, kept with the check
    from benchmark.reproduce import cross_cpu

    assert "| 8.9 min (install 109 s + `python -m benchmark run --jobs 2` 428 s, 1.12x its compute floor) |" in (
        cross_cpu.runs_table([run])
    )
    if allow:
        assert code == 0 and f"same logits: {n - 1} identical, 0 within 1e-9, 0 differ, 1 judged by noise" in out
        assert run["rows"]["same-logits-noise"] == 1 and run["reproduces"] is True
    else:
        assert code == 1 and f"same logits: {n - 1} identical, 0 within 1e-9, 1 differ; other logits:" in out
        assert "(--allow-other-inputs judges such rows by their noise)" in out and run["reproduces"] is False


def test_check_end_to_end_on_the_committed_bundle(tmp_path, monkeypatch, capsys):
    """The committed rows as a 'fresh' run, one value nudged by 1e-7: that row alone fails on the exact path;
    the summary and the stage outputs are the committed ones."""
    from benchmark.config.numerics import cpu
    from benchmark.reproduce.gate import committed_bundle

    other = "GenuineIntel-f6-m167" if cpu()["kind"] != "GenuineIntel-f6-m167" else "GenuineIntel-f6-m143"
    monkeypatch.chdir(ROOT)
    bundle = committed_bundle(ROOT)
    rows = bundle.rows.copy()
    i = rows.index[(rows["split"] == "test") & (rows["family"] == "single") & (rows["metric"] == "nll")][0]
    rows.loc[i, "value"] += 1e-7
    (tmp_path / "results").mkdir()
    rows.to_csv(tmp_path / "results" / "metrics.csv", index=False)
    (tmp_path / "results" / "summary.json").write_text(lockfile.committed_text("results/summary.json", ROOT))
    (tmp_path / "dvc.lock").write_text(lockfile.committed_text("dvc.lock", ROOT))
    code = main(
        [
            "reproduce",
            "check",
            "--results",
            str(tmp_path / "results"),
            "--summary",
            str(tmp_path / "results" / "summary.json"),
            "--lock",
            str(tmp_path / "dvc.lock"),
            "--bundle",
            str(bundle.path),
            "--report",
            str(tmp_path / "r.csv"),
            "--show",
            "3",
            "--record",
            str(tmp_path / "cross_cpu.json"),
            "--ran-on",
            other,
            "--note",
            "a test",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    n = len(rows)
    assert f"{n} rows; same logits: {n - 1} identical, 0 within 1e-9, 1 differ; other logits: 0 within" in out
    assert "DOES NOT REPRODUCE" in out and "vs HEAD:results/summary.json: " in out and "0 outside, 0 missing" in out
    assert "stage outputs of" in out and " byte-identical (" in out
    import pandas as pd

    rep = pd.read_csv(tmp_path / "r.csv", keep_default_na=False)
    bad = rep[rep["ok"].astype(str) == "False"]
    assert len(bad) == 1 and bad.iloc[0]["metric"] == "nll" and bad.iloc[0]["detail"] == "value"
    (run,) = json.loads((tmp_path / "cross_cpu.json").read_text())  # --record: the check as the README line reads it
    assert run["kind"] == other and run["cpu"] == other  # another machine's kind, and no record of its name here
    assert run["rows"]["identical"] == n - 1 and run["rows"]["differs"] == 1 and run["reproduces"] is False
    assert run["bundle"] == str(bundle.path) and run["note"] == "a test" and run["byte_identical"] is False
    assert "recorded in " in out


def test_check_without_a_fresh_run_is_exit_2(tmp_path, capsys):
    assert main(["reproduce", "check", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "metrics.csv: results file not found" in err and "Traceback" not in err
