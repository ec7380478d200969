"""Per-stage timing records: the runtime hook writes them, the table groups them."""

import json
import os
import subprocess
import sys
import time
from unittest import mock

import numpy as np
import pandas as pd
import pytest

from benchmark.config import runtime
from benchmark.docsgen import machines, readme
from benchmark.reproduce import timing


def test_stage_names_from_command_lines():
    assert timing.stage_name(["pipelines/train.py", "--model", "lite1"]) == "train@lite1"
    assert timing.stage_name(["/x/pipelines/sve.py", "--members", "1", "2", "8"]) == "sve"  # one stage, every size
    assert timing.stage_name(["pipelines/sve.py", "--train"]) == "sve-train"  # its DVC stage name
    assert (
        timing.stage_name(["pipelines/method.py", "--params", "p.yaml", "--kind", "soups", "--key", "soup-a"])
        == "soups@soup-a"
    )
    assert timing.stage_name(["pipelines/evaluate.py"]) == "evaluate"


def test_a_stage_that_dvc_started_is_named_as_dvc_names_it(tmp_path):
    """DVC names the stage it runs (``DVC_STAGE``): a method's stage is ``soup@soup-a`` whatever its command line."""
    log = tmp_path / "t.jsonl"
    env = dict(os.environ, UQ_TIMINGS=str(log), DVC_STAGE="soup@soup-a")
    env.pop("UQ_TIMINGS_PID", None)
    code = "import sys; sys.argv = ['pipelines/method.py', '--kind', 'soups', '--key', 'soup-a']; import benchmark"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    assert list(timing.read_records(log)["stage"]) == ["soup@soup-a"]


def test_a_process_importing_the_package_appends_its_record(tmp_path):
    log = tmp_path / "t.jsonl"
    env = dict(os.environ, UQ_TIMINGS=str(log))
    env.pop("UQ_TIMINGS_PID", None)
    env.pop("DVC_STAGE", None)
    for model in ("a", "b"):
        code = (
            f"import sys; sys.argv = ['pipelines/train.py', '--model', {model!r}]; import benchmark; x = "
            "bytearray(50 << 20)"
        )
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
    recs = timing.read_records(log)
    assert list(recs["stage"]) == ["train@a", "train@b"]
    assert (recs["wall_s"] > 0).all() and (recs["user_s"] >= 0).all() and (recs["max_rss_mb"] > 40).all()
    assert (recs["end"] - recs["start"] - recs["wall_s"]).abs().max() < 0.01 and recs["startup_wall_s"].isna().all()


def test_the_record_has_the_start_up_and_the_cpu_of_a_child_still_running(tmp_path):
    """A stage's start-up ends where its entry calls ``mark_work``; a child still running at exit (the evaluate
    stage's fork server, which reaped its workers) has its CPU seconds counted, which ``RUSAGE_CHILDREN`` misses."""
    log = tmp_path / "t.jsonl"
    env = dict(os.environ, UQ_TIMINGS=str(log))
    env.pop("UQ_TIMINGS_PID", None)
    code = (
        "import subprocess, sys, time; sys.argv = ['pipelines/evaluate.py']; import benchmark\n"
        "from benchmark.config import runtime; runtime.mark_work()\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import sys, time\\nt = time.process_time()\\n"
        "while time.process_time() - t < 0.6: pass\\nprint(1, flush=True)\\nsys.stdin.read()'],"
        " stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
        "child.stdout.readline()  # it burnt its CPU and waits for our exit (its stdin closes then)\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    (rec,) = timing.read_records(log).to_dict(orient="records")
    assert rec["stage"] == "evaluate" and 0 < rec["startup_wall_s"] < rec["wall_s"] and rec["startup_cpu_s"] > 0
    assert rec["user_s"] + rec["sys_s"] >= 0.6 + rec["startup_cpu_s"] * 0.5  # the child's 0.6 s counted
    assert "pandas" not in rec["imports"] and set(rec["imports"]) <= set(runtime.HEAVY)
    assert rec["live_children_cpu_s"] >= 0.6  # apart: no parent's wait counts it


def test_malloc_tuning_takes_on_glibc():
    if not sys.platform.startswith("linux"):
        return
    code = "from benchmark.config import runtime; print(runtime.tune_malloc())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "True"
    off = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, UQ_MALLOC="default"),
    ).stdout.strip()
    assert off == "False"


def test_by_kind_sums_and_the_readme_table(tmp_path):
    stages = pd.DataFrame(
        [
            {
                "stage": "train@a",
                "wall_s": 10.0,
                "user_s": 15.0,
                "sys_s": 1.0,
                "max_rss_mb": 900.0,
                "minor_faults": 1000,
                "startup_wall_s": 2.0,
                "startup_cpu_s": 1.5,
                "dvc_before_s": 1.0,
                "imports": ["torch", "timm"],
            },
            {
                "stage": "train@b",
                "wall_s": 20.0,
                "user_s": 30.0,
                "sys_s": 2.0,
                "max_rss_mb": 1200.0,
                "minor_faults": 3000,
                "startup_wall_s": 2.5,
                "startup_cpu_s": 1.5,
                "dvc_before_s": 2.0,
                "imports": ["torch", "safetensors"],
            },
            {"stage": "data", "wall_s": 5.0, "user_s": 4.0, "sys_s": 0.5, "max_rss_mb": 500.0, "minor_faults": 10},
        ]
    )
    k = timing.by_kind(stages).set_index("kind")
    assert k.loc["train", "stages"] == 2 and k.loc["train", "wall_s"] == 30.0 and k.loc["train", "max_rss_mb"] == 1200.0
    assert list(k.index) == ["train", "data"]  # largest wall time first
    assert k.loc["train", "startup_wall_s"] == 4.5 and k.loc["train", "dvc_before_s"] == 3.0
    assert np.isnan(k.loc["data", "startup_wall_s"])  # a record without it (written before the field existed)
    rec = {
        "command": "dvc repro -f",
        "repro_wall_s": 40.0,
        "install_s": 100.0,
        "dvc_overhead_s": 5.0,
        "date": "2026-11-30",
        "machine": {"cpus": 2, "cpu": "x", "torch": "2", "cpu_capability": "AVX512"},
        "stages": stages.to_dict(orient="records"),
    }
    table = readme.timings_table(rec)
    assert "| train | 2 | 30.0 | 45.0 | 3.0 | 4.5 | 3.0 | 1200 | 4,000 | safetensors, timm, torch |" in table
    assert "| data | 1 | 5.0 | 4.0 | 0.5 |  |  | 500 | 10 |  |" in table
    assert "**40 s** wall" in table and "**140 s**" in table
    assert f"the target of {machines.TARGET_S} s is met" in table  # 140 s
    slow = readme.timings_table({**rec, "repro_wall_s": machines.TARGET_S - 99.0})  # 100 + 501 s: one second over
    assert f"the target of {machines.TARGET_S} s is **not met**" in slow
    par = readme.timings_table(
        {
            **rec,
            "parallel": {
                "command": "python -m benchmark run --jobs 2",
                "repro_wall_s": 33.0,
                "floor_ratio": 1.1,
                "compute_floor_s": 30.0,
                "outputs": {"identical": 21},
            },
        }
    )
    assert "(`python -m benchmark run --jobs 2`): **33 s** wall, 1.10x its compute floor of 30 s; 21 stage" in par
    forks = [{**s, "warm": True, "imports": None} for s in rec["stages"]]  # a warm run: the forks' imports unknown
    warm = readme.timings_table({**rec, "stages": forks, "warm": {"forked": 5, "cold": 1, "why_cold": ["x differs"]}})
    row = "| train | 2 | 30.0 | 45.0 | 3.0 | 4.5 | 3.0 | 1200 | 4,000 | warm forks (imported by their server) |"
    assert row in warm
    assert "its jobs and stages were 5 forks of one warm python (benchmark/warm), 1 started fresh (x differs)" in warm
    half = [{**rec["stages"][0], "warm": True, "imports": None}, *rec["stages"][1:]]
    assert "| safetensors, torch; 1 warm fork(s) |" in readme.timings_table({**rec, "stages": half})
    zen4 = {**rec, "machine": {**rec["machine"], "cpu_kind": "AuthenticAMD-f25-m17"}, "repro_wall_s": 381.0}
    table = readme.timings_table(zen4)  # issue 56: 8 minutes on AMD's family 25, the machine's own class named
    assert "the target of 480 s is **not met**" in table and "(x, Zen 4, AuthenticAMD-f25-m17, torch" in table
    path = tmp_path / "timings.json"
    path.write_text(json.dumps(rec))
    assert timing.load(path)["repro_wall_s"] == 40.0


def test_a_run_two_at_a_time_tables_its_jobs_cpu_and_what_it_spent_outside_the_stages(tmp_path, monkeypatch):
    """The README's runner overlaps stages, so no gap before a stage is DVC's: the column holds each stage's job's CPU
    seconds (the lines the jobs append to the run's record file, which are no process records), and the line under the
    table what the run spent outside the stages' processes and how much of it was the jobs'."""
    from benchmark.cluster import job

    log = tmp_path / "timings.jsonl"
    log.write_text(json.dumps({"argv": ["pipelines/data.py"], "wall_s": 2.0, "user_s": 1.5, "sys_s": 0.2}) + "\n")
    monkeypatch.setenv("UQ_TIMINGS", str(log))
    job.note_cpu("report")  # this process's own CPU, as a job's
    with log.open("a") as f:
        f.write(json.dumps({"dvc_job": "data", "job_cpu_s": 0.75}) + "\n")
        f.write(json.dumps({"dvc_job": "train@a", "job_cpu_s": 1.25}) + "\n")
    per_job = timing.job_cpu(log)
    assert per_job.pop("report") == pytest.approx(job.own_cpu(), abs=0.5) and per_job == {"data": 0.75, "train@a": 1.25}
    assert list(timing.read_records(log)["stage"]) == ["data"]  # the jobs' lines are not process records
    stages = [
        {"stage": "train@a", "wall_s": 30.0, "user_s": 28.0, "sys_s": 1.0, "max_rss_mb": 900.0, "minor_faults": 5},
        {"stage": "data", "wall_s": 2.0, "user_s": 1.5, "sys_s": 0.2, "max_rss_mb": 300.0, "minor_faults": 1},
    ]
    frame = pd.DataFrame(stages).assign(dvc_job_cpu_s=lambda d: d["stage"].map(per_job))
    rec = {
        "command": "python -m benchmark run --jobs 2",
        "jobs": 2,
        "repro_wall_s": 20.0,
        "dvc_overhead_s": None,
        "cpu_s": 30.7,
        "startup_cpu_s": 0.7,
        "cores": 2,
        "compute_floor_s": 15.0,
        "floor_ratio": 1.333,
        "dvc_cpu_s": 6.4,
        "dvc_jobs_cpu_s": 2.0,
        "machine": {"cpus": 2, "cpu": "x", "torch": "2"},
        "stages": frame.to_dict(orient="records"),
    }
    table = readme.timings_table(rec)
    assert "| start-up s | DVC CPU s (its jobs) | peak RSS MB |" in table and "DVC s before" not in table
    assert "| train | 1 | 30.0 | 28.0 | 1.0 |  | 1.2 | 900 | 5 |" in table  # 1.25 s, one decimal
    assert "| data | 1 | 2.0 | 1.5 | 0.2 |  | 0.8 | 300 | 1 |" in table
    outside = "the run took **1.33x** it; outside the stages' processes it spent 6 CPU s, 2 of them in the stages' jobs"
    assert outside in table
    older = readme.timings_table({k: v for k, v in rec.items() if k != "dvc_jobs_cpu_s"})  # a record before the jobs'
    assert "outside the stages' processes it spent 6 CPU s;" in older and "of them" not in older
    serial = readme.timings_table({**rec, "jobs": 1})
    assert "| DVC s before |" in serial and "outside the stages' processes" not in serial


def test_the_compute_floor_and_dvc_gaps_of_a_serial_run():
    """floor = (CPU - start-up) / cores; the ratio is the run's wall over it; DVC's seconds: the gaps between stages
    (by start, records appended in end order) and after the last one."""
    stages = pd.DataFrame(
        [
            {
                "stage": "b",
                "wall_s": 4.0,
                "user_s": 6.0,
                "sys_s": 1.0,
                "start": 107.0,
                "end": 111.0,
                "startup_cpu_s": 1.0,
                "startup_wall_s": 1.5,
                "live_children_cpu_s": 2.0,
            },  # a fork server's 2 s: in b's CPU, not in the run's count
            {
                "stage": "a",
                "wall_s": 5.0,
                "user_s": 8.0,
                "sys_s": 1.0,
                "start": 101.0,
                "end": 106.0,
                "startup_cpu_s": 2.0,
                "startup_wall_s": 2.5,
            },
        ]
    )
    gaps, last = timing.dvc_gaps(stages, 100.0, 113.0)
    assert gaps == [1.0, 1.0] and last == 2.0  # b: 107 - 106; a: 101 - 100
    with mock.patch.object(timing, "cores", return_value=2):
        s = timing.summarize(stages, 13.0, cpu_total=20.0)
    assert s["cpu_s"] == 16.0 and s["startup_cpu_s"] == 3.0 and s["compute_floor_s"] == 6.5  # (16 - 3) / 2
    assert s["floor_ratio"] == round(13.0 / 6.5, 3) and s["dvc_cpu_s"] == 6.0 and s["dvc_overhead_s"] == 4.0  # 20 - 14
    assert timing.summarize(stages, 13.0, jobs=2)["dvc_overhead_s"] is None  # overlapping stages: no serial overhead


def _in_grandchild(check) -> int:
    """Exit code of a grandchild of this process (forked twice) that runs ``check(pid of this process)``: 0 when it
    returns true, 1 when false, 2 when it raises."""
    me = os.getpid()
    child = os.fork()
    if child == 0:  # the child: forks the grandchild and exits with its code
        code = 2
        try:
            grandchild = os.fork()
            if grandchild == 0:
                try:
                    code = 0 if check(me) else 1
                finally:
                    os._exit(code)
            code = os.waitstatus_to_exitcode(os.waitpid(grandchild, 0)[1])
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])


def test_a_worker_of_a_timed_process_is_counted_by_its_parent(monkeypatch):
    """``UQ_TIMINGS_PID`` names the timed process: a process below it (a multiprocessing worker) records nothing
    itself (its time reaches the parent's children's usage); an unrelated or a recycled pid does not count."""
    parent = os.getppid()
    # the test's own grandchild sees this process two levels up (this process's own parent and grandparent are
    # whatever started pytest: under nohup or in a container the grandparent is init, which never counts)
    assert _in_grandchild(lambda me: runtime._is_ancestor(os.getppid()) and runtime._is_ancestor(me)) == 0
    assert _in_grandchild(lambda me: runtime._is_ancestor(1)) == 1  # init is never the timed process
    assert runtime._is_ancestor(parent)
    assert not runtime._is_ancestor(os.getpid()) and not runtime._is_ancestor(2**22 + 7)  # no such process above
    monkeypatch.setenv("UQ_TIMINGS_PID", str(parent))
    assert runtime._top_pid() == -1 and os.environ["UQ_TIMINGS_PID"] == str(parent)
    monkeypatch.setenv("UQ_TIMINGS_PID", str(2**22 + 7))
    assert runtime._top_pid() == os.getpid() and os.environ["UQ_TIMINGS_PID"] == str(os.getpid())
    assert runtime._top_pid() == os.getpid()  # itself: still the top


def test_import_times_are_parsed_from_importtime_and_tabled():
    from benchmark.reproduce import import_times

    text = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:       100 |        100 |   _io\n"
        "import time:      2000 |     500000 |     numpy\n"
        "import time:      9000 |    1500000 |   torch\n"
        "import time:       300 |     200000 |   pandas\n"
        "import time:       300 |      50000 |     numpy\n"
    )  # numpy again (not first): ignored
    got = import_times.parse(text)
    assert got == {"import_s": 1.7, "packages": {"numpy": 0.5, "torch": 1.5, "pandas": 0.2}}  # top level: 3 spaces
    rec = {
        lab: {
            "date": "2026-12-06",
            "machine": {"cpus": 2, "cpu_kind": "AuthenticAMD-f25-m17"},
            "load": 1.0,
            "repeats": 3,
            "stages": {
                "train": {
                    "script": "pipelines/train.py",
                    "cpu_s": cpu,
                    "import_s": 1.7,
                    "packages": {"torch": 1.5, "numpy": 0.5},
                }
            },
        }
        for lab, cpu in (("before", 2.5), ("after", 2.0))
    }
    table = import_times.table(rec)
    assert "| `train` | 2.50 | 2.00 | 1.70 | torch 1.50, numpy 0.50 |" in table
    assert "before: 2026-12-06, 2 CPUs (AuthenticAMD-f25-m17), load average 1.0, fastest of 3" in table


def test_live_children_are_counted_when_a_thread_ends_while_they_are_read(monkeypatch):
    """A child still running at the record's time counts (its CPU and what it reaped), also when another thread of the
    process ended between listing the threads and reading its children (a pool's, at exit): that thread's entry is
    gone, the others still count (it had made the whole count zero: the evaluate stage's workers went missing)."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(30)",
        ]
    )
    try:
        deadline = time.time() + 30
        while sum(runtime._live_children_cpu()) < 0.25 and time.time() < deadline:
            time.sleep(0.05)
        alone = sum(runtime._live_children_cpu())
        real = os.listdir
        monkeypatch.setattr(os, "listdir", lambda p: [*real(p), "999999999"] if p == "/proc/self/task" else real(p))
        assert sum(runtime._live_children_cpu()) >= alone >= 0.25
    finally:
        child.kill()
        child.wait()
