"""A cluster run's folder: what was submitted, what each job reported, and the status of each stage.

``<repository>/.dvc/tmp/cluster/<run>/`` (DVC's scratch folder, never committed; inside the repository, on the
file system the jobs share)::

    run.json            the pipeline, the stages in run order, each one's job id, upstream stages and options
    job.sh              the batch script of every job (``exec "$@"``: the job's command comes as arguments)
    logs/<nn-stage>.out a stage job's output (the stage command's too); logs/collect.out the final job's
    state/<nn-stage>.json what the job reported: running, skipped, done, failed, stale or cancelled
    summary.json        what the final job (``collect``) found

Files are written atomically (:mod:`benchmark.storage.atomic`): a reader sees a whole record or the previous one.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from benchmark.cluster import slurm
from benchmark.cluster.pipeline import RUNS
from benchmark.storage.atomic import write_text

# (JSON through benchmark.storage.atomic, not benchmark.storage.store: a job starts without importing torch)
FINAL = ("skipped", "done", "failed", "stale", "cancelled")  # what a job reports when it ends


def write_json(path, obj) -> None:
    """Write ``obj`` as indented JSON with sorted keys, atomically."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def safe_name(index: int, stage: str) -> str:
    """A file name for the ``index``-th stage of a run: ``03-train@lite1`` (characters outside ``[A-Za-z0-9._@-]``
    become ``_``; the index keeps names unique)."""
    return f"{index:02d}-" + re.sub(r"[^A-Za-z0-9._@-]", "_", stage)


class Run:
    """One submitted cluster run (its folder and ``run.json``)."""

    def __init__(self, folder: Path, manifest: dict):
        self.folder = Path(folder)
        self.manifest = manifest

    # -- creating and finding runs ------------------------------------------------------------------------------
    @classmethod
    def create(cls, root: Path, manifest: dict) -> Run:
        """A new run folder under ``root/.dvc/tmp/cluster`` named by the UTC time (unique: a suffix if taken)."""
        base = Path(root) / RUNS
        base.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        for n in range(1000):
            folder = base / (stamp if n == 0 else f"{stamp}-{n}")
            try:
                folder.mkdir()
                break
            except FileExistsError:
                continue
        (folder / "logs").mkdir()
        (folder / "state").mkdir()
        run = cls(folder, dict(manifest, id=folder.name))
        run.save()
        return run

    @classmethod
    def open(cls, folder) -> Run:
        """The run recorded in ``folder`` (its ``run.json``); ``ValueError`` when there is none."""
        folder = Path(folder)
        try:
            manifest = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"{folder}: not a cluster run ({e})") from None
        return cls(folder, manifest)

    @classmethod
    def latest(cls, root: Path, dvcfile: str) -> Run | None:
        """The newest run of pipeline ``dvcfile`` (relative to ``root``), or None."""
        base = Path(root) / RUNS
        if not base.is_dir():
            return None
        for folder in sorted(
            (p for p in base.iterdir() if (p / "run.json").is_file()), key=lambda p: p.name, reverse=True
        ):
            run = cls.open(folder)
            if run.manifest.get("pipeline") == dvcfile:
                return run
        return None

    def save(self) -> None:
        """Write the run's manifest back to ``run.json``, atomically."""
        write_json(self.folder / "run.json", self.manifest)

    # -- what the manifest says ---------------------------------------------------------------------------------
    @property
    def root(self) -> Path:
        """The repository the run's pipeline belongs to."""
        return Path(self.manifest["root"])

    @property
    def lockfile(self) -> Path:
        """The pipeline's dvc.lock."""
        return self.root / Path(self.manifest["pipeline"]).parent / "dvc.lock"

    @property
    def stages(self) -> list[dict]:
        """The run's stages, in the order they were submitted: name, job, log file, nodes."""
        return self.manifest["stages"]

    def stage(self, name: str) -> dict:
        """The submitted stage ``name``; ``ValueError`` when the run has none of that name."""
        for s in self.stages:
            if s["name"] == name:
                return s
        raise ValueError(f"run {self.folder.name}: no stage {name!r}")

    def jobs(self) -> list[str]:
        """Every job id of the run (stages, then the final job)."""
        return [s["job"] for s in self.stages if s.get("job")] + (
            [self.manifest["collect_job"]] if self.manifest.get("collect_job") else []
        )

    def log(self, name: str) -> Path:
        """The log file of stage ``name``'s job."""
        return self.folder / "logs" / f"{self.stage(name)['file']}.out"

    # -- what the jobs report -----------------------------------------------------------------------------------
    def _state_path(self, name: str) -> Path:
        return self.folder / "state" / f"{self.stage(name)['file']}.json"

    def state(self, name: str) -> dict | None:
        """What stage ``name``'s job last reported (its state file), None before it started or when unreadable."""
        path = self._state_path(name)
        try:
            return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (OSError, ValueError):
            return None

    def report(self, name: str, status: str, **fields) -> None:
        """Record ``status`` (and ``fields``) of stage ``name``, keeping what was recorded before."""
        rec = dict(self.state(name) or {}, **fields, status=status, time=time.time())
        write_json(self._state_path(name), rec)

    def summary(self) -> dict | None:
        """The final job's ``summary.json``, None before it ran."""
        path = self.folder / "summary.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    # -- status -------------------------------------------------------------------------------------------------
    def status(self) -> list[dict]:
        """One row per stage (run order): ``stage``, ``job``, ``state`` and ``detail``: what the stage's job
        reported when it ended, else what Slurm says of the job (a job killed outright, by a lost node or a
        memory limit, reports nothing). A failed, stale or stopped stage's detail ends with the path of its log."""
        queued = slurm.queue(self.jobs())
        rows = []
        for s in self.stages:
            name, job = s["name"], s.get("job")
            rec = self.state(name) or {}
            state, detail = rec.get("status"), rec.get("message", "")
            if state not in FINAL:
                state, detail = self._from_slurm(name, rec, queued.get(job) or (slurm.job_state(job) if job else None))
            if state in ("failed", "stale") or (state == "cancelled" and rec):
                detail = f"{detail}; log {self.log(name)}" if detail else f"log {self.log(name)}"
            rows.append({"stage": name, "job": job, "state": state, "detail": detail})
        return rows

    def _from_slurm(self, name: str, rec: dict, slurm_says: tuple[str, str] | None) -> tuple[str, str]:
        """(state, detail) of a stage whose job has not reported an end, from Slurm's (state, reason) of the job."""
        started = rec.get("status") == "running"
        if slurm_says is None:  # the controller no longer knows the job: it has ended
            return (
                ("failed", "the job ended without a record (killed: a lost node, a memory limit?)")
                if started
                else ("cancelled", self._blame(name) or "the job ended before it started")
            )
        state, reason = slurm_says
        if state not in slurm.ENDED:
            return state.lower(), "" if reason in ("None", "") else reason
        if not started and (reason == "DependencyNeverSatisfied" or state == "CANCELLED"):
            return "cancelled", self._blame(name) or "cancelled before it started"
        return "failed", f"Slurm: {state}" + ("" if reason in ("None", "") else f" ({reason})")

    def _blame(self, name: str) -> str:
        """Which upstream stage's failure cancelled ``name`` (the first failed or stale ancestor)."""
        seen, todo = set(), list(self.stage(name).get("upstream", []))
        while todo:
            up = todo.pop(0)
            if up in seen:
                continue
            seen.add(up)
            rec = self.state(up) or {}
            if rec.get("status") in ("failed", "stale", "cancelled"):
                return f"upstream stage {up} {rec['status']}"
            todo += self.stage(up).get("upstream", [])
        return ""

    def active(self) -> list[str]:
        """The run's jobs that Slurm still lists as pending or running."""
        return [j for j, (state, _) in slurm.queue(self.jobs()).items() if state not in slurm.ENDED]


def format_status(run: Run, rows: list[dict]) -> str:
    """The rows as a table under one line naming the run."""
    width = max([len(r["stage"]) for r in rows] + [5])
    lines = [f"run {run.folder.name} of {run.manifest['pipeline']} ({run.folder})"]
    lines += [f"  {r['stage']:<{width}}  {r['job'] or '-':>8}  {r['state']:<10}  {r['detail']}".rstrip() for r in rows]
    return "\n".join(lines)
