"""``python -m benchmark cluster`` against a real Slurm (a one-node cluster started here, ``slurm``) on the toy
pipeline (tests/cluster/toy.py): the same dvc.lock and cache as a serial ``dvc repro``, failed, stale and cancelled
jobs, and what is refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from toy import BY, until

from benchmark.cli.main import main as cli_main
from benchmark.cluster.check import max_overlap
from benchmark.cluster.runs import RUNS, Run

pytestmark = pytest.mark.slow  # Slurm jobs: a few seconds each


def _submit(repo: Path, capsys, *args) -> Run:
    assert cli_main(["cluster", "submit", *args]) == 0, capsys.readouterr().err
    capsys.readouterr()
    run = Run.latest(repo, "dvc.yaml")
    assert run is not None
    return run


def _wait(run: Run) -> dict:
    until(lambda: not run.active(), 180, f"run {run.folder.name} to end")
    return {r["stage"]: r for r in run.status()}


def _state(run: Run, stage: str) -> str | None:
    return (run.state(stage) or {}).get("status")


def _cache(repo: Path) -> set[str]:
    return {p.relative_to(repo).as_posix() for p in (repo / ".dvc" / "cache").rglob("*") if p.is_file()}


def _lock_and_status(repo: Path) -> tuple[str, str]:
    status = subprocess.run(["python", "-m", "dvc", "status"], cwd=repo, capture_output=True, text=True).stdout
    return (repo / "dvc.lock").read_text(), status.strip()


def test_from_scratch_a_failure_and_a_resubmit_give_the_serial_dvc_lock_and_cache(
    slurm, toy_repo, toy_serial, monkeypatch, capsys
):
    monkeypatch.chdir(toy_repo)
    (toy_repo / "hold-b-x").touch()  # b@x ends after b@Y: its dvc.lock entry is written last, then put in run order
    (toy_repo / "hold-b-y").touch()  # and b@Y waits until both run (a loaded machine's Slurm may start one late)
    (toy_repo / "fail-c").touch()
    run = _submit(toy_repo, capsys)
    assert [s["name"] for s in run.stages] == ["a", "b@x", BY, "c", "d"]
    until(lambda: all((toy_repo / f"started-b-{i}").exists() for i in "xy"), 120, "b@x and b@Y running at once")
    (toy_repo / "hold-b-y").unlink()
    until(lambda: _state(run, BY) == "done", 120, "b@Y done while b@x runs")
    (toy_repo / "hold-b-x").unlink()
    rows = _wait(run)
    assert {s: r["state"] for s, r in rows.items()} == {
        "a": "done",
        "b@x": "done",
        BY: "done",
        "c": "failed",
        "d": "cancelled",
    }
    assert not list(toy_repo.parent.rglob("pwned"))  # names and paths reach Slurm as arguments, never through a shell
    # every character outside [A-Za-z0-9._@-] becomes "_" ("; $(" -> "____", ") `" -> "___")
    assert run.log(BY).name == "02-b@y____touch_pwned___touch_pwned_.out" and run.log(BY).parent == run.folder / "logs"
    spans = [(run.state(s)["started"], run.state(s)["ended"]) for s in ("b@x", BY)]
    assert max_overlap(spans) == 2  # the two independent stages ran at the same time
    log = run.log("c")  # the failed stage, with its log (inside the repository); what depends on it is cancelled
    assert rows["c"]["detail"] == f"the command failed (exit code 1); log {log}"
    assert "gate: c fails" in log.read_text() and log.is_relative_to(toy_repo)
    assert rows["d"]["detail"] == "upstream stage c failed"
    assert not (toy_repo / "c.txt").exists() and not (toy_repo / "d.txt").exists()
    summary = run.summary()
    assert not summary["complete"] and summary["not_up_to_date"] == ["c", "d"]
    assert "== not complete" in (run.folder / "logs" / "collect.out").read_text()
    assert cli_main(["cluster", "status"]) == 0
    assert f"log {log}" in capsys.readouterr().out
    (toy_repo / "fail-c").unlink()
    second = _submit(toy_repo, capsys)
    assert [s["name"] for s in second.stages] == ["c", "d"]  # what is left
    assert {r["state"] for r in _wait(second).values()} == {"done"} and second.summary()["complete"]
    lock, status = _lock_and_status(toy_repo)
    assert (lock, status) == _lock_and_status(toy_serial) and "up to date" in status  # byte for byte; dvc status clean
    assert _cache(toy_repo) == _cache(toy_serial)  # the same cache objects and run-cache entries


def test_inputs_changed_while_running_are_not_recorded(slurm, toy_repo, monkeypatch, capsys):
    monkeypatch.chdir(toy_repo)
    (toy_repo / "hold-a").touch()
    run = _submit(toy_repo, capsys)
    until(lambda: (toy_repo / "started-a").exists(), 120, "stage a to start")
    params = toy_repo / "params.yaml"
    params.write_text(params.read_text().replace("\n  seed: 0", "\n  seed: 1", 1))  # a's parameter, mid-run
    (toy_repo / "hold-a").unlink()
    rows = _wait(run)
    assert rows["a"]["state"] == "stale"
    assert "inputs changed while it ran (its command in dvc.yaml, params.yaml)" in rows["a"]["detail"]
    assert {rows[s]["state"] for s in ("b@x", BY, "c", "d")} == {"cancelled"}
    assert not (toy_repo / "a.txt").exists() and not (toy_repo / "dvc.lock").exists()


def test_cancel_ends_the_run_and_a_second_submit_waits_for_none(slurm, toy_repo, monkeypatch, capsys):
    monkeypatch.chdir(toy_repo)
    (toy_repo / "hold-a").touch()
    run = _submit(toy_repo, capsys)
    until(lambda: (toy_repo / "started-a").exists(), 120, "stage a to start")
    assert cli_main(["cluster", "submit"]) == 2  # one run of a pipeline at a time
    assert "still has jobs in Slurm's queue" in capsys.readouterr().err
    assert len([p for p in (toy_repo / RUNS).iterdir() if p.is_dir()]) == 1
    assert cli_main(["cluster", "cancel"]) == 0
    assert f"run {run.folder.name}: cancelled 6 job(s)" in capsys.readouterr().out
    rows = _wait(run)
    assert rows["a"]["state"] == "cancelled" and rows["a"]["detail"].startswith("stopped by a signal")
    assert {rows[s]["state"] for s in ("b@x", BY, "c", "d")} == {"cancelled"}
    assert not (toy_repo / "a.txt").exists() and not (toy_repo / "dvc.lock").exists()
    assert not [p for p in toy_repo.iterdir() if p.name.startswith(".a.txt")]  # no leftover of a write
    assert cli_main(["cluster", "collect"]) == 1
    assert "not complete" in capsys.readouterr().out


def test_an_unreachable_controller_is_one_line_and_nothing_is_submitted(slurm, toy_repo, monkeypatch, capsys):
    monkeypatch.chdir(toy_repo)
    conf = toy_repo / "down.conf"
    text = slurm.conf.read_text()
    port = next(line for line in text.splitlines() if line.startswith("SlurmctldPort="))
    conf.write_text(text.replace(port, "SlurmctldPort=1"))
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert cli_main(["cluster", "submit"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the Slurm controller is unreachable (scontrol ping:") and "\n" not in err
    assert not (toy_repo / RUNS).exists()
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    queue = subprocess.run(["squeue", "--noheader"], capture_output=True, text=True)
    assert queue.returncode == 0 and queue.stdout.strip() == ""


def test_a_dependent_job_starts_without_slurms_batch_delay(slurm):
    """The cluster starts a job as soon as its dependency has ended (``batch_sched_delay=0``): Slurm's default 3 s
    wait before each such start was most of a small pipeline's wall time. Read from the controller, and seen in its
    log: three chained jobs, each started within 2 s of the previous one's end (1 s here; 3 s with the default), by the
    main scheduler or, when a loaded machine made it pass the job over, the backfill scheduler (``bf_interval=1``)."""
    import re

    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    params = r"^SchedulerParameters\s*=.*"
    assert re.search(params + r"\bbatch_sched_delay=0\b", config, re.M) and re.search(
        params + r"\bbf_interval=1\b", config, re.M
    ), config
    ids: list[str] = []
    for _ in range(3):
        dep = [f"--dependency=afterok:{ids[-1]}"] if ids else []
        cmd = ["sbatch", "--parsable", "--output=/dev/null", *dep, "--wrap", "true"]  # no slurm-N.out in the checkout
        ids.append(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip())
    queue = ["squeue", "-h", "-j", ",".join(ids)]
    until(lambda: not subprocess.run(queue, capture_output=True, text=True).stdout.strip(), 60, "the jobs to end")
    log = (slurm.folder / "log" / "slurmctld.log").read_text()

    def when(pattern: str, job: str) -> float:
        from datetime import datetime

        stamp = re.search(r"^\[([^\]]+)\] " + pattern, log, re.M)
        assert stamp, f"{pattern!r} not in the controller's log; its lines of job {job}:\n" + "\n".join(
            line for line in log.splitlines() if f"JobId={job} " in line
        )
        return datetime.fromisoformat(stamp.group(1)).timestamp()

    for first, then in zip(ids, ids[1:]):
        started = when(rf"(?:sched: Allocate JobId={then} |.*backfill.*: Started JobId={then} in )", then)
        gap = started - when(rf"_job_complete: JobId={first} done", first)
        assert 0 <= gap < 2, f"job {then} started {gap:.1f} s after job {first} ended"
