"""What pinning the CPU numerics costs in time: one training stage timed pinned and native, on this machine.

``python -m benchmark reproduce pinning-cost [--stage train@lite0-s0] [--repeats 2]`` runs
the stage (``dvc repro -s -f --no-commit``) in scratch copies of this checkout
(:func:`benchmark.dvcutil.scratch.make_copy`: tracked files copied, upstream outputs
hard-linked), alternately with ``UQ_NUMERICS=pinned`` (the default:
:mod:`benchmark.config.numerics`) and ``UQ_NUMERICS=native`` (this CPU's own kernels),
``repeats`` times each, and reads the stage process's own timing record
(``UQ_TIMINGS``, :mod:`benchmark.config.runtime`: wall seconds from its start, user and
system CPU seconds). The medians and their ratio go to ``results/numerics.json``
(committed, small) with the machine they were measured on; the docs' performance page
is generated from it. Nothing of the checkout's own outputs is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

from benchmark.dvcutil.scratch import ScratchError, Target, checked_inputs, make_copy
from benchmark.reproduce.timing import machine
from benchmark.storage.atomic import write_text

RECORD = "results/numerics.json"
MODES = ("pinned", "native")


def _time_once(root: Path, target: Target, links: list[str], mode: str) -> dict:
    base = root / ".dvc" / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="pinning-", dir=base))
    try:
        make_copy(root, work, [target], links)
        log = work / ".dvc" / "tmp" / "timings.jsonl"
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("UQ_TIMINGS_PID",)}
        env.update(
            UQ_NUMERICS=mode,
            UQ_TIMINGS=str(log),
            PYTHONPATH=os.pathsep.join([str(work), *filter(None, [os.environ.get("PYTHONPATH")])]),
        )
        proc = subprocess.run(
            [sys.executable, "-m", "dvc", "repro", "-s", "-f", "--no-commit", str(target)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise ScratchError(f"{target} ({mode}): `dvc repro` failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        stage = [r for r in records if any(str(a).endswith(".py") and "pipelines" in str(a) for a in r.get("argv", []))]
        if not stage:
            raise ScratchError(f"{target} ({mode}): the stage process left no timing record in {log}")
        r = stage[-1]
        return {"mode": mode, "wall_s": r["wall_s"], "cpu_s": round(r["user_s"] + r["sys_s"], 3)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarize(runs: list[dict]) -> dict:
    """Median wall and CPU seconds per mode, and pinned / native ratios."""
    med = {
        m: {k: statistics.median(r[k] for r in runs if r["mode"] == m) for k in ("wall_s", "cpu_s")}
        for m in MODES
        if any(r["mode"] == m for r in runs)
    }
    if set(med) != set(MODES):
        raise ValueError(f"runs of both modes are needed, got {sorted(med)}")
    return {"median": med, "ratio": {k: round(med["pinned"][k] / med["native"][k], 3) for k in ("wall_s", "cpu_s")}}


def measure(stage: str = "train@lite0-s0", repeats: int = 2, *, root=".", progress: bool = True) -> dict:
    """Time ``stage`` pinned and native, ``repeats`` times each, alternating (see the module docstring)."""
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    root = Path(root).resolve()
    target = Target.parse(stage)
    _, links = checked_inputs(root, [target])
    order = [m for _ in range(repeats) for m in MODES]
    runs = [_time_once(root, target, links, m) for m in tqdm(order, desc=f"time {stage}", disable=not progress)]
    m = machine()
    return {
        "stage": stage,
        "repeats": repeats,
        "runs": runs,
        **summarize(runs),
        "machine": {k: m.get(k) for k in ("cpus", "cpu", "torch")},
    }


def write(record: dict, path=RECORD) -> Path:
    """Write the pinning-cost record to ``path`` atomically; returns ``path``."""
    path = Path(path)
    write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path
