"""``python -m benchmark reproduce {check,timings,readme}`` (registered in :mod:`benchmark.cli.main`).

    python -m benchmark reproduce check              # fresh results/ vs the committed bundle and summary
    python -m benchmark reproduce timings --force    # dvc repro -f with per-stage timings -> results/timings.json
    python -m benchmark reproduce imports --label X  # each stage script's start -> results/stage_imports.json
    python -m benchmark reproduce dvc-share          # DVC's own time around the stages -> results/dvc_share.json
    python -m benchmark reproduce readme --write     # README result blocks from the committed files
    python -m benchmark reproduce test-time          # the README's test command, timed -> results/test_command.json
    python -m benchmark reproduce fingerprint        # this CPU's kernel bytes vs the records of other CPU kinds

Exit codes: 0 fine, 1 the run does not reproduce (check), the README is stale
(readme --check) or a kernel parts from its records
(fingerprint), 2 malformed input.
"""

from __future__ import annotations

import sys

from benchmark.cli import reproduce_cpu, reproduce_measure


def add_reproduce_command(subparsers) -> None:
    """Register ``reproduce`` and its actions (one ``_add_<action>`` each) in the command line's ``subparsers``."""
    p = subparsers.add_parser(
        "reproduce",
        help="reproducibility gate, per-stage timings, README result tables",
        description=__doc__.split("\n\n")[0],
    )
    sub = p.add_subparsers(dest="reproduce_command", metavar="ACTION", required=True)
    for add in (
        _add_check,
        *reproduce_measure.ADDERS,
        _add_test_time,
        _add_tune,
        _add_pinning_cost,
        *reproduce_cpu.ADDERS,
        _add_readme,
    ):
        add(sub)


def _add_check(sub) -> None:
    """``reproduce check``."""
    c = sub.add_parser(
        "check",
        help="compare a fresh run with the committed results: exactly where the logits are the "
        "same, within each row's noise where they differ",
        description="Compare results/metrics.csv with the rows of the committed embedded bundle, "
        "results/summary.json with its committed version (git HEAD) and dvc.lock's stage "
        "outputs with HEAD:dvc.lock. A row with the committed inputs (inputs_hash) must "
        "agree to 1e-9; a row with other inputs within k x its noise (seed spread and "
        "bootstrap error); when both runs pinned the CPU numerics, other inputs and other "
        "stage outputs fail. Rules: benchmark/reproduce/gate.py. Exit 1 when anything fails.",
    )
    c.add_argument("--results", default="results", help="the fresh run's results folder (default: results)")
    c.add_argument("--bundle", help="committed bundle (default: the newest under leaderboard/embedded)")
    c.add_argument("--summary", default="results/summary.json", help="summary path, compared with its git HEAD version")
    c.add_argument("--lock", default="dvc.lock", help="the fresh run's dvc.lock, compared with its git HEAD version")
    c.add_argument("--params", default="params.yaml", help="params file (evaluate.main_fit, evaluate.bootstrap_level)")
    c.add_argument(
        "--allow-other-inputs",
        action="store_true",
        help="a CPU kind on which pinning did not give the same bytes: judge rows with other logits by their "
        "noise and report (not fail on) differing stage outputs, even when both runs pinned the numerics",
    )
    c.add_argument("--report", help="write the per-row comparison as CSV here")
    c.add_argument("--show", type=int, default=15, help="failing rows to print, largest first")
    c.add_argument(
        "--record",
        metavar="FILE",
        help="add this check to the cross-CPU record FILE (results/cross_cpu.json: "
        "CPU kind, commit, counts, verdict), from which the README and the reproducibility page are generated",
    )
    c.add_argument(
        "--ran-on",
        metavar="KIND",
        help="the CPU kind that made the fresh run (a kind of results/fingerprints/, e.g. GenuineIntel-f6-m167): "
        "what --record records and whose vendor the gate compares; default: the run's results/timings.json, else this "
        "machine's",
    )
    c.add_argument("--note", help="with --record: a note for the record (e.g. what the run is a replay of)")
    c.set_defaults(handler=run_check)


def _add_test_time(sub) -> None:
    """``reproduce test-time``."""
    e = sub.add_parser(
        "test-time",
        help="run the test suite (python -m pytest) timed; write results/test_command.json",
        description="Run `python -m pytest` here, as the README's test command does, and record its wall "
        "seconds, the counts of passed and skipped tests, whether .pytest_cache existed before, "
        "the commit and the machine. A run with a failed or erroring test is not recorded. "
        "`bash scripts/measure-tests.sh` times the install too. Rules: benchmark/reproduce/testrun.py.",
    )
    e.add_argument(
        "--setup-seconds", type=float, help="install time to record beside the run (bash scripts/setup.sh test)"
    )
    e.add_argument("--out", default="results/test_command.json", help="the record (default: results/test_command.json)")
    e.add_argument(
        "--beside",
        metavar="DIR",
        help="then run the same command in DIR (a clone of another commit, with its .venv) and record it as the "
        "baseline: two walls of the same hour compare, walls of different hours do not",
    )
    e.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --beside: each side N times, in the order here, DIR, DIR, here, ... (a drift of the machine's "
        "speed falls on both alike), every run from an empty .pytest_cache; each side's mean is recorded (default 1: "
        "here, then DIR)",
    )
    e.add_argument(
        "pytest_args",
        nargs="*",
        metavar="PYTEST_ARG",
        help="arguments for pytest, after `--` (default: none, the whole suite as pyproject.toml configures it)",
    )
    e.set_defaults(handler=run_test_time)


def _add_tune(sub) -> None:
    """``reproduce tune``."""
    u = sub.add_parser(
        "tune",
        help="choose a recipe's lr on validation: one stage run per grid point, in scratch copies",
        description="Run a training stage once per learning rate, each in a scratch copy of this checkout "
        "whose params.yaml differs only in recipes.<recipe>.lr (the recipe's budget unchanged), "
        "score each run by the validation score its train.json records, and write the grid to "
        "results/tuning.json. Exit 1 when params.yaml's lr is not the best of the grid. "
        "Rules: benchmark/models/tune.py.",
    )
    u.add_argument("--stage", required=True, help="the training stage, e.g. train@lite0-s0 or sve-train")
    u.add_argument("--recipe", required=True, help="the recipe whose lr is tuned (params.yaml recipes.<name>)")
    u.add_argument("--lr", nargs="+", type=float, required=True, metavar="LR", help="the grid")
    u.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another params.yaml key for every run, e.g. sve.members=[2] (YAML value)",
    )
    u.add_argument("--out", default="results/tuning.json", help="the tuning record (default: results/tuning.json)")
    u.set_defaults(handler=run_tune)


def _add_pinning_cost(sub) -> None:
    """``reproduce pinning-cost``."""
    n = sub.add_parser(
        "pinning-cost",
        help="time a training stage with pinned and with native CPU numerics",
        description="Run a training stage in scratch copies of this checkout, alternately with "
        "UQ_NUMERICS=pinned and UQ_NUMERICS=native, and write the medians of the stage "
        "process's wall and CPU seconds and their ratio to results/numerics.json. "
        "Rules: benchmark/reproduce/pinning_cost.py.",
    )
    n.add_argument("--stage", default="train@lite0-s0", help="the stage to time (default: train@lite0-s0)")
    n.add_argument("--repeats", type=int, default=2, help="runs per mode (default 2)")
    n.add_argument("--out", default="results/numerics.json", help="the record (default: results/numerics.json)")
    n.set_defaults(handler=run_pinning_cost)


def _add_readme(sub) -> None:
    """``reproduce readme``."""
    r = sub.add_parser("readme", help="regenerate (or check) the README's result blocks from committed files")
    r.add_argument(
        "--file",
        action="append",
        metavar="FILE",
        help="a file with generated blocks (repeatable; default: the README and the docs pages that have them)",
    )
    g = r.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="rewrite the stale blocks")
    g.add_argument("--check", action="store_true", help="exit 1 when a block is stale")
    r.set_defaults(handler=run_readme)


def run_check(args) -> int:
    """``reproduce check`` (:mod:`benchmark.cli.reproduce_check`, imported when the command runs)."""
    from benchmark.cli import reproduce_check

    return reproduce_check.main(args)


def run_test_time(args) -> int:
    """``reproduce test-time``: the README's test command, timed and recorded; 1 when a test fails."""
    from benchmark.reproduce import testrun

    try:
        rec = testrun.measure_beside(
            args.pytest_args, setup_s=args.setup_seconds, other=args.beside, rounds=args.rounds
        )
    except (RuntimeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"pytest: {rec['passed']} passed, {rec['skipped']} skipped in {rec['wall_s']} s wall (.pytest_cache "
        f"{rec['pytest_cache']} before it)"
        + (f"; {args.beside}: {rec['baseline']['wall_s']} s" if args.beside else "")
        + f"; wrote {testrun.write(rec, args.out)}"
    )
    return 0


def run_tune(args) -> int:
    """``reproduce tune``: one training run per learning rate of the grid, recorded; 1 when params.yaml's lr is not the
    best of the grid."""
    from benchmark.models import tune

    try:
        record = tune.tune(args.stage, args.recipe, args.lr, sets=[tune.parse_assignment(a) for a in args.set])
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for g in record["grid"]:
        print(
            f"lr {g['lr']:g}: validation {g['select_by']} {g['val_score']:.4f} (epoch {g['best_epoch']}, "
            f"{g['wall_s']:.0f} s)"
        )
    path = tune.write(record, args.out)
    problem = tune.check(record)
    print(
        f"wrote {path}"
        + (f"; {problem}" if problem else f"; params.yaml's lr {record['params_lr']:g} is the best of the grid")
    )
    return 1 if problem else 0


def run_pinning_cost(args) -> int:
    """``reproduce pinning-cost``: a training stage timed with pinned and with native numerics, recorded."""
    from benchmark.reproduce import pinning_cost

    try:
        record = pinning_cost.measure(args.stage, args.repeats)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    med, ratio = record["median"], record["ratio"]
    print(
        f"{args.stage}: pinned {med['pinned']['wall_s']:.1f} s wall / {med['pinned']['cpu_s']:.1f} s CPU, native "
        f"{med['native']['wall_s']:.1f} s / {med['native']['cpu_s']:.1f} s (pinned / native: {ratio['wall_s']:.2f} "
        f"wall, {ratio['cpu_s']:.2f} CPU); wrote {pinning_cost.write(record, args.out)}"
    )
    return 0


def run_readme(args) -> int:
    """``reproduce readme --write|--check``: rewrite the stale generated blocks, or exit 1 naming them."""
    from benchmark.docsgen import readme

    files = args.file or list(readme.FILES)
    try:
        if args.write:
            changed = readme.update(files)
            print(f"{', '.join(files)}: {'rewrote ' + ', '.join(changed) if changed else 'up to date'}")
            return 0
        stale = readme.stale(files)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if stale:
        print(
            f"generated blocks {stale} are stale; run `python -m benchmark reproduce readme --write`", file=sys.stderr
        )
        return 1
    print(f"{', '.join(files)}: generated blocks up to date")
    return 0
