"""DVC's own share of a run, measured without the stages' work: ``python -m benchmark reproduce dvc-share``.

In a scratch copy of this checkout (:func:`benchmark.dvcutil.scratch.make_copy`: the files git tracks, the committed
``dvc.lock``, no output and no DVC cache) every stage's command is replaced by a copy of its outputs from this
checkout's finished run. ``dvc repro`` there does all DVC does around a stage (it checks and hashes the dependencies,
caches the outputs, saves the run cache, rewrites ``dvc.lock``) and starts a shell that copies files; so does
``python -m benchmark run --jobs N`` (:mod:`benchmark.cluster.parallel`). Each runner's wall and CPU seconds from a
clean copy go to ``results/dvc_share.json``, from which the performance page's table is generated; the runners must
leave the same ``dvc.lock``, byte for byte.

What it showed (a profile of such a run): nine tenths of DVC's time around a stage is rewriting the whole ``dvc.lock``
through a pure-Python YAML round trip, so it grows with the stages times the lock's size (every code dependency
of every stage is a lock entry): fewer dependencies per stage and fewer stages cut it, the run cache and hashing are
a few hundredths.
"""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

RECORD = Path("results") / "dvc_share.json"
RUNNERS = {"dvc repro": ["-m", "dvc", "repro"], "benchmark run": ["-m", "benchmark", "run", "--jobs"]}


def _outs(stage: dict) -> list[str]:
    return [o if isinstance(o, str) else next(iter(o)) for o in stage.get("outs", [])]


def replay_copy(root, dest, dvcfile: str = "dvc.yaml") -> Path:
    """A scratch copy of ``root`` at ``dest`` whose stages copy their outputs from ``root`` (which must hold them:
    a finished run) instead of computing them."""
    import yaml

    from benchmark.dvcutil.scratch import ScratchError, make_copy

    root, dest = Path(root).resolve(), Path(dest)
    make_copy(root, dest, [], [])
    data = yaml.safe_load((dest / dvcfile).read_text(encoding="utf-8"))
    for name, stage in data["stages"].items():
        body = stage.get("do", stage)
        outs = _outs(body)
        if "foreach" not in stage:
            missing = [o for o in outs if not (root / o).exists()]
            if missing:
                raise ScratchError(f"{root}: no {missing[0]} (stage {name}); run the pipeline first (dvc repro)")
        src = shlex.quote(str(root))
        body["cmd"] = " && ".join(f'mkdir -p "$(dirname {o})" && cp -a {src}/{o} {o}' for o in outs)
    (dest / dvcfile).write_text(yaml.safe_dump(data, sort_keys=False, width=10_000), encoding="utf-8")
    return dest


def _files(copy: Path) -> set[Path]:
    return {p for p in copy.rglob("*") if p.is_file() and ".git" not in p.relative_to(copy).parts[:1]}


def _reset(copy: Path, clean: set[Path], lock: bytes, dvcfile: str) -> None:
    """The copy as from a clone: its files as copied (``clean``: no output), the committed lock, no DVC cache."""
    for p in sorted(_files(copy) - clean, reverse=True):
        p.unlink()
    for d in sorted(
        (p for p in copy.rglob("*") if p.is_dir() and ".git" not in p.relative_to(copy).parts[:1]), reverse=True
    ):
        if not any(d.iterdir()):
            d.rmdir()
    shutil.rmtree(copy / ".dvc" / "cache", ignore_errors=True)
    shutil.rmtree(copy / ".dvc" / "tmp", ignore_errors=True)
    (copy / dvcfile).with_name("dvc.lock").write_bytes(lock)


def run(copy: Path, runner: str, jobs: int = 1, python: str = sys.executable) -> dict:
    """One run of ``runner`` in the replay ``copy``: wall and CPU seconds (every process it waited for)."""
    cmd = [python, *RUNNERS[runner], *([str(jobs)] if runner == "benchmark run" else [])]
    env = dict(os.environ, DVC_NO_ANALYTICS="1", PYTHONPATH=str(copy))
    env.pop("UQ_TIMINGS", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd[1:])}` failed in {copy}: {(proc.stderr or proc.stdout).strip()[-500:]}")
    return {
        "runner": runner,
        "jobs": jobs,
        "wall_s": round(wall, 2),
        "cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 2),
    }


def measure(root=".", *, jobs=(2,), repeats: int = 2, workdir=None, dvcfile: str = "dvc.yaml") -> dict:
    """``dvc repro`` and ``benchmark run --jobs N`` (each of ``jobs``) in a replay copy of ``root``, ``repeats`` times
    each, interleaved; the fastest of each by wall time, the lock's size and the stages' count. ``RuntimeError`` when
    the runners leave different locks."""
    from benchmark.reproduce.timing import LoadSampler, machine

    root = Path(root).resolve()
    work = Path(workdir) if workdir else root / ".dvc" / "tmp"
    work.mkdir(parents=True, exist_ok=True)
    copy = work / "dvc-share"
    shutil.rmtree(copy, ignore_errors=True)
    try:
        replay_copy(root, copy, dvcfile)
        lock, clean = (copy / dvcfile).with_name("dvc.lock").read_bytes(), _files(copy)
        plan = [("dvc repro", 1)] + [("benchmark run", j) for j in jobs]
        runs, locks = {}, {}
        with LoadSampler() as load:
            for _ in range(repeats):
                for runner, j in plan:
                    _reset(copy, clean, lock, dvcfile)
                    r = run(copy, runner, j)
                    key = f"{runner} {j}" if runner == "benchmark run" else runner
                    runs[key] = min(runs.get(key, r), r, key=lambda x: x["wall_s"])
                    locks[key] = (copy / dvcfile).with_name("dvc.lock").read_bytes()
        if len(set(locks.values())) != 1:
            raise RuntimeError(f"the runners left different dvc.lock files in {copy}: {sorted(locks)}")
        from benchmark.dvcutil.lockfile import current_stages

        stages = len(current_stages(copy, dvcfile) or ())
        return {
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": machine(),
            "load": load.summary(),
            "stages": stages,
            "lock_bytes": len(lock),
            "repeats": repeats,
            "runs": list(runs.values()),
        }
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def table(record: dict) -> str:
    """The runners' wall and CPU seconds with every stage replaced by a copy of its outputs, per stage too; with the
    wall seconds of the same replay without libyaml beside them where the record has them (``without_libyaml``: runs
    with ``ruamel.yaml.clib`` uninstalled, DVC then parsing YAML in pure Python)."""
    n = record["stages"]
    base = {(r["runner"], r["jobs"]): r["wall_s"] for r in record.get("without_libyaml") or []}
    extra = " wall s without libyaml |" if base else ""
    lines = [
        "| runner | wall s | CPU s | wall s per stage | CPU s per stage |" + extra,
        "|---|---|---|---|---|" + ("---|" if base else ""),
    ]
    for r in record["runs"]:
        name = f"`python -m benchmark run --jobs {r['jobs']}`" if r["runner"] == "benchmark run" else f"`{r['runner']}`"
        wall, cpu = r["wall_s"], r["cpu_s"]
        old = base.get((r["runner"], r["jobs"]))
        more = (f" {old:.1f} |" if old is not None else " |") if base else ""
        lines.append(f"| {name} | {wall:.1f} | {cpu:.1f} | {wall / n:.2f} | {cpu / n:.2f} |" + more)
    m, load = record.get("machine") or {}, record.get("load") or {}
    return (
        "\n".join(lines) + f"\n\n{n} stages, each replaced by a copy of its outputs; `dvc.lock` of "
        f"{record['lock_bytes'] / 1000:.0f} kB; the same lock after every runner; fastest of {record['repeats']}; "
        f"measured {record.get('date', '?')} on {m.get('cpus', '?')} CPUs ({m.get('cpu', '?')}, "
        f"{m.get('cpu_kind', '?')}), load average {load.get('mean', float('nan')):.1f}"
        + (
            "; without libyaml: the same replay in the same checkout with `ruamel.yaml.clib` uninstalled, its runs "
            "added to the record as `without_libyaml`"
            if base
            else ""
        )
        + ".\n"
    )
