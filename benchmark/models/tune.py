"""How a recipe's learning rate was chosen: one grid, scored on validation, under the recipe's own budget.

``python -m benchmark reproduce tune --stage STAGE --recipe NAME --lr A B C ...`` runs
the DVC stage ``STAGE`` (e.g. ``train@lite0-s0`` for the fine-tune recipe, ``sve-train``
for SVE) once per learning rate, each time in a scratch copy of this checkout
(:func:`benchmark.dvcutil.scratch.make_copy`: tracked files copied, the stage's
upstream outputs such as ``results/data`` hard-linked) whose ``params.yaml`` has
``recipes.<NAME>.lr`` set to that value and nothing else changed: same epochs,
images, batch size, augmentation and seed, i.e. the budget the pipeline gives the
method. The score of a run is the ``best_score`` its ``train.json`` records: the
recipe's own model-selection score (``select_by``, validation accuracy unless the
recipe says otherwise) of the epoch it keeps. ``--set KEY=VALUE`` changes another
params key in every copy (e.g. ``sve.members=[2]``: tune SVE on two members).

The grid and its scores are written to ``results/tuning.json`` (committed, small;
one entry per recipe, replaced when the same recipe is tuned again) with the
lr that ``params.yaml`` uses; :func:`check` says whether that lr is the best of
its grid (the README's tuning block is generated from the file). Nothing of the
checkout's own outputs is touched.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmark.dvcutil import lockfile
from benchmark.dvcutil.scratch import ScratchError, Target, checked_inputs, make_copy

TUNING = "results/tuning.json"


def set_key(params: dict, dotted: str, value) -> dict:
    """``params`` with ``dotted`` (``a.b.c``) set to ``value``; the path must exist (ValueError naming it)."""
    out = copy.deepcopy(params)
    node, parts = out, dotted.split(".")
    for i, part in enumerate(parts[:-1]):
        if not isinstance(node, dict) or part not in node:
            raise ValueError(f"params.yaml: no key {'.'.join(parts[: i + 1])!r} (from --set/--recipe {dotted})")
        node = node[part]
    if not isinstance(node, dict) or parts[-1] not in node:
        raise ValueError(f"params.yaml: no key {dotted!r}")
    node[parts[-1]] = value
    return out


def parse_assignment(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` with VALUE read as YAML (``[2]``, ``0.01``, ``null``)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--set {text!r}: expected KEY=VALUE, e.g. sve.members=[2]")
    return key.strip(), yaml.safe_load(value)


def _scores(folder: Path, lock: dict, stage: str) -> dict:
    """``best_score``, ``best_epoch`` and ``select_by`` of the ``train.json`` files under the stage's outputs
    (paths in ``lock`` are relative to the stage's ``folder``)."""
    found = []
    for out in lock[stage]["outs"]:
        p = folder / out
        found += [p] if p.name == "train.json" else sorted(p.rglob("train.json")) if p.is_dir() else []
    if not found:
        raise ScratchError(f"{stage}: wrote no train.json (is it a training stage?)")
    rec = json.loads(found[0].read_text())
    return {
        "val_score": rec.get("best_score"),
        "best_epoch": rec.get("best_epoch"),
        "select_by": (rec.get("recipe") or {}).get("select_by", "accuracy"),
    }


def tune(stage: str, recipe: str, lrs: list[float], *, root=".", sets=(), progress: bool = True) -> dict:
    """Run ``stage`` once per learning rate of ``lrs`` (see the module docstring); returns the record."""
    from tqdm import tqdm

    root = Path(root).resolve()
    if not lrs:
        raise ValueError("--lr: give at least one learning rate")
    if any(lr <= 0 for lr in lrs):
        raise ValueError(f"--lr: learning rates must be > 0, got {lrs}")
    target = Target.parse(stage)
    params_file = target.folder / "params.yaml"  # the stage's params (a paper suite's: suites/<name>/params.yaml)
    params = yaml.safe_load((root / params_file).read_text(encoding="utf-8"))
    if recipe not in (params.get("recipes") or {}):
        raise ValueError(f"--recipe {recipe!r}: not in {params_file} recipes ({sorted(params.get('recipes') or {})})")
    for key, value in sets:
        params = set_key(params, key, value)
    _, links = checked_inputs(root, [target])
    grid = []
    base = root / ".dvc" / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    for lr in tqdm(lrs, desc=f"tune {recipe}.lr", disable=not progress):
        work = Path(tempfile.mkdtemp(prefix="tune-", dir=base))  # inside the checkout: hard links work
        try:
            make_copy(root, work, [target], links)
            run_params = set_key(params, f"recipes.{recipe}.lr", float(lr))
            (work / params_file).write_text(yaml.safe_dump(run_params, sort_keys=False), encoding="utf-8")
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "dvc", "repro", "-s", "-f", "--no-commit", str(target)],
                cwd=work,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise ScratchError(f"{stage} with lr {lr}: `dvc repro` failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
            grid.append(
                {
                    "lr": float(lr),
                    **_scores(work / target.folder, lockfile.read(work / target.lock), target.stage),
                    "wall_s": round(time.perf_counter() - t0, 1),
                }
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    r = params["recipes"][recipe]
    return {
        "stage": stage,
        "recipe": recipe,
        "set": {k: v for k, v in sets},
        "budget": {k: r.get(k) for k in ("epochs", "batch_size", "weight_decay", "warmup_epochs")},
        "grid": grid,
        "params_lr": float(r["lr"]),
    }


def best(record: dict) -> dict:
    """The grid point with the highest validation score (ties: the smaller lr)."""
    return max(
        record["grid"], key=lambda g: (g["val_score"] if g["val_score"] is not None else float("-inf"), -g["lr"])
    )


def check(record: dict) -> str | None:
    """None when params.yaml's lr is the best of its grid, else a sentence saying which is."""
    b = best(record)
    if abs(b["lr"] - record["params_lr"]) <= 1e-12 * max(1.0, b["lr"]):
        return None
    return (
        f"recipes.{record['recipe']}.lr = {record['params_lr']:g} in params.yaml, but lr {b['lr']:g} scored best on "
        f"validation ({b['val_score']:.4f})"
    )


def write(record: dict, path=TUNING) -> Path:
    """Add ``record`` to the tuning file (one entry per recipe), atomically."""
    from benchmark.storage.store import write_text

    path = Path(path)
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[record["recipe"]] = record
    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path
