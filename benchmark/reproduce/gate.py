"""Compare a fresh run's results with committed ones, metric by metric, within stated tolerances.

A value reproduces when ``|fresh - committed| <= atol(metric) + rtol(metric) *
|committed|`` (both from params ``reproduce.tolerance``; a metric without its
own entry uses ``default``). The same CPU kind gives byte-identical results (the
pipeline is seeded and deterministic); the tolerances cover other CPUs, whose
kernels round differently: a fine-tune amplifies a last-bit difference into a
slightly different model (README "Reproducibility" says how they were set).

Rows are keyed by :data:`KEY`; a row present on one side only is a failure.
Measured columns (throughput) are never compared. Pure functions on data
frames; reading files is the caller's business (:func:`load_committed`).
"""
from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

KEY = ["suite", "split", "family", "method", "base", "sidekick", "members", "fit", "confidence", "metric"]
COLUMNS = ["value", "ci_low", "ci_high"]


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float = 0.0

    def ok(self, fresh: float, ref: float) -> bool:
        if isinstance(fresh, float) and isinstance(ref, float) and math.isnan(fresh) and math.isnan(ref):
            return True
        return abs(fresh - ref) <= self.atol + self.rtol * abs(ref)


def of_params(reproduce) -> dict[str, Tolerance]:
    """``{metric: Tolerance}`` of the typed params block ``reproduce`` (:class:`~benchmark.stages.params_config.Params`)."""
    if reproduce is None:
        raise ValueError("params reproduce.tolerance: a mapping with a 'default' entry {atol, rtol} is required")
    return {str(m): Tolerance(float(t.atol), float(t.rtol)) for m, t in reproduce.tolerance.items()}


def compare(committed: pd.DataFrame, fresh: pd.DataFrame, tol: dict[str, Tolerance]) -> pd.DataFrame:
    """One row per key of either table: ``status`` is exact | within | outside | missing (not in fresh) | extra.

    ``value``/``ci_low``/``ci_high`` are compared (NaN equals NaN); ``diff`` is the value's difference.
    """
    for name, df in (("committed", committed), ("fresh", fresh)):
        missing = [c for c in KEY + ["value"] if c not in df.columns]
        if missing:
            raise ValueError(f"{name} results: columns {missing} missing")
        dup = df.duplicated(KEY)
        if dup.any():
            raise ValueError(f"{name} results: {int(dup.sum())} rows repeat a key, e.g. {df[dup].iloc[0][KEY].to_dict()}")
    cols = [c for c in COLUMNS if c in committed.columns and c in fresh.columns]
    a = committed[KEY + cols].astype({k: str for k in KEY})
    b = fresh[KEY + cols].astype({k: str for k in KEY})
    m = a.merge(b, on=KEY, how="outer", suffixes=("_ref", "_new"), indicator=True)
    status, diffs = [], []
    for _, r in m.iterrows():
        if r["_merge"] != "both":
            status.append("missing" if r["_merge"] == "left_only" else "extra")
            diffs.append(math.nan)
            continue
        t = tol.get(r["metric"], tol["default"])
        pairs = [(float(r[f"{c}_new"]), float(r[f"{c}_ref"])) for c in cols]
        exact = all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in pairs)
        status.append("exact" if exact else "within" if all(t.ok(x, y) for x, y in pairs) else "outside")
        diffs.append(float(r["value_new"]) - float(r["value_ref"]))
    out = m[KEY].copy()
    out["committed"], out["fresh"], out["diff"], out["status"] = m["value_ref"], m["value_new"], diffs, status
    return out


def summarize(report: pd.DataFrame) -> dict:
    """Counts per status and whether the run reproduces (no outside, missing or extra row)."""
    counts = {s: int((report["status"] == s).sum()) for s in ("exact", "within", "outside", "missing", "extra")}
    return {"rows": int(len(report)), **counts, "reproduces": counts["outside"] + counts["missing"] + counts["extra"] == 0}


def flatten_summary(d: dict, prefix: str = "") -> dict[str, float]:
    """``results/summary.json`` as ``{"duo/a+b/accuracy": value}`` (numbers only)."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(flatten_summary(v, key))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


def compare_summary(committed: dict, fresh: dict, tol: dict[str, Tolerance]) -> pd.DataFrame:
    """The summary's values compared like :func:`compare` (the metric is the last part of each key)."""
    a, b = flatten_summary(committed), flatten_summary(fresh)
    rows = []
    for key in sorted(set(a) | set(b)):
        if key not in b or key not in a:
            rows.append((key, a.get(key, math.nan), b.get(key, math.nan), math.nan, "missing" if key not in b else "extra"))
            continue
        t = tol.get(key.rsplit("/", 1)[-1], tol["default"])
        st = "exact" if a[key] == b[key] else "within" if t.ok(b[key], a[key]) else "outside"
        rows.append((key, a[key], b[key], b[key] - a[key], st))
    return pd.DataFrame(rows, columns=["key", "committed", "fresh", "diff", "status"])


def load_committed(path: str, *, root=".") -> str:
    """Text of ``path`` as committed at ``HEAD`` (``git show``), for files a run overwrites (results/summary.json)."""
    proc = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FileNotFoundError(f"{path}: not committed at HEAD ({proc.stderr.strip() or 'git show failed'})")
    return proc.stdout


def read_summary(text: str, where: str) -> dict:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not JSON ({e})") from None
    if not isinstance(d, dict):
        raise ValueError(f"{where}: not a JSON object")
    return d


def latest_bundle(folder) -> Path:
    """The newest bundle (by name) under ``folder`` (e.g. leaderboard/embedded)."""
    found = sorted(p.parent for p in Path(folder).glob("*/manifest.json"))
    if not found:
        raise FileNotFoundError(f"{folder}: no bundle (no */manifest.json)")
    return found[-1]
