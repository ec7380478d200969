"""``python -m benchmark reproduce`` actions that time the main job: ``timings`` (``dvc repro`` or the local parallel
run with per-stage records), ``imports`` (each stage script's start) and ``dvc-share`` (DVC's own time around the
stages)."""

from __future__ import annotations

import sys


def _add_timings(sub) -> None:
    """``reproduce timings``."""
    t = sub.add_parser(
        "timings",
        help="run the main job (dvc repro, or --jobs N stages at a time) with per-stage timing records; write "
        "results/timings.json",
    )
    t.add_argument("--force", action="store_true", help="dvc repro -f (rerun every stage)")
    t.add_argument(
        "--install-seconds", type=float, help="install time to record beside the repro (clone-to-leaderboard)"
    )
    t.add_argument("--out", default="results/timings.json", help="output JSON (default: results/timings.json)")
    t.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="stages at a time: more than 1 runs `python -m benchmark run "
        "--jobs N` (the same DAG, the same outputs) instead of dvc repro",
    )
    t.add_argument(
        "--compare-jobs",
        type=int,
        metavar="N",
        help="then run the DAG again N stages at a time (1: dvc repro) in a clean copy of this checkout under "
        ".dvc/tmp, check that its stage outputs are the first run's, and record its figures beside them (under "
        "'serial' or 'parallel')",
    )
    t.set_defaults(handler=run_timings)


def _add_imports(sub) -> None:
    """``reproduce imports``."""
    im = sub.add_parser(
        "imports",
        help="time each stage script's start (python -X importtime SCRIPT --help); add the "
        "figures to results/stage_imports.json under a label",
        description="For every stage of the checkout's dvc.yaml, run its script with -X importtime and "
        "--help (the interpreter and the imports of its entry: what the stage pays before "
        "any work) a few times and keep the fastest by CPU; add the figures under LABEL to "
        "the record, from which the performance page's table is generated (measure two "
        "checkouts, before and after a change, on the same machine). Rules: "
        "benchmark/reproduce/import_times.py.",
    )
    im.add_argument("--label", required=True, help="the figures' name in the record (e.g. a commit)")
    im.add_argument("--root", default=".", help="the checkout to measure (default: this one)")
    im.add_argument("--repeats", type=int, default=3, help="runs per script; the fastest is kept (default 3)")
    im.add_argument(
        "--out", default="results/stage_imports.json", help="the record (default: results/stage_imports.json)"
    )
    im.set_defaults(handler=run_imports)


def _add_dvc_share(sub) -> None:
    """``reproduce dvc-share``."""
    ds = sub.add_parser(
        "dvc-share",
        help="DVC's own time around the stages: the pipeline with every stage replaced by a "
        "copy of its outputs; write results/dvc_share.json",
        description="In a scratch copy of this checkout, replace every stage's command by a copy of its "
        "outputs from this checkout's finished run, and time `dvc repro` and `python -m "
        "benchmark run --jobs N` there from a clean state (no outputs, no cache, the committed "
        "dvc.lock): what DVC does around the stages, without their work. The runners must "
        "leave the same dvc.lock. Rules: benchmark/reproduce/dvc_share.py.",
    )
    ds.add_argument(
        "--jobs", type=int, nargs="+", default=[1, 2], help="the parallel runner's --jobs to time (default: 1 2)"
    )
    ds.add_argument("--repeats", type=int, default=2, help="runs of each runner, interleaved; the fastest is kept")
    ds.add_argument("--out", default="results/dvc_share.json", help="the record (default: results/dvc_share.json)")
    ds.set_defaults(handler=run_dvc_share)


ADDERS = (_add_timings, _add_imports, _add_dvc_share)


def run_timings(args) -> int:
    """``reproduce timings``: ``dvc repro`` (or ``--jobs`` stages at a time) with per-stage timing records, written to
    ``--out``, and with ``--compare-jobs`` the other runner's in a clean copy beside them; 1 when a run fails or the
    two runs' outputs differ."""
    import shutil
    import tempfile
    from pathlib import Path

    from benchmark.reproduce import timing
    from benchmark.storage.store import write_json

    bad = [
        f"{flag} must be at least 1, got {n}"
        for flag, n in (("--jobs", args.jobs), ("--compare-jobs", args.compare_jobs))
        if n is not None and n < 1
    ]
    if bad:
        print(f"error: {'; '.join(bad)}", file=sys.stderr)
        return 2
    try:
        rec = timing.run_repro(args.out, force=args.force, install_s=args.install_seconds, jobs=args.jobs)
        if args.compare_jobs:
            Path(".dvc/tmp").mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix="compare-", dir=".dvc/tmp"))
            try:
                timing.compare_run(rec, Path.cwd(), work / "copy", jobs=args.compare_jobs)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            write_json(args.out, rec)
    except (RuntimeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"{rec['command']}: {rec['repro_wall_s']} s wall ({rec['stages_wall_s']} s in {len(rec['stages'])} stage "
        f"processes; "
        f"{rec['floor_ratio']}x the compute floor of {rec['compute_floor_s']} s); wrote {args.out}"
    )
    other = rec.get("serial" if args.compare_jobs == 1 else "parallel") if args.compare_jobs else None
    if other:
        print(
            f"{other['command']} in a clean copy: {other['repro_wall_s']} s wall ({other['floor_ratio']}x its compute "
            f"floor); {other['outputs']['identical']} stage outputs identical to the first run's"
        )
    return 0


def run_imports(args) -> int:
    """``reproduce imports``: each stage script's start timed, added to the record under ``--label``."""
    import json
    from pathlib import Path

    from benchmark.reproduce import import_times
    from benchmark.storage.store import write_json

    if args.repeats < 1:
        print(f"error: --repeats must be at least 1, got {args.repeats}", file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        record = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
        record[args.label] = import_times.measure_checkout(args.root, repeats=args.repeats)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_json(out, record)
    print(import_times.table(record), end="")
    return 0


def run_dvc_share(args) -> int:
    """``reproduce dvc-share``: DVC's own time around the stages, written to ``--out``; 1 when a run fails."""
    from benchmark.dvcutil.scratch import ScratchError
    from benchmark.reproduce import dvc_share
    from benchmark.storage.store import write_json

    if args.repeats < 1 or any(j < 1 for j in args.jobs):
        print("error: --repeats and --jobs must be at least 1", file=sys.stderr)
        return 2
    try:
        record = dvc_share.measure(".", jobs=tuple(args.jobs), repeats=args.repeats)
    except (ScratchError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write_json(args.out, record)
    print(dvc_share.table(record), end="")
