"""``submit``: pack a finished run into a bundle folder (see :mod:`benchmark.bundle.schema`).

Where a suite's run lives: the embedded default in the repository root
(``results/``, ``dvc.lock``, ``params.yaml``), a paper suite in its pipeline
folder ``suites/<name>/`` (``results/``, ``dvc.lock``, ``params.yaml``; see
:mod:`benchmark.dvcgen.suite_pipeline`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from benchmark.bundle import csv_files
from benchmark.bundle.schema import (
    FORMAT,
    MANIFEST,
    MAX_FILE_BYTES,
    BundleError,
    check_rows,
    row_label,
    sha256_file,
)
from benchmark.stages.stage_config import fingerprint
from benchmark.storage.store import atomic_dir, listing, read_json, write_text


def suite_folder(suite: str, root=".") -> Path:
    """The folder a suite's stages run in: the root for the embedded default, else ``suites/<name>``."""
    root = Path(root)
    return root if suite == "embedded" else root / "suites" / suite


def folder_hash(folder: Path) -> str:
    """The hash the evaluate stage gives a model's logits folder (rows' ``inputs_hash`` is built from it)."""
    from benchmark.evaluation.stage import model_files

    return model_files(folder.name, folder)[1]


def git_state(root: Path) -> dict:
    """``{"commit": HEAD's sha or None, "dirty": tracked files changed (None outside a repository)}`` of ``root``."""

    def out(*args):
        try:
            proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return ""
        return proc.stdout.strip() if proc.returncode == 0 else ""

    commit = out("rev-parse", "--verify", "HEAD")
    return {
        "commit": commit or None,
        "dirty": bool(out("status", "--porcelain", "--untracked-files=no")) if commit else None,
    }


def package_versions() -> dict:
    """The versions a bundle records: Python, torch, timm and the benchmark."""
    import timm
    import torch

    import benchmark

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "timm": timm.__version__,
        "benchmark": benchmark.__version__,
    }


def _device(params: dict) -> dict:
    import torch

    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cuda": cuda,
        "configured": params.get("device", "cpu"),
    }


def _remote(root: Path) -> str | None:
    """The DVC project's default remote, if one is configured."""
    try:
        from dvc.repo import Repo

        with Repo(str(root)) as repo:
            return repo.config.get("core", {}).get("remote") or None
    except Exception:  # noqa: BLE001 - no DVC project, no remote: the bundle just names none
        return None


def _lock_stages(lock: dict, paths: set[str]) -> dict:
    """dvc.lock stages with an output among ``paths`` (relative to the lock's folder): {stage: {outs: {path: md5}}}."""
    out = {}
    for stage, s in sorted((lock.get("stages") or {}).items()):
        outs = {o.get("path"): o.get("md5") for o in (s or {}).get("outs") or [] if isinstance(o, dict)}
        if paths & set(outs):
            out[stage] = {"outs": {p: outs[p] for p in sorted(outs)}}
    return out


def units(rows: pd.DataFrame, results: Path) -> tuple[list[dict], dict[str, dict]]:
    """The evaluation units behind ``rows`` (grouped by their ``inputs_hash``) and the logits files they read
    (relative to ``results``, with sha256 and size)."""
    hashes: dict[str, str] = {}

    def h(folder: str) -> str:
        if folder not in hashes:
            if not (results / folder).is_dir():
                raise BundleError(f"{results / folder}: missing logits folder (rows refer to it)")
            hashes[folder] = folder_hash(results / folder)
        return hashes[folder]

    methods = {}
    for cost in listing(results / "methods", "*/cost.json"):
        methods[f"methods/{cost.parent.name}"] = read_json(cost)
    out = []
    for ih, g in rows.groupby("inputs_hash", sort=True):
        r = g.iloc[0]
        fam = r["family"]
        if fam in ("single", "duo", "deep_ensemble"):
            members = {"single": [r["base"]], "duo": [r["base"], r["sidekick"]]}.get(fam) or r["members"].split("+")
            unit = {"kind": fam, "members": members, "folders": [f"logits/{m}" for m in members]}
            unit_ok = fingerprint([h(f) for f in unit["folders"]]) == ih
        else:
            match = [f for f in methods if fingerprint([h(f)]) == ih]
            unit_ok = bool(match)
            if match:
                unit = {
                    "kind": "method",
                    "members": [match[0].split("/")[1]],
                    "folders": [match[0]],
                    "info": methods[match[0]],
                }
        if not unit_ok:
            raise BundleError(
                f"{results}: the rows of {row_label(r)} (inputs_hash {ih}) were not computed from the logits now in "
                f"{results}; rerun the evaluate stage (dvc repro) before submitting"
            )
        unit["inputs_hash"] = ih
        out.append(unit)
    logits = {}
    for folder in sorted({f for u in out for f in u["folders"]}):
        for f in listing(results / folder, "*.safetensors"):
            logits[f"{folder}/{f.name}"] = {"sha256": sha256_file(f), "bytes": f.stat().st_size}
    return out, logits


def _train_size(results: Path) -> int | None:
    """Images of the run's train split (``results/data``, as the stages count them), None when the run has no split
    index there; the manifest records it for ``verify``'s recompute of the training budgets."""
    from benchmark.stages.suite_source import train_size
    from benchmark.storage.store import StoreError

    if not (results / "data" / "train.npz").is_file():
        return None
    try:
        return train_size(results / "data")
    except StoreError as e:
        raise BundleError(str(e)) from None


def _plain(o):
    """JSON-safe: NaN and infinities become null (browsers' JSON.parse rejects NaN)."""
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def submit(suite: str, out, *, results=None, lock=None, contributor: str = "", root=".") -> Path:
    """Write the bundle folder ``out`` from the suite's finished run; returns ``out``."""
    root, out = Path(root), Path(out)
    _check_target(suite, out, contributor)
    folder = suite_folder(suite, root)
    results = Path(results) if results else folder / "results"
    lock_path = Path(lock) if lock else folder / "dvc.lock"
    params, rows = _read_run(suite, folder, results, out)
    zoo_path = folder / params.get("zoo", "")
    zoo_raw = _read_yaml(zoo_path).get("models", {}) if zoo_path.is_file() else {}
    unit_list, logits = units(rows, results)
    used = _used_models(unit_list, zoo_raw)
    missing = [m for m in used if m not in zoo_raw]
    if missing:
        raise BundleError(f"{zoo_path}: no zoo entry for models {missing} behind the rows")
    lock_data = yaml.safe_load(lock_path.read_text(encoding="utf-8")) if lock_path.is_file() else None
    if lock_path.is_file() and not isinstance(lock_data, dict):
        raise BundleError(f"{lock_path}: not a dvc.lock mapping")
    train_size = _train_size(results)
    rel = {f"results/{f}" for u in unit_list for f in u["folders"]} | {"results/metrics.csv"}
    rel |= {f"results/cost/{m}.json" for m in used}
    tables = csv_files.csv_parts("rows", rows)
    if (results / "paired.csv").is_file():
        tables += csv_files.csv_parts("paired", pd.read_csv(results / "paired.csv", dtype=str, keep_default_na=False))
    with atomic_dir(out) as tmp:
        files = _write_files(tmp, tables, results, lock_path if lock_data is not None else None)
        manifest = {
            "format": FORMAT,
            "suite": suite,
            "contributor": contributor,
            "created": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
            "git": git_state(root),
            "versions": package_versions(),
            "device": _device(params),
            "remote": _remote(root),
            "params": params,
            "zoo": {m: zoo_raw[m] for m in used},
            "files": {
                role: {"path": f, "sha256": sha256_file(tmp / f), "bytes": (tmp / f).stat().st_size}
                for role, f in files.items()
            },
            "stages": _lock_stages(lock_data or {}, rel),
            "logits": logits,
            "units": unit_list,
            **({"train_size": train_size} if train_size is not None else {}),
        }
        write_text(
            tmp / MANIFEST, json.dumps(_plain(manifest), indent=1, sort_keys=True, allow_nan=False, default=str) + "\n"
        )
        if (tmp / MANIFEST).stat().st_size > MAX_FILE_BYTES:
            raise BundleError(
                f"{MANIFEST}: {(tmp / MANIFEST).stat().st_size} bytes; a bundle file must stay under 1 MB"
            )
    print(
        f"submit: wrote {out} ({len(rows)} rows, {len(unit_list)} units, {len(logits)} logits files)", file=sys.stderr
    )
    return out


def _check_target(suite: str, out: Path, contributor: str) -> None:
    """The suite, the bundle's folder (``leaderboard/<suite>/<id>``) and the contributor as ``submit`` takes them."""
    from benchmark.bundle.intake import show
    from benchmark.bundle.manifest import BUNDLE_ID, MAX_TEXT, check_suite

    check_suite(suite, "--suite")
    if not BUNDLE_ID.fullmatch(out.name) or Path(os.path.abspath(out)).parent.name != suite:
        raise BundleError(
            f"--out {show(out)}: a bundle's folder is leaderboard/{suite}/<id> with <id> matching "
            f"{BUNDLE_ID.pattern} (its identity on the site)"
        )
    if not isinstance(contributor, str) or len(contributor) > MAX_TEXT or not contributor.isprintable():
        raise BundleError(f"--contributor: printable text on one line of at most {MAX_TEXT} characters")


def _read_yaml(path) -> dict:
    """A YAML file of the run (its params, its zoo); :class:`BundleError` naming the file when it cannot be read."""
    from benchmark.models.zoo import load_yaml

    try:
        return load_yaml(path) or {}
    except (ValueError, OSError) as e:  # ZooError and friends: one line naming the file
        raise BundleError(str(e) if str(path) in str(e) else f"{path}: {e}") from None


def _read_run(suite: str, folder: Path, results: Path, out: Path) -> tuple[dict, pd.DataFrame]:
    """The finished run's params and its checked result rows (``out`` must not exist yet)."""
    params_path = folder / "params.yaml"
    if out.exists():
        raise BundleError(f"{out}: already exists; a bundle is never overwritten, choose a new id")
    metrics = results / "metrics.csv"
    if not metrics.is_file():
        raise BundleError(
            f"{metrics}: not found; run the suite's pipeline first (dvc repro"
            f"{'' if suite == 'embedded' else f' suites/{suite}/dvc.yaml'})"
        )
    if not params_path.is_file():
        raise BundleError(f"{params_path}: not found (the params of the run)")
    params = _read_yaml(params_path)
    if not isinstance(params, dict):
        raise BundleError(f"{params_path}: must be a mapping")
    return params, check_rows(
        pd.read_csv(metrics, dtype=str, keep_default_na=False, na_values=[""]), suite, str(metrics)
    )


def _used_models(unit_list: list[dict], zoo_raw: dict) -> list[str]:
    """The zoo models behind the rows: those whose logits a unit reads, and a method's base, ingredients and the
    models its training builds on."""
    return sorted(
        {m for u in unit_list for m, f in zip(u["members"], u["folders"]) if f.startswith("logits/")}
        | {
            n
            for u in unit_list
            if u["kind"] == "method"
            for n in [u["info"].get("base"), *(u["info"].get("ingredients") or []), *(u["info"].get("builds_on") or [])]
            if n in zoo_raw
        }
    )


def _write_files(tmp: Path, tables: list, results: Path, lock_path: Path | None) -> dict[str, str]:
    """The bundle's data files in the folder ``tmp`` (the rows and paired parts, ``models.csv``, ``dvc.lock``), each
    under :data:`MAX_FILE_BYTES`; role -> file name."""
    files = {}
    for role, name, data in tables:
        (tmp / name).write_bytes(data)
        files[role] = name
    if (results / "models.csv").is_file():
        (tmp / "models.csv").write_bytes((results / "models.csv").read_bytes())
        files["models"] = "models.csv"
    if lock_path is not None:
        (tmp / "dvc.lock").write_bytes(lock_path.read_bytes())
        files["lock"] = "dvc.lock"
    for fname in files.values():
        if (tmp / fname).stat().st_size >= MAX_FILE_BYTES:
            raise BundleError(f"{fname}: over {MAX_FILE_BYTES} bytes; a bundle file must stay under 1 MB")
    return files
