"""``verify``: recompute a bundle's rows from logits with the evaluate stage's own code.

The bundle is first loaded and checked (:func:`benchmark.bundle.schema.load_bundle`;
malformed = :class:`~benchmark.bundle.schema.BundleError`). Then, for a results
folder holding the logits (``--logits``, or the suite's results after a pull
through a DVC remote): every logits file must have the sha256 the manifest
lists, every unit's logits folder the hash its rows' ``inputs_hash`` was made
from, and every unit is evaluated again by
:func:`benchmark.evaluation.runner.run_units` (the evaluate stage's unit runner)
with the run's ``evaluate`` params; each row's value, interval, sample count and
temperatures must agree to the tolerance (1e-6), and so must its costs (gflops,
params, balance, overhead, recomputed by :mod:`benchmark.bundle.recost`) and
``models.csv``. A bundle whose rows were all recomputed, costs included, is
*verified*; otherwise *self-reported*. Throughput is the contributor's measurement
and is never verified.

The status is written *outside* the bundle (:func:`record`, ``verify --record-to DIR``:
``DIR/<suite>/<id>.json``, bound to the bundle's identity, its manifest's sha256 and
its rows), in a folder that the workflow creates; ``publish --verified DIR`` reads the
badge from there only (:func:`recorded_status`). A bundle never carries its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from benchmark.bundle import intake, recost, strict
from benchmark.bundle.manifest import evaluate_params
from benchmark.bundle.schema import MANIFEST, Bundle, BundleError, rows_digest, sha256_file
from benchmark.bundle.verify_checks import (  # noqa: F401 (PAIRED_KEY re-exported)
    PAIRED_KEY,
    SELF_REPORTED,
    TOLERANCE,
    VERIFIED,
    Report,
    check_files,
    check_unit,
    recomputed_costs,
)

if TYPE_CHECKING:
    from benchmark.evaluation.runner import Unit

RECORD_FORMAT = "uq-verification/1"
MAX_BOOTSTRAP = 20_000  # verify refuses to spend more than this per split and unit (the params come from the bundle)
MAX_RECORD_BYTES = 65_536


def _eval_config(bundle: Bundle, results: Path, files: dict):
    where = intake.show(bundle.path / MANIFEST)
    cfg = evaluate_params(bundle.manifest, where, bundle.suite)
    if cfg.n_bootstrap > MAX_BOOTSTRAP:
        raise BundleError(
            f"{where}: params.evaluate.n_bootstrap {cfg.n_bootstrap}: verify recomputes at most {MAX_BOOTSTRAP}"
        )
    if (results / "data").is_dir() and results.name == "results" and files:
        # group ids (e.g. iWildCam locations) come from the run's data index, as in the evaluate stage
        from benchmark.evaluation.stage import split_groups
        from benchmark.storage import store

        first = next(iter(files.values()))
        labels = {s: store.mmap_logits_file(p).labels for s, p in first.items()}
        with contextlib.chdir(results.parent):
            cfg = dataclasses.replace(cfg, groups=split_groups(labels))
    return cfg


def verify_bundle(
    bundle: Bundle, results=None, *, tolerance: float = TOLERANCE, workers: int | None = None, progress: bool = True
) -> Report:
    """Check ``bundle`` against the logits in the results folder ``results`` (None: nothing to recompute).

    ``workers``: processes for the units (default: the run's ``evaluate.workers``, at most the CPU count)."""
    if workers is None:
        workers = min(
            evaluate_params(bundle.manifest, intake.show(bundle.path / MANIFEST)).workers, os.cpu_count() or 1
        )
    rep = Report(rows=len(bundle.rows))
    ok_folders, todo = _units_to_recompute(bundle, results, rep)
    fresh = _recompute(bundle, results, todo, workers, progress) if todo else {}
    costs = recomputed_costs(bundle, results, ok_folders, rep)
    done = {u["inputs_hash"]: unit.key for u, unit in todo}
    checks: list[dict] = []
    for u in bundle.manifest["units"]:
        theirs, paired = fresh[done[u["inputs_hash"]]] if u["inputs_hash"] in done else (None, None)
        checks += check_unit(bundle, u, theirs, paired, costs, tolerance, rep)
    if bundle.models is not None:
        rep.models_checked = costs is not None
        if costs is not None:
            rep.problems += recost.compare_models(bundle.models, costs.models, tolerance)
    rep.table = pd.DataFrame(checks)
    full = rep.recomputed == rep.costs == rep.rows and rep.models_checked is not False
    rep.status = VERIFIED if rep.ok and full else SELF_REPORTED
    return rep


def _units_to_recompute(bundle: Bundle, results, rep: Report) -> tuple[set[str], list[tuple[dict, Unit]]]:
    """The logits folders of ``results`` that match the manifest, and the units whose folders all do and hash to
    their rows' ``inputs_hash`` (with the :class:`~benchmark.evaluation.runner.Unit` that recomputes each)."""
    from benchmark.bundle.pack import folder_hash
    from benchmark.evaluation.runner import Unit
    from benchmark.stages.stage_config import fingerprint

    if results is None:
        return set(), []
    results = Path(results)
    ok_folders = check_files(bundle, results, rep)
    todo = []
    for i, u in enumerate(bundle.manifest["units"]):
        if not set(u["folders"]) <= ok_folders:
            continue
        if fingerprint([folder_hash(results / f) for f in u["folders"]]) != u["inputs_hash"]:
            rep.problems.append(
                f"unit {u['kind']} {'+'.join(u['members'])}: the logits folders {u['folders']} do not "
                f"hash to the rows' inputs_hash {u['inputs_hash']} (other or extra logits files)"
            )
            continue
        todo.append((u, Unit((u["kind"], *u["members"]), f"u{i:05d}", u.get("info"))))
    return ok_folders, todo


def _recompute(bundle: Bundle, results, todo: list[tuple[dict, Unit]], workers: int, progress: bool) -> dict:
    """The rows of the ``todo`` units recomputed from the logits in ``results``, as the evaluate stage computes them
    (its unit runner, one torch thread per process: :data:`benchmark.evaluation.runner.THREADS`); key -> (rows,
    paired)."""
    from benchmark.evaluation.runner import Context, run_units
    from benchmark.storage import store

    results = Path(results)
    files = {}
    for u, _ in todo:
        for m, f in zip(u["members"], u["folders"], strict=True):
            files[m] = {
                p.stem: str((results / f / p.name).absolute()) for p in store.listing(results / f, "*.safetensors")
            }
    cfg = _eval_config(bundle, results, files)
    with tempfile.TemporaryDirectory(prefix="uq-verify-") as tmp:
        return run_units(
            [unit for _, unit in todo], Context(cfg=cfg, files=files, folder=tmp), workers=workers, progress=progress
        )


def _record_path(folder, bundle: Bundle) -> Path:
    return Path(folder) / bundle.suite / f"{bundle.name}.json"


def _manifest_sha256(bundle: Bundle) -> str:
    return (
        hashlib.sha256(bundle.files[MANIFEST]).hexdigest()
        if MANIFEST in bundle.files
        else sha256_file(bundle.path / MANIFEST)
    )


def record(folder, bundle: Bundle, rep: Report, *, tolerance: float = TOLERANCE, source: str = "") -> Path | None:
    """Write the verification of ``bundle`` to ``folder/<suite>/<id>.json`` (outside the bundle) when it is verified;
    otherwise remove any earlier record of it. Returns the record's path, or None."""
    from benchmark.bundle.pack import package_versions
    from benchmark.config.numerics import cpu
    from benchmark.storage.store import write_text

    path = _record_path(folder, bundle)
    if rep.status != VERIFIED:
        path.unlink(missing_ok=True)
        return None
    data = {
        "format": RECORD_FORMAT,
        "bundle": f"{bundle.suite}/{bundle.name}",
        "status": rep.status,
        "rows": rep.rows,
        "recomputed": rep.recomputed,
        "costs_recomputed": rep.costs,
        "tolerance": tolerance,
        "manifest_sha256": _manifest_sha256(bundle),
        "rows_sha256": rows_digest(bundle.manifest),
        "reported_not_verified": list(rep.reported),
        "logits": source,
        "checked_with": package_versions(),
        "verified_on": {k: v for k, v in cpu().items() if k in ("kind", "cpu", "cores")},
        "verified_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def recorded_status(folder, bundle: Bundle) -> str:
    """``verified`` when ``folder`` holds a verification record of exactly this bundle (identity, manifest, rows),
    else ``self-reported``; a record that does not match, or cannot be read, is ignored."""
    return VERIFIED if recorded(folder, bundle) else SELF_REPORTED


def recorded(folder, bundle: Bundle) -> dict | None:
    """The verification record of exactly this bundle in ``folder`` (what :func:`record` wrote: when, on which CPU,
    against which logits), or None (no record, one that does not match, or one that cannot be read)."""
    if folder is None:
        return None
    path = _record_path(folder, bundle)
    try:
        with intake.Folder(path.parent) as f:
            data = strict.strict_json(f.read(path.name, cap=MAX_RECORD_BYTES), intake.show(path))
    except BundleError:
        return None
    n = len(bundle.rows)
    same = (
        isinstance(data, dict)
        and data.get("format") == RECORD_FORMAT
        and data.get("bundle") == f"{bundle.suite}/{bundle.name}"
        and data.get("manifest_sha256") == _manifest_sha256(bundle)
        and data.get("rows_sha256") == rows_digest(bundle.manifest)
        and data.get("rows") == data.get("recomputed") == data.get("costs_recomputed") == n
    )
    return data if same and data.get("status") == VERIFIED else None


def pull_logits(bundle: Bundle, remote: str | None, root=".") -> Path:
    """``dvc pull`` the outputs of the stages behind the bundle's logits (through :mod:`benchmark.storage.remote`) into
    this checkout of the suite; returns the suite's results folder. Raises ``RemoteError`` on failure."""
    from benchmark.bundle.pack import suite_folder
    from benchmark.storage import remote as dvc_remote

    folder = suite_folder(bundle.suite, root)
    stages = sorted(
        s
        for s, info in bundle.manifest["stages"].items()
        if any(p.startswith(("results/logits/", "results/methods/")) for p in info.get("outs", {}))
    )
    if bundle.suite != "embedded":  # a paper suite: stages of suites/<name>/dvc.yaml in the root DVC project
        from benchmark.dvcgen import suite_pipeline

        if not suite_pipeline.is_materialised(bundle.suite, root):
            suite_pipeline.write(bundle.suite, root)  # ask for the suite: its dvc.yaml (params.yaml is kept)
        stages = [f"suites/{bundle.suite}/dvc.yaml:{s}" for s in stages]
    dvc_remote.pull(stages, remote=remote or bundle.manifest["remote"], root=root)
    return folder / "results"
