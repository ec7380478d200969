"""What each stage script costs before it does anything: ``python -X importtime <script> --help`` for every stage script
of a ``dvc.yaml`` (the interpreter and the imports of its entry, which a stage pays whatever it runs), the CPU seconds
of that process and the import time of each heavy package, the fastest of a few runs.

``python -m benchmark reproduce imports --label NAME [--root CHECKOUT]`` adds a checkout's figures to
``results/stage_imports.json`` under ``NAME`` (two labels: before and after a change, measured on the same machine);
the performance page's table is generated from it (:func:`table`). What a stage imports while it runs (timm where it
builds a model) is in its timing record (``imports``, :mod:`benchmark.config.runtime`).
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmark.config.runtime import HEAVY

RECORD = Path("results") / "stage_imports.json"
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def parse(text: str) -> dict:
    """``-X importtime`` output -> ``{"import_s": every top-level import's cumulative seconds, "packages": {name:
    cumulative seconds}}`` of the :data:`HEAVY` packages (their first import)."""
    total, packages = 0, {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        cumulative, depth, name = int(m.group(2)), (len(m.group(3)) - 3) // 2, m.group(4)  # 2 L + 3 spaces: level L
        if depth == 0:
            total += cumulative
        if name in HEAVY and name not in packages:
            packages[name] = round(cumulative / 1e6, 3)
    return {"import_s": round(total / 1e6, 3), "packages": packages}


def measure(root: Path, script: str, python: str = sys.executable, repeats: int = 3) -> dict:
    """The fastest (by CPU) of ``repeats`` runs of ``python -X importtime script --help`` in ``root``: its CPU and
    wall seconds and :func:`parse` of its import times."""
    best = None
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("UQ_TIMINGS", None)
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [python, "-X", "importtime", script, "--help"], cwd=root, env=env, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"{script} --help failed in {root}: {proc.stderr.strip().splitlines()[-1:]}")
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        run = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), **parse(proc.stderr)}
        best = run if best is None or run["cpu_s"] < best["cpu_s"] else best
    return best


def stage_scripts(root: Path, dvcfile: str = "dvc.yaml") -> dict[str, str]:
    """stage name (``foreach`` stages once, by their name) -> the script its command runs (``pipelines/<x>.py``)."""
    import yaml

    stages = yaml.safe_load((Path(root) / dvcfile).read_text(encoding="utf-8"))["stages"]
    out = {}
    for name, stage in stages.items():
        cmd = stage.get("do", stage)["cmd"].split()
        out[name] = next(a for a in cmd if a.endswith(".py"))
    return out


def measure_checkout(root, python: str = sys.executable, repeats: int = 3) -> dict:
    """``{stage: measure(...)}`` for every stage of ``root``'s ``dvc.yaml`` (a script shared by stages is run once),
    with the machine and the load average while it ran."""
    from benchmark.reproduce.timing import machine

    root = Path(root).resolve()
    done, stages = {}, {}
    load = os.getloadavg()[0]
    for stage, script in stage_scripts(root).items():
        if script not in done:
            done[script] = measure(root, script, python, repeats)
        stages[stage] = {"script": script, **done[script]}
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": machine(),
        "load": round((load + os.getloadavg()[0]) / 2, 2),
        "repeats": repeats,
        "stages": stages,
    }


def table(record: dict) -> str:
    """Per stage: its script's CPU seconds to start (interpreter and its entry's imports) under each label, then the
    heavy packages the last label's entry imports (import seconds)."""
    labels = list(record)
    stages = list(record[labels[-1]]["stages"])
    head = ["stage", *(f"{lab}: CPU s" for lab in labels), f"{labels[-1]}: imports s", "heavy packages imported (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in stages:
        cells = [f"`{s}`"]
        for lab in labels:
            r = record[lab]["stages"].get(s)
            cells.append(f"{r['cpu_s']:.2f}" if r else "")
        last = record[labels[-1]]["stages"][s]
        pk = sorted(last["packages"].items(), key=lambda kv: -kv[1])
        cells += [f"{last['import_s']:.2f}", ", ".join(f"{k} {v:.2f}" for k, v in pk)]
        lines.append("| " + " | ".join(cells) + " |")
    notes = "; ".join(
        f"{lab}: {r['date']}, {r['machine'].get('cpus', '?')} CPUs ({r['machine'].get('cpu_kind', '?')}"
        f"), load average {r['load']:.1f}, fastest of {r['repeats']}"
        for lab, r in record.items()
    )
    return "\n".join(lines) + f"\n\n`python -X importtime <script> --help` per stage script ({notes}).\n"
