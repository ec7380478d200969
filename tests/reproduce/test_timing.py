"""Per-stage timing records: the runtime hook writes them, the table groups them."""
import json
import os
import subprocess
import sys

import pandas as pd

from benchmark.config import runtime
from benchmark.reproduce import readme, timing


def test_stage_names_from_command_lines():
    assert timing.stage_name(["pipelines/train.py", "--model", "lite1"]) == "train@lite1"
    assert timing.stage_name(["/x/pipelines/sve.py", "--members", "1", "2", "8"]) == "sve"  # one stage, every size
    assert timing.stage_name(["pipelines/sve.py", "--train"]) == "sve-train"  # its DVC stage name
    assert timing.stage_name(["pipelines/method.py", "--params", "p.yaml", "--kind", "soups", "--key", "soup-a"]) == "soup@soup-a"
    assert timing.stage_name(["pipelines/evaluate.py"]) == "evaluate"


def test_a_process_importing_the_package_appends_its_record(tmp_path):
    log = tmp_path / "t.jsonl"
    env = dict(os.environ, UQ_TIMINGS=str(log))
    env.pop("UQ_TIMINGS_PID", None)
    for model in ("a", "b"):
        code = "import sys; sys.argv = ['pipelines/train.py', '--model', %r]; import benchmark; x = bytearray(50 << 20)" % model
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
    recs = timing.read_records(log)
    assert list(recs["stage"]) == ["train@a", "train@b"]
    assert (recs["wall_s"] > 0).all() and (recs["user_s"] >= 0).all() and (recs["max_rss_mb"] > 40).all()


def test_malloc_tuning_takes_on_glibc():
    if not sys.platform.startswith("linux"):
        return
    code = "from benchmark.config import runtime; print(runtime.tune_malloc())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "True"
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, UQ_MALLOC="default")).stdout.strip()
    assert off == "False"


def test_by_kind_sums_and_the_readme_table(tmp_path):
    stages = pd.DataFrame([
        {"stage": "train@a", "wall_s": 10.0, "user_s": 15.0, "sys_s": 1.0, "max_rss_mb": 900.0, "minor_faults": 1000},
        {"stage": "train@b", "wall_s": 20.0, "user_s": 30.0, "sys_s": 2.0, "max_rss_mb": 1200.0, "minor_faults": 3000},
        {"stage": "data", "wall_s": 5.0, "user_s": 4.0, "sys_s": 0.5, "max_rss_mb": 500.0, "minor_faults": 10},
    ])
    k = timing.by_kind(stages).set_index("kind")
    assert k.loc["train", "stages"] == 2 and k.loc["train", "wall_s"] == 30.0 and k.loc["train", "max_rss_mb"] == 1200.0
    assert list(k.index) == ["train", "data"]  # largest wall time first
    rec = {"command": "dvc repro -f", "repro_wall_s": 40.0, "install_s": 100.0, "dvc_overhead_s": 5.0, "date": "2026-11-30",
           "machine": {"cpus": 2, "cpu": "x", "torch": "2", "cpu_capability": "AVX512"}, "stages": stages.to_dict(orient="records")}
    table = readme.timings_table(rec)
    assert "| train | 2 | 30.0 | 45.0 | 3.0 | 1200 | 4,000 |" in table
    assert "**40 s** wall" in table and "**140 s**" in table
    assert f"the target of {readme.TARGET_S} s is met" in table  # 140 s
    slow = readme.timings_table({**rec, "repro_wall_s": readme.TARGET_S - 99.0})  # 100 + 501 s: one second over
    assert f"the target of {readme.TARGET_S} s is **not met**" in slow
    path = tmp_path / "timings.json"
    path.write_text(json.dumps(rec))
    assert timing.load(path)["repro_wall_s"] == 40.0


def test_a_worker_of_a_timed_process_is_counted_by_its_parent(monkeypatch):
    """``UQ_TIMINGS_PID`` names the timed process: a process below it (a multiprocessing worker) records nothing
    itself (its time reaches the parent's children's usage); an unrelated or a recycled pid does not count."""
    from benchmark.config import runtime

    parent, grandparent = os.getppid(), None
    with open(f"/proc/{parent}/stat") as f:
        grandparent = int(f.read().rsplit(")", 1)[1].split()[1])
    assert runtime._is_ancestor(parent) and runtime._is_ancestor(grandparent)
    assert not runtime._is_ancestor(os.getpid()) and not runtime._is_ancestor(2 ** 22 + 7)  # no such process above
    monkeypatch.setenv("UQ_TIMINGS_PID", str(parent))
    assert runtime._top_pid() == -1 and os.environ["UQ_TIMINGS_PID"] == str(parent)
    monkeypatch.setenv("UQ_TIMINGS_PID", str(2 ** 22 + 7))
    assert runtime._top_pid() == os.getpid() and os.environ["UQ_TIMINGS_PID"] == str(os.getpid())
    assert runtime._top_pid() == os.getpid()  # itself: still the top
