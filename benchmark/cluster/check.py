"""``cluster local-check``: a pipeline run from scratch through Slurm gives the serial run's ``dvc.lock``.

In a scratch copy of this checkout (every file git tracks or would track; no
output and no DVC cache, so every stage runs) on a one-node cluster started here
(:class:`benchmark.cluster.local.LocalCluster`), ``cluster submit`` runs the
pipeline with ``jobs`` stage jobs at once (params ``cluster.resources.default.cpus``
of the copy set to the node's CPUs / ``jobs``: not a stage parameter, so no output
depends on it). The copy's ``dvc.lock`` is then compared with this checkout's,
from a serial ``dvc repro`` on this machine: the same stages in the same order,
every stage output with the same md5 except those that embed a measured time
(:data:`benchmark.dvcutil.lockfile.MEASURED`), ``dvc status`` clean, and at
least two jobs having run at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

from ruamel.yaml import YAML

from benchmark.cluster.local import LocalCluster
from benchmark.cluster.pipeline import PipelineError, locate
from benchmark.cluster.runs import Run
from benchmark.cluster.submit import submit, wait
from benchmark.dvcutil import lockfile
from benchmark.dvcutil.scratch import copy_checkout
from benchmark.storage.atomic import write_text


@dataclass
class Result:
    pipeline: str
    jobs: int
    wall_s: float = 0.0  # from `cluster submit` to the end of the run's last job
    stage_wall_s: dict = field(default_factory=dict)  # stage -> seconds its job spent on it (record to record)
    max_concurrent: int = 0  # the most stage jobs that ran at the same time
    outputs: dict = field(default_factory=dict)  # lockfile.summarize of the comparison
    problems: list = field(default_factory=list)
    workdir: Path | None = None

    @property
    def ok(self) -> bool:
        """Whether the check found no problem."""
        return not self.problems

    def report(self) -> str:
        """The check as the lines ``cluster local-check`` prints: time, concurrency, the stage outputs against the
        serial run, problems."""
        o = self.outputs
        lines = [
            f"{self.pipeline} from scratch through Slurm ({self.jobs} jobs at once on a one-node cluster): "
            f"{self.wall_s:.0f} s, at most {self.max_concurrent} stage jobs at once",
            f"  stage outputs against this checkout's dvc.lock: {o.get('identical', 0)} identical, "
            f"{o.get('different', 0)} different, {o.get('measured', 0)} measured (not compared), "
            f"{o.get('missing', 0)} missing, {o.get('extra', 0)} extra",
        ]
        lines += [f"  problem: {p}" for p in self.problems] or ["  the same stage outputs as the serial run"]
        if self.workdir:
            lines.append(f"  scratch copy kept: {self.workdir}")
        return "\n".join(lines)


@contextlib.contextmanager
def environment(values: dict):
    """``os.environ`` with ``values`` set (None: removed) inside the block (Slurm's clients and jobs read it)."""
    old = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def set_cpus(params_file: Path, cpus: int) -> None:
    """params ``cluster.resources.default.cpus = cpus`` in ``params_file``, the rest of the file as it was."""
    rt = YAML()
    data = rt.load(params_file.read_text(encoding="utf-8"))
    cluster = data.setdefault("cluster", {}) or {}
    data["cluster"] = cluster
    resources = cluster.setdefault("resources", {}) or {}
    cluster["resources"] = resources
    default = resources.setdefault("default", {}) or {}
    resources["default"] = default
    default["cpus"] = cpus
    buf = StringIO()
    rt.dump(data, buf)
    write_text(params_file, buf.getvalue())


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals ``(start, end)`` that hold one moment in common."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda e: (e[0], e[1]))
    best = now = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def run_through_slurm(
    copy: Path, dvcfile: str, cluster: LocalCluster, *, extra_env: dict | None = None, log=print
) -> tuple[Run, float, int]:
    """Submit ``dvcfile`` in ``copy`` to ``cluster`` and wait: (the run, its wall seconds, the wait's exit code)."""
    with environment({**cluster.env(), **(extra_env or {})}):
        t0 = time.perf_counter()
        run = submit(copy / dvcfile, log=log)
        if run is None:
            raise PipelineError(f"{dvcfile}: nothing to run in the scratch copy")
        rc = wait(run, poll=1.0, log=log)
        return run, time.perf_counter() - t0, rc


def job_env(jobs: int, extra_env: dict | None, environ) -> dict:
    """The environment the check adds for its jobs: ``extra_env``, and with several jobs on this machine's cores
    ``OMP_WAIT_POLICY=PASSIVE`` unless ``environ`` sets it (OpenMP threads sleep instead of spinning when they wait,
    as in the local parallel run: how threads wait changes no result, and two jobs' spinning threads on the same
    cores made the check 2-3x slower)."""
    passive = {"OMP_WAIT_POLICY": "PASSIVE"} if jobs > 1 and "OMP_WAIT_POLICY" not in environ else {}
    return {**passive, **(extra_env or {})}


def local_check(
    pipeline="dvc.yaml",
    *,
    jobs: int = 2,
    workdir=None,
    keep: bool = False,
    extra_env: dict | None = None,
    serial_lock=None,
    log=print,
) -> Result:
    """Run the check of the module docstring for the pipeline file ``pipeline`` of this checkout (``serial_lock``: the
    serial run's lock to compare with, default the checkout's; ``extra_env``: more environment for the jobs)."""
    root, dvcfile = locate(pipeline)
    serial_lock = Path(serial_lock) if serial_lock else root / Path(dvcfile).parent / "dvc.lock"
    if not serial_lock.is_file():
        raise PipelineError(f"{serial_lock}: not found; run the pipeline serially first (dvc repro), to compare with")
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    base = Path(workdir) if workdir else root / ".dvc" / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cluster-check-", dir=base))
    result = Result(pipeline=dvcfile, jobs=jobs, workdir=work)
    cluster = LocalCluster(work / "slurm")
    try:
        copy = work / "repo"
        copy_checkout(root, dvcfile, copy)
        set_cpus(copy / Path(dvcfile).parent / "params.yaml", max(1, cluster.cpus // jobs))
        cluster.start()
        env = job_env(jobs, extra_env, os.environ)
        run, result.wall_s, rc = run_through_slurm(copy, dvcfile, cluster, extra_env=env, log=log)
        records = {s["name"]: run.state(s["name"]) or {} for s in run.stages}
        spans = {n: (r["started"], r["ended"]) for n, r in records.items() if "started" in r and "ended" in r}
        result.stage_wall_s = {n: round(b - a, 1) for n, (a, b) in spans.items()}
        result.max_concurrent = max_overlap(list(spans.values()))
        if rc != 0:
            result.problems.append(f"the run did not complete: {run.folder / 'logs' / 'collect.out'}")
        fresh_lock = copy / Path(dvcfile).parent / "dvc.lock"
        serial, fresh = lockfile.read(serial_lock), lockfile.read(fresh_lock) if fresh_lock.is_file() else {}
        report = lockfile.compare_outputs(serial, fresh)
        result.outputs = lockfile.summarize(report)
        if result.outputs["failing_stages"]:
            result.problems.append(
                f"stage outputs differ from the serial run's: {', '.join(result.outputs['failing_stages'])}"
            )
        if list(serial) != list(fresh):
            result.problems.append("dvc.lock lists the stages in another order than the serial run's")
        if jobs >= 2 and result.max_concurrent < 2:
            result.problems.append(f"at most {result.max_concurrent} stage job ran at once (asked for {jobs})")
        return result
    finally:
        cluster.stop()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
            result.workdir = None
