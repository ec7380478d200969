"""The result sections of the README and the docs, generated from committed files only.

Sources: the embedded default's committed result bundle
(``leaderboard/embedded/<id>/``: rows, paired differences, models), the
``report:`` settings of ``params.yaml`` (which splits the headline and the plots
show), ``results/timings.json`` and ``results/tuning.json``. The blocks rank only what stands above the
training-seed noise (:mod:`benchmark.core.noise`): the seed block gives the
spread of every shown split and metric with the headline's noise verdict
(:func:`verdicts`), the duo block marks ✱ only a difference whose interval
excludes 0 *and* that lies outside the seed noise of its kind, and adds the
seed-robust statement over each seed group's bases; the budgets block gives the training budget behind each method
family (:mod:`benchmark.docsgen.budgets`). Each generated block sits between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` in one of :data:`FILES`
(the README keeps the headline, the docs the rest; a block may appear in several);
:func:`update` rewrites the blocks, :func:`stale` lists those that differ
(tests/docsgen/test_readme_results.py fails on any, naming the command that regenerates
them: ``python -m benchmark reproduce readme --write``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmark.config.report_config import ReportConfig
from benchmark.core import noise
from benchmark.core.metric_info import METRICS
from benchmark.docsgen import cpu_kinds, facts
from benchmark.docsgen.budgets import budgets_table
from benchmark.report.headline import headline_context
from benchmark.report.headline_noise import noise_table
from benchmark.report.tables import default_view, match_any, split_sort_key, wide_table
from benchmark.report.tables import fmt_short as fmt
from benchmark.reproduce import cross_cpu, dvc_share, fingerprint_records, gate, import_times, timing
from benchmark.reproduce.gate import committed_bundle
from benchmark.storage.atomic import write_text

FILES = (
    "README.md",
    "docs/results.md",
    "docs/explanations/performance.md",
    "docs/explanations/reproducibility.md",
    "docs/how-to/cluster.md",
)  # the files holding generated blocks
SPLIT, FIT, CONF = "test", "converged", "max"
MODEL_METRICS = [("accuracy", "test acc"), ("nll", "NLL"), ("aurc", "AURC"), ("auroc", "AUROC"), ("sac98", "SAC@98")]
DUO_METRICS = [("aurc", "AURC"), ("nll", "NLL")]
_BLOCK = re.compile(r"(<!-- generated:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated:(?P=name) -->)", re.S)


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


def _s(x) -> str:
    return "" if x is None or x != x else f"{x:.1f}"


def timings_table(record: dict) -> str:
    """Per stage kind: count, wall and CPU seconds, start-up (interpreter, imports, params) and DVC's seconds before
    its stages, peak RSS, page faults; then DVC's total, the run and its compute floor."""
    kinds = timing.by_kind(timing.stages_frame(record))
    lines = [
        "| stage | runs | wall s | user s | sys s | start-up s | DVC s before | peak RSS MB | minor faults | imports |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in kinds.itertuples(index=False):
        lines.append(
            f"| {r.kind} | {r.stages} | {r.wall_s:.1f} | {r.user_s:.1f} | {r.sys_s:.1f} | {_s(r.startup_wall_s)} | "
            f"{_s(r.dvc_before_s)} | {r.max_rss_mb:.0f} | {int(r.minor_faults):,} | {', '.join(r.imports)} |"
        )
    if record.get("dvc_overhead_s") is not None:
        lines.append(
            f"| DVC itself (hashing, locks, process starts) | | {record['dvc_overhead_s']:.1f} | | | | | | | |"
        )
    m = record.get("machine", {})
    floor = (
        f"; the stages' compute floor (CPU {record['cpu_s']:.0f} s less start-up {record['startup_cpu_s']:.0f} s, on "
        f"{record['cores']} cores) is {record['compute_floor_s']:.0f} s: the run took "
        f"**{record['floor_ratio']:.2f}x** it"
        if record.get("floor_ratio")
        else ""
    )
    load = record.get("load") or {}
    limit = facts.target(m)[0]
    tail = (
        f"\n`{record['command']}`: **{record['repro_wall_s']:.0f} s** wall"
        + (
            f", after an install of {record['install_s']:.0f} s (clone to leaderboard: "
            f"**{record['install_s'] + record['repro_wall_s']:.0f} s**; the target of {limit} s is "
            f"{'met' if record['install_s'] + record['repro_wall_s'] <= limit else '**not met**'})"
            if record.get("install_s") is not None
            else ""
        )
        + floor
        + f"; measured {record.get('date', '?')} on {m.get('cpus', '?')} CPUs ({m.get('cpu', '?')}"
        f"{', ' + m['cpu_kind'] if m.get('cpu_kind') else ''}, torch {m.get('torch', '?')}, kernels "
        f"{m.get('cpu_capability', '?')}{' pinned' if m.get('pinned') else ''})"
        + (
            f", load average {load['mean']:.1f} (max {load['max']:.1f})"
            if load.get("mean") == load.get("mean") and load.get("mean") is not None
            else ""
        )
        + ".\n"
    )
    par = record.get("parallel") or {}
    if par.get("repro_wall_s"):
        tail += (
            f"\nThe same DAG two stages at a time in another clean copy (`{par['command']}`): "
            f"**{par['repro_wall_s']:.0f} s** wall, {par['floor_ratio']:.2f}x its compute floor of "
            f"{par['compute_floor_s']:.0f} s; {par['outputs'].get('identical', 0)} stage outputs compared, all "
            f"byte-identical to the serial run's.\n"
        )
    return "\n".join(lines) + "\n" + tail


def pinning_table(record: dict) -> str:
    """``results/numerics.json`` (:mod:`benchmark.reproduce.pinning_cost`): medians per mode and their ratio."""
    med, ratio, m = record["median"], record["ratio"], record.get("machine") or {}
    lines = ["| numerics | wall s | CPU s |", "|---|---|---|"]
    lines += [f"| {mode} | {med[mode]['wall_s']:.1f} | {med[mode]['cpu_s']:.1f} |" for mode in ("pinned", "native")]
    return (
        "\n".join(lines) + f"\n\n`{record['stage']}`, median of {record['repeats']} run(s) per mode: pinned / native = "
        f"**{ratio['wall_s']:.2f}x** wall, {ratio['cpu_s']:.2f}x CPU; measured on {m.get('cpus', '?')} CPUs "
        f"({m.get('cpu', '?')}, torch {m.get('torch', '?')}).\n"
    )


def detection_table(bundle, cfg: ReportConfig, level: float) -> str:
    """The smallest shift of each headline metric that the gate's noise path detects on the committed bundle's
    headline rows (:func:`benchmark.reproduce.gate.detection`)."""
    nz = noise.row_noise(bundle.rows, noise.seed_groups(bundle.manifest.get("zoo") or {}), level=level)
    det = gate.detection(
        bundle.rows,
        nz,
        split=cfg.headline_split,
        family=cfg.reference_family,
        fit=cfg.fit,
        confidence=cfg.confidence,
        metrics=cfg.headline_metrics,
    )
    names = {m: info.label for m, info in METRICS.items()}
    lines = ["| metric | smallest shift detected | median over the models | largest |", "|---|---|---|---|"]
    lines += [
        f"| {names.get(r.metric, r.metric)} | {fmt(r.min)} ({r.model_min}) | {fmt(r.median)} | {fmt(r.max)} |"
        for r in det.itertuples(index=False)
    ]
    return (
        "\n".join(lines) + f"\n\nOn `{bundle.path.name}`'s {cfg.headline_split} split, {cfg.reference_family} models "
        f"({cfg.fit} fit, {cfg.confidence} confidence), {int(det['models'].max())} models: a row fails the noise path "
        f"when it moves by more than k times its noise (here k = {det['k'].median():.1f}).\n"
    )


def report_config(root=".") -> ReportConfig:
    """The ``report:`` settings of ``root/params.yaml`` (the defaults without one)."""
    path = Path(root) / "params.yaml"
    return ReportConfig.from_params(yaml.safe_load(path.read_text()) if path.exists() else None, source=str(path))


def _bundle_blocks(root: Path, bundle, cfg: ReportConfig) -> dict[str, str]:
    """The blocks of the committed ``bundle``'s rows: the models, seeds and duos tables and the bundle's line."""
    zoo = bundle.manifest.get("zoo") or {}
    paired = (
        bundle.paired
        if bundle.paired is not None
        else pd.DataFrame(
            columns=["suite", "split", "fit", "method", "base", "sidekick", "metric", "diff", "ci_low", "ci_high"]
        )
    )
    splits = shown_splits(bundle.rows, cfg)
    verdict = verdicts(bundle.rows, zoo, paired, cfg, sorted(set(splits) | {SPLIT}, key=split_sort_key))
    return {
        "models": models_table(bundle.rows, bundle.models),
        "seeds": seeds_table(bundle.rows, zoo, verdict, splits),
        "duos": duos_table(
            bundle.rows,
            paired,
            sidekicks=[n for n, e in zoo.items() if e.get("role") == "sidekick"] or None,
            zoo=zoo,
            config=cfg,
            verdict=verdict,
        ),
        "bundle": f"`{bundle.path.relative_to(root).as_posix()}` (rows of the committed bundle; commit "
        f"{(bundle.manifest.get('git') or {}).get('commit', '?')[:12]}).\n",
    }


def blocks(root=".") -> dict[str, str]:
    """The generated blocks' bodies, from the committed bundle, params.yaml's ``report:`` settings and timings."""
    root = Path(root)
    bundle = committed_bundle(root)
    cfg = report_config(root)
    out = _bundle_blocks(root, bundle, cfg)
    dfile = root / dvc_share.RECORD
    out["dvc_share"] = (
        dvc_share.table(json.loads(dfile.read_text(encoding="utf-8")))
        if dfile.exists()
        else "Not measured on this commit yet: `python -m benchmark reproduce dvc-share` writes it.\n"
    )
    ifile = root / import_times.RECORD
    out["imports"] = (
        import_times.table(json.loads(ifile.read_text(encoding="utf-8")))
        if ifile.exists()
        else "Not measured on this commit yet: `python -m benchmark reproduce imports --label NAME` writes it.\n"
    )
    tfile = root / "results" / "timings.json"
    timings = timing.load(tfile) if tfile.exists() else None
    if timings is not None:
        out["timings"] = timings_table(timings)
    out["budgets"] = budgets_block(bundle, cfg, timings, root / "results" / "tuning.json")
    nfile = root / "results" / "numerics.json"
    out["holds"] = facts.holds_block(root)
    out["holds_details"] = facts.holds_details(root)
    out["detection"] = detection_table(
        bundle, cfg, float(((bundle.manifest.get("params") or {}).get("evaluate") or {}).get("bootstrap_level", 0.95))
    )
    out["cross_cpu"] = cross_cpu.runs_table(cross_cpu.load(root / cross_cpu.RECORD))
    records = fingerprint_records.read_records(root / fingerprint_records.RECORDS)
    out["fingerprints"] = cross_cpu.fingerprint_table(records)
    out["cpu_kinds"] = cpu_kinds.table(records, cross_cpu.load(root / cross_cpu.RECORD))
    out["site_scale"] = facts.site_table(root)
    out["ci_run"] = facts.ci_table(root)
    out["cluster"] = facts.cluster_table(root)
    out["pinning"] = (
        pinning_table(json.loads(nfile.read_text()))
        if nfile.exists()
        else "Not measured on this commit yet: `python -m benchmark reproduce pinning-cost` writes it.\n"
    )
    return out


def budgets_block(bundle, config, timings: dict | None, tuning_file) -> str:
    """The budgets block (:func:`benchmark.docsgen.budgets.budgets_table`) of a loaded bundle, with the timings
    record and the tuning file when there is one."""
    tuning_file = Path(tuning_file)
    try:
        tuning = json.loads(tuning_file.read_text(encoding="utf-8")) if tuning_file.is_file() else None
    except json.JSONDecodeError as e:
        raise ValueError(f"{tuning_file}: not JSON ({e})") from None
    if tuning is not None and not isinstance(tuning, dict):
        raise ValueError(f"{tuning_file}: must map each recipe to its tuning record")
    return budgets_table(bundle.rows, bundle.manifest, bundle.lock, config, timings, tuning)


def render(text: str, new: dict[str, str]) -> str:
    """``text`` with the body of every generated block named in ``new`` replaced by ``new[name]``; other blocks as they
    are."""

    def sub(m):
        name = m.group("name")
        return m.group(1) + new[name] + m.group(4) if name in new else m.group(0)

    return _BLOCK.sub(sub, text)


def stale_blocks(readme_text: str, new: dict[str, str]) -> list[str]:
    """Names of generated blocks whose README body differs from ``new`` (or that the README lacks)."""
    have = {m.group("name"): m.group("body") for m in _BLOCK.finditer(readme_text)}
    return sorted(n for n in new if have.get(n) != new[n])


def stale(files=FILES, root=".") -> list[str]:
    """``FILE: NAME`` of every generated block of ``files`` (relative to ``root``) whose body differs from the
    committed results; ``ValueError`` when a file names an unknown block or a block is in none of the files."""
    root = Path(root)
    new = blocks(root)
    out, seen = [], set()
    for file in files:
        text = (root / file).read_text(encoding="utf-8")
        have = {m.group("name") for m in _BLOCK.finditer(text)}
        unknown = sorted(have - set(new))
        if unknown:
            raise ValueError(f"{file}: generated blocks {unknown} are not generated (known: {sorted(new)})")
        seen |= have
        out += [f"{file}: {n}" for n in stale_blocks(text, {n: new[n] for n in have})]
    missing = sorted(set(new) - seen)
    if missing:
        raise ValueError(
            f"no generated block for {missing} in {list(files)} (add '<!-- generated:NAME -->' and "
            f"'<!-- /generated:NAME -->' lines where each table goes)"
        )
    return out


def update(files=FILES, root=".") -> list[str]:
    """Rewrite the stale generated blocks of ``files``; return them as ``FILE: NAME``."""
    root = Path(root)
    changed = stale(files, root)
    new = blocks(root)
    for file in sorted({c.split(": ", 1)[0] for c in changed}):
        path = root / file
        write_text(path, render(path.read_text(encoding="utf-8"), new))
    return changed
