"""A real suite through a real Slurm: the tiny Caltech-256 run (tests/conftest.py's ``caltech``) loses its two
checkpoints; ``cluster submit`` retrains both at once on the one-node cluster (``slurm``), one job is cancelled while
its stage runs, and a second submit finishes the rest: dvc.lock is then the serial run's, byte for byte."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import psutil
import pytest
import yaml
from toy import until

from benchmark.cli.main import main as cli_main
from benchmark.cluster import slurm as slurm_cli
from benchmark.cluster.check import set_cpus
from benchmark.cluster.runs import Run

pytestmark = pytest.mark.slow  # two fine-tunes and a dozen Slurm jobs
PIPELINE = "suites/caltech256/dvc.yaml"
TRAIN = ("train@eff", "train@res")


def _lose_checkpoints(repo: Path) -> None:
    """Delete the train stages' outputs and their DVC cache objects: DVC can only recompute them (no run cache)."""
    folder = repo / "suites" / "caltech256"
    lock = yaml.safe_load((folder / "dvc.lock").read_text())
    for stage in TRAIN:
        for out in lock["stages"][stage]["outs"]:
            shutil.rmtree(folder / out["path"])
            md5 = out["md5"]
            (repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]).unlink()


def _stage_process(model: str):
    """The running ``python .../train.py --model <model>`` process of a cluster job, if any."""
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if any(c.endswith("pipelines/train.py") for c in cmd) and cmd[-2:] == ["--model", model]:
            return p
    return None


def test_a_suite_cancelled_half_way_and_resubmitted_gives_the_serial_dvc_lock(slurm, caltech_copy, monkeypatch, capsys):
    repo = caltech_copy  # a private copy of the shared serial run (tests/bundle/fixture_run.py)
    serial = (repo / PIPELINE).with_name("dvc.lock").read_text()
    _lose_checkpoints(repo)
    set_cpus(repo / "suites" / "caltech256" / "params.yaml", 1)  # two one-CPU jobs at once (not a stage parameter)
    monkeypatch.chdir(repo)
    assert cli_main(["cluster", "submit", PIPELINE]) == 0, capsys.readouterr().err
    run = Run.latest(repo, PIPELINE)
    assert [s["name"] for s in run.stages] == [
        *TRAIN,
        "logits@eff",
        "logits@res",
        "laplace@la-res",
        "evaluate",
        "report",
    ]
    # both fine-tunes run at the same time; then train@res's job is cancelled while its stage runs
    until(lambda: _stage_process("eff") and _stage_process("res"), 240, "both train stages to run at once")
    slurm_cli.cancel([run.stage("train@res")["job"]])
    until(lambda: not run.active(), 240, "the first run to end")
    rows = {r["stage"]: r for r in run.status()}
    assert rows["train@res"]["state"] == "cancelled"
    assert (
        rows["train@res"]["detail"]
        == f"stopped by a signal (scancel, a time limit or preemption); log {run.log('train@res')}"
    )
    for stage in ("logits@res", "laplace@la-res", "evaluate", "report"):
        assert (rows[stage]["state"], rows[stage]["detail"]) == ("cancelled", "upstream stage train@res cancelled")
    assert (rows["train@eff"]["state"], rows["logits@eff"]["state"]) == ("done", "skipped")
    checkpoints = repo / "suites" / "caltech256" / "results" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["eff"]  # nothing of res, not even a hidden leftover
    # a second submit runs what is left (train@eff is recorded) and ends where the serial dvc repro ended
    assert cli_main(["cluster", "submit", PIPELINE, "--wait"]) == 0, capsys.readouterr().err
    second = Run.latest(repo, PIPELINE)
    assert second.folder != run.folder and "train@eff" not in [s["name"] for s in second.stages]
    assert {r["stage"]: r["state"] for r in second.status()}["train@res"] == "done"
    assert (repo / PIPELINE).with_name("dvc.lock").read_text() == serial
    status = subprocess.run(["python", "-m", "dvc", "status", PIPELINE], cwd=repo, capture_output=True, text=True)
    assert status.returncode == 0 and "up to date" in status.stdout
