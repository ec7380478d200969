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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from benchmark.bundle import intake, recost
from benchmark.bundle.manifest import evaluate_params
from benchmark.bundle.schema import (
    COSTS,
    KEY,
    MANIFEST,
    RECOMPUTED,
    REPORTED,
    Bundle,
    BundleError,
    row_label,
    rows_digest,
    sha256_file,
)

if TYPE_CHECKING:
    from benchmark.evaluation.runner import Unit

TOLERANCE = 1e-6
VERIFIED, SELF_REPORTED = "verified", "self-reported"
RECORD_FORMAT = "uq-verification/1"
MAX_BOOTSTRAP = 20_000  # verify refuses to spend more than this per split and unit (the params come from the bundle)
MAX_RECORD_BYTES = 65_536


@dataclass
class Report:
    status: str = SELF_REPORTED
    rows: int = 0
    recomputed: int = 0  # rows whose values were recomputed
    costs: int = 0  # rows whose costs were recomputed
    models_checked: bool | None = None  # models.csv checked (None: the bundle has none)
    problems: list[str] = field(default_factory=list)  # mismatches: each names the row or file
    lines: list[str] = field(default_factory=list)  # per-unit report
    table: pd.DataFrame | None = None  # per-row: key columns + check, detail
    reported: tuple[str, ...] = tuple(REPORTED)  # columns shown as reported by the contributor, never verified

    @property
    def ok(self) -> bool:
        """Whether the verification found no problem."""
        return not self.problems

    def why_not_verified(self, no_logits: str = "no logits: give --logits or --remote") -> str:
        """One line: what keeps the bundle from being verified ('' when it is); ``no_logits`` says why rows were not
        recomputed (the caller knows where it looked for logits)."""
        if self.status == VERIFIED:
            return ""
        if self.problems:
            return f"{len(self.problems)} mismatch(es)"
        parts = []
        if self.recomputed < self.rows:
            parts.append(f"{self.rows - self.recomputed} of {self.rows} rows not recomputed ({no_logits})")
        if self.costs < self.rows:
            parts.append(f"the costs of {self.rows - self.costs} rows not recomputed")
        if self.models_checked is False:
            parts.append("models.csv not checked")
        return "; ".join(parts) or "not recomputed"


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


def _check_files(bundle: Bundle, results: Path, rep: Report) -> set[str]:
    """Folders whose every listed logits file is present with its manifest sha256."""
    missing, bad = set(), set()
    for rel, info in sorted(bundle.manifest["logits"].items()):
        folder = rel.rsplit("/", 1)[0]
        p = results / rel
        if not p.is_file():
            missing.add(folder)
        elif sha256_file(p) != info["sha256"]:
            bad.add(folder)
            rep.problems.append(
                f"{p}: sha256 differs from the manifest's ({info['sha256'][:16]}...): "
                f"the logits file was edited or the manifest hash does not match it"
            )
    folders = {rel.rsplit("/", 1)[0] for rel in bundle.manifest["logits"]}
    return folders - missing - bad


def _compare(
    unit: dict, mine: pd.DataFrame, theirs: pd.DataFrame | None, costs: dict | None, tol: float, rep: Report
) -> list[dict]:
    """Per-row checks of one unit (values when ``theirs``, costs when ``costs``); mismatches go to ``rep.problems``."""
    fresh = {tuple(str(r[k]) for k in KEY): r for r in theirs.to_dict("records")} if theirs is not None else {}
    out = []
    for r in mine.to_dict("records"):
        diffs, missing = [], []
        if theirs is not None:
            f = fresh.pop(tuple(str(r[k]) for k in KEY), None)
            if f is None:
                diffs.append("the evaluation produces no such row")
            else:
                diffs += [
                    f"{c}: bundle {r[c]!r}, recomputed {f[c]!r}"
                    for c in RECOMPUTED
                    if not recost.close(r[c], f[c], tol)
                ]
        else:
            missing.append("values (no logits)")
        if costs is not None:
            diffs += [
                f"{c}: bundle {r[c]!r}, recomputed {costs[c]!r}" for c in COSTS if not recost.close(r[c], costs[c], tol)
            ]
        else:
            missing.append("costs")
        check = "mismatch" if diffs else "not recomputed" if missing else "ok"
        detail = "; ".join(diffs) if diffs else ("not recomputed: " + ", ".join(missing) if missing else "")
        if diffs:
            rep.problems.append(f"row ({row_label(r)}): {detail}")
        out.append({**{k: r[k] for k in KEY}, "check": check, "detail": detail})
    for key in fresh:
        label = ", ".join(f"{k}={v}" for k, v in zip(KEY, key, strict=True) if v)
        rep.problems.append(
            f"row ({label}): recomputed but missing from the bundle (unit {unit['kind']} {'+'.join(unit['members'])})"
        )
    return out


PAIRED_KEY = ["split", "base", "sidekick", "fit", "method", "metric"]
PAIRED_VALUES = ["diff", "ci_low", "ci_high", "p_value"]


def _compare_paired(unit: dict, bundled: pd.DataFrame, fresh: pd.DataFrame, tol: float, rep: Report) -> None:
    """The bundle's paired differences of a duo against the recomputed ones (same keys, values to ``tol``)."""
    base, side = unit["members"]
    mine = bundled[(bundled["base"] == base) & (bundled["sidekick"] == side)]
    new = {tuple(str(r[k]) for k in PAIRED_KEY): r for r in fresh.to_dict("records")}
    for r in mine.to_dict("records"):
        key = tuple(str(r[k]) for k in PAIRED_KEY)
        f = new.pop(key, None)
        label = "paired (" + ", ".join(f"{k}={v}" for k, v in zip(PAIRED_KEY, key, strict=True)) + ")"
        if f is None:
            rep.problems.append(f"{label}: the evaluation produces no such paired difference")
            continue
        diffs = [
            f"{c}: bundle {r[c]!r}, recomputed {f[c]!r}"
            for c in PAIRED_VALUES
            if c in r and not recost.close(r[c], f[c], tol)
        ]
        if diffs:
            rep.problems.append(f"{label}: {'; '.join(diffs)}")
    for key in new:
        rep.problems.append(
            "paired ("
            + ", ".join(f"{k}={v}" for k, v in zip(PAIRED_KEY, key, strict=True))
            + f"): recomputed but missing from the bundle (duo {base}+{side})"
        )


def _shapes(bundle: Bundle, results: Path, ok_folders: set[str]) -> tuple[int | None, dict[str, int]]:
    """The class count C of the logits and each method output's member count M, from the verified logits files."""
    from benchmark.storage import store

    num_classes, members = None, {}
    for rel in sorted(bundle.manifest["logits"]):
        folder = rel.rsplit("/", 1)[0]
        if folder not in ok_folders:
            continue
        z = store.mmap_logits_file(results / rel).logits
        if num_classes is None:
            num_classes = int(z.shape[-1])
        if folder.startswith("methods/"):
            members.setdefault(folder.split("/")[1], int(z.shape[0]) if z.ndim == 3 else 1)
    return num_classes, members


def _costs(bundle: Bundle, results: Path | None, ok_folders: set[str], rep: Report) -> recost.Costs | None:
    if results is None or not ok_folders:
        return None
    num_classes, members = _shapes(bundle, results, ok_folders)
    if num_classes is None:
        return None
    try:
        return recost.recompute(bundle, num_classes, members)
    except (ValueError, RuntimeError, TypeError) as e:  # an architecture that cannot be built or counted here
        rep.lines.append(f"costs not recomputed: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
        return None


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
    costs = _costs(bundle, results, ok_folders, rep)
    done = {u["inputs_hash"]: unit.key for u, unit in todo}
    checks: list[dict] = []
    for u in bundle.manifest["units"]:
        theirs, paired = fresh[done[u["inputs_hash"]]] if u["inputs_hash"] in done else (None, None)
        checks += _check_unit(bundle, u, theirs, paired, costs, tolerance, rep)
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
    ok_folders = _check_files(bundle, results, rep)
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


def _check_unit(bundle: Bundle, u: dict, theirs, paired, costs, tolerance: float, rep: Report) -> list[dict]:
    """One unit's rows against their recomputed values (``theirs``, None when not recomputed) and costs; its line
    of the report; the checks made."""
    mine = bundle.rows[bundle.rows["inputs_hash"] == u["inputs_hash"]]
    expected = costs.units.get(u["inputs_hash"]) if costs is not None else None
    before = len(rep.problems)
    checks = _compare(u, mine, theirs, expected, tolerance, rep)
    if theirs is not None and u["kind"] == "duo" and bundle.paired is not None:
        _compare_paired(u, bundle.paired, paired, tolerance, rep)
    bad = len(rep.problems) - before
    rep.recomputed += len(mine) if theirs is not None else 0
    rep.costs += len(mine) if expected is not None else 0
    what = "rows recomputed" if theirs is not None else "rows not recomputed (logits not available or not matching)"
    why = costs.missing.get(u["inputs_hash"]) if costs is not None else None
    cost_note = "" if expected is not None else f"; costs not recomputed{f' ({why})' if why else ''}"
    rep.lines.append(
        f"{u['kind']} {'+'.join(u['members'])}: {len(mine)} {what}{cost_note}, "
        + (f"{bad} mismatch(es)" if bad else "no mismatch")
    )
    return checks


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
            data = intake.strict_json(f.read(path.name, cap=MAX_RECORD_BYTES), intake.show(path))
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
