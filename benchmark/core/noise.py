"""Training-seed noise of results rows: seed groups, seed spread and each row's noise (pure, no I/O).

A number the benchmark reports is one draw: another training seed (or another CPU
kind, whose kernels round differently and so train a different model) gives
another value. Two sources of noise, both per row:

* **Seed spread** ``sd_seed``. A *seed group* is a set of zoo entries that differ
  only in ``seed`` (and the free-text ``role``): one model trained several times
  (:func:`seed_groups`). Rows *differ only by seed* when they share ``split,
  family, method, fit, confidence, metric`` and their models (``base``,
  ``sidekick``, every name of ``members``) are the same once each name is
  replaced by its seed group's label: the singles of a group, the duos of the
  group's bases with one sidekick (or of one base with the group's sidekicks).
  Their sample standard deviation (``ddof=1``, over ``n`` rows, ``n - 1``
  degrees of freedom) is the seed spread of each of them (:func:`seed_spread`).
  A deep ensemble of the group's first ``m`` seeds, or a method built on one
  group member (SVE, soups, MC dropout, Laplace), has no such sibling rows.
* **Bootstrap error** ``se_boot = (ci_high - ci_low) / (2 z)``, ``z =
  Phi^-1(1 - (1 - level) / 2)`` (``level`` = params ``evaluate.bootstrap_level``):
  the standard error a normal interval of that width would have. Test-sample
  noise only; 0 on a row without an interval (splits outside
  ``evaluate.bootstrap_splits``).

Each row's noise (:func:`row_noise`) is ``sqrt(sd_seed^2 + se_boot^2)``, with
``sd_seed`` from the row's own seed siblings (``seed_source = "own"``) when every
model of the row belongs to a seed group, so that the spread covers the training
noise of all of them; otherwise the conservative *fallback*: the largest seed
spread measured for that ``(split, metric)`` over all groups, families and
methods (``"fallback"``, with that spread's row count). A duo of a group's base
with a sidekick of no group takes the fallback: its siblings vary the base only,
and a second training of the sidekick (another CPU kind retrains every model)
moves it too; the uq-only duo's accuracy, for one, is the base's, so its spread
over sidekick seeds is 0. When no spread exists for the ``(split, metric)`` (no
seed group in the zoo, or the group's rows are missing), ``sd_seed`` is NaN and
``seed_source = "none"``: the noise is the bootstrap error alone (NaN without an
interval), and :func:`describe` says so.

What the headline and the README rank are *differences to the base alone*
(:func:`differences`: a method's value minus the reference family's value of
its base). Their training noise (:func:`difference_noise`) is the seed spread of
the same kind of difference over a seed group's bases (a duo minus its base,
over the group's bases with the same sidekick): "own" as soon as the row's base
is in a group; otherwise the fallback of the ``(split, metric)``, the largest
such spread (of values where no difference has one). A difference is *within
noise* when ``|diff| <= FACTOR * sd_seed`` (:data:`FACTOR` = 2). A ``(split,
metric)`` is *noise-dominated* when the median ``|diff|`` of what is ranked is
below ``FACTOR`` times the largest seed sd of a model alone
(:func:`reference_noise`, :func:`noise_dominated`): retraining one model would
reorder the ranking.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

SPREAD_KEY = ["split", "family", "method", "fit", "confidence", "metric"]
MODEL_COLUMNS = ["base", "sidekick", "members"]
# entry fields that do not make another model: the seed (what a group varies) and free text
SEED_FIELD, IGNORED_FIELDS = "seed", ("role", "name")


@dataclass(frozen=True)
class SeedGroup:
    """Zoo entries that differ only in their seed: ``names`` sorted by seed (ties: zoo order)."""

    label: str  # "<arch> (<n> seeds)", unique (a "'" appended on a clash)
    names: tuple[str, ...]

    @property
    def first(self) -> str:
        """The group's first model (its representative in the headline)."""
        return self.names[0]


def _fields(entry: Any) -> dict | None:
    """An entry as a plain mapping (zoo dicts, :class:`~benchmark.models.zoo.ZooEntry`); None when unusable."""
    if isinstance(entry, dict):
        return entry
    if hasattr(entry, "as_dict"):
        return entry.as_dict()
    return None


def seed_groups(zoo: dict) -> list[SeedGroup]:
    """Groups of 2+ entries of ``zoo`` (``name -> entry``) that differ only in ``seed`` and ``role``.

    Groups come in the order of their first entry in ``zoo``; names within a
    group by seed (stable: zoo order on equal seeds), so ``names[:m]`` are the
    first ``m`` seeds (the members of a deep ensemble of size ``m``). Entries
    without a ``seed`` belong to no group.
    """
    buckets: dict[str, list[tuple[Any, str]]] = {}  # the seed (a number) and the entry's name
    archs: dict[str, str] = {}
    for name, entry in zoo.items():
        f = _fields(entry)
        if f is None or f.get(SEED_FIELD) is None:
            continue
        key = json.dumps(
            {k: v for k, v in f.items() if k != SEED_FIELD and k not in IGNORED_FIELDS}, sort_keys=True, default=str
        )
        buckets.setdefault(key, []).append((f[SEED_FIELD], str(name)))
        archs.setdefault(key, str(f.get("arch") or name))
    out, labels = [], set()
    for key, members in buckets.items():
        if len(members) < 2:
            continue
        names = tuple(n for _, n in sorted(members, key=lambda m: m[0]))
        label = f"{archs[key]} ({len(names)} seeds)"
        while label in labels:
            label += "'"
        labels.add(label)
        out.append(SeedGroup(label, names))
    return out


def group_of(groups: list[SeedGroup]) -> dict[str, str]:
    """``model name -> its seed group's label`` (names in no group are absent)."""
    return {n: g.label for g in groups for n in g.names}


def seedless(rows: pd.DataFrame, groups: list[SeedGroup]) -> pd.DataFrame:
    """``base``, ``sidekick``, ``members`` with every model name replaced by its group's label: rows that
    differ only by seed get equal values."""
    to = group_of(groups)

    def one(name: str) -> str:
        return to.get(name, name)

    return pd.DataFrame(
        {
            "base": rows["base"].astype(str).map(one),
            "sidekick": rows["sidekick"].fillna("").astype(str).map(one),
            "members": rows["members"].astype(str).map(lambda m: "+".join(one(x) for x in m.split("+"))),
        },
        index=rows.index,
    )


def seed_spread(rows: pd.DataFrame, groups: list[SeedGroup]) -> pd.DataFrame:
    """The spread over seeds of each set of rows that differ only by seed (2+ finite values).

    Columns: :data:`SPREAD_KEY`, the seedless ``base``, ``sidekick``, ``members``
    (group labels in place of names), and ``n`` (rows), ``mean``, ``sd``
    (sample sd, ``ddof=1``), ``min``, ``max``.
    """
    cols = SPREAD_KEY + MODEL_COLUMNS + ["n", "mean", "sd", "min", "max"]
    if rows.empty or not groups:
        return pd.DataFrame(columns=cols)
    df = pd.concat([rows[SPREAD_KEY].astype(str), seedless(rows, groups)], axis=1)
    df["value"] = pd.to_numeric(rows["value"], errors="coerce")
    df["model"] = rows["members"].astype(str)
    df = df[np.isfinite(df["value"]) & df["members"].ne(df["model"])]  # a row with no group member has no siblings
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.groupby(SPREAD_KEY + MODEL_COLUMNS, sort=True)
    out = g["value"].agg(
        n="size", mean="mean", sd=lambda v: float(np.std(v, ddof=1)) if len(v) >= 2 else math.nan, min="min", max="max"
    )
    out = out[(out["n"] >= 2) & (g["model"].nunique() >= 2)].reset_index()
    return out[cols]


def z_of(level: float) -> float:
    """``Phi^-1(1 - (1 - level) / 2)``: the half-width, in standard errors, of a two-sided normal interval."""
    if not 0 < level < 1:
        raise ValueError(f"bootstrap level must be in (0, 1), got {level!r}")
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def bootstrap_se(rows: pd.DataFrame, level: float) -> pd.Series:
    """``(ci_high - ci_low) / (2 z_level)`` per row; 0 where the row has no interval."""
    lo = pd.to_numeric(rows.get("ci_low", pd.Series(math.nan, index=rows.index)), errors="coerce")
    hi = pd.to_numeric(rows.get("ci_high", pd.Series(math.nan, index=rows.index)), errors="coerce")
    return ((hi - lo) / (2 * z_of(level))).where(np.isfinite(lo) & np.isfinite(hi), 0.0).clip(lower=0.0)


def fallback_spread(spread: pd.DataFrame, by: Sequence[str] = ("split", "metric")) -> pd.DataFrame:
    """Per ``by`` (default ``(split, metric)``): the largest seed sd over all groups (and families and methods unless
    ``by`` names them), with its ``n``."""
    by = list(by)
    if spread.empty:
        return pd.DataFrame(columns=[*by, "sd", "n"])
    s = spread[np.isfinite(spread["sd"].astype(float))]
    idx = s.sort_values(["sd", "n"], ascending=[False, True], kind="stable").groupby(by, sort=True).head(1)
    return idx[[*by, "sd", "n"]].reset_index(drop=True)


def seed_sd(
    rows: pd.DataFrame,
    groups: list[SeedGroup],
    *,
    spread: pd.DataFrame | None = None,
    own: str = "all",
    fallback: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Each row's seed spread, same index as ``rows``: ``sd_seed``, ``seeds`` (rows it was measured over; 0 when
    none) and ``seed_source``: ``own`` (the sd of the row's seed siblings, :func:`seed_spread`), ``fallback`` (the
    largest sd of the row's ``(split, metric)``: ``fallback``, default :func:`fallback_spread` of ``spread``) or
    ``none`` (NaN).

    ``own="all"`` (the gate): a row takes its own spread only when every model of its ``members`` is in a seed group,
    so that its siblings vary all of them. ``own="base"`` (differences to the base alone, :func:`difference_noise`):
    when its ``base`` is, e.g. a duo of a group's base with a sidekick of no group, whose siblings are the group's
    other bases with that sidekick."""
    if own not in ("all", "base"):
        raise ValueError(f"seed_sd: own must be 'all' or 'base', got {own!r}")
    spread = seed_spread(rows, groups) if spread is None else spread
    fallback = fallback_spread(spread) if fallback is None else fallback
    keyed = pd.concat([rows[SPREAD_KEY].astype(str), seedless(rows, groups)], axis=1)
    mine = keyed.merge(spread[SPREAD_KEY + MODEL_COLUMNS + ["sd", "n"]], on=SPREAD_KEY + MODEL_COLUMNS, how="left")
    fb = keyed[["split", "metric"]].merge(fallback[["split", "metric", "sd", "n"]], on=["split", "metric"], how="left")
    if {"family", "method"} <= set(fallback.columns):  # a finer fallback first: the same family and method
        fine = keyed[["split", "metric", "family", "method"]].merge(
            fallback, on=["split", "metric", "family", "method"], how="left"
        )
        coarse = fallback[fallback["family"].isna()] if "family" in fallback else fallback.iloc[:0]
        fb = keyed[["split", "metric"]].merge(
            coarse[["split", "metric", "sd", "n"]], on=["split", "metric"], how="left"
        )
        take = fine["sd"].notna().to_numpy()
        fb.loc[take, ["sd", "n"]] = fine.loc[take, ["sd", "n"]].to_numpy()
    to = group_of(groups)
    if own == "all":
        complete = rows["members"].astype(str).map(lambda m: all(x in to for x in m.split("+"))).to_numpy()
    else:
        complete = rows["base"].astype(str).isin(list(to)).to_numpy()
    has_own = mine["sd"].notna().to_numpy() & complete
    sd = np.where(has_own, mine["sd"], fb["sd"]).astype(float)
    n = np.where(has_own, mine["n"], fb["n"]).astype(float)
    source = np.where(has_own, "own", np.where(np.isfinite(sd), "fallback", "none"))
    return pd.DataFrame({"sd_seed": sd, "seeds": np.nan_to_num(n).astype(int), "seed_source": source}, index=rows.index)


def row_noise(
    rows: pd.DataFrame, groups: list[SeedGroup], *, level: float, spread: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Each row's noise, same index as ``rows``: ``sd_seed``, ``seeds`` (the rows its spread was measured
    over; 0 when none), ``seed_source`` (own: every model of the row is in a seed group and the row has seed
    siblings | fallback | none; :func:`seed_sd`), ``se_boot`` and ``noise =
    sqrt(sd_seed^2 + se_boot^2)`` (``sd_seed`` NaN counts as 0; NaN when neither is known)."""
    out = seed_sd(rows, groups, spread=spread, own="all")
    sd = out["sd_seed"].to_numpy(dtype=float)
    se = bootstrap_se(rows, level).to_numpy(dtype=float)
    has_ci = np.isfinite(
        pd.to_numeric(rows.get("ci_low", pd.Series(math.nan, index=rows.index)), errors="coerce").to_numpy(dtype=float)
    )
    noise = np.sqrt(np.nan_to_num(sd) ** 2 + se**2)
    out["se_boot"] = se
    out["noise"] = np.where(np.isfinite(sd) | has_ci, noise, math.nan)
    return out


def describe(noise: pd.DataFrame, groups: list[SeedGroup]) -> str:
    """One line: the seed groups and how many rows got their own spread, the fallback, or none."""
    if not groups:
        return (
            "no seed group in the zoo (no entries that differ only in their seed): training noise is unmeasured, "
            "each row's noise is its bootstrap error alone"
        )
    c = noise["seed_source"].value_counts()
    names = "; ".join(f"{g.label}: {', '.join(g.names)}" for g in groups)
    return (
        f"seed groups {names}; seed spread of the row's own seeds for {int(c.get('own', 0))} rows, the largest "
        f"spread of the split and metric (fallback) for {int(c.get('fallback', 0))}, none for {int(c.get('none', 0))}"
    )


# ---- differences to the base alone: what a ranking rests on ------------------------------------------------

FACTOR = 2.0  # a difference within FACTOR seed sds of its kind is within training-seed noise


def differences(rows: pd.DataFrame, reference_family: str) -> pd.DataFrame:
    """The rows outside ``reference_family`` whose base has a reference row ("the base alone"), with ``value``
    replaced by ``value - value(base alone)`` (same ``suite`` where given, ``split``, ``base``, ``metric``; the
    first such reference row in ``rows``' order: pass one variant per method) and no interval (``ci_low``,
    ``ci_high`` NaN: a difference's interval is the paired bootstrap's). Same index as ``rows``."""
    key = [c for c in ("suite", "split", "base", "metric") if c in rows.columns]
    ref = rows["family"].astype(str).to_numpy() == reference_family
    alone = rows.loc[ref, key + ["value"]].astype({c: str for c in key}).drop_duplicates(key, keep="first")
    others = rows.loc[~ref]
    a = others[key].astype(str).merge(alone.rename(columns={"value": "_alone"}), on=key, how="left")["_alone"]
    a = pd.to_numeric(a, errors="coerce").to_numpy(dtype=float)
    out = others.copy()
    out["value"] = pd.to_numeric(others["value"], errors="coerce").to_numpy(dtype=float) - a
    for c in ("ci_low", "ci_high"):
        if c in out.columns:
            out[c] = math.nan
    return out[~np.isnan(a)]


def within_noise(diff: float | None, sd: float | None, factor: float = FACTOR) -> bool | None:
    """``|diff| <= factor * sd``; None where either is not finite (no judgement)."""
    if diff is None or sd is None or not (np.isfinite(diff) and np.isfinite(sd)):
        return None
    return bool(abs(diff) <= factor * sd)


def difference_noise(
    rows: pd.DataFrame, groups: list[SeedGroup], reference_family: str, *, factor: float = FACTOR
) -> pd.DataFrame:
    """Training-seed noise of each row's difference to its base alone (:func:`differences`), index of those rows.

    Columns ``diff``, ``sd_seed``, ``seeds``, ``seed_source``, ``within``. ``sd_seed`` is the spread over the seeds of
    a seed group of the same kind's difference (:func:`seed_spread` of the differences: e.g. duo minus base over the
    group's bases with the same sidekick, method, fit and confidence; ``seed_source = "own"``), for a row whose base
    is in a seed group and that has such siblings (:func:`seed_sd` with ``own="base"``). Otherwise the conservative
    fallback: the largest sd of differences of the same family and method on the ``(split, metric)`` (e.g. weighted
    duos: not another variant's), else of any kind (:func:`fallback_spread`), and where no difference has a spread
    there, the largest sd of values (the reference family's included). ``within = |diff| <= factor * sd_seed``
    (:func:`within_noise`: None without a spread, ``seed_source = "none"``)."""
    diffs = differences(rows, reference_family)
    cols = ["diff", "sd_seed", "seeds", "seed_source", "within"]
    if diffs.empty:
        return pd.DataFrame(columns=cols, index=diffs.index)
    dspread = seed_spread(diffs, groups)
    fb = fallback_spread(dspread)
    vfb = fallback_spread(seed_spread(rows, groups))
    have = set(zip(fb["split"], fb["metric"]))
    fb = pd.concat([fb, vfb[[(s, m) not in have for s, m in zip(vfb["split"], vfb["metric"])]]], ignore_index=True)
    fb = pd.concat(
        [fallback_spread(dspread, by=("split", "metric", "family", "method")), fb.assign(family=np.nan, method=np.nan)],
        ignore_index=True,
    )
    out = seed_sd(diffs, groups, spread=dspread, own="base", fallback=fb)
    out.insert(0, "diff", diffs["value"].to_numpy(dtype=float))
    out["within"] = pd.Series(
        [within_noise(d, s, factor) for d, s in zip(out["diff"], out["sd_seed"])], index=out.index, dtype=object
    )  # True, False or None (no spread)
    return out[cols]


def reference_noise(rows: pd.DataFrame, groups: list[SeedGroup], reference_family: str) -> pd.DataFrame:
    """Per ``(split, metric)``: ``sd``, ``n``: the largest seed sd of the reference family's values over the seed
    groups (:func:`fallback_spread` of the single models' :func:`seed_spread`): how far one retraining moves a
    model alone."""
    return fallback_spread(seed_spread(rows[rows["family"].astype(str) == reference_family], groups))


def noise_dominated(ranked: pd.DataFrame, reference: pd.DataFrame, factor: float = FACTOR) -> pd.DataFrame:
    """Whether the differences a ranking rests on stand above the training-seed noise, per ``(split, metric)``.

    ``ranked``: ``split``, ``metric``, ``diff`` (the differences to the base alone that are ranked, e.g. the
    headline's non-reference entries); ``reference``: ``split``, ``metric``, ``sd``, ``n``
    (:func:`reference_noise`). Returns ``split``, ``metric``, ``sd``, ``n``, ``entries`` (finite differences),
    ``median`` (``median |diff|``) and ``dominated``::

        dominated  <=>  median_i |diff_i|  <  factor * sd

    so that a typical ranked difference is smaller than what retraining one model moves it. False where either
    side is unknown (no seed group, no difference): nothing measured says the split is noise.
    """
    d = ranked[["split", "metric"]].astype(str).assign(absdiff=pd.to_numeric(ranked["diff"], errors="coerce").abs())
    d = d[np.isfinite(d["absdiff"])]
    med = d.groupby(["split", "metric"], sort=True)["absdiff"].agg(entries="size", median="median").reset_index()
    keys = pd.concat(
        [ranked[["split", "metric"]].astype(str), reference[["split", "metric"]].astype(str)]
    ).drop_duplicates()
    ref = reference[["split", "metric", "sd", "n"]].astype({"split": str, "metric": str})
    out = keys.merge(ref, on=["split", "metric"], how="left").merge(med, on=["split", "metric"], how="left")
    out["entries"] = out["entries"].fillna(0).astype(int)
    sd, m = out["sd"].to_numpy(dtype=float), out["median"].to_numpy(dtype=float)
    out["dominated"] = np.isfinite(sd) & np.isfinite(m) & (m < factor * np.nan_to_num(sd))
    return out.sort_values(["split", "metric"], kind="stable").reset_index(drop=True)
