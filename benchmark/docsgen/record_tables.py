"""Tables of the committed records (never typed): on the performance page, ``.ci/run`` by kind of step
(``results/ci_run.json``), the site at the papers' scale (``results/site_scale.json``) and the embedded default
through Slurm (``results/cluster.json``); on the tests how-to, the test command against its baseline run
(``results/test_command.json``). Their one-line forms are in :mod:`benchmark.docsgen.facts`."""

from __future__ import annotations

import math
from pathlib import Path

from benchmark.docsgen.facts import MB, load, short_commit, site_line
from benchmark.docsgen.machines import where


def ci_table(root=".") -> str:
    """``.ci/run`` timed by kind of step (``results/ci_run.json``, :mod:`benchmark.reproduce.ci_timing`): minutes per
    kind, the total against the 45-minute target, the machine and the commit."""
    rec = load(Path(root) / "results" / "ci_run.json")
    if rec is None:
        return "Not measured on this commit yet: `bash scripts/measure-ci.sh` writes `results/ci_run.json`.\n"
    lines = ["| step | minutes |", "|---|---|"]
    lines += [f"| {kind} | {seconds / 60:.1f} |" for kind, seconds in rec["by_kind"].items()]
    total, target = rec["total_s"], rec["target_s"]
    verdict = (
        f"within the {target // 60}-minute target" if total <= target else f"**over** the {target // 60}-minute target"
    )
    lines += [
        f"| **all of `.ci/run`** | **{total / 60:.1f}** |",
        "",
        f"{'Passed' if rec['passed'] else 'FAILED'}, {verdict}; {where(rec.get('machine') or {})}, commit "
        f"`{(rec.get('commit') or '?')[:7]}`, {rec.get('date', '?')} (`bash scripts/measure-ci.sh`).",
    ]
    return "\n".join(lines) + "\n"


def site_table(root=".") -> str:
    """The paper-scale ``publish`` at two sizes (0.25x and 1x the rows) and the straight-line 10x estimate, against
    the targets; then the first render in Chromium per suite page."""
    rec = load(Path(root) / "results" / "site_scale.json")
    if rec is None or "publish" not in rec:
        return site_line(rec) + "\n"
    lim = rec["limits"]
    lines = [
        "| rows | publish wall s | CPU s | site MB | files | largest file MB | embedded part MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in sorted(rec["publish"].items(), key=lambda kv: kv[1]["rows"]):  # smallest first, the estimate last
        largest = f"{r['largest'][1] / MB:.1f} (`{r['largest'][0]}`)" if "largest" in r else ""
        embedded = f"{r['embedded_bytes'] / MB:.1f}" if "embedded_bytes" in r else ""
        lines.append(
            f"| {name}: {r['rows']:,.0f} | {r['wall']:.0f} | {r['cpu']:.0f} | {r['bytes'] / MB:.1f} | "
            f"{r.get('files', '')} | {largest} | {embedded} |"
        )
    text = "\n".join(lines) + (
        f"\n\nTargets: publish at most {lim['publish_s']} s, site at most {lim['site_bytes'] / MB:.0f} MB, no file "
        f"over {lim['file_bytes'] / MB:.0f} MB, the embedded part at most {lim['embedded_bytes'] / MB:.0f} MB, each "
        "page's "
        f"first render under {lim['render_ms']} ms; the 10x row is a straight line through the two measured sizes "
        f"(not a target). Measured {rec.get('date', '?')} on {where(rec.get('machine') or {})}.\n"
    )
    if rec.get("first_render_ms"):
        text += (
            "\nFirst render in Chromium, median ms per suite page: "
            + ", ".join(f"{k} {v}" for k, v in sorted(rec["first_render_ms"].items()))
            + ".\n"
        )
    return text


def cluster_table(root=".") -> str:
    """The embedded default from scratch as Slurm jobs on a one-node cluster (1 and 2 jobs at once) against a serial
    ``dvc repro`` on the same machine: wall seconds, what the Slurm path adds, and its cost per job."""
    rec = load(Path(root) / "results" / "cluster.json")
    if rec is None:
        return (
            "Not measured on this commit yet: `pytest --benchmark-enable tests/benchmarks/test_bench_cluster.py` "
            "writes `results/cluster.json`.\n"
        )
    serial = rec["serial"]
    lines = [
        "| run | stage jobs at once | wall s | added over serial | stage processes s | per job s |",
        "|---|---|---|---|---|---|",
        f"| `dvc repro` (serial) | 1 | {serial['wall_s']:.0f} |  | {serial['stages_wall_s']:.0f} |  |",
    ]
    for r in rec["slurm"]:
        added = r["wall_s"] - serial["wall_s"]
        lines.append(
            f"| `cluster submit` | {r['jobs']} (at most {r['max_concurrent']} seen) | {r['wall_s']:.0f} | "
            f"{added:+.0f} s ({added / serial['wall_s']:+.0%}) | {r['stages_wall_s']:.0f} | "
            f"{r['job_overhead_s']:.1f} |"
        )
    return (
        "\n".join(lines) + f"\n\n{rec['stages']} stage jobs and the final one; *stage processes*: the stages' own "
        f"wall seconds, summed; *per job*: a job's time outside its stage's process (the interpreter, DVC's two "
        f"hashings, the lock), on average. Measured {rec.get('date', '?')} on {where(rec.get('machine') or {})}, one "
        f"run each{'; ' + rec['note'] if rec.get('note') else ''}.\n"
    )


def tests_table(root=".") -> str:
    """The README's test command against the baseline run beside it (``results/test_command.json``, written by
    ``bash scripts/measure-tests.sh --beside DIR``): each side's wall and tests, then the test files' summed seconds
    split into the files both commits have and the files only one has (added since, or moved or folded), those
    longest first."""
    rec = load(Path(root) / "results" / "test_command.json")
    if rec is None:
        return "Not measured on this commit yet: `bash scripts/measure-tests.sh` writes `results/test_command.json`.\n"
    base, head = rec.get("baseline"), f"`{short_commit(rec)}`"
    if not base or not isinstance(base.get("wall_s"), (int, float)) or base["wall_s"] <= 0:
        return f"{head}: {rec['passed']:,} tests in {rec['wall_s']:.0f} s; no baseline run beside it.\n"
    here, there = dict(rec.get("files_s") or []), dict(base.get("files_s") or [])
    both = here.keys() & there.keys()
    # fsum: the same total in any order (a set's order changes with the process's hash seed)
    shared = (math.fsum(there[f] for f in both), math.fsum(here[f] for f in both))
    alone = (math.fsum(there[f] for f in there.keys() - both), math.fsum(here[f] for f in here.keys() - both))
    runs = len(rec.get("walls_s") or [rec["wall_s"]])
    lines = [
        f"| | `{short_commit(base)}` (baseline) | {head} | ratio |",
        "|---|---:|---:|---:|",
        f"| wall, mean of {runs} run{'s' * (runs > 1)} a side | {base['wall_s']:,.0f} s | {rec['wall_s']:,.0f} s | "
        f"{rec['wall_s'] / base['wall_s']:.2f}x |",
        f"| tests passed | {base['passed']:,} | {rec['passed']:,} | |",
        f"| summed seconds of the {len(both)} test files both have | {shared[0]:,.0f} | {shared[1]:,.0f} | "
        f"{f'{shared[1] / shared[0]:.2f}x' if shared[0] > 0 else ''} |",
        f"| summed seconds of the test files only one has | {alone[0]:,.0f} | {alone[1]:,.0f} | |",
    ]

    def longest(side: dict) -> str:
        only = sorted(((s, f) for f, s in side.items() if f not in both and s >= 1), reverse=True)
        return ", ".join(f"`{f}` {s:.0f} s" for s, f in only) or "none over a second"

    note = base.get("note", "the baseline right after")
    return (
        "\n".join(lines)
        + f"\n\nFiles only {head} has: {longest(here)}. Only `{short_commit(base)}`: {longest(there)}. Measured "
        f"{rec.get('date', '?')} on {where(rec.get('machine') or {})}; {note}.\n"
    )
