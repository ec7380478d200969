""".ci/run timed step by step (benchmark/reproduce/ci_timing.py) from a hand-written trace, and its docs table."""

import json
import time
from pathlib import Path

import pytest

from benchmark.docsgen import record_tables
from benchmark.reproduce import ci_timing

ROOT = Path(__file__).resolve().parents[2]

TRACE = """+ 100.0 cd /x
+ 100.5 bash scripts/setup.sh test
++ 101.0 nproc
+ 200.0 .venv/bin/ruff check
+ 210.0 .venv/bin/python -m pytest
+ 570.0 python -m benchmark reproduce fingerprint
+ 690.0 python -m benchmark reproduce fingerprint --emulate Icelake-Server --all-modes
+ 1290.0 python -m benchmark reproduce fingerprint --emulate EPYC-Milan --all-modes --no-pipeline
+ 1380.0 python -m benchmark reproduce timings
+ 1800.0 python -m benchmark cluster local-check --jobs 2
some output of a command
+ 2100.0 echo '== ci: tests passed'
"""


def test_each_top_level_command_gets_its_seconds_and_kind():
    steps = ci_timing.parse_trace(TRACE, end=2100.5)
    assert [s["kind"] for s in steps] == [
        None,
        "set-up",
        "lint and types",
        "tests",
        "fingerprint",
        "emulated CPU kinds",
        "emulated CPU kinds",
        "main job and gate",
        "Slurm",
        None,
    ]
    assert [s["seconds"] for s in steps] == [0.5, 99.5, 10.0, 360.0, 120.0, 600.0, 90.0, 420.0, 300.0, 0.5]
    rec = ci_timing.record(steps, machine={"cpus": 2, "cpu": "AMD EPYC"}, commit="abc1234def", passed=True)
    assert rec["by_kind"]["emulated CPU kinds"] == 690.0 and rec["total_s"] == 2000.5


def test_a_trace_without_time_stamps_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no time-stamped trace line"):
        ci_timing.parse_trace("+ cd /x\n", end=1.0)
    (tmp_path / "t").write_text("nothing")
    assert ci_timing.main([str(tmp_path / "t"), "--end", "1", "--out", str(tmp_path / "r.json")]) == 2
    assert not (tmp_path / "r.json").exists()


def test_the_docs_table_sums_by_kind_and_judges_the_target(tmp_path):
    assert "bash scripts/measure-ci.sh" in record_tables.ci_table(tmp_path)
    steps = ci_timing.parse_trace(TRACE, end=2100.5)
    rec = ci_timing.record(steps, machine={"cpus": 2, "cpu": "AMD EPYC"}, commit="abc1234def", passed=True)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ci_run.json").write_text(json.dumps(rec))
    table = record_tables.ci_table(tmp_path)
    assert "| emulated CPU kinds | 11.5 |" in table and "| **all of `.ci/run`** | **33.3** |" in table
    assert "Passed, within the 45-minute target; 2 CPUs, AMD EPYC, commit `abc1234`" in table
    rec["total_s"] = 46 * 60.0
    (tmp_path / "results" / "ci_run.json").write_text(json.dumps(rec))
    assert "**over** the 45-minute target" in record_tables.ci_table(tmp_path)
    rec["machine"]["kind"] = "AuthenticAMD-f25-m1"  # CI's record names the CPU kind "kind"
    (tmp_path / "results" / "ci_run.json").write_text(json.dumps(rec))
    assert "; 2 CPUs, AMD EPYC (Zen 3, AuthenticAMD-f25-m1), commit `abc1234`" in record_tables.ci_table(tmp_path)


def test_the_trace_of_measure_ci_has_time_stamps_as_root_too(tmp_path):
    """scripts/measure-ci.sh sets PS4 through BASH_ENV (bash ignores PS4 from the environment when run as root, as
    in CI's containers): the same construct gives time-stamped lines that parse_trace reads."""
    import subprocess

    script = (ROOT / "scripts" / "measure-ci.sh").read_text()
    assert 'BASH_ENV="$work/ps4" bash -x .ci/run' in script
    (tmp_path / "ps4").write_text("PS4='+ $(date +%s.%N) '\n")
    (tmp_path / "run").write_text("echo one\nsleep 0.2\necho two\n")
    env = {"PATH": "/usr/bin:/bin", "BASH_ENV": str(tmp_path / "ps4"), "PS4": "ignored as root "}
    trace = subprocess.run(["bash", "-x", str(tmp_path / "run")], env=env, capture_output=True, text=True).stderr
    steps = ci_timing.parse_trace(trace, end=time.time())
    assert [s["command"] for s in steps] == ["echo one", "sleep 0.2", "echo two"]
    assert steps[1]["seconds"] >= 0.2
