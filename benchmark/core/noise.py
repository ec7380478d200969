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
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from statistics import NormalDist

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
        return self.names[0]


def _fields(entry) -> dict | None:
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
    buckets: dict[str, list[tuple[object, str]]] = {}
    archs: dict[str, str] = {}
    for name, entry in zoo.items():
        f = _fields(entry)
        if f is None or f.get(SEED_FIELD) is None:
            continue
        key = json.dumps({k: v for k, v in f.items() if k != SEED_FIELD and k not in IGNORED_FIELDS}, sort_keys=True, default=str)
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

    return pd.DataFrame({"base": rows["base"].astype(str).map(one), "sidekick": rows["sidekick"].fillna("").astype(str).map(one),
                         "members": rows["members"].astype(str).map(lambda m: "+".join(one(x) for x in m.split("+")))},
                        index=rows.index)


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
    out = g["value"].agg(n="size", mean="mean", sd=lambda v: float(np.std(v, ddof=1)) if len(v) >= 2 else math.nan,
                         min="min", max="max")
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


def fallback_spread(spread: pd.DataFrame) -> pd.DataFrame:
    """Per ``(split, metric)``: the largest seed sd over all groups, families and methods, with its ``n``."""
    if spread.empty:
        return pd.DataFrame(columns=["split", "metric", "sd", "n"])
    s = spread[np.isfinite(spread["sd"].astype(float))]
    idx = s.sort_values(["sd", "n"], ascending=[False, True], kind="stable").groupby(["split", "metric"], sort=True).head(1)
    return idx[["split", "metric", "sd", "n"]].reset_index(drop=True)


def row_noise(rows: pd.DataFrame, groups: list[SeedGroup], *, level: float, spread: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each row's noise, same index as ``rows``: ``sd_seed``, ``seeds`` (the rows its spread was measured
    over; 0 when none), ``seed_source`` (own: every model of the row is in a seed group and the row has seed
    siblings | fallback | none), ``se_boot`` and ``noise =
    sqrt(sd_seed^2 + se_boot^2)`` (``sd_seed`` NaN counts as 0; NaN when neither is known)."""
    spread = seed_spread(rows, groups) if spread is None else spread
    keyed = pd.concat([rows[SPREAD_KEY].astype(str), seedless(rows, groups)], axis=1)
    own = keyed.merge(spread[SPREAD_KEY + MODEL_COLUMNS + ["sd", "n"]], on=SPREAD_KEY + MODEL_COLUMNS, how="left")
    fb = keyed[["split", "metric"]].merge(fallback_spread(spread), on=["split", "metric"], how="left")
    to = group_of(groups)
    complete = rows["members"].astype(str).map(lambda m: all(x in to for x in m.split("+"))).to_numpy()
    has_own = own["sd"].notna().to_numpy() & complete
    sd = np.where(has_own, own["sd"], fb["sd"]).astype(float)
    n = np.where(has_own, own["n"], fb["n"]).astype(float)
    source = np.where(has_own, "own", np.where(np.isfinite(sd), "fallback", "none"))
    se = bootstrap_se(rows, level).to_numpy(dtype=float)
    has_ci = np.isfinite(pd.to_numeric(rows.get("ci_low", pd.Series(math.nan, index=rows.index)), errors="coerce").to_numpy(dtype=float))
    noise = np.sqrt(np.nan_to_num(sd) ** 2 + se ** 2)
    noise = np.where(np.isfinite(sd) | has_ci, noise, math.nan)
    return pd.DataFrame({"sd_seed": sd, "seeds": np.nan_to_num(n).astype(int), "seed_source": source, "se_boot": se,
                         "noise": noise}, index=rows.index)


def describe(noise: pd.DataFrame, groups: list[SeedGroup]) -> str:
    """One line: the seed groups and how many rows got their own spread, the fallback, or none."""
    if not groups:
        return ("no seed group in the zoo (no entries that differ only in their seed): training noise is unmeasured, "
                "each row's noise is its bootstrap error alone")
    c = noise["seed_source"].value_counts()
    names = "; ".join(f"{g.label}: {', '.join(g.names)}" for g in groups)
    return (f"seed groups {names}; seed spread of the row's own seeds for {int(c.get('own', 0))} rows, the largest "
            f"spread of the split and metric (fallback) for {int(c.get('fallback', 0))}, none for {int(c.get('none', 0))}")
