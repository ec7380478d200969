"""The result sections of the README and the docs, generated from committed files only.

Sources: the embedded default's committed result bundle
(``leaderboard/embedded/<id>/``: rows, paired differences, models), the
``report:`` settings of ``params.yaml`` (which splits the headline and the plots
show), ``results/timings.json`` and ``results/tuning.json``. The blocks rank only what stands above the
training-seed noise (:mod:`benchmark.core.noise`): the models, seeds and duos blocks come from
:mod:`benchmark.docsgen.results_tables` (the seed block gives the
spread of every shown split and metric with the headline's noise verdict, the duo block marks ✱ only a difference
whose interval excludes 0 *and* that lies outside the seed noise of its kind, and adds the
seed-robust statement over each seed group's bases); the budgets block gives the training budget behind each method
family (:mod:`benchmark.docsgen.budgets`). Each generated block sits between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` in one of :data:`FILES`
(the README keeps the headline, the docs the rest; a block may appear in several);
:func:`update` rewrites the blocks, :func:`stale` lists those that differ
(tests/docsgen/test_readme_results.py fails on any, naming the command that regenerates
them: ``python -m benchmark reproduce readme --write``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import yaml

from benchmark.config.report_config import ReportConfig
from benchmark.core import noise
from benchmark.core.metric_info import METRICS
from benchmark.docsgen import cpu_kinds, facts, machines, record_tables
from benchmark.docsgen.budgets import budgets_table
from benchmark.docsgen.results_tables import SPLIT, duos_table, models_table, seeds_table, shown_splits, verdicts
from benchmark.report.tables import fmt_short as fmt
from benchmark.report.tables import split_sort_key
from benchmark.reproduce import cross_cpu, dvc_share, fingerprint_records, gate, import_times, timing
from benchmark.reproduce.gate import committed_bundle
from benchmark.storage.atomic import write_text

FILES = (
    "README.md",
    "docs/results.md",
    "docs/explanations/performance.md",
    "docs/explanations/reproducibility.md",
    "docs/how-to/cluster.md",
    "docs/how-to/tests.md",
)  # the files holding generated blocks
_BLOCK = re.compile(r"(<!-- generated:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated:(?P=name) -->)", re.S)


def _s(x) -> str:
    return "" if x is None or x != x else f"{x:.1f}"


def _imports(kind) -> str:
    """The imports cell of a stage kind: the heavy packages its processes imported; a warm fork's are not known (its
    server imported them before it started: benchmark/warm)."""
    seen = ", ".join(kind.imports)
    if not kind.warm:
        return seen
    warm = "warm forks (imported by their server)" if kind.warm == kind.stages else f"{kind.warm} warm fork(s)"
    return f"{seen}; {warm}" if seen else warm


def _outside_note(record: dict) -> str:
    """A run two stages at a time: its CPU seconds outside the stages' processes and the share of the stages' jobs
    (DVC's work for each stage), as a clause; empty without them."""
    if record.get("dvc_cpu_s") is None:
        return ""
    jobs = record.get("dvc_jobs_cpu_s")
    share = (
        f", {jobs:.0f} of them in the stages' jobs (DVC: checking, hashing, caching and recording each stage) and the "
        "rest in the runner and the warm python's imports"
        if jobs is not None
        else ""
    )
    return f"; outside the stages' processes it spent {record['dvc_cpu_s']:.0f} CPU s{share}"


def _warm_note(warm: dict | None) -> str:
    """What the run's warm python served (:func:`benchmark.reproduce.timing.warm_summary`), as a clause; empty
    without one."""
    if not warm:
        return ""
    cold = f", {warm['cold']} started fresh ({'; '.join(warm['why_cold'])})" if warm.get("cold") else ""
    return f"; its jobs and stages were {warm['forked']} forks of one warm python (benchmark/warm){cold}"


def _kind_rows(record: dict, parallel: bool) -> list[str]:
    """The timing table's header and one row per stage kind; DVC's column: the gaps before a serial run's stages, the
    CPU of the stages' jobs in a run two at a time."""
    lines = [
        "| stage | runs | wall s | user s | sys s | start-up s | "
        + ("DVC CPU s (its jobs)" if parallel else "DVC s before")
        + " | peak RSS MB | minor faults | imports |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in timing.by_kind(timing.stages_frame(record)).itertuples(index=False):
        lines.append(
            f"| {r.kind} | {r.stages} | {r.wall_s:.1f} | {r.user_s:.1f} | {r.sys_s:.1f} | {_s(r.startup_wall_s)} | "
            f"{_s(r.dvc_job_cpu_s if parallel else r.dvc_before_s)} | {r.max_rss_mb:.0f} | {int(r.minor_faults):,} | "
            f"{_imports(r)} |"
        )
    return lines


def timings_table(record: dict) -> str:
    """Per stage kind: count, wall and CPU seconds, start-up (interpreter, imports, params) and DVC's seconds (before
    its stages in a serial run, its stages' jobs' CPU in a run two at a time), peak RSS, page faults; then DVC's
    total, the run and its compute floor."""
    parallel = (record.get("jobs") or 1) > 1
    lines = _kind_rows(record, parallel)
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
    limit = machines.target(m)[0]
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
        + (_outside_note(record) if parallel else "")
        + _warm_note(record.get("warm"))
        + f"; measured {record.get('date', '?')} on {m.get('cpus', '?')} CPUs ({m.get('cpu', '?')}"
        f"{', ' + _arch(m['cpu_kind']) + m['cpu_kind'] if m.get('cpu_kind') else ''}, torch {m.get('torch', '?')}, "
        "kernels "
        f"{m.get('cpu_capability', '?')}{' pinned' if m.get('pinned') else ''})"
        + (
            f", load average {load['mean']:.1f} (max {load['max']:.1f})"
            if load.get("mean") == load.get("mean") and load.get("mean") is not None
            else ""
        )
        + ".\n"
    )
    for key, how in (("serial", "one stage at a time"), ("parallel", "two stages at a time")):
        other = record.get(key) or {}
        if other.get("repro_wall_s"):
            tail += (
                f"\nThe same DAG {how} in another clean copy (`{other['command']}`): "
                f"**{other['repro_wall_s']:.0f} s** wall, {other['floor_ratio']:.2f}x its compute floor of "
                f"{other['compute_floor_s']:.0f} s; {other['outputs'].get('identical', 0)} stage outputs compared, all "
                f"byte-identical to the first run's.\n"
            )
    return "\n".join(lines) + "\n" + tail


def _arch(kind: str) -> str:
    """``Zen 3, `` for a kind whose microarchitecture :func:`benchmark.docsgen.machines.microarchitecture` knows."""
    arch = machines.microarchitecture(kind)
    return f"{arch}, " if arch else ""


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
    out["site_scale"] = record_tables.site_table(root)
    out["ci_run"] = record_tables.ci_table(root)
    out["cluster"] = record_tables.cluster_table(root)
    out["test_files"] = record_tables.tests_table(root)
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
