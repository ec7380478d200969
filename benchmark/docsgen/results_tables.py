"""The results tables of the README and the docs (the models, seeds and duos blocks), from a result bundle's rows.

The blocks rank only what stands above the training-seed noise (:mod:`benchmark.core.noise`): the seed block
(:func:`seeds_table`) gives the spread of every shown split and metric with the headline's noise verdict
(:func:`verdicts`), the duo block (:func:`duos_table`) marks ✱ only a difference whose interval excludes 0 *and* that
lies outside the seed noise of its kind, and adds the seed-robust statement over each seed group's bases.
:mod:`benchmark.docsgen.readme` writes them into their blocks.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from benchmark.config.report_config import ReportConfig
from benchmark.core import noise
from benchmark.core.metric_info import METRICS
from benchmark.report.headline import headline_context
from benchmark.report.headline_noise import noise_table
from benchmark.report.tables import default_view, match_any, split_sort_key, wide_table
from benchmark.report.tables import fmt_short as fmt

SPLIT, FIT, CONF = "test", "converged", "max"
MODEL_METRICS = [("accuracy", "test acc"), ("nll", "NLL"), ("aurc", "AURC"), ("auroc", "AUROC"), ("sac98", "SAC@98")]
DUO_METRICS = [("aurc", "AURC"), ("nll", "NLL")]


def _signed(x) -> str:
    s = fmt(abs(x))
    return ("−" if x < 0 else "+") + s if s not in ("0", "—") else s


def _view(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[(rows["split"] == SPLIT) & (rows["fit"] == FIT) & (rows["confidence"] == CONF)]


def models_table(rows: pd.DataFrame, models: pd.DataFrame | None) -> str:
    """Every single model, temperature-scaled: GFLOPs and the test metrics, largest GFLOPs first."""
    v = _view(rows)
    v = v[v["family"] == "single"]
    wide = v.pivot_table(index="base", columns="metric", values="value", aggfunc="first")
    gflops = v.groupby("base")["gflops"].first()
    role = models.set_index("name")["role"] if models is not None and "role" in models.columns else pd.Series(dtype=str)
    lines = [
        "| model | role | GFLOPs | " + " | ".join(label for _, label in MODEL_METRICS) + " |",
        "|---|---|---|" + "---|" * len(MODEL_METRICS),
    ]
    for name in sorted(wide.index, key=lambda n: (-float(gflops.get(n, 0)), n)):
        cells = [fmt(wide.loc[name].get(m)) for m, _ in MODEL_METRICS]
        lines.append(f"| {name} | {role.get(name, '')} | {fmt(gflops.get(name), 2)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _marks(x) -> str:
    """' ✱' for a finding (interval excludes 0, outside the seed noise), ' ≈' within the seed noise, else ''."""
    return " ✱" if x.get("finding") else " ≈" if x.get("within") else ""


def duo_noise(rows: pd.DataFrame, zoo: dict | None, config=None) -> dict:
    """``(base, sidekick, metric) -> {sd, seeds, source, within}`` of every weighted duo of the test split's default
    view (the page's: :func:`benchmark.report.tables.default_view`): the seed noise of its difference to the base
    alone (:func:`benchmark.core.noise.difference_noise`)."""
    cfg = config or ReportConfig()
    v = default_view(rows[rows["split"] == SPLIT], cfg.fit, cfg.confidence)
    dn = noise.difference_noise(v, noise.seed_groups(zoo or {}), cfg.reference_family)
    r = v.loc[dn.index]
    keep = ((r["family"] == "duo") & (r["method"] == "weighted")).to_numpy()
    return {
        (b, k, m): {"sd": sd, "seeds": n, "source": src, "within": w}
        for b, k, m, sd, n, src, w in zip(
            r["base"][keep],
            r["sidekick"][keep],
            r["metric"][keep],
            dn["sd_seed"][keep],
            dn["seeds"][keep],
            dn["seed_source"][keep],
            dn["within"][keep],
        )
    }


def _improves(metric: str, d: float) -> bool:
    hib = METRICS[metric].higher_is_better if metric in METRICS else False
    return d > 0 if hib else d < 0


def _duo_row(
    base: str, side: str, d: pd.DataFrame, single: pd.Series, p: pd.DataFrame, judged: dict, diffs: dict
) -> str:
    """The duos table's row of ``base`` + ``side`` (``d``: the duo by metric); its differences go to ``diffs``."""
    cells = []
    for m, _ in DUO_METRICS:
        b, x = single.get((base, m), math.nan), d["value"].get(m, math.nan)
        j = dict(judged.get((base, side, m), {}))
        if (base, side, m) in p.index:
            r = p.loc[(base, side, m)]
            diffs[(base, side, m)] = float(r["diff"])
            j["within"] = noise.within_noise(float(r["diff"]), j.get("sd", math.nan))
            j["finding"] = bool((r["ci_high"] < 0 or r["ci_low"] > 0) and j["within"] is False)
            cells.append(
                f"{fmt(b)} → {fmt(x)} ({_signed(r['diff'])} [{_signed(r['ci_low'])}, "
                f"{_signed(r['ci_high'])}]){_marks(j)}"
            )
        else:
            diffs[(base, side, m)] = x - b
            cells.append(f"{fmt(b)} → {fmt(x)}{_marks(j)}")
    bal = d["balance"].iloc[0] if len(d) else math.nan
    return f"| {base} + {side} | {fmt(bal, 2)} | " + " | ".join(cells) + " |"


def duos_table(
    rows: pd.DataFrame,
    paired: pd.DataFrame,
    sidekicks=None,
    zoo: dict | None = None,
    config=None,
    verdict: pd.DataFrame | None = None,
) -> str:
    """Every weighted duo (of a ``sidekicks`` member when given): base alone -> duo and the paired-bootstrap
    difference with its interval, marked ✱ when that interval excludes 0 *and* the difference is outside the
    training-seed noise of duo-minus-base differences (:func:`duo_noise`), ≈ when within it; then, per seed group
    of bases and sidekick, the difference over the group's seeds: mean ± sd and how many seeds improve. A metric
    that ``verdict`` (:func:`verdicts`) finds noise-dominated on the split says so in its column header."""
    v = _view(rows)
    if sidekicks is not None:
        v = v[(v["family"] != "duo") | v["sidekick"].isin(list(sidekicks))]
    single = v[v["family"] == "single"].set_index(["base", "metric"])["value"]
    duo = v[(v["family"] == "duo") & (v["method"] == "weighted")]
    p = paired[(paired["split"] == SPLIT) & (paired["fit"] == FIT) & (paired["method"] == "weighted")]
    p = p.set_index(["base", "sidekick", "metric"])
    judged = duo_noise(rows, zoo, config)
    dom = (
        set()
        if verdict is None
        else set(verdict.loc[(verdict["split"] == SPLIT) & verdict["dominated"].astype(bool), "metric"])
    )
    head = (
        "| duo (weighted) | FLOPs balance | "
        + " | ".join(
            f"{label}{' (noise-dominated)' if m in dom else ''}: base → duo (diff [95% CI])" for m, label in DUO_METRICS
        )
        + " |"
    )
    lines = [head, "|---|---|" + "---|" * len(DUO_METRICS)]
    keys = duo[["base", "sidekick"]].drop_duplicates().sort_values(["base", "sidekick"]).itertuples(index=False)
    diffs: dict[tuple, float] = {}
    for base, side in keys:
        d = duo[(duo["base"] == base) & (duo["sidekick"] == side)].set_index("metric")
        lines.append(_duo_row(base, side, d, single, p, judged, diffs))
    table = "\n".join(lines) + "\n"
    return (
        table + "\n✱ the 95% interval of the difference excludes 0 and the difference is outside the training-seed "
        f"noise: |diff| > {noise.FACTOR:g} × the seed sd of the duo-minus-base difference (over the seed group's bases "
        "with the same sidekick where the base has a seed group, else the largest such sd of the split); "
        "≈ within that noise, so one retraining could reverse it."
        + (
            " (noise-dominated): on this split the differences the headline ranks are typically within the seed spread "
            "of a model alone (seed table above): shown, not ranked."
            if dom
            else ""
        )
        + "\n"
        + _group_lines(duo, diffs, zoo)
    )


def _group_lines(duo: pd.DataFrame, diffs: dict, zoo: dict | None) -> str:
    """Per seed group of bases and sidekick: mean ± sd of the duo-minus-base difference over the group's seeds
    and how many of them improve (the seed-robust statement)."""
    lines = []
    for g in noise.seed_groups(zoo or {}):
        sides = sorted(set(duo.loc[duo["base"].isin(g.names), "sidekick"]) - set(g.names))
        for side in sides:
            bal = duo.loc[duo["base"].isin(g.names) & (duo["sidekick"] == side), "balance"]
            cells = []
            for m, _ in DUO_METRICS:
                ds = [diffs[(b, side, m)] for b in g.names if np.isfinite(diffs.get((b, side, m), math.nan))]
                if len(ds) < 2:
                    cells.append("—")
                    continue
                up = sum(_improves(m, d) for d in ds)
                cells.append(
                    f"{_signed(float(np.mean(ds)))} ± {fmt(float(np.std(ds, ddof=1)))} ({up}/{len(ds)} seeds improve)"
                )
            lines.append(
                f"| {' / '.join(g.names)} + {side} | {fmt(bal.iloc[0] if len(bal) else math.nan, 2)} | "
                + " | ".join(cells)
                + " |"
            )
    if not lines:
        return ""
    head = (
        "| duo (weighted), over a seed group's bases | FLOPs balance | "
        + " | ".join(f"{label}: mean diff ± sd (seeds improving)" for _, label in DUO_METRICS)
        + " |"
    )
    return (
        "\nOver the seeds of each seed group of bases (the seed-robust statement: the difference to the base alone, "
        "mean ± sample sd over the group's bases with that sidekick, and on how many of them the duo is better):\n\n"
        + "\n".join([head, "|---|---|" + "---|" * len(DUO_METRICS)] + lines)
        + "\n"
    )


def shown_splits(rows: pd.DataFrame, config) -> list[str]:
    """The splits the headline or the plots show: report.plot_splits (patterns) and report.headline_split."""
    return sorted(
        {s for s in rows["split"].astype(str) if s == config.headline_split or match_any(s, config.plot_splits)},
        key=split_sort_key,
    )


def verdicts(rows: pd.DataFrame, zoo: dict, paired: pd.DataFrame | None, config, splits) -> pd.DataFrame:
    """The headline's noise verdict per shown split and metric (:func:`benchmark.report.headline_noise.noise_table`)."""
    view = default_view(wide_table(rows[rows["split"].isin(list(splits))]), config.fit, config.confidence)
    views = {(su, sp): g for (su, sp), g in view.groupby(["suite", "split"], sort=False)}
    views = {k: views[k] for k in sorted(views, key=lambda k: (k[0], split_sort_key(k[1])))}
    return noise_table(headline_context(views, config, zoo=zoo, paired=paired))


def seeds_table(
    rows: pd.DataFrame, zoo: dict, verdict: pd.DataFrame | None = None, splits=(SPLIT,), metrics=None
) -> str:
    """Mean, standard deviation and range over the seeds of each seed group (:mod:`benchmark.core.noise`) of the
    models alone, per split of ``splits`` and metric (``metrics``, default the README's: those the split has), with
    the headline's verdict (``verdict``: :func:`verdicts`): the median ranked difference and whether the split and
    metric are noise-dominated."""
    groups = noise.seed_groups(zoo)
    v = rows[(rows["fit"] == FIT) & (rows["confidence"] == CONF) & (rows["family"] == "single")]
    spread = noise.seed_spread(v, groups).set_index(["split", "members", "metric"])
    vd = verdict.set_index(["split", "metric"]) if verdict is not None and len(verdict) else None
    want = list(metrics) if metrics is not None else [m for m, _ in MODEL_METRICS] + ["ece", "brier", "ood_auroc"]
    lines = [
        "| split | model (seeds) | metric | mean | sd | min | max | median ranked \\|Δ\\| | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for split in splits:
        for g in groups:
            for m in want:
                if (split, g.label, m) not in spread.index:
                    continue
                x = spread.loc[(split, g.label, m)]
                med, mark = "—", "—"
                if vd is not None and (split, m) in vd.index:
                    r = vd.loc[(split, m)]
                    med = fmt(r["median"])
                    mark = (
                        "**noise-dominated**"
                        if r["dominated"]
                        else "ranked"
                        if np.isfinite(r["sd"]) and r["entries"]
                        else "—"
                    )
                label = METRICS[m].label if m in METRICS else m
                lines.append(
                    f"| {split} | {' / '.join(g.names)} | {label} | {fmt(x['mean'])} | {fmt(x['sd'])} | "
                    f"{fmt(x['min'])} | {fmt(x['max'])} | {med} | {mark} |"
                )
    legend = (
        f"\nmedian ranked |Δ|: the median difference to the base alone of the rows the headline ranks on that split "
        f"(every method but the models alone); **noise-dominated**: it is under {noise.FACTOR:g} × the largest seed sd "
        "of a model alone on that split and metric (over the seed groups), so one retraining could reorder the "
        "ranking: the page shows that split unranked for that metric and `dvc metrics show` leaves it out.\n"
    )
    return "\n".join(lines) + "\n" + legend
