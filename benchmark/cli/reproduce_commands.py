"""``python -m benchmark reproduce {check,timings,readme}`` (registered in :mod:`benchmark.cli.main`).

    python -m benchmark reproduce check              # fresh results/ vs the committed bundle and summary
    python -m benchmark reproduce timings --force    # dvc repro -f with per-stage timings -> results/timings.json
    python -m benchmark reproduce readme --write     # README result blocks from the committed files

Exit codes: 0 fine, 1 the run does not reproduce (check) or the README is stale
(readme --check), 2 malformed input.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_reproduce_command(subparsers) -> None:
    p = subparsers.add_parser("reproduce", help="reproducibility gate, per-stage timings, README result tables",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="reproduce_command", metavar="ACTION", required=True)

    c = sub.add_parser("check", help="compare a fresh run with the committed results within the params tolerances",
                       description="Compare results/metrics.csv with the rows of the committed embedded bundle and "
                                   "results/summary.json with its committed version (git HEAD), within params "
                                   "reproduce.tolerance. Exit 1 when any value is outside, missing or extra.")
    c.add_argument("--results", default="results", help="the fresh run's results folder (default: results)")
    c.add_argument("--bundle", help="committed bundle (default: the newest under leaderboard/embedded)")
    c.add_argument("--summary", default="results/summary.json", help="summary path, compared with its git HEAD version")
    c.add_argument("--params", default="params.yaml", help="params file with the reproduce.tolerance block")
    c.add_argument("--report", help="write the per-row comparison as CSV here")
    c.add_argument("--show", type=int, default=15, help="rows to print, largest relative differences first")
    c.set_defaults(handler=run_check)

    t = sub.add_parser("timings", help="run dvc repro with per-stage timing records; write results/timings.json")
    t.add_argument("--force", action="store_true", help="dvc repro -f (rerun every stage)")
    t.add_argument("--install-seconds", type=float, help="install time to record beside the repro (clone-to-leaderboard)")
    t.add_argument("--out", default="results/timings.json", help="output JSON (default: results/timings.json)")
    t.set_defaults(handler=run_timings)

    r = sub.add_parser("readme", help="regenerate (or check) the README's result blocks from committed files")
    r.add_argument("--readme", default="README.md")
    g = r.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="rewrite the stale blocks")
    g.add_argument("--check", action="store_true", help="exit 1 when a block is stale")
    r.set_defaults(handler=run_readme)


def run_check(args) -> int:
    try:
        return _check(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _check(args) -> int:
    import pandas as pd

    from benchmark.bundle.schema import load_bundle
    from benchmark.report.inputs import read_results
    from benchmark.reproduce import gate
    from benchmark.stages.stage_config import load_params

    tol = gate.of_params(load_params(args.params).reproduce)  # parsed field by field with the params file
    bundle = load_bundle(Path(args.bundle) if args.bundle else gate.latest_bundle("leaderboard/embedded"), check_arch=False)
    fresh, _ = read_results(Path(args.results) / "metrics.csv")
    rows = gate.compare(bundle.rows, fresh, tol)
    summ = gate.compare_summary(gate.read_summary(gate.load_committed(args.summary), f"HEAD:{args.summary}"),
                                gate.read_summary(Path(args.summary).read_text(), args.summary), tol)
    if args.report:
        rows.to_csv(args.report, index=False)
    ok = True
    for what, rep in ((f"rows vs {bundle.path}", rows), (f"{args.summary} vs HEAD", summ)):
        s = gate.summarize(rep)
        ok &= s["reproduces"]
        print(f"{what}: {s['rows']} values: {s['exact']} identical, {s['within']} within tolerance, "
              f"{s['outside']} outside, {s['missing']} missing, {s['extra']} extra -> "
              f"{'reproduces' if s['reproduces'] else 'DOES NOT REPRODUCE'}")
        bad = rep[rep["status"].isin(["outside", "missing", "extra"])]
        show = bad if len(bad) else rep[rep["status"] == "within"]
        if len(show) and args.show:
            rel = (show["diff"].abs() / show["committed"].abs().clip(lower=1e-12)).fillna(float("inf"))
            with pd.option_context("display.width", 200, "display.max_columns", 20):
                print(show.assign(rel=rel).sort_values("rel", ascending=False).head(args.show).drop(columns="rel").to_string(index=False))
    return 0 if ok else 1


def run_timings(args) -> int:
    from benchmark.reproduce.timing import run_repro

    try:
        rec = run_repro(args.out, force=args.force, install_s=args.install_seconds)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"dvc repro: {rec['repro_wall_s']} s wall ({rec['stages_wall_s']} s in {len(rec['stages'])} stage processes); wrote {args.out}")
    return 0


def run_readme(args) -> int:
    from benchmark.reproduce import readme

    if args.write:
        changed = readme.update(args.readme)
        print(f"{args.readme}: {'rewrote ' + ', '.join(changed) if changed else 'up to date'}")
        return 0
    stale = readme.stale_blocks(Path(args.readme).read_text(), readme.blocks())
    if stale:
        print(f"{args.readme}: generated blocks {stale} are stale; run `python -m benchmark reproduce readme --write`", file=sys.stderr)
        return 1
    print(f"{args.readme}: generated blocks up to date")
    return 0
