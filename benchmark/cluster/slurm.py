"""A thin layer over Slurm's client commands (``sbatch``, ``scontrol``, ``squeue``, ``scancel``).

Every value (stage names, paths, options from params) reaches Slurm as its own
argument of a command started without a shell; the job itself is a fixed batch
script, ``exec "$@"``, whose arguments are the job's command line
(:data:`BATCH_SCRIPT`). Slurm runs the jobs in the order their ``afterok``
dependencies allow and cancels the dependents of a job that fails or is
cancelled (``--kill-on-invalid-dep=yes``); nothing here schedules anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

BATCH_SCRIPT = (
    '#!/bin/sh\n# One job of `python -m benchmark cluster submit`: its arguments are the command it runs.\nexec "$@"\n'
)
TIMEOUT = 60  # seconds a client command may take (scontrol retries a missing configuration for 60 s)
ENDED = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
)


class SlurmError(RuntimeError):
    """A Slurm client command is missing, the controller is unreachable, or a command failed (one line)."""


def _run(args: list[str], what: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SlurmError(
            f"{args[0]} not found on PATH: run this where Slurm's client commands are (a login node)"
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"{what}: `{args[0]}` gave no answer in {timeout:g} s (is the Slurm controller reachable?)"
        ) from None


def _first_line(proc: subprocess.CompletedProcess) -> str:
    text = (proc.stderr or proc.stdout or "").strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not set(ln.strip()) <= {"*"}]
    return lines[0] if lines else f"exit code {proc.returncode}"


def check_available() -> None:
    """``SlurmError`` unless ``sbatch`` is on ``PATH`` and ``scontrol ping`` finds the controller up."""
    for cmd in ("sbatch", "scontrol", "squeue", "scancel"):
        if shutil.which(cmd) is None:
            raise SlurmError(f"{cmd} not found on PATH: run this where Slurm's client commands are (a login node)")
    proc = _run(["scontrol", "ping"], "checking the controller", timeout=30)
    if proc.returncode != 0 or " is UP" not in proc.stdout:
        raise SlurmError(f"the Slurm controller is unreachable (scontrol ping: {_first_line(proc)})")


def sbatch(options: list[str], script: Path, command: list[str]) -> str:
    """Submit ``script`` with ``options`` and ``command`` as the script's arguments; the job id."""
    proc = _run(["sbatch", "--parsable", *options, str(script), *command], "sbatch")
    if proc.returncode != 0:
        raise SlurmError(f"sbatch refused the job: {_first_line(proc)}")
    job = proc.stdout.strip().split(";")[0]  # --parsable: "id" or "id;cluster"
    if not job.isdigit():
        raise SlurmError(f"sbatch printed no job id: {proc.stdout.strip()!r}")
    return job


def release(jobs: list[str]) -> None:
    """Let held jobs run (``scontrol release``)."""
    if jobs:
        proc = _run(["scontrol", "release", ",".join(jobs)], "scontrol release")
        if proc.returncode != 0:
            raise SlurmError(f"scontrol release failed: {_first_line(proc)}")


def cancel(jobs: list[str]) -> None:
    """``scancel`` the jobs (those already ended are ignored by Slurm)."""
    if jobs:
        _run(["scancel", *jobs], "scancel")


def queue(jobs: list[str]) -> dict[str, tuple[str, str]]:
    """job id -> (state, reason) of the jobs Slurm still lists (pending, running, ending)."""
    if not jobs:
        return {}
    proc = _run(["squeue", "--noheader", "--states=all", "--format=%i|%T|%r", f"--jobs={','.join(jobs)}"], "squeue")
    if proc.returncode != 0 and "Invalid job id" not in proc.stderr:  # ids the controller has forgotten: not an error
        raise SlurmError(f"squeue failed: {_first_line(proc)}")
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0] in jobs:
            out[parts[0]] = (parts[1], parts[2])
    return out


def job_state(job: str) -> tuple[str, str] | None:
    """(state, reason) of an ended job while the controller remembers it (``MinJobAge``), else None."""
    proc = _run(["scontrol", "show", "job", "--oneliner", job], "scontrol show job")
    if proc.returncode != 0:
        return None
    fields = dict(f.split("=", 1) for f in proc.stdout.split() if "=" in f)
    return (fields["JobState"], fields.get("Reason", "None")) if "JobState" in fields else None


def first_node() -> str | None:
    """The first host of this job's allocation (``$SLURM_JOB_NODELIST`` expanded by ``scontrol show hostnames``)."""
    nodes = os.environ.get("SLURM_JOB_NODELIST")
    if not nodes:
        return None
    proc = _run(["scontrol", "show", "hostnames", nodes], "scontrol show hostnames")
    hosts = proc.stdout.split()
    return hosts[0] if proc.returncode == 0 and hosts else None
