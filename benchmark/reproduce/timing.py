"""Where the time of ``dvc repro`` goes: one record per stage process, tabulated.

Every process that imports :mod:`benchmark` appends its wall time (imports
included), user/system CPU time, peak RSS and minor page faults to the file named
by ``UQ_TIMINGS`` (:mod:`benchmark.config.runtime`). :func:`run_repro` runs ``dvc
repro`` with it set and writes ``results/timings.json``; the README's timing
table is rendered from that file (:mod:`benchmark.docsgen.readme`). DVC's own
work (hashing, locking, starting processes) is the total minus the stages: per stage, the gap before it in a serial
run, and the CPU seconds of its job in a run two stages at a time (its line in the same file: :func:`job_cpu`).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from benchmark.config import numerics
from benchmark.dvcutil import lockfile
from benchmark.storage import store

_SCRIPT = re.compile(r"pipelines/(\w+)\.py$")
_ITEM_FLAGS = ("--model", "--key")


def stage_name(argv: list[str]) -> str:
    """The stage a process without DVC's stage name (:func:`read_records`) ran, from its command line:
    ``['pipelines/train.py', '--model', 'lite1']`` -> ``'train@lite1'``; ``'data'`` for an item-less stage; a method's
    stage (``pipelines/method.py --kind soups --key k``) by its kind (``soups@k``); SVE's training
    (``pipelines/sve.py --train``) as ``sve-train``, its outputs (``pipelines/sve.py --members 1 2 4``) as ``sve``."""
    script = next((a for a in argv if _SCRIPT.search(a.replace(os.sep, "/"))), None)
    if script is None:
        return " ".join(Path(a).name for a in argv[:2])
    match = _SCRIPT.search(script.replace(os.sep, "/"))
    name = match.group(1) if match else script
    if name == "method" and "--kind" in argv and argv.index("--kind") + 1 < len(argv):
        name = argv[argv.index("--kind") + 1]
    for flag in _ITEM_FLAGS:
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return f"{name}@{argv[argv.index(flag) + 1]}"
    return f"{name}-train" if name == "sve" and "--train" in argv else name


COLUMNS = [
    "stage",
    "wall_s",
    "user_s",
    "sys_s",
    "max_rss_mb",
    "minor_faults",
    "start",
    "end",
    "startup_wall_s",
    "startup_cpu_s",
    "imports",
    "live_children_cpu_s",
    "warm",
]
# start, end: epoch seconds; startup_*: before the stage's own work (runtime.mark_work); imports: the heavy packages it
# imported (runtime.HEAVY); live_children_cpu_s: its children still running at its end (in its CPU, no parent waits);
# warm: a fork of the warm python's server (benchmark.warm), its record from the fork on (imports: None, not known)


def warm_decisions(path) -> list[dict]:
    """What a run's warm ``python`` servers decided for each command line handed to them (``UQBENCH_WARM_LOG``,
    :mod:`benchmark.warm`: argv, folder, ``warm``, ``why`` not, ``sent`` to a server of another environment); empty
    without the file."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def served_warm(decisions: list[dict]) -> set[tuple[tuple[str, ...], str]]:
    """(argv, folder) of the command lines a warm server forked (:func:`warm_decisions`)."""
    return {(tuple(d["argv"]), d["cwd"]) for d in decisions if d.get("warm")}


def warm_summary(decisions: list[dict]) -> dict:
    """How many command lines a run's warm servers forked, ran cold (each with its reason) and sent to a server of
    another environment (that server then started: a refusal's reason names the variable that differed)."""
    cold = [d for d in decisions if not d.get("warm") and not d.get("sent")]
    return {
        "forked": sum(1 for d in decisions if d.get("warm")),
        "cold": len(cold),
        "sent_elsewhere": sum(1 for d in decisions if d.get("sent")),
        "why_cold": sorted({str(d.get("why")) for d in cold}),
    }


def read_records(path, *, stages_only: bool = False, warm: set | None = None) -> pd.DataFrame:
    """The records a run left in ``path`` (one JSON object a line), with a ``stage`` column (:data:`COLUMNS`; a
    record written before a field existed has NaN there): the DVC stage that started the process (``DVC_STAGE``,
    recorded by :mod:`benchmark.config.runtime`), else :func:`stage_name` of its command line; ``stages_only``: those of
    stage scripts (``pipelines/``), not of another process that imported the package (``python -m benchmark run``);
    ``warm``: the command lines a warm server forked (:func:`served_warm`), their records marked so."""
    rows = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not a JSON line ({e})") from None
        if "dvc_job" in r:  # a stage's job's own CPU (job_cpu), not a process record
            continue
        r["stage"] = r.get("dvc_stage") or stage_name(r.get("argv", []))  # DVC's own name for the stages it runs
        if stages_only and not any(_SCRIPT.search(str(a).replace(os.sep, "/")) for a in r.get("argv", [])):
            continue
        r["warm"] = (tuple(r.get("argv", [])), r.get("cwd")) in (warm or set())
        if r["warm"]:
            r["imports"] = None  # (what the server had imported, not what the stage needed)
        rows.append(r)
    return pd.DataFrame(rows, columns=COLUMNS + ["argv", "cwd"])[COLUMNS] if rows else read_records_empty()


def by_kind(stages: pd.DataFrame) -> pd.DataFrame:
    """Stages grouped by kind (``train@lite1`` -> ``train``): count and sums (peak RSS: max; start-up, DVC's seconds
    before the stage and its job's CPU: NaN where the records lack them), largest wall time first."""
    df = stages.assign(kind=stages["stage"].str.split("@").str[0])
    for col in ("startup_wall_s", "startup_cpu_s", "dvc_before_s", "dvc_job_cpu_s", "imports", "warm"):
        if col not in df:
            df[col] = float("nan")
    g = df.groupby("kind").agg(
        stages=("stage", "size"),
        wall_s=("wall_s", "sum"),
        user_s=("user_s", "sum"),
        sys_s=("sys_s", "sum"),
        max_rss_mb=("max_rss_mb", "max"),
        minor_faults=("minor_faults", "sum"),
        startup_wall_s=("startup_wall_s", lambda x: x.sum(min_count=1)),
        startup_cpu_s=("startup_cpu_s", lambda x: x.sum(min_count=1)),
        dvc_before_s=("dvc_before_s", lambda x: x.sum(min_count=1)),
        dvc_job_cpu_s=("dvc_job_cpu_s", lambda x: x.sum(min_count=1)),
        imports=("imports", lambda x: sorted({m for v in x if isinstance(v, list) for m in v})),
        warm=("warm", lambda x: sum(v is True or v == 1 for v in x)),
    )
    return g.sort_values("wall_s", ascending=False).reset_index()


def machine() -> dict:
    """This machine as a timing record names it: CPUs, the CPU's name and kind (vendor, family, model), Python, torch
    and the numerics the stages run with."""
    cpu = numerics.cpu()
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu["cpu"],
        "cpu_kind": cpu["kind"],
        "python": platform.python_version(),
        "torch": torch.__version__,
        **numerics.state(),
    }


def cores() -> int:
    """The CPUs this process may run on (its affinity), what the stages' compute floor divides by."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class LoadSampler:
    """The machine's 1-minute load average sampled every ``every`` seconds while a run goes (a shared machine's
    timings are read with it): ``summary()`` gives its mean and maximum and the run's CPUs."""

    def __init__(self, every: float = 5.0):
        import threading

        self.every, self.samples, self._stop = every, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        """The samples' mean and maximum (NaN-free), their count and the machine's CPUs."""
        s = [x for x in self.samples if x == x] or [float("nan")]
        return {
            "mean": round(sum(s) / len(s), 2),
            "max": round(max(s), 2),
            "samples": len(self.samples),
            "cpus": os.cpu_count(),
        }


def summarize(stages: pd.DataFrame, wall: float, *, jobs: int = 1, cpu_total: float | None = None) -> dict:
    """The figures of a run of ``wall`` seconds from its stage records: the stages'
    CPU seconds and start-up (interpreter, imports, params), the compute floor ``(CPU - start-up) / cores`` and the
    run's wall time as a multiple of it (the figure to lower), DVC's own seconds (the wall time outside the stage
    processes; for a serial run also per stage: the gap before it) and, given ``cpu_total`` (every process of the
    run, DVC's included), DVC's CPU seconds."""
    cpu = float((stages["user_s"] + stages["sys_s"]).sum())
    startup_cpu = float(stages["startup_cpu_s"].fillna(0).sum())
    n = cores()
    floor = (cpu - startup_cpu) / n
    out = {
        "repro_wall_s": round(wall, 1),
        "stages_wall_s": round(float(stages["wall_s"].sum()), 1),
        "dvc_overhead_s": round(wall - float(stages["wall_s"].sum()), 1) if jobs == 1 else None,
        "cpu_s": round(cpu, 1),
        "startup_cpu_s": round(startup_cpu, 1),
        "startup_wall_s": round(float(stages["startup_wall_s"].fillna(0).sum()), 1),
        "cores": n,
        "jobs": jobs,
        "compute_floor_s": round(floor, 1),
        "floor_ratio": round(wall / floor, 3) if floor > 0 else None,
    }
    if cpu_total is not None:  # the stages' CPU that reached the run's own count (not that of orphaned children)
        live = stages["live_children_cpu_s"].fillna(0).sum() if "live_children_cpu_s" in stages else 0.0
        waited = cpu - float(live)
        out["dvc_cpu_s"] = round(cpu_total - waited, 1)
    return out


def dvc_gaps(stages: pd.DataFrame, start: float, end: float) -> tuple[list[float], float]:
    """A serial run's DVC seconds around each stage: the gap between the previous stage's end (the run's start for the
    first) and the stage's start, in the records' order by start; and the gap after the last stage to the run's end."""
    if stages.empty or stages["start"].isna().any():
        return [float("nan")] * len(stages), float("nan")
    order = stages.sort_values("start")
    gaps, prev = [], start
    for _, r in order.iterrows():
        gaps.append(round(float(r["start"]) - prev, 2))
        prev = float(r["end"])
    return [gaps[list(order.index).index(i)] for i in stages.index], round(end - prev, 2)


def job_cpu(path) -> dict[str, float]:
    """stage -> the CPU seconds its job reported in the record file ``path`` of a run two stages at a time
    (:func:`benchmark.cluster.job.note_cpu`: DVC's work for the stage; a stage DVC skipped as up to date included)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line) if line.strip().startswith("{") else {}
        if "dvc_job" in r and isinstance(r.get("job_cpu_s"), (int, float)):
            out[r["dvc_job"]] = float(r["job_cpu_s"])
    return out


def _dvc_per_stage(stages: pd.DataFrame, per_job: dict | None, start: float, end: float) -> tuple[pd.DataFrame, dict]:
    """DVC's seconds per stage of a run from ``start`` to ``end``: a serial run's gaps (:func:`dvc_gaps`, and the one
    after its last stage), else ``per_job``, the CPU of each stage's job (:func:`job_cpu`), and their sum."""
    if per_job is None:
        gaps, last = dvc_gaps(stages, start, end)
        return stages.assign(dvc_before_s=gaps), {"dvc_after_last_s": last}
    if not per_job:
        return stages, {}
    return stages.assign(dvc_job_cpu_s=stages["stage"].map(per_job)), {
        "dvc_jobs_cpu_s": round(sum(per_job.values()), 1)
    }


def run_repro(
    out,
    *,
    force: bool = False,
    dvc_args=(),
    install_s: float | None = None,
    cwd=".",
    jobs: int = 1,
    python: str | None = None,
) -> dict:
    """Run ``dvc repro`` (``-f`` when ``force``; with ``jobs`` > 1 the local parallel run of the same DAG,
    ``python -m benchmark run --jobs``: :mod:`benchmark.cluster.parallel`) with timing records on; write ``out`` (JSON)
    and return it. ``python``: the interpreter of the environment to run (its folder first on ``PATH``, for the stages'
    ``python``; default this one); ``cwd``'s own ``benchmark`` package first on ``PYTHONPATH``. The entries of stages no
    longer in ``dvc.yaml`` are dropped from ``dvc.lock`` first (:func:`lockfile.prune`)."""
    import resource

    stages = lockfile.current_stages(cwd)
    if stages and (Path(cwd) / "dvc.lock").is_file():
        gone = lockfile.prune(Path(cwd) / "dvc.lock", stages)
        if gone:
            print(
                f"dvc.lock: dropped {len(gone)} entries of stages no longer in dvc.yaml ({', '.join(gone)})", flush=True
            )
    with tempfile.TemporaryDirectory() as tmp:
        log, decisions = Path(tmp) / "timings.jsonl", Path(tmp) / "warm.jsonl"
        python = str(python or sys.executable)
        env = dict(os.environ, UQ_TIMINGS=str(log), UQBENCH_WARM_LOG=str(decisions))  # benchmark.warm.LOG
        env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
        # the package of the checkout that runs, whichever environment runs it (a copy's own code, not the install's)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(cwd).resolve()), *filter(None, [env.get("PYTHONPATH")])])
        env.pop("UQ_TIMINGS_PID", None)
        if jobs > 1:
            cmd = [python, "-m", "benchmark", "run", "--jobs", str(jobs), *(["--force"] if force else []), *dvc_args]
        else:
            cmd = [python, "-m", "dvc", "repro", *(["-f"] if force else []), *dvc_args]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with LoadSampler() as load:
            t0 = time.time()
            proc = subprocess.run(cmd, cwd=cwd, env=env)
            t1 = time.time()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd[2:])}` failed with exit code {proc.returncode}; no timings written")
        decided = warm_decisions(decisions)
        stages = (
            read_records(log, stages_only=True, warm=served_warm(decided)) if log.exists() else read_records_empty()
        )
        per_job = None if jobs == 1 else job_cpu(log) if log.exists() else {}
    total_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    stages, dvc = _dvc_per_stage(stages, per_job, t0, t1)
    record = {
        "command": " ".join(["dvc" if jobs == 1 else "python -m benchmark", *cmd[3:]]),
        "install_s": None if install_s is None else round(install_s, 1),
        **summarize(stages, t1 - t0, jobs=jobs, cpu_total=total_cpu),
        **dvc,
        **({"warm": warm_summary(decided)} if decided else {}),
        "load": load.summary(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": machine(),
        "stages": json.loads(stages.drop(columns=["start", "end"]).to_json(orient="records")),
    }
    store.write_json(out, record)
    return record


COMPARED = ("command", "jobs", "repro_wall_s", "cpu_s", "startup_cpu_s", "compute_floor_s", "floor_ratio", "load")


def compare_run(record: dict, first, second, *, jobs: int, python: str | None = None) -> dict:
    """The same DAG run again ``jobs`` stages at a time (1: ``dvc repro``) in ``second``, a clean copy of the checkout
    ``first`` (its files, no output, no DVC cache) after :func:`run_repro` ran there: its figures (:data:`COMPARED`) and
    how its stage outputs compare with the first run's lock, added to ``record`` under ``serial`` (jobs 1) or
    ``parallel``; ValueError when an output that embeds no measured time differs or the locks' orders differ."""
    from benchmark.dvcutil.scratch import copy_checkout

    first, second = Path(first), Path(second)
    copy_checkout(first, "dvc.yaml", second)
    with tempfile.TemporaryDirectory() as tmp:
        other = run_repro(Path(tmp) / "other.json", cwd=second, python=python, jobs=jobs)
    locks = lockfile.read(first / "dvc.lock"), lockfile.read(second / "dvc.lock")
    outputs = lockfile.summarize(lockfile.compare_outputs(*locks))
    if outputs["failing_stages"] or not outputs["identical"]:
        raise ValueError(f"`{other['command']}` gave other stage outputs than `{record['command']}`: {outputs}")
    if list(locks[0]) != list(locks[1]):
        raise ValueError("the two runs left dvc.lock's entries in another order")
    record["serial" if jobs == 1 else "parallel"] = {k: other[k] for k in COMPARED} | {"outputs": outputs}
    return record


def read_records_empty() -> pd.DataFrame:
    """An empty table of stage records (the columns of :func:`read_records`)."""
    return pd.DataFrame(columns=COLUMNS)


def load(path) -> dict:
    """A timings file written by :func:`run_repro`."""
    d = store.read_json(path)
    if not isinstance(d, dict) or not isinstance(d.get("stages"), list) or "repro_wall_s" not in d:
        raise ValueError(f"{path}: not a timings file (needs 'repro_wall_s' and a 'stages' list)")
    return d


def stages_frame(record: dict) -> pd.DataFrame:
    """The stage records of a timings file, with DVC's seconds before each stage (a serial run) or its job's CPU
    seconds (a run two stages at a time) where the run recorded them."""
    cols = [c for c in COLUMNS if c not in ("start", "end")] + ["dvc_before_s", "dvc_job_cpu_s"]
    return pd.DataFrame(record["stages"], columns=cols)
