"""Another x86 CPU kind, simulated: rerun DVC stages in a scratch copy under the switches that select kernels
and compare the outputs, byte for byte, with this checkout's ``dvc.lock``.

``python -m benchmark reproduce simulate [--stages STAGE ...]`` copies the
checkout (every file git tracks or would track, i.e. not ignored) into a scratch
folder, hard-links the upstream outputs the chosen stages read (``results/data``,
the checkpoints a ``logits@`` stage reads, ...: the deps of the chosen stages
that other stages of the lock produce), and runs ``dvc repro -s -f --no-commit``
of each stage there, in the given order, with:

* ``ATEN_CPU_CAPABILITY=avx2``, ``ONEDNN_MAX_CPU_ISA=AVX2``,
  ``MKL_ENABLE_INSTRUCTIONS=AVX2`` (:data:`OTHER_CPU`): ATen's, oneDNN's and
  MKL's kernels of an AVX2-only CPU;
* ``taskset`` to one visible core when the tool exists (the threads stay at
  params ``threads``: a reduction is split by threads, not by cores).

Validated (README "Reproducibility"): with these switches an AMD Zen 5 machine
with AVX-512 trained, at commit 01a9cfa without pinning, byte for byte the
``lcnet035`` and ``lite0-s0`` checkpoints of a real AMD EPYC without AVX-512; its
own kernels gave different bytes. So the simulated run is a second CPU kind on
demand: under pinning (:mod:`benchmark.config.numerics`) its outputs must equal
this checkout's, and with ``UQ_NUMERICS=native`` in both runs on an AVX-512 host
they differ (the negative control of tests/reproduce/test_simulate.py).

The outputs are compared by DVC's own md5s (the copy's ``dvc.lock`` against this
checkout's); outputs that embed a measured time or a run record
(:data:`benchmark.reproduce.lockfile.MEASURED`) are listed, not compared. A dep
whose md5 differs between the two locks means the checkout's outputs are not
those of its ``dvc.lock`` (rerun ``dvc repro`` first): exit 2, nothing compared.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pandas as pd

from benchmark.reproduce import lockfile

OTHER_CPU = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
CPUS = {"avx2": OTHER_CPU}


class SimulateError(ValueError):
    """The simulation cannot run or its comparison would mean nothing; the message names the file and the fix."""


@dataclass(frozen=True)
class Target:
    """A stage of a DVC file: ``dvcfile`` relative to the root (``dvc.yaml`` or ``suites/<s>/dvc.yaml``)."""

    dvcfile: str
    stage: str

    @classmethod
    def parse(cls, text: str) -> "Target":
        path, sep, stage = text.rpartition(":")
        return cls(path if sep else "dvc.yaml", stage)

    @property
    def folder(self) -> PurePosixPath:
        return PurePosixPath(self.dvcfile).parent

    @property
    def lock(self) -> str:
        return str(self.folder / "dvc.lock")

    def __str__(self) -> str:
        return self.stage if self.dvcfile == "dvc.yaml" else f"{self.dvcfile}:{self.stage}"


@dataclass
class Result:
    stages: list[tuple[str, float]] = field(default_factory=list)  # (target, wall seconds)
    outputs: pd.DataFrame | None = None  # stage, path, checkout, simulated, status, measured
    workdir: Path | None = None

    @property
    def identical(self) -> bool:
        return self.outputs is not None and not (self.outputs["status"] == "different").any()


def default_stages(root=".") -> list[str]:
    """``train@`` and ``logits@`` of the sidekick with the fewest GFLOPs (``results/cost``; else the smallest input)
    and of the first model of the first seed group (else the first base): one scratch CNN and one pretrained base."""
    from benchmark.core import noise
    from benchmark.models.zoo import load_yaml
    from benchmark.storage import store

    root = Path(root)
    params = load_yaml(root / "params.yaml") or {}
    zoo = ((load_yaml(root / str(params.get("zoo", "zoo/embedded.yaml"))) or {}).get("models")) or {}
    if not zoo:
        raise SimulateError(f"{root / 'params.yaml'}: no zoo to choose default stages from; name them with --stages")

    def gflops(name):
        f = root / "results" / "cost" / f"{name}.json"
        try:
            return float(store.read_json(f)["gflops"])
        except (OSError, ValueError, KeyError, TypeError):
            return float("inf")

    sidekicks = [n for n, e in zoo.items() if (e or {}).get("role") == "sidekick"] or list(zoo)
    side = min(sidekicks, key=lambda n: (gflops(n), int(zoo[n].get("img_size") or 0), sidekicks.index(n)))
    groups = noise.seed_groups(zoo)
    bases = [n for n, e in zoo.items() if (e or {}).get("role") == "base"] or list(zoo)
    base = groups[0].first if groups else bases[0]
    return [f"{kind}@{m}" for m in dict.fromkeys([side, base]) for kind in ("train", "logits")]


def _listed(root: Path) -> list[str]:
    proc = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SimulateError(f"{root}: not a git checkout ({proc.stderr.strip()})")
    return [p for p in proc.stdout.split("\0") if p]


def _link_tree(src: Path, dst: Path) -> None:
    """Hard-link ``src`` (a file or a folder tree) to ``dst``; copy where a link is impossible (another file system)."""
    files = [src] if src.is_file() else [p for p in src.rglob("*") if p.is_file()]
    for f in files:
        to = dst if f == src else dst / f.relative_to(src)
        if to.exists():  # linked already (a dep inside an output folder that is a dep too)
            continue
        to.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(f, to)
        except OSError:
            shutil.copy2(f, to)


def upstream(locks: dict[str, dict], targets: list[Target]) -> list[str]:
    """Deps of ``targets`` (paths relative to the root) that other stages of their locks produce: an output, or a
    file inside an output folder (``results/data/train.npz`` of ``results/data``)."""
    chosen = {(t.lock, t.stage) for t in targets}
    out = []
    for t in targets:
        lock = locks[t.lock]
        made = [p for s, rec in lock.items() if (t.lock, s) not in chosen for p in rec["outs"]]
        for dep in lock[t.stage]["deps"]:
            if any(dep == p or dep.startswith(p.rstrip("/") + "/") for p in made):
                out.append(str(t.folder / dep))
    return list(dict.fromkeys(out))


def checked_inputs(root: Path, targets: list[Target]) -> tuple[dict[str, dict], list[str]]:
    """The locks of ``targets`` and the upstream outputs they read (:func:`upstream`), after checking that each lock
    exists, names its stage, and that those outputs are present (one :class:`SimulateError` naming what is not)."""
    locks = {}
    for t in targets:
        if t.lock not in locks:
            try:
                locks[t.lock] = lockfile.read(root / t.lock)
            except FileNotFoundError:
                raise SimulateError(f"{root / t.lock}: not found; run the pipeline first (dvc repro)") from None
        if t.stage not in locks[t.lock]:
            raise SimulateError(f"{root / t.lock}: no stage {t.stage!r} (stages: {', '.join(sorted(locks[t.lock])[:12])}, ...)")
    links = upstream(locks, targets)
    missing = [p for p in links if not (root / p).exists()]
    if missing:
        raise SimulateError(f"{root}: inputs {missing} of {', '.join(map(str, targets))} are missing; run `dvc repro` first")
    return locks, links


def make_copy(root: Path, dest: Path, targets: list[Target], links: list[str]) -> None:
    for rel in _listed(root):
        src = root / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for t in targets:  # a suite's materialised pipeline files, whatever git thinks of them
        for rel in (t.dvcfile, t.lock, str(t.folder / "params.yaml")):
            if (root / rel).is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, dest / rel)
    for rel in links:
        _link_tree(root / rel, dest / rel)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)


def one_core() -> list[str]:
    """``taskset -c N`` (N: the last core this process may use) when ``taskset`` exists, else nothing."""
    if not shutil.which("taskset") or not hasattr(os, "sched_getaffinity"):
        return []
    return ["taskset", "-c", str(max(os.sched_getaffinity(0)))]


def environment(workdir: Path, cpu: str) -> dict:
    env = dict(os.environ, **CPUS[cpu], PYTHONPATH=os.pathsep.join([str(workdir), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("UQ_TIMINGS", None)  # the simulated stages are not the run's timing records
    return env


def compare(checkout: dict[str, dict], simulated: dict[str, dict], targets: list[Target]) -> pd.DataFrame:
    """Each output of ``targets``: identical | different | measured | missing; deps must agree (else SimulateError)."""
    outs_chosen = {(t.lock, p) for t in targets for p in simulated[t.lock].get(t.stage, {}).get("outs", {})}
    rows = []
    for t in targets:
        a, b = checkout[t.lock].get(t.stage), simulated[t.lock].get(t.stage)
        if a is None:
            raise SimulateError(f"{t.lock}: no stage {t.stage!r} in this checkout's lock; run `dvc repro` first")
        if b is None:
            raise SimulateError(f"{t}: the simulated run recorded no lock entry")
        stale = [p for p, m in b["deps"].items() if (t.lock, p) not in outs_chosen and a["deps"].get(p) != m]
        if stale:
            raise SimulateError(f"{t}: inputs {stale} differ from those in {t.lock} (the checkout's outputs or code changed "
                                f"since its dvc.lock was written); run `dvc repro` first")
        for path in sorted(set(a["outs"]) | set(b["outs"])):
            why = lockfile.measured(path)
            status = ("missing" if path not in b["outs"] else "measured" if why else
                      "identical" if a["outs"].get(path) == b["outs"][path] else "different")
            rows.append((str(t), str(t.folder / path), a["outs"].get(path, ""), b["outs"].get(path, ""), status, why or ""))
    return pd.DataFrame(rows, columns=["stage", "path", "checkout", "simulated", "status", "measured"])


def simulate(targets: list[str], *, root=".", cpu: str = "avx2", workdir=None, keep: bool = False, progress: bool = True) -> Result:
    """Run ``targets`` in a scratch copy of ``root`` on the simulated ``cpu`` and compare their outputs (:class:`Result`)."""
    from tqdm import tqdm

    root = Path(root).resolve()
    ts = [Target.parse(t) for t in targets]
    locks, links = checked_inputs(root, ts)
    base = Path(workdir) if workdir else root / ".dvc" / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="simulate-", dir=base))
    result = Result(workdir=work)
    try:
        make_copy(root, work, ts, links)
        env, pin = environment(work, cpu), one_core()
        bar = tqdm(ts, desc="simulated stages", unit="stage", disable=not progress)
        for t in bar:
            bar.set_postfix_str(str(t))
            log = work / ".dvc" / "tmp" / f"simulate-{len(result.stages)}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            with open(log, "w") as f:
                proc = subprocess.run([*pin, sys.executable, "-m", "dvc", "repro", "-s", "-f", "--no-commit", str(t)],
                                      cwd=work, env=env, stdout=f, stderr=subprocess.STDOUT)
            result.stages.append((str(t), round(time.perf_counter() - t0, 1)))
            if proc.returncode != 0:
                tail = log.read_text(errors="replace")[-3000:]
                raise SimulateError(f"{t}: `dvc repro` failed in the simulated run (exit {proc.returncode}):\n{tail}")
        simulated = {lk: lockfile.read(work / lk) for lk in locks}
        result.outputs = compare(locks, simulated, ts)
        return result
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
            result.workdir = None
