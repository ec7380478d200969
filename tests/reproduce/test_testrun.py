"""benchmark/reproduce/testrun.py: the README's test command timed and recorded; counts read from a JUnit report
(hand-written cases), a real pytest run of a tiny generated suite, and a failing run that records nothing."""

import json
import sys
from pathlib import Path

import pytest

from benchmark.cli.main import main
from benchmark.reproduce import testrun

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="{e}" failures="{f}" skipped="2" tests="10" time="3.1"/>
<testsuite name="other" errors="0" failures="0" skipped="0" tests="5" time="1.0"/></testsuites>"""


def test_junit_counts_sum_the_suites_and_derive_passed(tmp_path):
    p = tmp_path / "r.xml"
    p.write_text(JUNIT.format(e=1, f=3))
    assert testrun.junit_counts(p) == {"tests": 15, "failures": 3, "errors": 1, "skipped": 2, "passed": 9}
    p.write_text('<testsuite tests="4" skipped="1"/>')  # a lone suite as the root
    assert testrun.junit_counts(p)["passed"] == 3


def test_seconds_per_file_sum_each_files_tests_longest_first(tmp_path):
    p = tmp_path / "r.xml"
    p.write_text(
        '<testsuites><testsuite name="pytest" tests="4">'
        '<testcase classname="tests.cluster.test_run" name="test_a" time="1.25"/>'
        '<testcase classname="tests.cluster.test_run.TestX" name="test_b" time="2.5"/>'
        '<testcase classname="tests.test_cli" name="test_c[x]" time="4.0"/>'
        '<testcase classname="tests.test_cli" name="test_d" time=""/>'
        "</testsuite></testsuites>"
    )
    files = testrun.junit_file_seconds(p)
    assert files == {"tests/test_cli.py": 4.0, "tests/cluster/test_run.py": 3.8}
    assert list(files) == ["tests/test_cli.py", "tests/cluster/test_run.py"]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("<testsuites", "not a JUnit XML report"),
        ("<report/>", r"no <testsuite> element \(root <report>\)"),
        ('<testsuite tests="many"/>', "<testsuite tests='many'> is not a count"),
    ],
)
def test_a_malformed_report_is_refused_with_the_problem_named(tmp_path, text, problem):
    p = tmp_path / "r.xml"
    p.write_text(text)
    with pytest.raises(ValueError, match=rf"r\.xml: {problem}"):
        testrun.junit_counts(p)


@pytest.mark.slow  # three pytest processes
def test_a_real_run_is_timed_counted_and_a_failing_one_writes_nothing(tmp_path, monkeypatch):
    (tmp_path / "test_ok.py").write_text(
        "import pytest\n\ndef test_a():\n    assert 1\n\ndef test_b():\n    assert 2\n\n"
        "@pytest.mark.skip(reason='x')\ndef test_c():\n    pass\n"
    )
    (tmp_path / "test_bad.py").write_text("def test_bad():\n    assert 0\n")
    rec = testrun.measure(["test_ok.py", "-q"], setup_s=12.34, root=tmp_path, python=sys.executable)
    assert (rec["passed"], rec["skipped"], rec["pytest_cache"], rec["setup_s"]) == (2, 1, "empty", 12.3)
    assert 0 < rec["wall_s"] < 120 and rec["command"] == "python -m pytest test_ok.py -q"
    assert rec["target_s"] == 360 and rec["machine"]["cpus"] >= 1
    assert rec["git"] == {"commit": None, "dirty": None}  # the temporary folder is no git repository
    assert [f for f, _ in rec["files_s"]] == ["test_ok.py"] and rec["files_s"][0][1] >= 0
    assert (tmp_path / ".pytest_cache").is_dir()  # the run made it: the next one is "present"

    out = tmp_path / "record.json"
    out.write_text('{"kept": true}')
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "test-time", "--out", str(out), "--", "test_bad.py", "-q"]) == 1
    assert json.loads(out.read_text()) == {"kept": True}  # the committed record is not replaced by a failing run
    assert main(["reproduce", "test-time", "--out", str(out), "--", "test_ok.py", "-q"]) == 0
    assert json.loads(out.read_text())["pytest_cache"] == "present"


def test_a_run_beside_another_checkout_records_it_as_the_baseline(tmp_path, monkeypatch, capsys):
    """``--beside DIR``: the same command in DIR with DIR's own interpreter, right after, kept under ``baseline``;
    a DIR without a set-up environment is one line naming it, before anything runs, and nothing is written."""
    here, other = tmp_path / "here", tmp_path / "other"
    here.mkdir(), other.mkdir()
    (here / "test_ok.py").write_text("def test_a():\n    assert 1\n")
    (other / "test_ok.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")  # another commit's
    out = tmp_path / "record.json"
    monkeypatch.chdir(here)
    assert main(["reproduce", "test-time", "--out", str(out), "--beside", str(other), "--", "test_ok.py", "-q"]) == 1
    assert f"{other}: no .venv/bin/python" in capsys.readouterr().err and not out.exists()
    assert not (here / ".pytest_cache").exists()  # refused before running anything
    (other / ".venv" / "bin").mkdir(parents=True)
    (other / ".venv" / "bin" / "python").symlink_to(sys.executable)
    assert main(["reproduce", "test-time", "--out", str(out), "--beside", str(other), "--", "test_ok.py", "-q"]) == 0
    rec = json.loads(out.read_text())
    assert rec["passed"] == 1 and rec["baseline"]["passed"] == 2  # each checkout's own tests
    assert rec["baseline"]["pytest_cache"] == "empty" and 0 < rec["baseline"]["wall_s"] < 120
    assert [f for f, _ in rec["baseline"]["files_s"]] == ["test_ok.py"]
    assert "right after" in rec["baseline"]["note"]


def test_rounds_alternate_the_two_checkouts_and_record_each_sides_mean(tmp_path, monkeypatch, capsys):
    """``--rounds 2``: here, DIR, DIR, here (a drift of the machine's speed during the four runs falls on both sides
    alike), every run from an empty .pytest_cache (DIR's first too, where a run before left one); each side's mean
    wall, its runs and its files' mean seconds."""
    other = tmp_path / "other"
    (other / ".venv" / "bin").mkdir(parents=True)
    (other / ".pytest_cache").mkdir()  # left by an earlier measurement in that clone
    (other / ".venv" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    calls, walls = [], iter([20.0, 10.0, 14.0, 24.0])

    def fake(pytest_args, *, setup_s=None, root=".", python=sys.executable):
        side = "here" if str(root) == "." else "other"
        calls.append((side, (Path(root) / ".pytest_cache").exists()))
        (Path(root) / ".pytest_cache").mkdir(exist_ok=True)  # what a run leaves
        w = next(walls)
        return {
            "wall_s": w,
            "passed": 3 if side == "here" else 2,
            "skipped": 0,
            "pytest_cache": "empty",
            "git": {"commit": side},
            "files_s": [["t.py", w / 2], ["u.py", 1.0]],
            "setup_s": setup_s,
        }

    monkeypatch.setattr(testrun, "measure", fake)
    with pytest.raises(ValueError, match="rounds must be at least 1, got 0"):
        testrun.measure_beside(other=other, rounds=0)
    rec = testrun.measure_beside(other=other, rounds=2, setup_s=5.0)
    assert calls == [("here", False), ("other", False), ("other", False), ("here", False)]  # every run: cache emptied
    assert (rec["wall_s"], rec["walls_s"], rec["passed"]) == (22.0, [20.0, 24.0], 3)
    assert rec["baseline"]["wall_s"] == 12.0 and rec["baseline"]["walls_s"] == [10.0, 14.0]
    assert rec["files_s"] == [["t.py", 11.0], ["u.py", 1.0]] and rec["baseline"]["files_s"][0] == ["t.py", 6.0]
    assert rec["order"] == f"here, {other}, {other}, here" and "2 runs a side" in rec["baseline"]["note"]
    from benchmark.docsgen import facts

    line = facts.test_command_line({**rec, "target_s": 360, "date": "d", "machine": None})
    assert "2 runs a side alternating with these on the same machine (means): 12 s against 22 s" in line
