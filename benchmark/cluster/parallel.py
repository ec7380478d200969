"""``python -m benchmark run --jobs N``: the pipeline's DAG on this machine, N stages at a time.

The cluster runner with a local executor: the same plan (:func:`benchmark.cluster.pipeline.load`: the stages DVC
calls changed and every stage downstream of one, in ``dvc repro``'s order, each with its upstream stages), the same run
folder (:mod:`benchmark.cluster.runs`: logs, each stage's record, ``summary.json``) and the same job per stage
(``python -m benchmark.cluster.job stage``, :mod:`benchmark.cluster.job`: DVC's checks and records under the locks,
the command without them, ``dvc.lock`` in a serial run's order), started here as processes instead of Slurm jobs. A
stage starts once its upstream stages are done and fewer than N stages run, the one with the longest chain of work
after it first (from the committed timing record, :func:`priorities`). Each stage sets its own thread count
(params ``threads``), so its bytes do not depend on N (as on a cluster: ``results/cluster.json``), and the run ends in
the ``dvc.lock`` and cache a serial ``dvc repro`` leaves (``python -m benchmark reproduce check`` compares them).

Warm starts: the jobs and the stages' ``python`` are served by a warm ``python`` (:mod:`benchmark.warm`, started for
the run with the jobs' environment): one process imports torch, timm, pandas and DVC once, and each job and stage is a
fork of it that runs as a fresh interpreter would (the stages' bytes are the same: ``reproduce timings
--compare-jobs 1`` checks them against ``dvc repro``'s). ``--cold`` (or ``UQBENCH_WARM=0``) starts every process
fresh; where a warm ``python`` already serves this process's environment (``UQBENCH_WARM_PYTHON``: the tests'), its
jobs use that one.

A stage that fails: no stage downstream of it starts, the running ones finish, exit 1 (the run's report names it and
its log). Ctrl-C: the running stages get SIGTERM (their outputs are removed, as a cancelled Slurm job's), exit 130.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmark import warm
from benchmark.cluster.pipeline import load, locate
from benchmark.cluster.runs import Run
from benchmark.cluster.submit import run_manifest

ENDED_WELL = ("done", "skipped")


def _manifest(pipe, todo: list[str], *, force: bool, jobs: int) -> dict:
    """``run.json`` of a local run (as :func:`benchmark.cluster.submit.submit` writes it, without Slurm's options)."""
    return run_manifest(pipe, todo, force, {s: (1, []) for s in todo}) | {"executor": "local", "jobs": jobs}


def job_environment(jobs: int) -> dict[str, str]:
    """The environment of the jobs (and of their stages). With several stages at once their OpenMP threads share the
    cores: a thread that finishes a parallel region sleeps instead of spinning (``OMP_WAIT_POLICY=PASSIVE``, unless
    set), so it does not take the core another stage's thread needs; how threads wait changes no result."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if jobs > 1:
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def start_warm(jobs: int, *, cold: bool = False) -> warm.Server | None:
    """The run's warm ``python`` (module docstring), started with the jobs' environment; None with ``cold``, with
    ``UQBENCH_WARM=0``, or where one already serves this environment."""
    if cold or os.environ.get("UQBENCH_WARM", "1") == "0" or os.environ.get(warm.ENV):
        return None
    return warm.start(job_environment(jobs), timed=True)


def _start(run: Run, name: str, jobs: int, server: warm.Server | None = None) -> subprocess.Popen:
    """The job of stage ``name`` (through ``server``'s ``python``, or the warm ``python`` that already serves this
    environment, when there is one), its output in the stage's log."""
    env = job_environment(jobs)
    if server is not None:
        env, python = server.environ(env), server.python
    else:
        python = (warm.serving_python(env) if env.get("UQBENCH_WARM", "1") != "0" else None) or sys.executable
    with open(run.log(name), "ab") as out:
        return subprocess.Popen(
            [python, "-m", "benchmark.cluster.job", "stage", str(run.folder), name],
            cwd=run.root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def durations(folder: Path) -> dict[str, float]:
    """stage -> its wall seconds in the pipeline's timing record (``results/timings.json`` beside its ``dvc.yaml``,
    committed with the project), to start the longest chains first; empty without one."""
    import json

    try:
        record = json.loads((Path(folder) / "results" / "timings.json").read_text(encoding="utf-8"))
        return {str(s["stage"]): float(s["wall_s"]) for s in record.get("stages", []) if s.get("wall_s") is not None}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def priorities(stages: list[dict], seconds: dict[str, float]) -> dict[str, float]:
    """stage -> the seconds of the longest chain from its start to the run's end (its own ``seconds``, else the median
    of the known ones, plus the longest of the stages that wait for it): among the stages ready to start, the one
    with the longest chain goes first (a stage that few wait for but that is long, as SVE's training, starts early
    instead of last), ties in ``dvc repro``'s order. How stages are scheduled changes none of their outputs."""
    known = sorted(seconds.values())
    default = known[len(known) // 2] if known else 1.0
    downstream: dict[str, list[str]] = {s["name"]: [] for s in stages}
    for s in stages:
        for u in s["upstream"]:
            downstream.setdefault(u, []).append(s["name"])
    chain: dict[str, float] = {}
    for s in reversed(stages):  # run order: every stage after those it waits for
        name = s["name"]
        chain[name] = seconds.get(name, default) + max((chain[d] for d in downstream[name] if d in chain), default=0.0)
    return chain


def execute(
    run: Run,
    jobs: int,
    *,
    poll: float = 0.05,
    log=print,
    seconds: dict[str, float] | None = None,
    server: warm.Server | None = None,
) -> dict[str, str]:
    """Run the stages of ``run`` here, at most ``jobs`` at once, each when its upstream stages ended well, the longest
    chain first (:func:`priorities`, from ``seconds``: stage -> its expected wall seconds); stage -> how it ended
    (``done``, ``skipped``, ``failed``, ``stale``, ``cancelled``). A stage's end is seen within ``poll`` seconds, and
    the stage that waits for it starts then. ``server``: the warm ``python`` the jobs start through."""
    from tqdm import tqdm

    rank = priorities(run.stages, seconds or {})
    order = {s["name"]: i for i, s in enumerate(run.stages)}
    waiting = sorted((s["name"] for s in run.stages), key=lambda n: (-rank[n], order[n]))
    upstream = {s["name"]: s["upstream"] for s in run.stages}
    running: dict[str, subprocess.Popen] = {}
    ended: dict[str, str] = {}
    shown = ""
    with tqdm(total=len(waiting), desc=f"run {run.folder.name}", unit="stage", file=sys.stderr) as bar:
        try:
            while waiting or running:
                for name in list(waiting):
                    bad = [u for u in upstream[name] if ended.get(u) not in (None, *ENDED_WELL)]
                    if bad:
                        why = f"upstream stage {bad[0]} {ended[bad[0]]}"
                        run.report(name, "cancelled", ended=time.time(), message=why)
                        ended[name] = "cancelled"
                        waiting.remove(name)
                        bar.update()
                    elif len(running) < jobs and all(ended.get(u) in ENDED_WELL for u in upstream[name]):
                        running[name] = _start(run, name, jobs, server)
                        waiting.remove(name)
                for name, proc in list(running.items()):
                    if proc.poll() is None:
                        continue
                    del running[name]
                    state = (run.state(name) or {}).get("status")
                    ended[name] = state if state in (*ENDED_WELL, "failed", "stale", "cancelled") else "failed"
                    if state not in (*ENDED_WELL, "failed", "stale", "cancelled"):
                        why = f"its job exited {proc.returncode} without a record"
                        run.report(name, "failed", ended=time.time(), message=why)
                    if ended[name] not in ENDED_WELL:
                        log(f"stage {name} {ended[name]}: log {run.log(name)}")
                    bar.update()
                now = f"running {', '.join(running) or '-'}"
                if now != shown:  # redrawn when it changes, not at every poll
                    bar.set_postfix_str(shown := now)
                if running or waiting:
                    time.sleep(poll)
        except KeyboardInterrupt:
            for proc in running.values():
                proc.send_signal(signal.SIGTERM)  # the job removes the stage's outputs and records it cancelled
            for proc in running.values():
                proc.wait()
            raise
    return ended


def run_local(path="dvc.yaml", *, jobs: int = 2, force: bool = False, log=print, cold: bool = False) -> int:
    """Run the stages of the pipeline at ``path`` that are not up to date (every stage with ``force``) here, ``jobs``
    at a time, started warm unless ``cold`` (module docstring); then report as a cluster run's final job does
    (:func:`benchmark.cluster.job.collect`). 0 when every stage is up to date at the end (``dvc status`` clean), 1
    otherwise."""
    from benchmark.cluster.job import collect

    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    locate(path)  # a path that is no pipeline is named first
    server = start_warm(jobs, cold=cold)  # (it imports the libraries while DVC finds what to run)
    try:
        pipe, todo = load(path, force=force)
        if not todo:
            log(f"nothing to do: every stage of {pipe.dvcfile} is up to date")
            return 0
        run = Run.create(pipe.root, _manifest(pipe, todo, force=force, jobs=jobs) | {"warm": server is not None})
        log(f"running {len(todo)} stage(s) of {pipe.dvcfile}, {jobs} at a time: run {run.folder.name} ({run.folder})")
        execute(run, jobs, log=log, seconds=durations(pipe.folder), server=server)
    finally:
        if server is not None:
            server.stop()
    return collect(run)
