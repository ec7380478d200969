"""``cluster submit``: one Slurm job per stage that is not up to date, ``afterok`` dependencies along the DAG.

Every job is submitted held (``--hold``) and released only once all are in, so a
refused submission (a bad partition, a limit) cancels the ones already in and
nothing runs; the run's folder is then removed. A final job (``collect``,
``afterany`` on every stage job) reports the run when the last one has ended.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

import yaml
from tqdm import tqdm

from benchmark.cluster import config, slurm
from benchmark.cluster.pipeline import Pipeline, load, locate
from benchmark.cluster.runs import Run, format_status, safe_name


class RunActive(ValueError):
    """The pipeline's previous run still has jobs in Slurm's queue."""


def job_specs(pipe: Pipeline, stages: list[str]) -> tuple[dict[str, config.JobSpec], config.JobSpec, list[str]]:
    """The job of each stage (params ``cluster`` and the run's ``device``, ``threads``, ``num_workers``,
    ``distributed`` in the pipeline's params file, the built-in defaults without one), the final job's, and warnings
    (resources keys that match no stage of the pipeline)."""
    from benchmark.stages.params_config import load_params

    where = str(pipe.params_file.relative_to(pipe.root))
    if pipe.params_file.is_file():
        params = load_params(pipe.params_file)
        cfg, d = config.parse(params.cluster, where), params.distributed
        kw = {
            "device": params.device,
            "threads": params.threads,
            "num_workers": params.num_workers,
            "nproc_per_node": d.nproc_per_node,
            "nnodes": d.nnodes,
        }
    else:  # a pipeline without a params file: every built-in default
        cfg, kw = config.ClusterConfig(), {}
    specs = {s: config.job_spec(s, cfg, **kw) for s in stages}
    known = {"default", config.COLLECT} | set(pipe.order) | {config.kind(s) for s in pipe.order}
    warnings = [
        f"{where}: cluster.resources.{k} names no stage or kind of stage of {pipe.dvcfile} (kinds: "
        f"{', '.join(sorted({config.kind(s) for s in pipe.order}))})"
        for k in cfg.resources
        if k not in known
    ]
    return specs, config.job_spec(config.COLLECT, cfg, device="cpu"), warnings


def lock_keys(pipe: Pipeline) -> list[str]:
    """The stage entries of the pipeline's dvc.lock, in its order (a run puts the lock back in this order)."""
    if not pipe.lockfile.is_file():
        return []
    data = yaml.safe_load(pipe.lockfile.read_text(encoding="utf-8")) or {}
    return list((data.get("stages") or {}) if isinstance(data, dict) else {})


def _output(path: Path) -> str:
    return "--output=" + str(path).replace("%", "%%")  # sbatch expands %j and friends in the file name


def run_manifest(pipe: Pipeline, todo: list[str], force: bool, jobs: dict[str, tuple[int, list[str]]]) -> dict:
    """The manifest (``run.json``) of a run of stages ``todo`` of ``pipe``: its pipeline, the lock's order and each
    stage's job (``jobs``: stage -> its nodes and its scheduler options), as a cluster run and a local parallel run
    (:mod:`benchmark.cluster.parallel`) write it."""
    return {
        "root": str(pipe.root),
        "pipeline": pipe.dvcfile,
        "force": force,
        "created": time.time(),
        "python": sys.executable,
        "order": list(pipe.order),
        "lock_before": lock_keys(pipe),
        "stages": [
            {
                "name": s,
                "file": safe_name(i, s),
                "upstream": [u for u in pipe.upstream[s] if u in todo],
                "nodes": jobs[s][0],
                "options": jobs[s][1],
            }
            for i, s in enumerate(todo)
        ],
    }


def _manifest(pipe: Pipeline, todo: list[str], specs: dict[str, config.JobSpec], force: bool) -> dict:
    """The manifest of a Slurm run of stages ``todo`` of ``pipe`` (:func:`run_manifest`, each stage's sbatch job)."""
    return run_manifest(pipe, todo, force, {s: (specs[s].nodes, specs[s].sbatch_options()) for s in todo})


def _submit_held(pipe: Pipeline, run: Run, final: config.JobSpec) -> list[str]:
    """Submit ``run``'s stage jobs and its final job held, then release them all; the job ids. On any failure the
    ones in are cancelled and the run's folder removed (a refused job named by its stage)."""
    script = run.folder / "job.sh"
    script.write_text(slurm.BATCH_SCRIPT, encoding="utf-8")
    common = ["--hold", "--no-requeue", f"--chdir={pipe.root}", "--export=ALL,PYTHONUNBUFFERED=1"]
    job_cmd = [sys.executable, "-m", "benchmark.cluster.job"]
    submitted: list[str] = []
    try:
        for s in run.stages:
            after = [run.stage(u)["job"] for u in s["upstream"]]
            deps = [f"--dependency=afterok:{':'.join(after)}", "--kill-on-invalid-dep=yes"] if after else []
            s["job"] = slurm.sbatch(
                [*s["options"], *common, *deps, f"--job-name=uq:{s['name']}", _output(run.log(s["name"]))],
                script,
                [*job_cmd, "stage", str(run.folder), s["name"]],
            )
            submitted.append(s["job"])
        run.manifest["collect_job"] = slurm.sbatch(
            [
                *final.sbatch_options(),
                *common,
                f"--dependency=afterany:{':'.join(submitted)}",
                "--job-name=uq:collect",
                _output(run.folder / "logs" / "collect.out"),
            ],
            script,
            [*job_cmd, "collect", str(run.folder)],
        )
        submitted.append(run.manifest["collect_job"])
        run.save()
        slurm.release(submitted)
    except BaseException as e:
        slurm.cancel(submitted)
        shutil.rmtree(run.folder, ignore_errors=True)
        job = re.search(r"\bjob (\d+)", str(e)) if isinstance(e, slurm.SlurmError) else None
        which = [s for s in run.stages if job and s.get("job") == job.group(1)]
        if which:  # Slurm names a job: say which stage and what it asked for
            raise slurm.SlurmError(
                f"{e} (stage {which[0]['name']}: {' '.join(which[0]['options'])}); nothing was submitted"
            ) from None
        raise
    return submitted


def submit(path, *, force: bool = False, dry_run: bool = False, log=print) -> Run | None:
    """Submit the stages of the pipeline at ``path`` that are not up to date (every stage with ``force``); the run,
    or None when there is nothing to do (or ``dry_run``: the jobs are printed, nothing is submitted).
    ``slurm.SlurmError`` (no sbatch, an unreachable controller, a refused job) and ``ValueError`` (bad params, a
    run still active) leave nothing submitted."""
    locate(path)  # a path that is no pipeline is named first
    if not dry_run:
        slurm.check_available()
    pipe, todo = load(path, force=force)
    if not todo:
        log(f"nothing to do: every stage of {pipe.dvcfile} is up to date")
        return None
    specs, final, warnings = job_specs(pipe, todo)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if dry_run:
        for s in todo:
            ups = [u for u in pipe.upstream[s] if u in todo]
            log(f"{s}: {' '.join(specs[s].sbatch_options())}" + (f" (after {', '.join(ups)})" if ups else ""))
        return None
    previous = Run.latest(pipe.root, pipe.dvcfile)
    if previous is not None and previous.active():
        raise RunActive(
            f"run {previous.folder.name} of {pipe.dvcfile} still has jobs in Slurm's queue: wait for it "
            f"(python -m benchmark cluster status {pipe.dvcfile}) or end it (... cluster cancel)"
        )
    run = Run.create(pipe.root, _manifest(pipe, todo, specs, force))
    submitted = _submit_held(pipe, run, final)
    log(
        f"submitted {len(run.stages)} stage job(s) of {pipe.dvcfile} and a final one: run {run.folder.name} "
        f"(jobs {submitted[0]}-{submitted[-1]}); follow it with `python -m benchmark cluster status {pipe.dvcfile}`"
    )
    return run


QUIET_REASONS = ("None", "Dependency", "Priority", "Resources", "JobHeldUser", "BeginTime")  # reasons that pass


def wait(run: Run, *, poll: float = 2.0, log=print) -> int:
    """Wait until no job of ``run`` is in Slurm's queue (the bar shows how many ended, how many run, and why jobs
    wait when it is not their dependencies or free resources); print the final report. 0 when the run is complete."""
    jobs = run.jobs()
    with tqdm(total=len(jobs), desc=f"run {run.folder.name}", unit="job", file=sys.stderr) as bar:
        while True:
            active = {j: sr for j, sr in slurm.queue(jobs).items() if sr[0] not in slurm.ENDED}
            bar.update(len(jobs) - len(active) - bar.n)
            running = sum(state == "RUNNING" for state, _ in active.values())
            odd = sorted(
                {reason for state, reason in active.values() if state == "PENDING" and reason not in QUIET_REASONS}
            )
            bar.set_postfix_str(
                f"running {running}, waiting {len(active) - running}" + (f" ({', '.join(odd)})" if odd else "")
            )
            if not active:
                break
            time.sleep(poll)
    summary = run.summary()
    if summary is None:  # the final job did not run (cancelled): report from the jobs' records
        log(format_status(run, run.status()))
        log("the run's final job did not run: `python -m benchmark cluster collect` checks the pipeline's status")
        return 1
    log((run.folder / "logs" / "collect.out").read_text(encoding="utf-8", errors="replace").rstrip())
    return 0 if summary.get("complete") else 1
