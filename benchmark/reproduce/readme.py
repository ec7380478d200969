"""The result sections of the README and the docs, generated from committed files only.

Sources: the embedded default's committed result bundle
(``leaderboard/embedded/<id>/``: rows, paired differences, models) and
``results/timings.json``. Each generated block sits between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` in one of :data:`FILES`
(the README keeps the headline, the docs the rest; a block may appear in several);
:func:`update` rewrites the blocks, :func:`stale` lists those that differ
(tests/reproduce/test_readme_results.py fails on any, naming the command that regenerates
them: ``python -m benchmark reproduce readme --write``).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from benchmark.core import noise
from benchmark.reproduce import timing

FILES = ("README.md", "docs/results.md", "docs/explanations/performance.md")  # the files holding generated blocks
SPLIT, FIT, CONF = "test", "converged", "max"
MODEL_METRICS = [("accuracy", "test acc"), ("nll", "NLL"), ("aurc", "AURC"), ("auroc", "AUROC"), ("sac98", "SAC@98")]
DUO_METRICS = [("aurc", "AURC"), ("nll", "NLL")]
_BLOCK = re.compile(r"(<!-- generated:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated:(?P=name) -->)", re.S)


def fmt(x, digits: int = 3) -> str:
    """``digits`` significant digits below 0.1, ``digits`` decimals otherwise; '—' for NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    x = float(x)
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if abs(x) < 0.1 else f"{x:.{digits}f}"


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
    lines = ["| model | role | GFLOPs | " + " | ".join(label for _, label in MODEL_METRICS) + " |",
             "|---|---|---|" + "---|" * len(MODEL_METRICS)]
    for name in sorted(wide.index, key=lambda n: (-float(gflops.get(n, 0)), n)):
        cells = [fmt(wide.loc[name].get(m)) for m, _ in MODEL_METRICS]
        lines.append(f"| {name} | {role.get(name, '')} | {fmt(gflops.get(name), 2)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def duos_table(rows: pd.DataFrame, paired: pd.DataFrame, sidekicks=None) -> str:
    """Every weighted duo (of a ``sidekicks`` member when given): base alone -> duo and the paired-bootstrap
    difference with its interval."""
    v = _view(rows)
    if sidekicks is not None:
        v = v[(v["family"] != "duo") | v["sidekick"].isin(list(sidekicks))]
    single = v[v["family"] == "single"].set_index(["base", "metric"])["value"]
    duo = v[(v["family"] == "duo") & (v["method"] == "weighted")]
    p = paired[(paired["split"] == SPLIT) & (paired["fit"] == FIT) & (paired["method"] == "weighted")]
    p = p.set_index(["base", "sidekick", "metric"])
    head = "| duo (weighted) | FLOPs balance | " + " | ".join(f"{label}: base → duo (diff [95% CI])" for _, label in DUO_METRICS) + " |"
    lines = [head, "|---|---|" + "---|" * len(DUO_METRICS)]
    keys = duo[["base", "sidekick"]].drop_duplicates().sort_values(["base", "sidekick"]).itertuples(index=False)
    for base, side in keys:
        d = duo[(duo["base"] == base) & (duo["sidekick"] == side)].set_index("metric")
        cells = []
        for m, _ in DUO_METRICS:
            b, x = single.get((base, m), math.nan), d["value"].get(m, math.nan)
            if (base, side, m) in p.index:
                r = p.loc[(base, side, m)]
                mark = " ✱" if (r["ci_high"] < 0 or r["ci_low"] > 0) else ""
                cells.append(f"{fmt(b)} → {fmt(x)} ({_signed(r['diff'])} [{_signed(r['ci_low'])}, {_signed(r['ci_high'])}]){mark}")
            else:
                cells.append(f"{fmt(b)} → {fmt(x)}")
        bal = d["balance"].iloc[0] if len(d) else math.nan
        lines.append(f"| {base} + {side} | {fmt(bal, 2)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n✱ the 95% interval of the difference excludes 0.\n"


def seeds_table(rows: pd.DataFrame, zoo: dict) -> str:
    """Mean, standard deviation and range over the seeds of each seed group (:mod:`benchmark.core.noise`), test split."""
    v = _view(rows)
    groups = noise.seed_groups(zoo)
    spread = noise.seed_spread(v[v["family"] == "single"], groups).set_index(["members", "metric"])
    lines = ["| model (seeds) | metric | mean | sd | min | max |", "|---|---|---|---|---|---|"]
    for g in groups:
        for m, label in MODEL_METRICS:
            if (g.label, m) not in spread.index:
                continue
            x = spread.loc[(g.label, m)]
            lines.append(f"| {' / '.join(g.names)} | {label} | {fmt(x['mean'])} | {fmt(x['sd'])} | {fmt(x['min'])} | {fmt(x['max'])} |")
    return "\n".join(lines) + "\n"


TARGET_S = 600  # the README's main command, install included, on 2 cores (10 minutes)


def timings_table(record: dict) -> str:
    """Per stage kind: count, wall and CPU seconds, peak RSS, page faults; then the totals."""
    kinds = timing.by_kind(timing.stages_frame(record))
    lines = ["| stage | runs | wall s | user s | sys s | peak RSS MB | minor faults |", "|---|---|---|---|---|---|---|"]
    for r in kinds.itertuples(index=False):
        lines.append(f"| {r.kind} | {r.stages} | {r.wall_s:.1f} | {r.user_s:.1f} | {r.sys_s:.1f} | {r.max_rss_mb:.0f} | {int(r.minor_faults):,} |")
    lines.append(f"| DVC itself (hashing, locks, process starts) | | {record['dvc_overhead_s']:.1f} | | | | |")
    m = record.get("machine", {})
    tail = (f"\n`{record['command']}`: **{record['repro_wall_s']:.0f} s** wall"
            + (f", after an install of {record['install_s']:.0f} s (clone to leaderboard: "
               f"**{record['install_s'] + record['repro_wall_s']:.0f} s**; the target of {TARGET_S} s is "
               f"{'met' if record['install_s'] + record['repro_wall_s'] <= TARGET_S else '**not met**'})"
               if record.get("install_s") is not None else "")
            + f"; measured {record.get('date', '?')} on {m.get('cpus', '?')} CPUs ({m.get('cpu', '?')}, "
              f"torch {m.get('torch', '?')}, kernels {m.get('cpu_capability', '?')}{' pinned' if m.get('pinned') else ''}).\n")
    return "\n".join(lines) + "\n" + tail


def blocks(root=".") -> dict[str, str]:
    """The generated blocks' bodies, from the committed bundle and timings."""
    from benchmark.bundle.schema import load_bundle
    from benchmark.reproduce.gate import latest_bundle

    root = Path(root)
    bundle = load_bundle(latest_bundle(root / "leaderboard" / "embedded"), check_arch=False)
    out = {"models": models_table(bundle.rows, bundle.models),
           "seeds": seeds_table(bundle.rows, bundle.manifest.get("zoo") or {}),
           "duos": duos_table(bundle.rows, bundle.paired if bundle.paired is not None else pd.DataFrame(
               columns=["split", "fit", "method", "base", "sidekick", "metric", "diff", "ci_low", "ci_high"]),
               sidekicks=[n for n, e in (bundle.manifest.get("zoo") or {}).items() if e.get("role") == "sidekick"] or None),
           "bundle": f"`{bundle.path.relative_to(root).as_posix()}` (rows of the committed bundle; commit "
                     f"{(bundle.manifest.get('git') or {}).get('commit', '?')[:12]}).\n"}
    tfile = root / "results" / "timings.json"
    if tfile.exists():
        out["timings"] = timings_table(timing.load(tfile))
    return out


def render(text: str, new: dict[str, str]) -> str:
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
        raise ValueError(f"no generated block for {missing} in {list(files)} (add '<!-- generated:NAME -->' and "
                         f"'<!-- /generated:NAME -->' lines where each table goes)")
    return out


def update(files=FILES, root=".") -> list[str]:
    """Rewrite the stale generated blocks of ``files``; return them as ``FILE: NAME``."""
    from benchmark.storage.store import write_text

    root = Path(root)
    changed = stale(files, root)
    new = blocks(root)
    for file in sorted({c.split(": ", 1)[0] for c in changed}):
        path = root / file
        write_text(path, render(path.read_text(encoding="utf-8"), new))
    return changed
