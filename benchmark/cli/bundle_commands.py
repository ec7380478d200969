"""Command line of the result bundles: ``submit``, ``verify`` and ``publish`` (registered in :mod:`benchmark.cli.main`).

    python -m benchmark submit --suite embedded --out leaderboard/embedded/2026-11-30-lead
    python -m benchmark verify leaderboard/embedded/2026-11-30-lead --logits results
    python -m benchmark publish --out site/

Exit codes: 0 fine, 1 a row or logits file does not match (verify), 2 malformed input.
"""
from __future__ import annotations

import sys
from pathlib import Path


def add_submit_command(subparsers) -> None:
    p = subparsers.add_parser(
        "submit", help="pack a finished run into a result bundle (rows + provenance manifest)",
        description="Pack a suite's finished run (results/metrics.csv, models.csv, the zoo entries and params used, dvc.lock, "
                    "the sha256 of every logits file behind the rows, versions, device, git commit) into a small bundle folder, "
                    "then recompute its rows from the local logits and record the status (verification.json).")
    p.add_argument("--suite", required=True, help="'embedded' or a paper suite (suites/<name>.yaml)")
    p.add_argument("--out", required=True, metavar="DIR", help="new bundle folder, e.g. leaderboard/<suite>/<id>")
    p.add_argument("--results", metavar="DIR", help="results folder (default: results/ or suites/<name>/results)")
    p.add_argument("--lock", metavar="FILE", help="dvc.lock of the run (default: ./dvc.lock or suites/<name>/dvc.lock)")
    p.add_argument("--contributor", default="", metavar="TEXT", help="who ran it (free text)")
    p.add_argument("--no-verify", action="store_true", help="do not recompute the rows now (the bundle stays self-reported)")
    p.set_defaults(handler=run_submit)


def run_submit(args) -> int:
    from benchmark.bundle.pack import submit, suite_folder
    from benchmark.bundle.schema import load_bundle
    from benchmark.bundle.verify import record, verify_bundle

    out = submit(args.suite, args.out, results=args.results, lock=args.lock, contributor=args.contributor)
    if args.no_verify:
        print(f"{out}: self-reported (not verified: --no-verify)")
        return 0
    bundle = load_bundle(out)
    rep = verify_bundle(bundle, Path(args.results) if args.results else suite_folder(args.suite) / "results")
    for line in rep.problems[:20]:
        print(f"mismatch: {line}", file=sys.stderr)
    if not rep.ok:
        print(f"{out}: written but its rows do not recompute from the logits ({len(rep.problems)} problem(s)); not recorded",
              file=sys.stderr)
        return 1
    record(bundle, rep)
    print(f"{out}: {rep.status} ({rep.recomputed}/{rep.rows} rows recomputed)")
    return 0


def add_verify_command(subparsers) -> None:
    p = subparsers.add_parser(
        "verify", help="check a result bundle and recompute its rows from logits",
        description="Check a bundle's schema and invariants (exit 2 when malformed), then, where logits are available, "
                    "check every logits file's sha256 and recompute every row with the evaluate stage's code (to 1e-6). "
                    "Exit 1 on any mismatch. Status: 'verified' when all rows were recomputed, else 'self-reported'.")
    p.add_argument("bundle", metavar="BUNDLE", help="bundle folder (with manifest.json)")
    p.add_argument("--logits", metavar="DIR", help="results folder holding logits/<model>/ and methods/<name>/")
    p.add_argument("--remote", metavar="NAME", help="dvc pull the logits through this DVC remote into this checkout first")
    p.add_argument("--record", action="store_true", help="write the status to BUNDLE/verification.json (read by publish)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when the bundle's verification.json claims 'verified' but its rows could not be recomputed here")
    p.add_argument("--report", metavar="CSV", help="write the per-row report (row key, check, detail) to this CSV file")
    p.add_argument("--workers", type=int, help="worker processes for the units (default: the run's evaluate.workers)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run_verify)


def run_verify(args) -> int:
    from benchmark.bundle.schema import load_bundle
    from benchmark.bundle.verify import VERIFIED, claimed_status, pull_logits, record, verify_bundle
    from benchmark.storage.remote import RemoteError
    from benchmark.storage.store import StoreError, write_table

    if args.workers is not None and args.workers < 1:
        raise StoreError(f"--workers: must be >= 1, got {args.workers}")
    bundle = load_bundle(args.bundle)
    claimed = claimed_status(bundle)
    logits = Path(args.logits) if args.logits else None
    if args.remote:
        try:
            logits = pull_logits(bundle, args.remote)
        except RemoteError as e:
            raise StoreError(f"--remote {args.remote}: {e}") from None
    if logits is not None and not logits.is_dir():
        raise StoreError(f"--logits {logits}: not a folder")
    rep = verify_bundle(bundle, logits, workers=args.workers, progress=not args.quiet)
    for line in rep.lines:
        print(line)
    for p in rep.problems:
        print(f"mismatch: {p}", file=sys.stderr)
    if args.report and rep.table is not None:
        write_table(args.report, rep.table)
    print(f"{bundle.path}: {rep.status} ({rep.recomputed}/{rep.rows} rows recomputed, {len(rep.problems)} mismatch(es))")
    if not rep.ok:
        return 1
    if args.record:
        record(bundle, rep)
    if args.strict and claimed == VERIFIED and rep.status != VERIFIED:
        print(f"{bundle.path}: verification.json claims 'verified' but the rows could not be recomputed here "
              "(give --logits or --remote, or delete verification.json)", file=sys.stderr)
        return 1
    return 0


def add_publish_command(subparsers) -> None:
    p = subparsers.add_parser(
        "publish", help="build the static leaderboard site from all result bundles",
        description="Build the static site (index, one page per suite with interactive Pareto charts, provenance of every "
                    "bundle, Parquet and gzipped CSV of every table) "
                    "from the bundles under --bundles; no training, no results/ needed. The same bundles give a byte-identical site.")
    p.add_argument("--out", required=True, metavar="DIR", help="site folder (replaced as a whole)")
    p.add_argument("--bundles", default="leaderboard", metavar="DIR", help="folder searched for bundles (default leaderboard/)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run_publish)


def run_publish(args) -> int:
    from benchmark.bundle.site import publish

    page = publish(args.bundles, args.out, progress=not args.quiet)
    print(f"publish: wrote {page}")
    return 0


COMMANDS = [add_submit_command, add_verify_command, add_publish_command]

