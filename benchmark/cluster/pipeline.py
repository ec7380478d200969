"""The DVC side of a cluster run: which stages of one ``dvc.yaml`` to run, in what order, after which others.

Read with DVC's own API (its index, graph, ``Stage.changed`` and the order
``dvc repro`` plans, :func:`dvc.repo.reproduce.plan_repro`), so a cluster run
decides as a serial ``dvc repro`` of the same file does: a stage runs when DVC
calls it changed, and every stage downstream of one that runs gets a job too,
which at its start checks again and skips when its inputs turned out unchanged
(as ``dvc repro`` does when it reaches it).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

RUNS = Path(".dvc") / "tmp" / "cluster"  # a repository's cluster runs (benchmark.cluster.runs) and their lock


class PipelineError(ValueError):
    """The pipeline file cannot be run on a cluster (missing, not in a DVC repository, a frozen stage...)."""


@dataclass(frozen=True)
class Pipeline:
    """One ``dvc.yaml`` of a DVC repository: its stages in ``dvc repro``'s order and their upstream stages."""

    root: Path  # the DVC repository's root (absolute)
    dvcfile: str  # the pipeline file, relative to root (posix): dvc.yaml, suites/<name>/dvc.yaml
    order: tuple[str, ...]  # every stage (dvc.lock name: train@lite1) in the order a serial dvc repro runs them
    upstream: dict[str, tuple[str, ...]]  # stage -> the stages of this file whose outputs it depends on

    @property
    def folder(self) -> Path:
        """The folder of the pipeline's ``dvc.yaml`` (the root, or ``suites/<name>``)."""
        return self.root / Path(self.dvcfile).parent

    @property
    def lockfile(self) -> Path:
        """The pipeline's ``dvc.lock``."""
        return self.folder / "dvc.lock"

    @property
    def params_file(self) -> Path:
        """The pipeline's ``params.yaml``."""
        return self.folder / "params.yaml"

    def target(self, stage: str) -> str:
        """DVC's address of ``stage`` (``suites/caltech256/dvc.yaml:train@res``)."""
        return f"{self.dvcfile}:{stage}"

    def downstream(self, stages) -> list[str]:
        """``stages`` and every stage that depends on one of them, directly or not, in run order."""
        chosen = set(stages)
        for name in self.order:  # upstream stages come first in run order
            if any(u in chosen for u in self.upstream[name]):
                chosen.add(name)
        return [s for s in self.order if s in chosen]


@contextlib.contextmanager
def locked_repo(root: Path):
    """A DVC ``Repo`` of ``root`` holding the run lock (one job of any cluster run in this repository at a time) and
    DVC's repository lock (waited for while another dvc command holds it)."""
    from dvc.lock import LockError
    from dvc.repo import Repo
    from filelock import FileLock

    (Path(root) / RUNS).mkdir(parents=True, exist_ok=True)
    with FileLock(str(Path(root) / RUNS / "guard.lock")):
        for attempt in range(150):
            repo = Repo(str(root))
            try:
                repo.lock.lock()
                break
            except LockError:
                repo.close()
                if attempt == 149:
                    raise
                time.sleep(2)
        try:
            yield repo
        finally:
            repo.lock.unlock()
            repo.close()


def locate(path) -> tuple[Path, str]:
    """(repository root, pipeline file relative to it) of the ``dvc.yaml`` at ``path``; ``PipelineError`` else."""
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo

    p = Path(path)
    if p.is_dir():
        p = p / "dvc.yaml"
    if p.name != "dvc.yaml" or not p.is_file():
        raise PipelineError(f"{path}: not a pipeline file (a dvc.yaml: the root one or suites/<name>/dvc.yaml)")
    p = p.resolve()
    try:
        root = Path(Repo.find_root(str(p.parent)))
    except NotDvcRepoError:
        raise PipelineError(f"{path}: not inside a DVC repository (dvc init)") from None
    return root, p.relative_to(root).as_posix()


def stages_of(repo, dvcfile: str) -> list:
    """The stages of pipeline file ``dvcfile`` (relative to the repository's root) in DVC's index."""
    path = (Path(repo.root_dir) / dvcfile).resolve()
    return [s for s in repo.index.stages if Path(s.dvcfile.path).resolve() == path]


def load(path, *, force: bool = False) -> tuple[Pipeline, list[str]]:
    """The pipeline of the ``dvc.yaml`` at ``path`` and the stages a cluster run gives a job, in run order: those
    DVC calls changed (every stage with ``force``) and all downstream of them. Holds DVC's repository lock while
    it reads (the stages' status hashes their dependencies, as ``dvc status`` does)."""
    from dvc.repo.reproduce import get_active_graph, plan_repro

    root, dvcfile = locate(path)
    with locked_repo(root) as repo:
        stages = stages_of(repo, dvcfile)
        if not stages:
            raise PipelineError(f"{dvcfile}: no stages")
        mine = set(stages)
        graph = get_active_graph(repo.index.graph)
        ordered = [s for s in plan_repro(graph, stages) if s in mine]
        frozen = [s.name for s in ordered if s.frozen]
        if frozen:
            raise PipelineError(
                f"{dvcfile}: frozen stages {frozen} (dvc unfreeze them, or run this file with dvc repro)"
            )
        upstream = {}
        for s in ordered:
            deps = set(graph.successors(s))  # DVC's graph: an edge from a stage to each stage it depends on
            upstream[s.name] = tuple(u.name for u in ordered if u in deps)
        pipe = Pipeline(root, dvcfile, tuple(s.name for s in ordered), upstream)
        changed = [s.name for s in ordered if force or s.changed()]
    return pipe, pipe.downstream(changed)
