"""``python -m benchmark cluster {submit,status,cancel,collect,local-check}``: the pipeline as Slurm jobs.

    python -m benchmark cluster submit                          # the root dvc.yaml: every stage not up to date
    python -m benchmark cluster submit suites/caltech256/dvc.yaml --wait
    python -m benchmark cluster status                          # each stage's job state (the newest run)
    python -m benchmark cluster cancel                          # end the whole run
    python -m benchmark cluster collect                         # report a run whose final job did not run

Exit codes: 0 fine, 1 a run that did not complete (``--wait``, ``collect``) or a local check that failed,
2 bad input, no ``sbatch``, an unreachable controller or a refused job (nothing submitted).
How-to: docs/how-to/cluster.md; rules: :mod:`benchmark.cluster`.
"""

from __future__ import annotations

import argparse
import sys

PIPELINE_HELP = "the pipeline file: dvc.yaml (default) or suites/<name>/dvc.yaml"


def add_cluster_command(subparsers) -> None:
    """Register ``cluster`` and its actions (submit, status, cancel, collect, local-check) in ``subparsers``."""
    p = subparsers.add_parser(
        "cluster",
        help="run the pipeline's stages as Slurm jobs (one job per stage, along the DAG)",
        description=__doc__.split("\n\n")[0],
    )
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)

    s = sub.add_parser(
        "submit",
        help="submit every stage that is not up to date as its own Slurm job",
        description="Submit each stage of PIPELINE that DVC calls changed, and every stage downstream of "
        "one, as its own Slurm job with afterok dependencies along the DAG (independent stages "
        "run at the same time); a final job reports the run. Each job runs its stage as dvc "
        "repro does and records it in dvc.lock only when its inputs did not change while it "
        "ran. Resources per stage: params `cluster` (docs/reference/params.md#cluster). Logs "
        "and records: .dvc/tmp/cluster/<run>/.",
    )
    s.add_argument("pipeline", nargs="?", default="dvc.yaml", help=PIPELINE_HELP)
    s.add_argument("-f", "--force", action="store_true", help="run every stage, as dvc repro -f (no run cache)")
    s.add_argument(
        "--wait", action="store_true", help="wait for the run to end and print its report (exit 1 unless complete)"
    )
    s.add_argument(
        "--dry-run", action="store_true", help="print each job's sbatch options and dependencies; submit nothing"
    )
    s.set_defaults(handler=run_submit)

    for name, helptext, handler in (
        ("status", "each stage's job state in the newest (or --run) run of PIPELINE", run_status),
        ("cancel", "cancel every job of the newest (or --run) run of PIPELINE", run_cancel),
        ("collect", "report a run and whether every stage is up to date (what its final job does)", run_collect),
    ):
        c = sub.add_parser(name, help=helptext, description=helptext[0].upper() + helptext[1:] + ".")
        c.add_argument("pipeline", nargs="?", default="dvc.yaml", help=PIPELINE_HELP)
        c.add_argument(
            "--run", help="the run's id (a folder name under .dvc/tmp/cluster; default: the newest of PIPELINE)"
        )
        c.set_defaults(handler=handler)

    lc = sub.add_parser(
        "local-check",
        help="run PIPELINE from scratch on a one-node Slurm started here; compare dvc.lock",
        description="Start a one-node Slurm cluster on this machine (Debian's slurm-wlm, installed if "
        "missing; needs root), run PIPELINE from scratch through `cluster submit` in a scratch "
        "copy of this checkout with --jobs stage jobs at once, and compare the copy's dvc.lock "
        "with this checkout's (from the run that made it here: dvc repro or python -m benchmark run): every "
        "stage output byte for byte, except those that embed a measured time. Exit 1 when they differ, "
        "the run did not complete or fewer than 2 jobs ran at once. Rules: "
        "benchmark/cluster/check.py.",
    )
    lc.add_argument("pipeline", nargs="?", default="dvc.yaml", help=PIPELINE_HELP)
    lc.add_argument(
        "--jobs", type=int, default=2, help="stage jobs the node runs at once (default 2: one CPU each on 2 cores)"
    )
    lc.add_argument("--workdir", help="where the scratch copy and the cluster's files go (default: .dvc/tmp)")
    lc.add_argument("--keep", action="store_true", help="keep the scratch copy (its path is printed)")
    lc.set_defaults(handler=run_local_check)


def _errors():
    from dvc.exceptions import DvcException

    from benchmark.cluster.local import LocalClusterError
    from benchmark.cluster.slurm import SlurmError

    return (ValueError, SlurmError, LocalClusterError, DvcException)


def _fail(e: Exception) -> int:
    print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
    return 2


def _run_of(args):
    from pathlib import Path

    from benchmark.cluster.pipeline import locate
    from benchmark.cluster.runs import RUNS, Run

    root, dvcfile = locate(args.pipeline)
    if args.run:
        if "/" in args.run or args.run.startswith("."):
            raise ValueError(f"--run {args.run!r}: a run id is a folder name under {RUNS}")
        return Run.open(Path(root) / RUNS / args.run)
    run = Run.latest(Path(root), dvcfile)
    if run is None:
        raise ValueError(f"{dvcfile}: no cluster run yet (python -m benchmark cluster submit {dvcfile})")
    return run


def run_submit(args: argparse.Namespace) -> int:
    """``cluster submit``: one Slurm job per stage that is not up to date (``--wait``: until they end); the exit
    status."""
    from benchmark.cluster.submit import submit, wait

    try:
        run = submit(args.pipeline, force=args.force, dry_run=args.dry_run)
    except _errors() as e:
        return _fail(e)
    if run is None or not args.wait:
        return 0
    return wait(run)


def run_status(args: argparse.Namespace) -> int:
    """``cluster status``: each stage's state in a run (the newest by default)."""
    from benchmark.cluster.runs import format_status

    try:
        run = _run_of(args)
        print(format_status(run, run.status()))
    except _errors() as e:
        return _fail(e)
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    """``cluster cancel``: cancel a run's jobs that are still in Slurm's queue."""
    from benchmark.cluster import slurm

    try:
        run = _run_of(args)
        active = run.active()
        slurm.cancel(active)
    except _errors() as e:
        return _fail(e)
    print(
        f"run {run.folder.name}: cancelled {len(active)} job(s) still queued or running"
        if active
        else f"run {run.folder.name}: no job left to cancel"
    )
    return 0


def run_collect(args: argparse.Namespace) -> int:
    """``cluster collect``: the run's final job by hand, once none of its jobs is queued; 0 when the run is complete."""
    from benchmark.cluster.job import collect

    try:
        run = _run_of(args)
        if run.active():
            raise ValueError(f"run {run.folder.name} still has jobs in Slurm's queue: `cluster status` shows them")
        return collect(run)
    except _errors() as e:
        return _fail(e)


def run_local_check(args: argparse.Namespace) -> int:
    """``cluster local-check``: the pipeline from scratch through a one-node Slurm against a serial ``dvc repro``; 0
    when the locks agree."""
    from benchmark.cluster.check import local_check

    try:
        result = local_check(args.pipeline, jobs=args.jobs, workdir=args.workdir, keep=args.keep)
    except _errors() as e:
        return _fail(e)
    print(result.report())
    return 0 if result.ok else 1


def add_run_command(subparsers) -> None:
    """Register ``run`` (the local parallel run of a pipeline) in the command line's ``subparsers``."""
    p = subparsers.add_parser(
        "run",
        help="run the pipeline here, several independent stages at a time (the same dvc.lock as dvc repro)",
        description="Run the stages of PIPELINE that DVC calls changed, and every stage downstream of one, on this "
        "machine with --jobs stages at a time along the DAG (the cluster runner with a local executor: "
        "benchmark/cluster/parallel.py). Each stage runs as dvc repro runs it, with its params' thread "
        "count, and is recorded in dvc.lock and the DVC cache as dvc repro records it: the same bytes. "
        "Logs and records: .dvc/tmp/cluster/<run>/. Exit 1 when a stage failed (nothing downstream of "
        "it ran), 130 on Ctrl-C (the running stages' outputs are removed).",
    )
    p.add_argument("pipeline", nargs="?", default="dvc.yaml", help=PIPELINE_HELP)
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=2,
        help="stages at a time (default 2: on 2 cores the single-threaded parts of two stages overlap)",
    )
    p.add_argument("-f", "--force", action="store_true", help="run every stage, as dvc repro -f (no run cache)")
    p.add_argument(
        "--cold",
        action="store_true",
        help="start every job and stage in a fresh interpreter (default: forks of one warm python that imported "
        "torch, timm, pandas and DVC once; the same outputs: benchmark/warm)",
    )
    p.set_defaults(handler=run_run)


def run_run(args: argparse.Namespace) -> int:
    """``run``: the pipeline's stages that are not up to date, ``--jobs`` at a time here; 0 when it completes."""
    from benchmark.cluster.parallel import run_local

    try:
        return run_local(args.pipeline, jobs=args.jobs, force=args.force, cold=args.cold)
    except _errors() as e:
        return _fail(e)
    except KeyboardInterrupt:
        print(
            "interrupted: the running stages were stopped and their outputs removed; run again to go on",
            file=sys.stderr,
        )
        return 130
