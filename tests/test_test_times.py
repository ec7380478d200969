"""scripts/test_times.py: where the suite's time goes, summed from the plugin's JSON lines (a hand-worked case), and
the CPU time of the processes a run starts, by kind (sampled from /proc in a real pytest run)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from test_times import kind_of, summarise, summarise_procs  # noqa: E402


def test_sums_per_file_fixture_and_test_and_counts_an_xdist_test_once():
    lines = [
        {"kind": "test", "node": "tests/a.py::t1", "when": "setup", "seconds": 1.0, "worker": "gw0"},
        {"kind": "test", "node": "tests/a.py::t1", "when": "call", "seconds": 2.0, "worker": "gw0"},
        {"kind": "test", "node": "tests/b.py::t2", "when": "call", "seconds": 4.0, "worker": "gw1"},
        # the controller's copies of the workers' reports (files written before the plugin left them out)
        {"kind": "test", "node": "tests/a.py::t1", "when": "call", "seconds": 2.0, "worker": "main"},
        {"kind": "test", "node": "tests/b.py::t2", "when": "call", "seconds": 4.0, "worker": "main"},
        {
            "kind": "fixture",
            "name": "run",
            "scope": "session",
            "node": "tests/a.py::t1",
            "seconds": 0.5,
            "worker": "gw0",
        },
        {
            "kind": "fixture",
            "name": "run",
            "scope": "session",
            "node": "tests/b.py::t2",
            "seconds": 1.5,
            "worker": "gw1",
        },
    ]
    text = summarise(lines, top=10)
    assert text.splitlines()[0] == "tests: 2, summed test time (set-up + call + teardown): 7 s"
    assert "| tests/b.py | 4.0 | 57.1 % |" in text and "| tests/a.py | 3.0 | 42.9 % |" in text
    assert "| run (session) | 2 | 2.0 |" in text
    assert "| tests/a.py::t1 | 3.0 |" in text


def test_one_process_run_counts_every_record():
    lines = [
        {"kind": "test", "node": "tests/a.py::t", "when": w, "seconds": 1.0, "worker": "main"}
        for w in ("setup", "call")
    ]
    assert summarise(lines, top=5).splitlines()[0] == "tests: 1, summed test time (set-up + call + teardown): 2 s"


def test_schedule_hands_out_slow_files_first_and_the_shared_run_readers_last_keeping_files_whole():
    from types import SimpleNamespace

    from file_order import schedule  # (tests/ is on sys.path: tests/conftest.py puts it there)

    def item(nodeid, slow=False, fixtures=()):
        return SimpleNamespace(
            nodeid=nodeid,
            fixturenames=list(fixtures),
            get_closest_marker=lambda name, s=slow: object() if s and name == "slow" else None,
        )

    items = [
        item("tests/a.py::quick"),
        item("tests/b.py::reads", fixtures=["caltech"]),
        item("tests/b.py::other"),
        item("tests/c.py::e2e", slow=True),
        item("tests/c.py::after"),
        item("tests/d.py::copy", slow=True, fixtures=["caltech_copy", "caltech"]),
        item("tests/e.py::quick2"),
    ]
    order = [i.nodeid for i in schedule(items)]
    assert order == [
        "tests/c.py::e2e",
        "tests/c.py::after",
        "tests/a.py::quick",
        "tests/e.py::quick2",
        "tests/d.py::copy",
        "tests/b.py::reads",
        "tests/b.py::other",
    ]


def test_a_run_of_named_files_starts_no_more_workers_than_files(tmp_path):
    """``-n auto`` (tests/conftest.py) counts the files a command line names: one file is one process (0 workers),
    a test in a file counts as its file, and a folder (or nothing: the whole suite) leaves the count to the cores."""
    from file_order import named_files

    (tmp_path / "t").mkdir()
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / "t" / name).write_text("")
    assert named_files(["t/test_a.py"], tmp_path) == 1
    assert named_files(["t/test_a.py::test_x", "t/test_a.py", str(tmp_path / "t" / "test_b.py")], tmp_path) == 2
    assert named_files(["t"], tmp_path) is None  # a folder: its files are not counted here
    assert named_files(["t/test_a.py", "t"], tmp_path) is None
    assert named_files([], tmp_path) is None  # the whole suite
    assert named_files(["t/test_missing.py"], tmp_path) is None  # pytest's own error, not ours


def test_process_kinds_and_their_sums():
    procs = [
        {"pid": 10, "ppid": 1, "cmd": "/v/bin/python -m pytest -p test_times", "cpu_s": 2.0},
        {"pid": 11, "ppid": 10, "cmd": "/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))", "cpu_s": 5.0},
        {
            "pid": 12,
            "ppid": 11,
            "cmd": "/v/bin/python /r/benchmark/warm/warm_server.py /tmp/s 11",
            "cpu_s": 3.0,
        },  # its forks too
        {"pid": 13, "ppid": 11, "cmd": "/v/bin/python pipelines/train.py --model m", "cpu_s": 4.0},
        {"pid": 14, "ppid": 11, "cmd": "/v/bin/python -B -c from multiprocessing.forkserver import main", "cpu_s": 1.0},
        {"pid": 15, "ppid": 11, "cmd": "/v/bin/python -c import torch", "cpu_s": 1.5},
        {"pid": 16, "ppid": 11, "cmd": "/usr/lib/chromium/chromium --type=renderer", "cpu_s": 2.5},
        {"pid": 17, "ppid": 11, "cmd": "/bin/bash -c true", "cpu_s": 1.0},
    ]
    assert kind_of(procs[3]["cmd"]) == "stage scripts, fresh interpreter (pipelines/*.py)"
    assert kind_of(procs[4]["cmd"]) == "multiprocessing forkserver and its children"  # not 'python -c'
    assert kind_of(procs[5]["cmd"]) == "python -c, fresh interpreter"
    text = summarise_procs(procs, top=10)
    lines = text.splitlines()
    assert lines[0] == "processes: 8, CPU seconds: 20 (lower bounds: sampled every 0.1 s)"
    assert (
        lines[4] == "| pytest (controller and xdist workers: in-process test code) | 2 | 7.0 | 35.0 % |"
    )  # most first
    assert "| stage scripts, fresh interpreter (pipelines/*.py) | 1 | 4.0 | 20.0 % |" in lines
    assert "| other: bash | 1 | 1.0 | 5.0 % |" in lines and "| Chromium | 1 | 2.5 | 12.5 % |" in lines


BURN = """
import subprocess, sys
BURN = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.6:\\n    pass"
def test_burn():
    subprocess.run([sys.executable, "-c", BURN], check=True)
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc (Linux)")
def test_a_run_lists_the_cpu_of_the_processes_it_started(tmp_path):
    (tmp_path / "test_burn.py").write_text(textwrap.dedent(BURN))
    out = tmp_path / "procs.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not a worker of this run
    env.update(UQBENCH_PROC_CPU=str(out), PYTHONPATH=str(ROOT / "scripts"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "test_times", "-p", "no:cacheprovider", "-q", "test_burn.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, log
    procs = json.loads(out.read_text())
    pids = {p["pid"] for p in procs}
    assert proc.pid in pids and all(p["ppid"] in pids for p in procs if p["pid"] != proc.pid)  # its tree only
    burn = [p for p in procs if "process_time" in p["cmd"]]
    assert len(burn) == 1 and burn[0]["ppid"] == proc.pid
    assert 0.4 <= burn[0]["cpu_s"] < 10  # 0.6 s of CPU (and start-up), read at most 0.1 s before it ended
    assert "| python -c, fresh interpreter | 1 |" in summarise_procs(procs, top=10)
