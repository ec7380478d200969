"""Command line of the result bundles: ``submit``, ``verify`` and ``publish`` (registered in :mod:`benchmark.cli.main`).

    python -m benchmark submit --suite embedded --out leaderboard/embedded/2026-11-30-lead
    python -m benchmark verify leaderboard/embedded/2026-11-30-lead --logits results [--record-to DIR] [--strict]
    python -m benchmark publish --out site/ [--verified DIR]

Exit codes: 0 fine, 1 a row, cost or logits file does not match (verify), or the bundle did not end verified
(``verify --strict``), 2 malformed input, 3 the site was written but some bundles or suites were left out (publish).
"""

from __future__ import annotations

import sys
from pathlib import Path


def add_submit_command(subparsers) -> None:
    """Register ``submit`` (pack a finished run into a result bundle) in ``subparsers``."""
    p = subparsers.add_parser(
        "submit",
        help="pack a finished run into a result bundle (rows + provenance manifest)",
        description="Pack a suite's finished run (results/metrics.csv, models.csv, the zoo entries and params used, "
        "dvc.lock, the sha256 of every logits file behind the rows, versions, device, git commit) into a small "
        "bundle folder "
        "leaderboard/<suite>/<id>, then recompute its rows and costs from the local logits as a check (the "
        "site's badge comes from the verification this project's workflow runs, never from the bundle).",
    )
    p.add_argument("--suite", required=True, help="'embedded' or a paper suite (suites/<name>.yaml)")
    p.add_argument(
        "--out", required=True, metavar="DIR", help="new bundle folder leaderboard/<suite>/<id> (id: a-z, 0-9, . _ -)"
    )
    p.add_argument("--results", metavar="DIR", help="results folder (default: results/ or suites/<name>/results)")
    p.add_argument("--lock", metavar="FILE", help="dvc.lock of the run (default: ./dvc.lock or suites/<name>/dvc.lock)")
    p.add_argument("--contributor", default="", metavar="TEXT", help="who ran it (one line, at most 200 characters)")
    p.add_argument("--no-verify", action="store_true", help="do not recompute the rows now")
    p.set_defaults(handler=run_submit)


def run_submit(args) -> int:
    """``submit``: write the bundle, then read it back and verify its rows and costs against the local logits; the exit
    status."""
    from benchmark.bundle.pack import submit, suite_folder
    from benchmark.bundle.schema import load_bundle
    from benchmark.bundle.verify import verify_bundle

    out = submit(args.suite, args.out, results=args.results, lock=args.lock, contributor=args.contributor)
    bundle = load_bundle(out)  # what verify and publish will read: the intake's checks
    print(_remote_note(bundle.manifest["remote"]), file=sys.stderr)
    if args.no_verify:
        print(f"{out}: written (not recomputed: --no-verify)")
        return 0
    rep = verify_bundle(bundle, Path(args.results) if args.results else suite_folder(args.suite) / "results")
    for line in rep.problems[:20]:
        print(f"mismatch: {line}", file=sys.stderr)
    if not rep.ok:
        print(
            f"{out}: written but its rows do not recompute from the logits ({len(rep.problems)} problem(s))",
            file=sys.stderr,
        )
        return 1
    print(
        f"{out}: recomputes here ({rep.recomputed}/{rep.rows} rows, costs of {rep.costs}); "
        + ("" if rep.status == "verified" else f"would not be verified: {rep.why_not_verified()}; ")
        + "the badge on the site comes from the project's own verification"
    )
    return 0


def _remote_note(remote: str | None) -> str:
    """What ``submit`` says about the DVC remote its manifest names (where the site pulls the logits to verify)."""
    if remote is None:
        return (
            "submit: no default DVC remote is configured, so the manifest names none and the site cannot pull your "
            "logits to verify the bundle: add one (`dvc remote add -d NAME URL`), push (`python -m benchmark remote "
            "push`) "
            "and submit again"
        )
    return (
        f"submit: the manifest names DVC remote {remote!r}: push the logits there (`python -m benchmark remote push`)"
    )


NO_REMOTE = (
    "its manifest names no DVC remote (the bundle was made before one was configured): give --remote NAME or "
    "--logits DIR, or submit again after `dvc remote add -d NAME URL`"
)


def add_verify_command(subparsers) -> None:
    """Register ``verify`` (check a bundle and recompute its rows from logits) in ``subparsers``."""
    p = subparsers.add_parser(
        "verify",
        help="check a result bundle and recompute its rows from logits",
        description="Check a bundle's files, manifest and rows (exit 2 when malformed or hostile, one line), then, "
        "where logits are available, check every logits file's sha256 and recompute every row with the evaluate "
        "stage's code "
        "and every cost (GFLOPs and parameters with fvcore from the zoo entries, balance, overhead) and models.csv "
        "(to 1e-6). Exit 1 on any mismatch. Status: 'verified' when every row and cost was recomputed, else "
        "'self-reported'. Throughput is the contributor's measurement: never verified.",
    )
    p.add_argument("bundle", metavar="BUNDLE", help="bundle folder leaderboard/<suite>/<id> (with manifest.json)")
    p.add_argument("--logits", metavar="DIR", help="results folder holding logits/<model>/ and methods/<name>/")
    p.add_argument(
        "--remote", metavar="NAME", help="dvc pull the logits through this DVC remote into this checkout first"
    )
    p.add_argument(
        "--pull",
        action="store_true",
        help="dvc pull the logits through the DVC remote the manifest names, if "
        "it names one (a remote of this checkout's DVC config)",
    )
    p.add_argument(
        "--record-to",
        metavar="DIR",
        help="write the verification record to DIR/<suite>/<id>.json when verified (else remove an old one); "
        "publish --verified DIR reads the badges from there. DIR must be outside the bundles folder",
    )
    p.add_argument(
        "--strict", action="store_true", help="exit 1 unless the bundle ends verified (every row and cost recomputed)"
    )
    p.add_argument(
        "--report",
        metavar="CSV",
        help="write the per-row report (row key, check, detail) to this CSV file, "
        "its folder made if needed, and say so (e.g. results/verify/<id>-rows.csv: "
        "git ignores results/)",
    )
    p.add_argument("--workers", type=int, help="worker processes for the units (default: the run's evaluate.workers)")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar and no per-unit lines: the status line and any mismatch only",
    )
    p.set_defaults(handler=run_verify)


def _verify_logits(args, bundle) -> tuple[Path | None, str, str | None]:
    """``verify``'s logits folder (pulled when asked), a line on where it came from, and the remote pulled from; first
    checks that ``--record-to`` lies outside the bundles folder."""
    import os

    from benchmark.bundle.verify import pull_logits
    from benchmark.storage.remote import RemoteError
    from benchmark.storage.store import StoreError

    if args.record_to:
        here, inside = Path(os.path.abspath(args.record_to)), Path(os.path.abspath(bundle.path)).parent.parent
        if here == inside or inside in here.parents:
            raise StoreError(
                f"--record-to {args.record_to}: inside the bundles folder {inside}; records live outside it"
            )
    logits = Path(args.logits) if args.logits else None
    source = f"local results folder {args.logits}" if args.logits else ""
    remote = args.remote or (bundle.manifest["remote"] if args.pull else None)
    if remote:
        try:
            logits = pull_logits(bundle, remote)
        except RemoteError as e:
            raise StoreError(f"--remote {remote}: {e}") from None
        source = f"pulled through DVC remote {remote}"
    elif args.pull:
        print(f"{bundle.path}: nothing pulled: {NO_REMOTE}", file=sys.stderr)
    if logits is not None and not logits.is_dir():
        raise StoreError(f"--logits {logits}: not a folder")
    return logits, source, remote


def _verify_report(args, bundle, logits: Path | None):
    """``verify``'s recompute of ``bundle`` from ``logits``; a failure as a StoreError naming it."""
    from benchmark.bundle.verify import verify_bundle
    from benchmark.storage.store import StoreError

    try:
        return verify_bundle(bundle, logits, workers=args.workers, progress=not args.quiet)
    except (
        ValueError,
        RuntimeError,
        OSError,
    ) as e:  # logits that pass their hash but cannot be evaluated (StoreError too)
        msg = " ".join(str(e).split())
        raise StoreError(
            msg
            if isinstance(e, StoreError)
            else f"{bundle.path}: the recompute failed: {type(e).__name__}: {msg[:500]}"
        ) from None


def run_verify(args) -> int:
    """``verify``: check a bundle, recompute its rows from the logits (pulled when asked), print the report and record a
    verification when asked; the exit status."""
    from benchmark.bundle.schema import load_bundle
    from benchmark.bundle.verify import VERIFIED, record
    from benchmark.storage.store import StoreError, write_table

    if args.workers is not None and args.workers < 1:
        raise StoreError(f"--workers: must be >= 1, got {args.workers}")
    bundle = load_bundle(args.bundle)
    logits, source, remote = _verify_logits(args, bundle)
    rep = _verify_report(args, bundle, logits)
    for line in [] if args.quiet else rep.lines:
        print(line)
    for p in rep.problems:
        print(f"mismatch: {p}", file=sys.stderr)
    if args.report and rep.table is not None:
        write_table(args.report, rep.table)
    print(
        f"{bundle.path}: {rep.status} ({rep.recomputed}/{rep.rows} rows recomputed, costs of {rep.costs}, "
        f"{len(rep.problems)} mismatch(es); {', '.join(rep.reported)}: reported, not verified)"
    )
    if args.report and rep.table is not None:
        print(f"{bundle.path}: per-row report written to {args.report} ({len(rep.table)} rows)")
    if args.record_to:
        path = record(args.record_to, bundle, rep, source=source)
        print(f"{bundle.path}: " + (f"verification recorded in {path}" if path else "nothing recorded (not verified)"))
    if not rep.ok:
        return 1
    if args.strict and rep.status != VERIFIED:
        why = rep.why_not_verified(
            *([f"no logits: {NO_REMOTE}"] if args.pull and not remote and logits is None else [])
        )
        print(f"{bundle.path}: not verified (--strict): {why}", file=sys.stderr)
        return 1
    return 0


def add_publish_command(subparsers) -> None:
    """Register ``publish`` (the static leaderboard site from every bundle) in ``subparsers``."""
    p = subparsers.add_parser(
        "publish",
        help="build the static leaderboard site from all result bundles",
        description="Build the static site (index, one page per suite with interactive Pareto charts, provenance of "
        "every bundle, Parquet and gzipped CSV of every table) from the bundles under --bundles (at "
        "<bundles>/<suite>/<id>/); no training, no results/ needed. A bundle that cannot be read is reported and "
        "left out (exit 3 once the rest of the site is written). The same bundles and records give a "
        "byte-identical site.",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="site folder (replaced as a whole)")
    p.add_argument(
        "--bundles", default="leaderboard", metavar="DIR", help="folder searched for bundles (default leaderboard/)"
    )
    p.add_argument(
        "--verified",
        metavar="DIR",
        help="verification records written by `verify --record-to DIR`: the only "
        "source of 'verified' badges (without it every bundle is self-reported)",
    )
    p.add_argument(
        "--repo",
        default=".",
        metavar="DIR",
        help="repository whose params.yaml (embedded) and "
        "suites/<name>/params.yaml configure the suites' pages (default .)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run_publish)


def run_publish(args) -> int:
    """``publish``: build the site from the bundles; 3 when a bundle was left out, else 0."""
    from benchmark.bundle.site import publish
    from benchmark.storage.store import StoreError

    if args.verified is not None and not Path(args.verified).is_dir():
        raise StoreError(f"--verified {args.verified}: not a folder (made by `verify --record-to`)")
    page, problems = publish(args.bundles, args.out, progress=not args.quiet, verified=args.verified, repo=args.repo)
    for line in problems:
        print(f"publish: {line}", file=sys.stderr)
    print(f"publish: wrote {page}" + (f"; {len(problems)} left out" if problems else ""))
    return 3 if problems else 0


COMMANDS = [add_submit_command, add_verify_command, add_publish_command]
