"""``python -m benchmark run`` starts its jobs and stages warm (benchmark/warm, benchmark/cluster/parallel.py): forks of
one server that imported the libraries once, each timed from its fork and marked so in the timing record, with the
bytes of a cold ``dvc repro``; the server ends with the run; ``--cold``, ``UQBENCH_WARM=0`` and a server that already
serves the environment (the tests') start none."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from toy import run, until

from benchmark import warm
from benchmark.cli.main import main as cli_main
from benchmark.cluster import parallel
from benchmark.reproduce import timing

pytestmark = pytest.mark.slow  # a DVC process per stage and a server that imports torch

PIPELINE = """\
stages:
  w:
    foreach: [x, y]
    do:
      cmd: python pipelines/work.py ${item}
      deps: [pipelines/work.py]
      outs:
        - w-${item}.bin
  z:
    cmd: python pipelines/work.py z w-x.bin w-y.bin
    deps: [pipelines/work.py, w-x.bin, w-y.bin]
    outs: [z.bin]
"""
# a stage as the pipeline's are: imports benchmark first (pinned numerics, its timing record), then torch, computes
WORK = """\
import os
import sys
import time

import benchmark
import torch
from benchmark.config import numerics, runtime

numerics.check_pinned()
runtime.mark_work()
name, *inputs = sys.argv[1:]
if os.path.exists(f"hold-{name}"):  # the tests' handle: wait (after saying so) until the file is gone
    open(f"started-{name}", "w").close()
    while os.path.exists(f"hold-{name}"):
        time.sleep(0.1)
torch.manual_seed(len(name) + ord(name[0]))
x = torch.randn(4, 3, 16, 16)
for path in inputs:
    x = x + torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.float32)[: x.numel()].view_as(x)
y = torch.nn.Conv2d(3, 3, 3, padding=1)(x).detach()
open("z.bin" if name == "z" else f"w-{name}.bin", "wb").write(y.numpy().tobytes())
"""
PRELOAD = "numpy,torch,dvc.repo,dvc.stage.run,dvc.scm,scmrepo.git,filelock,yaml,tqdm"


def _pipeline(root: Path) -> Path:
    (root / "pipelines").mkdir(parents=True)
    (root / "dvc.yaml").write_text(PIPELINE)
    (root / "pipelines" / "work.py").write_text(WORK)
    run(["git", "init", "-q"], root)
    run([sys.executable, "-m", "dvc", "init", "-q"], root)
    return root


@pytest.fixture
def own_server(monkeypatch):
    """No server serves this environment (not the tests'): a run starts its own, importing a few libraries only."""
    monkeypatch.delenv(warm.ENV, raising=False)
    monkeypatch.setenv("UQBENCH_WARM_PRELOAD", PRELOAD)


def test_a_timed_warm_run_records_forks_and_gives_a_cold_serial_runs_bytes(tmp_path, own_server, monkeypatch):
    root = _pipeline(tmp_path / "py")
    monkeypatch.setenv("PS1", "(.venv) ")  # an activated environment's prompt, which a stage's shell drops
    rec = timing.run_repro(root / "rec.json", cwd=root, jobs=2)
    assert rec["command"] == "python -m benchmark run --jobs 2"
    assert rec["warm"] == {"forked": 6, "cold": 0, "sent_elsewhere": 0, "why_cold": []}  # 3 jobs, 3 stages: one server
    stages = {s["stage"]: s for s in rec["stages"]}
    assert set(stages) == {"w@x", "w@y", "z"}
    assert all(s["warm"] and s["imports"] is None for s in stages.values()), stages  # forks, said so
    assert all(s["startup_cpu_s"] is not None and s["user_s"] > 0 for s in stages.values())  # timed from the fork
    jobs = [s["dvc_job_cpu_s"] for s in stages.values()]  # each stage's job: DVC's work, its command not counted
    assert all(j > 0 for j in jobs)
    assert sum(jobs) == pytest.approx(rec["dvc_jobs_cpu_s"], abs=0.1) and rec["dvc_jobs_cpu_s"] <= rec["dvc_cpu_s"]
    timing.compare_run(rec, root, tmp_path / "cold", jobs=1)  # dvc repro in a clean copy: fresh interpreters
    assert rec["serial"]["outputs"]["identical"] == 3 and not rec["serial"]["outputs"]["failing_stages"]


def test_the_run_starts_its_server_serves_its_jobs_and_stops_it(tmp_path, own_server, monkeypatch):
    root = _pipeline(tmp_path / "py")
    started, real_start = [], warm.start

    def start(*args, **kw):
        server = real_start(*args, **kw)
        started.append(server)
        return server

    monkeypatch.setattr(parallel.warm, "start", start)
    monkeypatch.chdir(root)
    assert cli_main(["run"]) == 0
    assert len(started) == 1
    server = started[0]
    assert server.process.poll() is not None and not os.path.exists(server.folder)  # ended with the run
    logs = sorted((root / ".dvc" / "tmp" / "cluster").glob("*/logs/*"))
    assert len(logs) == 3 and all("done, recorded in dvc.lock" in p.read_text() for p in logs)


def test_ctrl_c_stops_the_stages_and_the_server(tmp_path, own_server):
    """SIGINT to the run (a Ctrl-C in its terminal reaches its process group): the running stage stops, its outputs are
    removed, exit 130, and the run's server and its forks are gone."""
    root = _pipeline(tmp_path / "py")
    (root / "hold-x").touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmark", "run"], cwd=root, start_new_session=True, stderr=subprocess.PIPE, text=True
    )
    until(lambda: (root / "started-x").exists(), 120, "stage w@x to start")
    folder = next(Path(p).parent for p in glob.glob("/tmp/uqwarm-*/sock") if _serves(p, proc.pid))
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(60) == 130, proc.stderr.read()[-2000:]
    assert "interrupted" in proc.stderr.read()
    assert not (root / "w-x.bin").exists()
    until(lambda: not folder.exists(), 30, "the server's folder to go")


def _serves(sock: str, runner: int) -> bool:
    """Whether the warm server listening on ``sock`` was started by process ``runner``."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(cmd) > 3 and cmd[1].endswith(b"warm_server.py") and cmd[2].decode() == sock:
            return cmd[3].decode() == str(runner)
    return False


def test_cold_runs_and_a_server_already_serving_start_none(monkeypatch):
    monkeypatch.setattr(parallel.warm, "start", lambda *a, **kw: pytest.fail("started a server"))
    monkeypatch.delenv(warm.ENV, raising=False)
    assert parallel.start_warm(2, cold=True) is None  # --cold
    monkeypatch.setenv("UQBENCH_WARM", "0")
    assert parallel.start_warm(2) is None
    monkeypatch.delenv("UQBENCH_WARM")
    monkeypatch.setenv(warm.ENV, "/tmp/the-tests-socket")  # one serves this environment already: its jobs use it
    assert parallel.start_warm(2) is None
    env = parallel.job_environment(2)
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env["PYTHONUNBUFFERED"] == "1"


def test_the_run_command_offers_cold(capsys):
    assert cli_main(["run", "--help"]) == 0
    assert "--cold" in capsys.readouterr().out


def test_a_timed_record_marks_only_what_its_server_forked(tmp_path):
    """timing.read_records with the server's decisions: a record is warm when its command line and folder were
    forked; the others keep what they imported."""
    records = tmp_path / "t.jsonl"
    lines = [
        {"argv": ["pipelines/work.py", "x"], "cwd": "/r", "dvc_stage": "w@x", "wall_s": 1, "imports": ["torch"]},
        {"argv": ["pipelines/work.py", "y"], "cwd": "/r", "dvc_stage": "w@y", "wall_s": 1, "imports": ["torch"]},
        {"argv": ["pipelines/work.py", "x"], "cwd": "/other", "dvc_stage": "w@x", "wall_s": 1, "imports": ["torch"]},
    ]
    records.write_text("".join(json.dumps(r) + "\n" for r in lines))
    decisions = tmp_path / "warm.jsonl"
    decisions.write_text(
        json.dumps({"argv": ["pipelines/work.py", "x"], "cwd": "/r", "warm": True})
        + "\n"
        + json.dumps({"argv": ["pipelines/work.py", "y"], "cwd": "/r", "warm": False, "why": "environment differs"})
        + "\n"
    )
    df = timing.read_records(records, warm=timing.served_warm(timing.warm_decisions(decisions)))
    assert df["warm"].tolist() == [True, False, False]
    assert df["imports"].tolist() == [None, ["torch"], ["torch"]]
    kinds = timing.by_kind(df)
    assert kinds.loc[0, "warm"] == 1 and kinds.loc[0, "imports"] == ["torch"]
    assert timing.warm_decisions(tmp_path / "missing.jsonl") == []
    summary = timing.warm_summary(timing.warm_decisions(decisions))
    assert summary == {"forked": 1, "cold": 1, "sent_elsewhere": 0, "why_cold": ["environment differs"]}


def test_jobs_go_through_the_shim_of_a_server_that_already_serves(tmp_path):
    """Under the tests' server (its socket set, its shim first on PATH) a run's jobs start through that shim; a
    ``python`` first on PATH that is no warm shim, or no socket, leaves the real interpreter."""
    shims = warm.warm_client.write_shim(str(tmp_path / "bin"), sys.executable)
    env = {warm.ENV: str(tmp_path / "sock"), "PATH": shims + os.pathsep + os.environ["PATH"]}
    assert warm.serving_python(env) == os.path.join(shims, "python")
    assert warm.serving_python({**env, warm.ENV: ""}) is None
    other = tmp_path / "other"
    other.mkdir()
    (other / "python").write_text("#!/bin/sh\nexec true\n")
    (other / "python").chmod(0o755)
    assert warm.serving_python({**env, "PATH": str(other) + os.pathsep + shims}) is None
