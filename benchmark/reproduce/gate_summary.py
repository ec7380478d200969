"""The gate's second half: each value of a fresh ``results/summary.json`` against the committed one, judged by the
path of the result row it was taken from (:mod:`benchmark.reproduce.gate`: exact where the row's logits are the same,
within the row's ``k`` times its noise elsewhere)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from benchmark.bundle.schema import KEY

SUMMARY_ATOL = 1.5e-6  # results/summary.json rounds to 6 decimals: one unit of the last decimal, plus float error


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


def summary_sources(rows: pd.DataFrame, summarize) -> dict[str, tuple]:
    """``summary key -> the row's KEY tuple`` it was taken from: ``summarize`` (the evaluate stage's own summary,
    ``rows -> dict``: :func:`benchmark.evaluation.stage.summary` at the run's main fit) run on the rows with each value
    replaced by the row's position."""
    pos = rows.reset_index(drop=True).assign(value=lambda d: np.arange(len(d), dtype=float))
    keys = pos[KEY].astype(str).itertuples(index=False, name=None)
    by_pos = dict(enumerate(keys))
    return {k: by_pos[int(v)] for k, v in flatten_summary(summarize(pos)).items()}


def compare_summary(committed: dict, fresh: dict, row_report: pd.DataFrame, sources: dict[str, tuple]) -> pd.DataFrame:
    """Each summary value against its committed version, by the path of the row it came from: exact path
    ``|diff| <= SUMMARY_ATOL``; noise path ``|diff| <= k noise + SUMMARY_ATOL`` (the row's ``k`` and noise).

    ``status``: identical | within | outside | missing | extra."""
    a, b = flatten_summary(committed), flatten_summary(fresh)
    rep = row_report.set_index(KEY)
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            out.append(
                (
                    key,
                    a.get(key, math.nan),
                    b.get(key, math.nan),
                    math.nan,
                    "",
                    math.nan,
                    "missing" if key not in b else "extra",
                )
            )
            continue
        src = sources.get(key)
        r = rep.loc[src] if src is not None and src in rep.index else None
        noise_path = r is not None and r["path"] == "noise"
        tol = SUMMARY_ATOL + (float(r["k"]) * float(r["noise"]) if noise_path and np.isfinite(r["noise"]) else 0.0)
        d = b[key] - a[key]
        st = "identical" if a[key] == b[key] else "within" if abs(d) <= tol else "outside"
        out.append((key, a[key], b[key], d, "noise" if noise_path else "exact", tol, st))
    return pd.DataFrame(out, columns=["key", "committed", "fresh", "diff", "path", "tolerance", "status"])


def summarize_summary(report: pd.DataFrame) -> dict:
    """Counts per status of :func:`compare_summary`'s report and whether every value reproduces."""
    c = report["status"].value_counts()
    n = {s: int(c.get(s, 0)) for s in ("identical", "within", "outside", "missing", "extra")}
    return {"values": int(len(report)), **n, "reproduces": n["outside"] + n["missing"] + n["extra"] == 0}


def read_summary(text: str, where: str) -> dict:
    """``results/summary.json``'s text as a mapping; ``ValueError`` naming ``where`` when it is not a JSON object."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not JSON ({e})") from None
    if not isinstance(d, dict):
        raise ValueError(f"{where}: not a JSON object")
    return d
