"""The training-seed noise of a split's headline (pure, no I/O): what :mod:`benchmark.report.headline` needs from
:mod:`benchmark.core.noise`, on the headline's wide rows.

:func:`split_noise` judges every row's difference to its base alone against the seed spread of that kind of
difference (:func:`benchmark.core.noise.difference_noise`) and keeps the reference family's seed spread per
metric, against which :func:`benchmark.report.headline.headline` tells whether a metric is noise-dominated on
the split. :func:`spread_records` is the page's table of seed spreads, :func:`seed_notes` its sentences,
:func:`noise_table` the verdicts as a table (the README's blocks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from benchmark.core import noise
from benchmark.core.metric_info import METRICS
from benchmark.report.tables import fmt_metric, method_label

VIEW_KEY = ["suite", "split", "family", "method", "base", "sidekick", "members", "fit", "confidence"]


def tidy(view: pd.DataFrame, metrics) -> pd.DataFrame:
    """The wide rows of ``view`` as one row per metric of ``metrics`` (those it has): :data:`VIEW_KEY`,
    ``metric``, ``value`` and ``row`` (the index in ``view``), the shape :mod:`benchmark.core.noise` reads."""
    parts = []
    for m in metrics:
        if m in view.columns:
            d = view[VIEW_KEY].astype(str)
            parts.append(
                d.assign(metric=m, value=pd.to_numeric(view[m], errors="coerce").astype(float), row=view.index)
            )
    if not parts:
        return pd.DataFrame(columns=VIEW_KEY + ["metric", "value", "row"])
    return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class SplitNoise:
    """The training-seed noise of one split's headline: per ``(view index, metric)`` the difference's
    ``(sd_seed, seeds, seed_source)`` (:func:`benchmark.core.noise.difference_noise`) and per metric the
    reference family's ``(sd, n)`` (:func:`benchmark.core.noise.reference_noise`)."""

    rows: dict = field(default_factory=dict)
    reference: dict = field(default_factory=dict)


def split_noise(view: pd.DataFrame, groups: list[noise.SeedGroup], reference_family: str, metrics) -> SplitNoise:
    """:class:`SplitNoise` of one split's rows (one variant per method)."""
    t = tidy(view, metrics)
    if t.empty:
        return SplitNoise()
    dn = noise.difference_noise(t, groups, reference_family)
    where = t.loc[dn.index, ["row", "metric"]]
    rows = {
        (r, m): (float(sd), int(n), str(src))
        for r, m, sd, n, src in zip(where["row"], where["metric"], dn["sd_seed"], dn["seeds"], dn["seed_source"])
    }
    ref = noise.reference_noise(t, groups, reference_family)
    return SplitNoise(rows, {m: (float(sd), int(n)) for m, sd, n in zip(ref["metric"], ref["sd"], ref["n"])})


def _stats(spread: pd.DataFrame) -> dict:
    return {
        r.metric: {"mean": float(r.mean), "sd": float(r.sd), "min": float(r.min), "max": float(r.max), "n": int(r.n)}
        for r in spread.itertuples(index=False)
    }


def spread_records(view: pd.DataFrame, groups: list[noise.SeedGroup], reference_family: str, metrics) -> list[dict]:
    """Mean and spread over seeds (:func:`benchmark.core.noise.seed_spread`) of each set of rows that differ only
    by seed: a group's models alone, its bases' duos with one sidekick, ...; ``{"what", "group", "seeds",
    "metrics": {m: {mean, sd, min, max, n}}, "diff": {m: ...}}``, ``diff`` the same for the difference to the
    base alone (empty for the reference family). The reference family's records first."""
    t = tidy(view, metrics)
    if t.empty or not groups:
        return []
    key = ["family", "method", "fit", "confidence", "base", "sidekick", "members"]
    vals = noise.seed_spread(t, groups)
    diffs = noise.seed_spread(noise.differences(t, reference_family), groups)
    by_key = {k: g for k, g in diffs.groupby(key, sort=False)}
    labels = {g.label for g in groups}
    out = []
    for k, g in vals.groupby(key, sort=True):
        rec = dict(zip(key, k))
        d = by_key.get(k, diffs.iloc[:0])
        alone = rec["family"] == reference_family
        what = (
            " + ".join(rec["members"].split("+"))
            + ": "
            + ("base alone" if alone else method_label(rec["family"], rec["method"]))
        )
        group = (
            rec["base"] if rec["base"] in labels else rec["sidekick"] if rec["sidekick"] in labels else rec["members"]
        )
        out.append(
            {
                "what": what,
                "group": group,
                "seeds": int(g["n"].max()),
                "alone": alone,
                "metrics": _stats(g),
                "diff": _stats(d),
            }
        )
    return sorted(out, key=lambda r: (not r["alone"], r["what"]))


def seed_notes(spread: list[dict], metrics) -> list[str]:
    """Sentences for "how to read": the range of each metric across the seeds of each group alone."""
    notes = []
    for rec in spread:
        if not rec["alone"]:
            continue
        parts = [
            f"{METRICS[m].label if m in METRICS else m} {fmt_metric(s['min'])}–{fmt_metric(s['max'])} (range "
            f"{fmt_metric(s['max'] - s['min'])})"
            for m in metrics
            if (s := rec["metrics"].get(m))
        ]
        notes.append(f"{rec['group']}: " + ", ".join(parts))
    return notes


def noise_table(head: dict) -> pd.DataFrame:
    """The noise verdicts of :func:`headline_context`'s splits: ``suite``, ``split``, ``metric``, ``sd``, ``n``,
    ``median``, ``entries``, ``dominated``."""
    cols = ["suite", "split", "metric", "sd", "n", "median", "entries", "dominated"]
    return pd.DataFrame(
        [
            {"suite": su["name"], "split": sp["name"], "metric": m, **v}
            for su in head["suites"]
            for sp in su["splits"]
            for m, v in sp["noise"].items()
        ],
        columns=cols,
    )
