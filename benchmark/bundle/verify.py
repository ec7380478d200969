"""``verify``: recompute a bundle's rows from logits with the evaluate stage's own code.

The bundle is first loaded and checked (:func:`benchmark.bundle.schema.load_bundle`;
malformed = :class:`~benchmark.bundle.schema.BundleError`). Then, for a results
folder holding the logits (``--logits``, or the suite's results after a pull
through a DVC remote): every logits file must have the sha256 the manifest
lists, every unit's logits folder the hash its rows' ``inputs_hash`` was made
from, and every unit is evaluated again by
:func:`benchmark.evaluation.runner.run_units` (the evaluate stage's unit runner)
with the run's ``evaluate`` params; each row's value, interval, sample count and
temperatures must agree to the tolerance (1e-6). A bundle whose rows were all
recomputed is *verified*; without logits it is *self-reported*.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchmark.bundle.schema import KEY, MANIFEST, RECOMPUTED, VERIFICATION, Bundle, row_label, rows_digest, sha256_file
from benchmark.stages.stage_config import fingerprint

TOLERANCE = 1e-6
VERIFIED, SELF_REPORTED = "verified", "self-reported"


@dataclass
class Report:
    status: str = SELF_REPORTED
    rows: int = 0
    recomputed: int = 0
    problems: list[str] = field(default_factory=list)  # mismatches: each names the row or file
    lines: list[str] = field(default_factory=list)  # per-unit report
    table: pd.DataFrame | None = None  # per-row: key columns + check, detail

    @property
    def ok(self) -> bool:
        return not self.problems


def _close(a, b, tol: float) -> bool:
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _eval_config(bundle: Bundle, results: Path, files: dict):
    from benchmark.config.evaluate import EvalConfig

    params = bundle.manifest["params"]
    cfg = EvalConfig.from_params(params.get("suite", "embedded"), params.get("evaluate") or {})
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
            rep.problems.append(f"{p}: sha256 differs from the manifest's ({info['sha256'][:16]}...): "
                                f"the logits file was edited or the manifest hash does not match it")
    folders = {rel.rsplit("/", 1)[0] for rel in bundle.manifest["logits"]}
    return folders - missing - bad


def _compare(unit: dict, mine: pd.DataFrame, theirs: pd.DataFrame, tol: float, rep: Report) -> list[dict]:
    """Per-row checks of one unit; mismatches go to ``rep.problems``."""
    fresh = {tuple(str(r[k]) for k in KEY): r for r in theirs.to_dict("records")}
    out = []
    for r in mine.to_dict("records"):
        key = tuple(str(r[k]) for k in KEY)
        f = fresh.pop(key, None)
        if f is None:
            check, detail = "mismatch", "the evaluation produces no such row"
        else:
            diffs = [f"{c}: bundle {r[c]!r}, recomputed {f[c]!r}" for c in RECOMPUTED if not _close(r[c], f[c], tol)]
            check, detail = ("mismatch", "; ".join(diffs)) if diffs else ("ok", "")
        if check != "ok":
            rep.problems.append(f"row ({row_label(r)}): {detail}")
        out.append({**{k: r[k] for k in KEY}, "check": check, "detail": detail})
    for key in fresh:
        label = ", ".join(f"{k}={v}" for k, v in zip(KEY, key, strict=True) if v)
        rep.problems.append(f"row ({label}): recomputed but missing from the bundle (unit {unit['kind']} {'+'.join(unit['members'])})")
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
        diffs = [f"{c}: bundle {r[c]!r}, recomputed {f[c]!r}" for c in PAIRED_VALUES if c in r and not _close(r[c], f[c], tol)]
        if diffs:
            rep.problems.append(f"{label}: {'; '.join(diffs)}")
    for key in new:
        rep.problems.append("paired (" + ", ".join(f"{k}={v}" for k, v in zip(PAIRED_KEY, key, strict=True))
                            + f"): recomputed but missing from the bundle (duo {base}+{side})")


def verify_bundle(bundle: Bundle, results=None, *, tolerance: float = TOLERANCE, workers: int | None = None,
                  progress: bool = True) -> Report:
    """Check ``bundle`` against the logits in the results folder ``results`` (None: nothing to recompute).

    ``workers``: processes for the units (default: the run's ``evaluate.workers``)."""
    if workers is None:
        w = (bundle.manifest["params"].get("evaluate") or {}).get("workers", 1)
        workers = w if isinstance(w, int) and not isinstance(w, bool) and w >= 1 else 1
    from benchmark.bundle.pack import folder_hash
    from benchmark.evaluation.runner import Context, Unit, run_units
    from benchmark.storage import store

    rows = bundle.rows
    rep = Report(rows=len(rows))
    checks: list[dict] = []
    todo: list[tuple[dict, Unit]] = []
    units = bundle.manifest["units"]
    if results is not None:
        results = Path(results)
        ok_folders = _check_files(bundle, results, rep)
        for i, u in enumerate(units):
            if not set(u["folders"]) <= ok_folders:
                continue
            if fingerprint([folder_hash(results / f) for f in u["folders"]]) != u["inputs_hash"]:
                rep.problems.append(f"unit {u['kind']} {'+'.join(u['members'])}: the logits folders {u['folders']} do not hash "
                                    f"to the rows' inputs_hash {u['inputs_hash']} (other or extra logits files)")
                continue
            todo.append((u, Unit((u["kind"], *u["members"]), f"u{i:05d}", u.get("info"))))
    fresh = {}
    if todo:
        files = {}
        for u, _ in todo:
            for m, f in zip(u["members"], u["folders"], strict=True):
                files[m] = {p.stem: str((results / f / p.name).absolute()) for p in store.listing(results / f, "*.safetensors")}
        cfg = _eval_config(bundle, results, files)
        with tempfile.TemporaryDirectory(prefix="uq-verify-") as tmp:
            ctx = Context(cfg=cfg, files=files, folder=tmp)
            fresh = run_units([unit for _, unit in todo], ctx, workers=workers,
                              threads=max(1, int(bundle.manifest["params"].get("threads") or os.cpu_count() or 1) // workers), progress=progress)
    done = {u["inputs_hash"]: unit.key for u, unit in todo}
    for u in units:
        mine = rows[rows["inputs_hash"] == u["inputs_hash"]]
        name = f"{u['kind']} {'+'.join(u['members'])}"
        if u["inputs_hash"] not in done:
            checks += [{**{k: r[k] for k in KEY}, "check": "not recomputed", "detail": "no logits"} for r in mine.to_dict("records")]
            rep.lines.append(f"{name}: {len(mine)} rows not recomputed (logits not available or not matching)")
            continue
        theirs, paired = fresh[done[u["inputs_hash"]]]
        before = len(rep.problems)
        checks += _compare(u, mine, theirs, tolerance, rep)
        if u["kind"] == "duo" and bundle.paired is not None:
            _compare_paired(u, bundle.paired, paired, tolerance, rep)
        rep.recomputed += len(mine)
        bad = len(rep.problems) - before
        rep.lines.append(f"{name}: {len(mine)} rows recomputed, " + (f"{bad} mismatch(es)" if bad else "all equal"))
    rep.table = pd.DataFrame(checks)
    rep.status = VERIFIED if rep.ok and rep.recomputed == rep.rows else SELF_REPORTED
    return rep


def record(bundle: Bundle, rep: Report, tolerance: float = TOLERANCE) -> Path:
    """Write ``verification.json`` next to the manifest (what ``publish`` reads for the badge)."""
    from benchmark.bundle.pack import package_versions
    from benchmark.storage.store import write_text

    data = {"status": rep.status, "rows": rep.rows, "recomputed": rep.recomputed, "tolerance": tolerance,
            "manifest_sha256": sha256_file(bundle.path / MANIFEST), "rows_sha256": rows_digest(bundle.manifest),
            "checked_with": package_versions()}
    path = bundle.path / VERIFICATION
    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def _recorded(bundle: Bundle) -> dict:
    try:
        data = json.loads((bundle.path / VERIFICATION).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def claimed_status(bundle: Bundle) -> str:
    """What ``verification.json`` says, whether or not it still applies to the bundle's files."""
    return VERIFIED if _recorded(bundle).get("status") == VERIFIED else SELF_REPORTED


def recorded_status(bundle: Bundle) -> str:
    """``verified`` when ``verification.json`` says so for exactly this manifest and these rows, else ``self-reported``."""
    data = _recorded(bundle)
    same = (data.get("manifest_sha256") == sha256_file(bundle.path / MANIFEST)
            and data.get("rows_sha256") == rows_digest(bundle.manifest)
            and data.get("recomputed") == data.get("rows") == len(bundle.rows))
    return VERIFIED if data.get("status") == VERIFIED and same else SELF_REPORTED


def pull_logits(bundle: Bundle, remote: str | None, root=".") -> Path:
    """``dvc pull`` the outputs of the stages behind the bundle's logits (through :mod:`benchmark.storage.remote`) into
    this checkout of the suite; returns the suite's results folder. Raises ``RemoteError`` on failure."""
    from benchmark.bundle.pack import suite_folder
    from benchmark.storage import remote as dvc_remote

    folder = suite_folder(bundle.suite, root)
    stages = sorted(s for s, info in bundle.manifest["stages"].items()
                    if any(p.startswith(("results/logits/", "results/methods/")) for p in info.get("outs", {})))
    if bundle.suite != "embedded":  # a paper suite: stages of suites/<name>/dvc.yaml in the root DVC project
        from benchmark.dvcgen import suite_pipeline

        if not suite_pipeline.is_materialised(bundle.suite, root):
            suite_pipeline.write(bundle.suite, root)  # ask for the suite: its dvc.yaml (params.yaml is kept)
        stages = [f"suites/{bundle.suite}/dvc.yaml:{s}" for s in stages]
    dvc_remote.pull(stages, remote=remote or bundle.manifest["remote"], root=root)
    return folder / "results"
