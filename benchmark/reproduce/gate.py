"""The reproducibility gate: a fresh run's rows, summary and stage outputs against the committed ones.

``python -m benchmark reproduce check`` compares every row of a fresh
``results/metrics.csv`` with the row of the same key (:data:`KEY`) in the
committed embedded bundle, and each value of ``results/summary.json`` with its
committed (git ``HEAD``) version. Each row takes one of two paths:

**Exact path** (the fresh row's ``inputs_hash`` equals the committed one: the same
logits went in). Everything computed from the logits must come out the same:
``value``, ``ci_low``, ``ci_high``, ``n``, the temperatures and weights, and the
cost columns but ``throughput`` (:data:`EXACT_COLUMNS`) agree to ``|a - b| <=
1e-9 max(|a|, |b|) + 1e-12`` (NaN equals NaN). Any regression of the metric code,
the temperature fits, the combiners or the bootstrap shows here, however small:
a temperature 3% off, a metric computed one sample wrong, a duo combined with
another sidekick's logits (tests/reproduce/test_gate.py makes each with the real
evaluation code).

**Noise path** (the inputs differ: the models were trained again, on another
CPU kind or with other numerics). The row must lie within ``k`` times its noise,
``|fresh - committed| <= k * noise``, where ``noise = sqrt(sd_seed^2 +
se_boot^2)`` is the committed row's own noise (:mod:`benchmark.core.noise`: the
spread of the row over training seeds, else the largest spread measured for the
split and metric, plus the row's bootstrap standard error). Only the committed
side's noise counts: a regression that makes the fresh models erratic must not
widen its own tolerance. The columns that do not depend on trained weights
(``n``, GFLOPs, parameters, balance, overheads: :data:`STRUCTURAL_COLUMNS`)
must still agree exactly.

``k`` follows from the seed count. The fresh and the committed value are two independent draws, so their difference
has the standard deviation ``sqrt(2) sigma``; ``sigma`` is estimated by a seed spread of ``s`` seeds (``s - 1``
degrees of freedom), so ``(fresh - committed) / (sqrt(2) sd)`` follows Student's ``t`` with ``s - 1`` degrees of
freedom. A row passes below the two-sided ``1 - ALPHA`` quantile: ``k = sqrt(2) t_{s-1}(1 - ALPHA / 2)`` with ``ALPHA
= 0.001`` (a gate of ~10^5 rows needs a small per-row false-alarm rate): ``k = 12.2`` for 5 seeds, ``6.8`` for 10,
``44.7`` for 3 (a spread of 3 seeds says little); ``sqrt(2) z = 4.65`` for a row whose noise is its bootstrap error
alone. The noise path cannot see a small regression: that is what the exact path is for.

**Mode.** When both runs pinned the CPU numerics (:mod:`benchmark.config.numerics`;
the fresh run's ``results/timings.json``, else its checkpoints' ``train.json``,
else this process; the committed run's bundle manifest, else the committed
``results/timings.json``; unknown counts as not pinned) the pipeline is
byte-identical across x86 CPU kinds, so a row whose inputs differ fails on its own
("logits differ although both runs pinned the numerics") unless
``--allow-other-inputs``; and every stage output of ``dvc.lock`` but those that
embed a measured time or a run record (:data:`benchmark.dvcutil.lockfile.MEASURED`) must equal
the committed one.

What the noise path can see is small only where the seed noise is: :func:`detection` gives, per headline
metric, the smallest shift it detects (``k`` times the committed row's noise; the reproducibility page shows them
for the committed bundle). Byte-identical logits across CPU kinds keep a run on the exact path, which sees any shift.

**Another CPU vendor.** The training and logits stages give the same bytes on an Intel and an AMD CPU (the portable
kernels); the evaluation does not: its temperature fits and bootstrap call MKL's float64 BLAS (``dot``, ``mv``,
``mm``), vector math (``log``, ``exp``) and LAPACK (``eigh``), whose code paths differ by vendor, so the same logits
give values that part at 1e-9 to 1e-5 relative (a real Intel Xeon against the AMD EPYCs' bundle). With
``evaluation_parts`` (the caller's: ``--allow-other-inputs`` and runs of two vendors) a row with the same logits that
is not within the exact tolerance is judged on the noise path, like a row with other logits (column ``same_logits``
tells them apart).

**Chosen rows.** A row whose zoo models the method chose from the data (the greedy soup's ingredients, declared by
the method: :func:`benchmark.methods.registry.chosen_rows`) is matched by what it is, not by the models it chose
(:func:`identity`): another CPU kind's greedy soup may keep other ingredients and is then compared on the noise
path, its choice reported as a value (column ``choice``); on the exact path the same logits must make the same
choice.

A row present on one side only fails. Pure functions on data frames; reading
files is the caller's (:mod:`benchmark.cli.reproduce_commands`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from benchmark.bundle.schema import KEY, RECOMPUTED, Bundle, load_bundle

STRUCTURAL_COLUMNS = ["n", "gflops", "params", "balance", "overhead_percent", "extra_params_percent"]
EXACT_COLUMNS = RECOMPUTED + [
    c for c in STRUCTURAL_COLUMNS if c not in RECOMPUTED
]  # throughput: measured, never compared
EXACT_RTOL, EXACT_ATOL = 1e-9, 1e-12
ALPHA = 1e-3  # two-sided per-row false-alarm rate of the noise path
FAIL = ("differs", "beyond-noise", "inputs-differ", "missing", "extra")


def k_factor(seeds) -> np.ndarray:
    """``sqrt(2) t_{seeds-1}(1 - ALPHA/2)`` per row; the normal quantile where fewer than 2 seeds measured the noise."""
    df = np.asarray(seeds, dtype=float) - 1
    q = np.where(df >= 1, stats.t.ppf(1 - ALPHA / 2, np.maximum(df, 1)), stats.norm.ppf(1 - ALPHA / 2))
    return math.sqrt(2) * q


def _num(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def close(a, b, rtol: float = EXACT_RTOL, atol: float = EXACT_ATOL) -> np.ndarray:
    """Elementwise ``|a - b| <= rtol max(|a|, |b|) + atol``; NaN equals NaN."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore"):
        ok = (a == b) | (np.abs(a - b) <= rtol * np.maximum(np.abs(a), np.abs(b)) + atol)
    return ok | (np.isnan(a) & np.isnan(b))


def _check(name: str, df: pd.DataFrame) -> None:
    missing = [c for c in KEY + ["value", "inputs_hash"] if c not in df.columns]
    if missing:
        raise ValueError(f"{name} results: columns {missing} missing")
    dup = df.duplicated(KEY)
    if dup.any():
        raise ValueError(f"{name} results: {int(dup.sum())} rows repeat a key, e.g. {df[dup].iloc[0][KEY].to_dict()}")


CHOSEN = "(chosen)"  # what a chosen row's base and members read in its identity (:func:`identity`)
CHOICE_COLUMNS = ["base", "members"]


def identity(rows: pd.DataFrame, chosen=()) -> pd.DataFrame:
    """The :data:`KEY` by which the gate matches a row: the row's key, except for the rows whose zoo models the
    method chose from the data (``chosen``: ``(family, method)`` pairs, e.g. ``("soup", "greedy")``: the greedy soup
    keeps the ingredients that improve its validation score). Such a row is *what* it is (the greedy soup of its
    suite, on its split, fit, confidence and metric), so its ``base`` and ``members`` read :data:`CHOSEN`; the choice
    itself is a value (:func:`compare`'s ``choice``). Where two rows of one table would then share an identity (two
    greedy soups of different pools), both keep their full key."""
    out = rows[KEY].astype(str).reset_index(drop=True)
    if not len(chosen) or out.empty:
        return out
    pairs = pd.MultiIndex.from_tuples([tuple(map(str, p)) for p in chosen], names=["family", "method"])
    mask = pd.MultiIndex.from_frame(out[["family", "method"]]).isin(pairs)
    blank = out.copy()
    blank.loc[mask, CHOICE_COLUMNS] = CHOSEN
    clash = mask & blank.duplicated(KEY, keep=False).to_numpy()
    blank.loc[clash, CHOICE_COLUMNS] = out.loc[clash, CHOICE_COLUMNS]
    return blank


def compare(
    committed: pd.DataFrame,
    fresh: pd.DataFrame,
    noise: pd.DataFrame,
    *,
    inputs_must_match: bool = False,
    chosen=(),
    evaluation_parts: bool = False,
) -> pd.DataFrame:
    """One row per identity of either table (see the module docstring for the rules).

    ``noise``: :func:`benchmark.core.noise.row_noise` of ``committed`` (same index). ``inputs_must_match``:
    both runs pinned the numerics and other inputs are not allowed. ``chosen``: the ``(family, method)`` pairs whose
    base and members are a data-driven choice (:func:`identity`; :func:`benchmark.methods.registry.chosen_rows`): such
    rows are matched by what they are, and a different choice is a value (column ``choice``), failing on the exact path
    only (the same logits must make the same choice). ``evaluation_parts``: the runs' CPU vendors differ and other
    inputs are allowed (module docstring). Columns: :data:`KEY` (the committed row's, else the fresh one's),
    ``same_logits``, ``path`` (exact | noise | ''), ``status`` (identical | recomputed | differs | within-noise |
    beyond-noise | inputs-differ | missing | extra), ``committed``, ``fresh``, ``diff`` (values), ``noise``, ``k``,
    ``ratio`` (``|diff| / noise``), ``seed_source``, ``choice`` ('' or ``committed -> fresh`` members where the choice
    differs), ``detail`` (the columns that differ), ``ok``.
    """
    _check("committed", committed)
    _check("fresh", fresh)
    cols = [c for c in EXACT_COLUMNS if c in committed.columns and c in fresh.columns]
    m = _matched(committed, fresh, noise, cols, chosen)
    j = _judged(m, cols, inputs_must_match, evaluation_parts)
    exact = j["exact_path"].to_numpy()
    out = m[KEY].copy()
    out["same_logits"] = j["same_inputs"].to_numpy()
    out["path"] = np.where(~j["both"].to_numpy(), "", np.where(exact, "exact", "noise"))
    out["status"] = j["status"].to_numpy()
    out["committed"], out["fresh"], out["diff"] = j["ref"].to_numpy(), j["new"].to_numpy(), j["diff"].to_numpy()
    for c in ("noise", "k", "ratio"):  # the noise path's: NaN on the exact path
        out[c] = np.where(exact, np.nan, j[c].to_numpy())
    out["seed_source"] = m["seed_source"].fillna("")
    out["choice"] = j["choice"].to_numpy()
    out["detail"] = _details(j, cols)
    out["ok"] = ~np.isin(j["status"].to_numpy(), FAIL)
    return out


def _matched(
    committed: pd.DataFrame, fresh: pd.DataFrame, noise: pd.DataFrame, cols: list[str], chosen
) -> pd.DataFrame:
    """The two tables outer-joined on each row's :func:`identity`: ``<column>_ref`` (committed, with its noise) and
    ``<column>_new`` (fresh) of the :data:`KEY`, ``cols`` and ``inputs_hash``; ``_merge`` says which side has the
    row; the :data:`KEY` columns hold the committed row's key, else the fresh one's."""
    ident = ["_" + k for k in KEY]

    def side(df: pd.DataFrame) -> pd.DataFrame:
        keyed = df[KEY + cols + ["inputs_hash"]].astype({k: str for k in KEY}).reset_index(drop=True)
        return pd.concat([keyed, identity(df, chosen).set_axis(ident, axis=1)], axis=1)

    a = pd.concat([side(committed), noise[["noise", "seeds", "seed_source"]].reset_index(drop=True)], axis=1)
    b = side(fresh)
    for name, df in (("committed", a), ("fresh", b)):
        dup = df.duplicated(ident)
        if (
            dup.any()
        ):  # identity() keeps full keys where blanking would clash: cannot happen, but never merge many-to-many
            raise ValueError(f"{name} results: {int(dup.sum())} rows share an identity")
    m = a.merge(b, on=ident, how="outer", suffixes=("_ref", "_new"), indicator=True).reset_index(drop=True)
    for k in KEY:
        m[k] = m[f"{k}_ref"].where(m[f"{k}_ref"].notna(), m[f"{k}_new"])
    return m


def _judged(m: pd.DataFrame, cols: list[str], inputs_must_match: bool, evaluation_parts: bool = False) -> pd.DataFrame:
    """Per matched row (:func:`_matched`) what the rules of the module docstring look at, as columns: ``both``,
    ``same_inputs``, ``choice``, ``agree:<column>`` (within the exact tolerance), ``ref``/``new``/``diff`` (values),
    ``noise``, ``k``, ``ratio``, ``within`` (the value within k x noise), ``noise_ok`` (and the structural columns
    exact), ``exact_path`` and the verdict, ``status``."""
    j = pd.DataFrame(index=m.index)
    both = (m["_merge"] == "both").to_numpy()
    other = pd.Series(both, index=m.index) & (m["members_ref"] != m["members_new"])
    j["choice"] = ""
    j.loc[other, "choice"] = m.loc[other, "members_ref"] + " -> " + m.loc[other, "members_new"]
    no_choice = (j["choice"] == "").to_numpy()
    j["both"] = both
    j["same_inputs"] = both & (m["inputs_hash_ref"].astype(str) == m["inputs_hash_new"].astype(str)).to_numpy()
    for c in cols:
        j[f"agree:{c}"] = close(_num(m[f"{c}_ref"]), _num(m[f"{c}_new"]))
    exact_ok = np.logical_and.reduce([j[f"agree:{c}"].to_numpy() for c in cols]) & no_choice
    bitwise = np.logical_and.reduce(
        [
            (_num(m[f"{c}_ref"]) == _num(m[f"{c}_new"]))
            | (np.isnan(_num(m[f"{c}_ref"])) & np.isnan(_num(m[f"{c}_new"])))
            for c in cols
        ]
    )
    j["ref"], j["new"] = _num(m["value_ref"]), _num(m["value_new"])
    j["diff"] = j["new"] - j["ref"]
    j["k"] = k_factor(m["seeds"].fillna(0))
    j["noise"] = _num(m["noise"])
    with np.errstate(invalid="ignore", divide="ignore"):
        j["ratio"] = np.abs(j["diff"].to_numpy()) / j["noise"].to_numpy()
        j["within"] = j["agree:value"].to_numpy() | (
            np.abs(j["diff"].to_numpy()) <= j["k"].to_numpy() * j["noise"].to_numpy()
        )
    structural = [j[f"agree:{c}"].to_numpy() for c in cols if c in STRUCTURAL_COLUMNS] or [np.ones(len(m), bool)]
    j["noise_ok"] = j["within"].to_numpy() & np.logical_and.reduce(structural)
    same = j["same_inputs"].to_numpy()
    j["exact_path"] = same & (exact_ok | (not evaluation_parts))
    j["status"] = np.select(
        [
            ~both & (m["_merge"] == "left_only").to_numpy(),
            ~both,
            same & bitwise & no_choice,
            same & exact_ok,
            j["exact_path"].to_numpy(),
            ~same & bool(inputs_must_match),
            j["noise_ok"].to_numpy(),
        ],
        ["missing", "extra", "identical", "recomputed", "differs", "inputs-differ", "within-noise"],
        "beyond-noise",
    )
    return j


def _details(j: pd.DataFrame, cols: list[str]) -> list[str]:
    """Per judged row (:func:`_judged`): the columns that differ on the exact path (and ``choice``), or on the noise
    path the value beyond its noise, the structural columns that differ and, where pinned numerics forbid other
    inputs, that the logits differ."""
    out = []
    for r in j.to_dict("records"):
        if not r["both"]:
            out.append("")
        elif r["exact_path"]:
            out.append(",".join([c for c in cols if not r[f"agree:{c}"]] + (["choice"] if r["choice"] else [])))
        elif r["same_inputs"]:
            out.append(
                f"same logits, another CPU vendor's evaluation (noise path: {'within' if r['noise_ok'] else 'beyond'})"
                + ": "
                + ",".join([c for c in cols if not r[f"agree:{c}"]] + (["choice"] if r["choice"] else []))
            )
        else:
            parts = [c for c in cols if c in STRUCTURAL_COLUMNS and not r[f"agree:{c}"]]
            if not r["within"]:
                parts.insert(0, "value" if np.isfinite(r["noise"]) else "value (no noise estimate)")
            if r["status"] == "inputs-differ":
                parts.insert(
                    0,
                    "logits differ although both runs pinned the numerics (noise path: "
                    f"{'within' if r['noise_ok'] else 'beyond'})",
                )
            out.append("; ".join(parts))
    return out


def detection(
    rows: pd.DataFrame, noise: pd.DataFrame, *, split: str, family: str, fit: str, confidence: str, metrics
) -> pd.DataFrame:
    """The smallest shift of each of ``metrics`` that the noise path detects on the rows of one view (the headline:
    ``split``, ``family``, ``fit``, ``confidence``): a row fails when ``|fresh - committed| > k noise``, so its
    threshold is ``k noise`` (the committed row's ``k`` and noise). One row per metric: ``models`` (rows of the view),
    ``min``, ``median``, ``max`` of the thresholds, ``model_min`` (the row with the smallest) and ``k`` (the median
    ``k`` of the rows)."""
    v = rows.assign(_noise=noise["noise"].to_numpy(dtype=float), _k=k_factor(noise["seeds"].fillna(0)))
    v = v[(v["split"] == split) & (v["family"] == family) & (v["fit"] == fit) & (v["confidence"] == confidence)]
    out = []
    for metric in metrics:
        m = v[v["metric"] == metric]
        th = (m["_k"] * m["_noise"]).to_numpy(dtype=float)
        ok = np.isfinite(th)
        if not ok.any():  # no row of the view carries a noise estimate: no threshold
            out.append((metric, 0, math.nan, math.nan, math.nan, "", math.nan))
            continue
        i = int(np.nanargmin(np.where(ok, th, np.nan)))
        out.append(
            (
                metric,
                int(ok.sum()),
                float(np.min(th[ok])),
                float(np.median(th[ok])),
                float(np.max(th[ok])),
                str(m["base"].iloc[i]),
                float(np.median(m["_k"].to_numpy(dtype=float)[ok])),
            )
        )
    return pd.DataFrame(out, columns=["metric", "models", "min", "median", "max", "model_min", "k"])


def summarize(report: pd.DataFrame) -> dict:
    """Counts per status, of rows with the same logits judged on the noise path (``same-logits-noise``: another CPU
    vendor's evaluation) and whether every row passes."""
    c = report["status"].value_counts()
    counts = {
        s: int(c.get(s, 0))
        for s in (
            "identical",
            "recomputed",
            "differs",
            "within-noise",
            "beyond-noise",
            "inputs-differ",
            "missing",
            "extra",
        )
    }
    same = report["same_logits"] if "same_logits" in report.columns else pd.Series(False, index=report.index)
    vendor = (report["path"] == "noise") & same.astype(bool)
    return {
        "rows": int(len(report)),
        **counts,
        "same-logits-noise": int(vendor.sum()),
        "reproduces": bool(report["ok"].all()),
    }


def latest_bundle(folder) -> Path:
    """The newest bundle (by name) under ``folder`` (e.g. leaderboard/embedded)."""
    found = sorted(p.parent for p in Path(folder).glob("*/manifest.json"))
    if not found:
        raise FileNotFoundError(f"{folder}: no bundle (no */manifest.json)")
    return found[-1]


def committed_bundle(root=".", bundle=None) -> Bundle:
    """The committed bundle a fresh run of the embedded default is judged against: ``bundle`` (a path) when given,
    else the newest under ``root/leaderboard/embedded`` (:func:`latest_bundle`); read without checking the zoo's
    architectures (no model is built)."""
    path = Path(bundle) if bundle else latest_bundle(Path(root) / "leaderboard" / "embedded")
    return load_bundle(path, check_arch=False)
