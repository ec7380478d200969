"""``verify``'s checks: a bundle's rows, costs, paired differences and logits files against the recomputed ones.

:func:`check_files` finds the logits folders whose every file has the manifest's sha256; :func:`recomputed_costs`
recomputes the costs (:mod:`benchmark.bundle.recost`) from those logits' shapes; :func:`check_unit` compares one
unit's rows with their recomputed values and costs (to the tolerance, :data:`TOLERANCE`) and, for a duo, its paired
differences. Every mismatch is one line of the :class:`Report`'s ``problems`` naming the row or file;
:mod:`benchmark.bundle.verify` runs the recomputation and decides the status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchmark.bundle import recost
from benchmark.bundle.schema import COSTS, KEY, RECOMPUTED, REPORTED, Bundle, row_label, sha256_file

TOLERANCE = 1e-6
VERIFIED, SELF_REPORTED = "verified", "self-reported"


@dataclass
class Report:
    """What :func:`~benchmark.bundle.verify.verify_bundle` found: the status, counts, mismatches and per-row checks."""

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


def check_files(bundle: Bundle, results: Path, rep: Report) -> set[str]:
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


def recomputed_costs(bundle: Bundle, results: Path | None, ok_folders: set[str], rep: Report) -> recost.Costs | None:
    """The costs of ``bundle`` recomputed from the shapes of its verified logits (the ``ok_folders`` of ``results``),
    or None when there is nothing to recompute them from or the architecture cannot be built or counted here (said
    in ``rep.lines``)."""
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


def check_unit(bundle: Bundle, u: dict, theirs, paired, costs, tolerance: float, rep: Report) -> list[dict]:
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
