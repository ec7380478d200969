"""The tests how-to's table of the test command against its baseline (benchmark/docsgen/record_tables.py), from a
hand-made record: every figure worked out below by hand."""

import json
import os
import subprocess
import sys

from benchmark.docsgen import record_tables

MACHINE = {"cpus": 2, "cpu": "AMD EPYC 7B13", "cpu_kind": "AuthenticAMD-f25-m1"}
HEAD = {
    "git": {"commit": "b" * 40},
    "passed": 12,
    "wall_s": 120.0,
    "walls_s": [110.0, 130.0],
    "date": "2026-12-07",
    "machine": MACHINE,
    "files_s": [["t/a.py", 50.0], ["t/b.py", 30.0], ["t/new.py", 20.0], ["t/tiny.py", 0.4]],
}
BASE = {
    "git": {"commit": "a" * 40},
    "passed": 10,
    "wall_s": 100.0,
    "walls_s": [90.0, 110.0],
    "files_s": [["t/a.py", 60.0], ["t/b.py", 40.0], ["t/old.py", 5.0]],
    "note": "2 runs a side",
}


def _table(tmp_path, rec) -> str:
    (tmp_path / "results").mkdir(exist_ok=True)
    (tmp_path / "results" / "test_command.json").write_text(json.dumps(rec))
    return record_tables.tests_table(tmp_path)


def test_the_files_both_commits_have_are_told_apart_from_those_only_one_has(tmp_path):
    lines = _table(tmp_path, {**HEAD, "baseline": BASE}).splitlines()
    assert lines[0] == "| | `aaaaaaa` (baseline) | `bbbbbbb` | ratio |"
    assert lines[2] == "| wall, mean of 2 runs a side | 100 s | 120 s | 1.20x |"  # 120 / 100
    assert lines[3] == "| tests passed | 10 | 12 | |"
    # a.py and b.py: 60 + 40 = 100 there, 50 + 30 = 80 here, 0.80x
    assert lines[4] == "| summed seconds of the 2 test files both have | 100 | 80 | 0.80x |"
    assert lines[5] == "| summed seconds of the test files only one has | 5 | 20 | |"  # old.py 5; new.py 20 + 0.4
    note = lines[7]
    assert "Files only `bbbbbbb` has: `t/new.py` 20 s. Only `aaaaaaa`: `t/old.py` 5 s." in note  # under 1 s: not named
    assert note.endswith("on 2 CPUs, AMD EPYC 7B13 (Zen 3, AuthenticAMD-f25-m1); 2 runs a side.")


def test_a_record_without_a_baseline_or_no_record_says_so(tmp_path):
    assert "`bash scripts/measure-tests.sh` writes" in record_tables.tests_table(tmp_path)
    assert _table(tmp_path, HEAD) == "`bbbbbbb`: 12 tests in 120 s; no baseline run beside it.\n"
    assert _table(tmp_path, {**HEAD, "baseline": {**BASE, "wall_s": 0.0}}).endswith("no baseline run beside it.\n")


def test_no_file_in_common_leaves_the_ratio_out(tmp_path):
    base = {**BASE, "files_s": [["t/old.py", 5.0]]}
    assert "| summed seconds of the 0 test files both have | 0 | 0 |  |" in _table(tmp_path, {**HEAD, "baseline": base})


def test_the_sums_do_not_depend_on_the_process_hash_seed(tmp_path):
    """Summed in a set's order, which changes with ``PYTHONHASHSEED``, these eight files' seconds come to 396.5 give or
    take a rounding, shown as 396 or 397 (found by trying seeds); the table must read the same in every process: the
    exactly rounded sum, 396.5, shown as 396 (halves to even)."""
    seconds = (24.4, 60.7, 55.8, 13.4, 37.9, 93.8, 61.9, 48.6)
    files = [[f"t/f{i}.py", s] for i, s in enumerate(seconds)]
    rec = {**HEAD, "files_s": files, "baseline": {**BASE, "files_s": files}}
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "test_command.json").write_text(json.dumps(rec))
    code = "import sys; from benchmark.docsgen import record_tables; print(record_tables.tests_table(sys.argv[1]))"
    tables = {
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(12)
    }
    assert len(tables) == 1
    assert "| summed seconds of the 8 test files both have | 396 | 396 | 1.00x |" in tables.pop()
