"""What a cluster run's jobs do: ``python -m benchmark.cluster.job {stage,exec,collect} RUN_FOLDER [STAGE]``.

``stage`` runs one DVC stage as ``dvc repro`` runs it (:meth:`dvc.stage.Stage.run`), in three steps, so that
jobs of independent stages run at the same time in one workspace while DVC's records stay exact:

1. under the run's lock (and DVC's repository lock): skip when DVC calls the stage unchanged (an upstream job's
   outputs came out as before), remove its outputs and restore them from DVC's cache as ``dvc repro`` does (before
   the inputs are hashed again: dvc.lock's outputs only for the inputs dvc.lock records, else the run cache's
   entry for the inputs now), then note its inputs (dependencies' hashes, params, command);
2. without a lock: run the stage's command as DVC does (:func:`dvc.stage.run.cmd_run`: its shell, folder and
   environment), on every node of the job through ``srun`` when the stage asks for several;
3. under the locks again: hash the inputs once more and, only when they are the ones noted in step 1, record
   the outputs as DVC does (``Stage.save``, ``commit``, and its ``dvc.lock`` entry: the same entry and cache) with
   the lock's entries in the order a serial ``dvc repro`` leaves them (in one write,
   :func:`benchmark.dvcutil.lockfile.record`). Inputs that changed while the command ran (an edited file, a new
   params value) leave the stage unrecorded and reported as ``stale``.

A command that fails or is stopped (``scancel``, a time limit: SIGTERM) leaves no output of the stage in place
(persistent outputs keep what their atomic writes completed) and exits non-zero, so Slurm cancels the jobs that
depend on it. ``collect`` (the final job) reports every stage and whether ``dvc status`` is clean.

In a timed run (``UQ_TIMINGS`` names the record file: :mod:`benchmark.reproduce.timing`) a stage's job appends its own
CPU seconds to that file when it ends (DVC's work for the stage, steps 1 and 3; the command runs in other processes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time

from dvc.dependency.base import DependencyDoesNotExistError
from dvc.repo import Repo
from dvc.stage.cache import RunCacheNotFoundError
from dvc.stage.exceptions import StageCmdFailedError
from dvc.stage.run import cmd_run
from dvc.stage.serialize import to_lockfile

from benchmark.cluster import slurm
from benchmark.cluster.pipeline import locked_repo, stages_of
from benchmark.cluster.runs import Run, format_status, write_json
from benchmark.dvcutil import lockfile
from benchmark.storage.atomic import clean_leftovers

STALE_EXIT = 3  # step 3 found other inputs than step 1


def own_cpu() -> float:
    """This process's own CPU seconds (user + system; not its children's: the stage's command). A job forked by the
    warm python counts from its fork (:mod:`benchmark.warm`), a fresh one from its start, its imports included."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return round(r.ru_utime + r.ru_stime, 3)


def note_cpu(name: str) -> None:
    """In a timed run (``UQ_TIMINGS`` set), append ``{"dvc_job": name, "job_cpu_s": own_cpu()}`` to its record file
    as one JSON line (the stages' processes append theirs there: :mod:`benchmark.config.runtime`)."""
    path = os.environ.get("UQ_TIMINGS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"dvc_job": name, "job_cpu_s": own_cpu()}) + "\n")


def _find(repo, run: Run, name: str):
    target = f"{run.manifest['pipeline']}:{name}"
    try:
        stages = repo.stage.collect(target)
    except Exception as e:  # noqa: BLE001 - a dvc.yaml edited since the submit: not found, or any parse error
        raise LookupError(f"stage {target} is no longer in the pipeline ({type(e).__name__}: {e})") from None
    return stages[0]


def inputs(stage) -> dict:
    """What a stage's outputs are computed from, as DVC hashes it: its command, each dependency's hash (params:
    their values) and its declared outputs (dependencies saved: ``stage.save_deps()``)."""
    return {"cmd": stage.cmd, "deps": [d.dumpd() for d in stage.deps], "outs": [str(o) for o in stage.outs]}


def _differences(before: dict, after: dict) -> list[str]:
    """What changed between two :func:`inputs` of a stage: its command or outputs in dvc.yaml, dependency paths."""
    changed = [
        what
        for key, what in (("cmd", "its command in dvc.yaml"), ("outs", "its outputs in dvc.yaml"))
        if before[key] != after[key]
    ]
    old = {d.get("path"): d for d in before["deps"]}
    changed += [d.get("path", "?") for d in after["deps"] if old.get(d.get("path")) != d]
    return changed or ["its list of dependencies"]


def _clear_outputs(stage) -> None:
    """Remove what a failed or stopped command left of ``stage``'s outputs: the outputs (persistent ones keep their
    completed atomic writes, as DVC keeps them between runs) and the hidden leftovers of interrupted writes."""
    for out in stage.outs:
        if not out.persist:
            out.remove(ignore_remove=False)
        clean_leftovers(out.fs_path)


class _Stop:
    """The signal that stopped this job, if one did: Slurm sends SIGTERM to every process of a job (``scancel``, a
    time limit, preemption); the stage's command ends too, and the job then cleans up."""

    def __init__(self) -> None:
        self.signal: int | None = None
        signal.signal(signal.SIGTERM, self._received)

    def _received(self, signum: int, frame: object) -> None:
        self.signal = signum

    def seen_in(self, rc: int) -> int | None:
        """The signal, also when it reached the command alone (its exit status ``rc`` says SIGTERM)."""
        if self.signal is None and rc in (-signal.SIGTERM, 128 + signal.SIGTERM):
            self.signal = signal.SIGTERM
        return self.signal


def _command(run: Run, name: str, stage, nodes: int) -> int:
    """Run the stage's command (step 2): here, or on each of the job's ``nodes`` through srun; its exit status."""
    if nodes > 1:
        env = dict(os.environ)
        env.setdefault("MASTER_ADDR", slurm.first_node() or "")  # rank 0's node: params distributed.master_addr null
        argv = [
            "srun",
            f"--nodes={nodes}",
            f"--ntasks={nodes}",
            "--ntasks-per-node=1",
            "--kill-on-bad-exit=1",
            sys.executable,
            "-m",
            "benchmark.cluster.job",
            "exec",
            str(run.folder),
            name,
        ]
        return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL).returncode
    try:
        cmd_run(stage)
    except StageCmdFailedError as e:  # "failed to run: <cmd>, exited with <status>"
        status = re.search(r"exited with (-?\d+)$", str(e))
        return int(status.group(1)) if status else 1
    return 0


def run_stage(run: Run, name: str) -> int:
    """Step 1-3 of the module docstring for stage ``name`` of ``run``; the job's exit status."""
    stop = _Stop()
    job, host = os.environ.get("SLURM_JOB_ID", "-"), socket.gethostname()
    run.report(name, "running", job=job, host=host, started=time.time(), message="")
    print(f"== stage {name} of {run.manifest['pipeline']}: job {job} on {host}", flush=True)
    prepared = _prepare(run, name)
    if isinstance(prepared, int):
        return prepared
    stage, before, restored = prepared
    rc = 0 if restored else _command(run, name, stage, int(run.stage(name).get("nodes", 1)))
    signum = stop.seen_in(rc)
    if rc != 0 or signum is not None:
        return _not_recorded(run, name, rc, signum)
    return _record(run, name, before, restored)


def _prepare(run: Run, name: str) -> int | tuple[object, dict, bool]:
    """Step 1 under the locks: the job's exit status when there is nothing to run (the stage is up to date, a
    dependency is missing), else the stage, its :func:`inputs` and whether DVC's run cache restored its outputs."""
    force = bool(run.manifest.get("force"))
    with locked_repo(run.root) as repo:
        stage = _find(repo, run, name)
        if not force and not stage.changed():
            print(f"== {name}: up to date (its inputs are unchanged), nothing to run", flush=True)
            run.report(name, "skipped", ended=time.time(), message="up to date")
            note_cpu(name)
            return 0
        missing = [str(d) for d in stage.deps if not d.exists]
        if missing:
            why = f"dependency {', '.join(missing)} does not exist"
            run.report(name, "failed", ended=time.time(), message=f"a dependency is missing ({why})")
            print(f"error: {name}: {why}", file=sys.stderr, flush=True)
            return 1
        stage.remove_outs(ignore_remove=False, force=False)
        # as dvc repro (dvc.stage.run.run_stage): the run cache is asked before the inputs are hashed again, so that
        # DVC takes dvc.lock's outputs only when every input is as dvc.lock records it, else the run cache's entry
        # for the inputs now. Asked after save_deps, DVC's check compares the inputs with themselves and hands back
        # dvc.lock's outputs of the old inputs.
        restored = False
        if not force:
            try:
                repo.stage_cache.restore(stage)
                restored = True
            except (RunCacheNotFoundError, DependencyDoesNotExistError):  # the latter: said below
                pass
        try:
            stage.save_deps()
        except DependencyDoesNotExistError as e:  # gone since the check above
            _clear_outputs(stage)
            run.report(name, "failed", ended=time.time(), message=f"a dependency is missing ({e})")
            print(f"error: {name}: {e}", file=sys.stderr, flush=True)
            return 1
        if restored:
            print(f"== {name}: restored from DVC's run cache", flush=True)
        return stage, inputs(stage), restored


def _not_recorded(run: Run, name: str, rc: int, signum: int | None) -> int:
    """A command that failed (exit status ``rc``) or was stopped (signal ``signum``): its outputs removed, nothing
    recorded; the job's exit status."""
    with locked_repo(run.root) as repo:
        _clear_outputs(_find(repo, run, name))
    stopped = signum is not None
    why = (
        "stopped by a signal (scancel, a time limit or preemption)"
        if stopped
        else f"the command failed (exit code {rc})"
    )
    run.report(name, "cancelled" if stopped else "failed", ended=time.time(), message=why)
    print(
        f"error: stage {name}: {why}; its outputs were removed, nothing recorded. Log: {run.log(name)}",
        file=sys.stderr,
        flush=True,
    )
    return 128 + signum if signum is not None else rc


def _record(run: Run, name: str, before: dict, restored: bool) -> int:
    """Step 3 under the locks: the stage's outputs recorded as DVC records them when its inputs are still
    ``before``, else left unrecorded as ``stale``; the job's exit status."""
    with locked_repo(run.root) as repo:
        stage = _find(repo, run, name)
        try:
            stage.save_deps()
            after = inputs(stage)
            changed = _differences(before, after) if after != before else []
        except DependencyDoesNotExistError as e:
            changed = [f"a dependency went missing ({e})"]
        if changed:
            _clear_outputs(stage)
            why = f"its inputs changed while it ran ({', '.join(changed)}): outputs not recorded"
            run.report(name, "stale", ended=time.time(), message=why)
            print(f"error: stage {name}: {why}; submit again to run it on the new inputs", file=sys.stderr, flush=True)
            return STALE_EXIT
        no_cache = any(not o.use_cache for o in stage.outs if not (o.is_metric or o.is_plot))
        stage.save(run_cache=not no_cache)
        stage.commit()
        # what stage.dump(update_pipeline=False) writes, put in a serial run's order, in one write (libyaml read)
        lockfile.record(run.lockfile, to_lockfile(stage), run.manifest["lock_before"], run.manifest["order"])
    run.report(name, "done", ended=time.time(), message="restored from the run cache" if restored else "")
    note_cpu(name)
    print(f"== {name}: done, recorded in {run.lockfile.relative_to(run.root)}", flush=True)
    return 0


def run_command(run: Run, name: str) -> int:
    """``exec``: the stage's command alone (one node's share of a several-node stage, started by srun)."""
    with Repo(str(run.root)) as repo:
        stage = _find(repo, run, name)
    return _command(run, name, stage, nodes=1)


def collect(run: Run) -> int:
    """The final job: each stage's state, the lock's order, and whether DVC calls every stage of the pipeline
    up to date; writes ``summary.json`` and prints it. 0 when the run is complete, 1 otherwise."""
    rows = run.status()
    with locked_repo(run.root) as repo:
        stages = stages_of(repo, run.manifest["pipeline"])
        changed = [s.name for s in stages if s.changed()]
        if run.lockfile.is_file():
            lockfile.reorder(run.lockfile, run.manifest["lock_before"], run.manifest["order"])
    bad = [r for r in rows if r["state"] not in ("done", "skipped")]
    summary = {
        "run": run.folder.name,
        "pipeline": run.manifest["pipeline"],
        "complete": not bad and not changed,
        "stages": rows,
        "not_up_to_date": changed,
        "time": time.time(),
    }
    write_json(run.folder / "summary.json", summary)
    print(format_status(run, rows))
    if summary["complete"]:
        print(f"== complete: every stage of {run.manifest['pipeline']} is up to date (dvc status clean)")
        return 0
    print(
        f"== not complete: {len(bad)} stage(s) did not finish; not up to date: {', '.join(changed) or 'none'}. "
        f"`python -m benchmark cluster submit {run.manifest['pipeline']}` runs what is left"
    )
    return 1


def main(argv=None) -> int:
    """``python -m benchmark.cluster.job {stage,exec,collect} RUN_FOLDER [STAGE]``: the job's exit status."""
    p = argparse.ArgumentParser(prog="python -m benchmark.cluster.job", description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["stage", "exec", "collect"])
    p.add_argument("run", help="the run's folder (.dvc/tmp/cluster/<run>)")
    p.add_argument("stage", nargs="?", help="the stage (stage, exec)")
    args = p.parse_args(argv)
    os.environ.pop("UQ_TIMINGS_PID", None)  # with UQ_TIMINGS set the stage's process records its own time, not this one
    run = Run.open(args.run)
    if args.action == "collect":
        return collect(run)
    if not args.stage:
        p.error(f"{args.action} needs a stage")
    try:
        return run_stage(run, args.stage) if args.action == "stage" else run_command(run, args.stage)
    except LookupError as e:
        if args.action == "stage":
            run.report(args.stage, "failed", ended=time.time(), message=str(e))
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
