"""Where the time of ``dvc repro`` goes: one record per stage process, tabulated.

Every process that imports :mod:`benchmark` appends its wall time (imports
included), user/system CPU time, peak RSS and minor page faults to the file named
by ``UQ_TIMINGS`` (:mod:`benchmark.config.runtime`). :func:`run_repro` runs ``dvc
repro`` with it set and writes ``results/timings.json``; the README's timing
table is rendered from that file (:mod:`benchmark.reproduce.readme`). DVC's own
work (hashing, locking, starting processes) is the total minus the stages.
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

from benchmark.storage import store

_SCRIPT = re.compile(r"pipelines/(\w+)\.py$")
_ITEM_FLAGS = ("--model", "--key")


def stage_name(argv: list[str]) -> str:
    """``['pipelines/train.py', '--model', 'lite1']`` -> ``'train@lite1'``; ``'data'`` for an item-less stage; a method's
    stage (``pipelines/method.py --kind soups --key k``) by its DVC name (``soup@k``); SVE's training
    (``pipelines/sve.py --train``) as ``sve-train``, its outputs (``pipelines/sve.py --members 1 2 4``) as ``sve``."""
    script = next((a for a in argv if _SCRIPT.search(a.replace(os.sep, "/"))), None)
    if script is None:
        return " ".join(Path(a).name for a in argv[:2])
    name = _SCRIPT.search(script.replace(os.sep, "/")).group(1)
    if name == "method" and "--kind" in argv and argv.index("--kind") + 1 < len(argv):
        from benchmark.methods import registry

        kind = argv[argv.index("--kind") + 1]
        try:
            name = registry.get_method(kind).stage
        except ValueError:
            name = kind
    for flag in _ITEM_FLAGS:
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return f"{name}@{argv[argv.index(flag) + 1]}"
    return f"{name}-train" if name == "sve" and "--train" in argv else name


def read_records(path) -> pd.DataFrame:
    """The records a run left in ``path`` (one JSON object a line), with a ``stage`` column."""
    rows = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not a JSON line ({e})") from None
        r["stage"] = stage_name(r.get("argv", []))
        rows.append(r)
    cols = ["stage", "wall_s", "user_s", "sys_s", "max_rss_mb", "minor_faults"]
    return pd.DataFrame(rows, columns=cols + ["argv", "cwd"])[cols] if rows else pd.DataFrame(columns=cols)


def by_kind(stages: pd.DataFrame) -> pd.DataFrame:
    """Stages grouped by kind (``train@lite1`` -> ``train``): count and sums (peak RSS: max), largest wall time first."""
    df = stages.assign(kind=stages["stage"].str.split("@").str[0])
    g = df.groupby("kind").agg(stages=("stage", "size"), wall_s=("wall_s", "sum"), user_s=("user_s", "sum"),
                               sys_s=("sys_s", "sum"), max_rss_mb=("max_rss_mb", "max"), minor_faults=("minor_faults", "sum"))
    return g.sort_values("wall_s", ascending=False).reset_index()


def machine() -> dict:
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    import torch

    from benchmark.config import numerics

    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version(), "torch": torch.__version__,
            **numerics.state()}


def run_repro(out, *, force: bool = False, dvc_args=(), install_s: float | None = None, cwd=".") -> dict:
    """Run ``dvc repro`` (``-f`` when ``force``) with timing records on; write ``out`` (JSON) and return it. The
    entries of stages no longer in ``dvc.yaml`` are dropped from ``dvc.lock`` first (:func:`lockfile.prune`)."""
    from benchmark.reproduce import lockfile

    stages = lockfile.current_stages(cwd)
    if stages and (Path(cwd) / "dvc.lock").is_file():
        gone = lockfile.prune(Path(cwd) / "dvc.lock", stages)
        if gone:
            print(f"dvc.lock: dropped {len(gone)} entries of stages no longer in dvc.yaml ({', '.join(gone)})", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "timings.jsonl"
        env = dict(os.environ, UQ_TIMINGS=str(log))
        env.pop("UQ_TIMINGS_PID", None)
        cmd = [sys.executable, "-m", "dvc", "repro", *(["-f"] if force else []), *dvc_args]
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=cwd, env=env)
        total = time.time() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd[2:])}` failed with exit code {proc.returncode}; no timings written")
        stages = read_records(log) if log.exists() else read_records_empty()
    record = {"command": " ".join(["dvc", *cmd[3:]]), "repro_wall_s": round(total, 1),
              "install_s": None if install_s is None else round(install_s, 1),
              "stages_wall_s": round(float(stages["wall_s"].sum()), 1),
              "dvc_overhead_s": round(total - float(stages["wall_s"].sum()), 1),
              "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": machine(),
              "stages": stages.to_dict(orient="records")}
    store.write_json(out, record)
    return record


def read_records_empty() -> pd.DataFrame:
    return pd.DataFrame(columns=["stage", "wall_s", "user_s", "sys_s", "max_rss_mb", "minor_faults"])


def load(path) -> dict:
    """A timings file written by :func:`run_repro`."""
    d = store.read_json(path)
    if not isinstance(d, dict) or not isinstance(d.get("stages"), list) or "repro_wall_s" not in d:
        raise ValueError(f"{path}: not a timings file (needs 'repro_wall_s' and a 'stages' list)")
    return d


def stages_frame(record: dict) -> pd.DataFrame:
    return pd.DataFrame(record["stages"], columns=read_records_empty().columns)
