"""DVC stage ``report``: results table -> reports/ (leaderboard page, plots, plot data, headline metrics).

    python pipelines/report.py --results results/metrics.csv --models results/models.csv \
        --paired results/paired.csv --zoo zoo/embedded.yaml --params params.yaml --lock dvc.lock --out reports

Settings come from the ``report:`` block of the params file. A missing zoo,
model table or dvc.lock, or an empty results table, is reported on the page.
"""

from __future__ import annotations

import argparse
import sys

from benchmark.config import runtime
from benchmark.report import build_report, load_inputs, load_published
from benchmark.storage.store import StoreError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pipelines/report.py",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--results", default="results/metrics.csv", help="tidy results table (benchmark.storage.results_schema)"
    )
    p.add_argument("--models", default="results/models.csv", help="model table (name, arch, init, ..., gflops, params)")
    p.add_argument(
        "--zoo",
        action="append",
        default=argparse.SUPPRESS,
        help="zoo YAML (name -> entry, or under 'models'); repeat for several (default: zoo/embedded.yaml)",
    )
    p.add_argument("--params", default="params.yaml", help="params file; its 'report' block configures the report")
    p.add_argument(
        "--paired",
        default="results/paired.csv",
        help="paired-bootstrap differences duo - base (the headline's intervals; missing = no intervals)",
    )
    p.add_argument(
        "--logits",
        default="results/logits",
        help="models' logits folders (<model>/<split>.safetensors): risk-coverage and reliability curves",
    )
    p.add_argument(
        "--methods",
        default=argparse.SUPPRESS,
        help="method outputs (<name>/{cost.json, <split>.safetensors}): their curves (default: 'methods' beside "
        "--logits)",
    )
    p.add_argument(
        "--lock", default="dvc.lock", help="dvc.lock, read for the hashes of each model's logits (not a dependency)"
    )
    p.add_argument(
        "--published", default=argparse.SUPPRESS, help="published numbers YAML (default: the package's published.yaml)"
    )
    p.add_argument("--out", default="reports", help="output folder (replaced as a whole)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    runtime.mark_work()  # what came before is the stage's start-up (its timing record, UQ_TIMINGS)
    try:
        inputs = load_inputs(
            args.results,
            models=args.models,
            zoo=getattr(args, "zoo", ["zoo/embedded.yaml"]),
            params=args.params,
            lock=args.lock,
            paired=args.paired,
            logits=args.logits,
            methods=getattr(args, "methods", None),
        )
        published = load_published(args.published) if hasattr(args, "published") else None
        page = build_report(inputs, args.out, published=published, progress=not args.quiet)
    except (StoreError, ValueError) as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    for n in inputs.notices:
        print(f"report: note: {n}", file=sys.stderr)
    print(f"report: wrote {page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
