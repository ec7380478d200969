"""``python -m benchmark suite-pipeline``: write (or check) the generated pipelines, the root ``dvc.yaml`` of the
embedded default (:mod:`benchmark.dvcgen.embedded_pipeline`) and each paper suite's
(:mod:`benchmark.dvcgen.suite_pipeline`)."""

from __future__ import annotations

import sys
from pathlib import Path

from benchmark.dvcgen import embedded_pipeline as emb
from benchmark.dvcgen import suite_pipeline


def add_suite_pipeline_command(subparsers) -> None:
    """Register ``suite-pipeline`` (a suite's generated ``dvc.yaml``) in ``subparsers``."""
    p = subparsers.add_parser(
        "suite-pipeline",
        help="write a paper suite's DVC pipeline suites/<NAME>/dvc.yaml (ask for the suite)",
        description="Write suites/<NAME>/dvc.yaml from the package's template (not committed: the suite is then "
        "'asked for' and DVC commands at the root include it), and suites/<NAME>/params.yaml when it does "
        "not exist yet. Run from the repository root. Then: dvc repro suites/<NAME>/dvc.yaml",
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="suite names (suites/<NAME>.yaml); 'embedded': the root dvc.yaml of the embedded default",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="regenerate what exists: the root dvc.yaml (once it is generated), every suite's params.yaml "
        "where absent, the dvc.yaml of the suites already asked for (no other suite is materialised)",
    )
    p.add_argument("--check", action="store_true", help="write nothing; exit 2 when a file differs from the generator")
    p.add_argument("--root", default=".", metavar="DIR", help="repository root (default: the current folder)")
    p.set_defaults(handler=run_suite_pipeline)


def run_suite_pipeline(args) -> int:
    """``suite-pipeline``: write (or with ``--check`` compare) the pipelines of the named suites; the exit status."""
    from benchmark.data.paper.suites import SuiteError, list_suites
    from benchmark.models.zoo import ZooError

    root = Path(args.root)
    names = ([emb.NAME] if emb.is_generated(root) else []) + list_suites(root / "suites") if args.all else args.names
    if not names or (args.all and args.names):
        print("error: give suite names or --all (not both)", file=sys.stderr)
        return 2
    problems, stale = [], []
    for name in names:
        try:
            if name == emb.NAME:  # the embedded default: the root dvc.yaml (params.yaml is the user's)
                found = emb.check(root) if args.check else []
                written = [] if args.check else emb.write(root)
            else:
                found = suite_pipeline.check(name, root) if args.check else []
                written = (
                    []
                    if args.check
                    else suite_pipeline.write(
                        name, root, pipeline=not args.all or suite_pipeline.is_materialised(name, root)
                    )
                )
            for path in written:
                print(f"wrote {path}")
        except (SuiteError, ZooError, OSError, ValueError) as e:
            found = [str(e)]
        problems += found
        stale += [name] if found else []
    for msg in problems:
        print(f"error: {msg}", file=sys.stderr)
    if args.check and problems:
        print(
            f"regenerate with: python -m benchmark suite-pipeline {' '.join(stale)} (params.yaml is kept when it "
            "exists: fix the keys named above, or delete it first)",
            file=sys.stderr,
        )
    return 2 if problems else 0
