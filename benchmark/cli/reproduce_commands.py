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
from pathlib import Path

from benchmark.cli import reproduce_measure


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
        _add_fingerprint,
        _add_stage,
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
        help="with --record: the CPU kind that made the fresh run, when it was "
        "another machine (a kind of results/fingerprints/, e.g. GenuineIntel-f6-m167; default: this machine's)",
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


def _add_fingerprint(sub) -> None:
    """``reproduce fingerprint``."""
    f = sub.add_parser(
        "fingerprint",
        help="this CPU's kernel fingerprint against the committed records of CPU kinds",
        description="Hash the float32 operations the pipeline's stages run (the kernel-fingerprint tool's "
        "operations, and each layer, gradient and logits of a training step and a logits pass "
        "of every zoo architecture, through the functions train@ and logits@ call) under the "
        "pinned numerics, on this CPU or on an emulated one (--emulate), and compare them with "
        "the records in --records: a record of the same CPU kind must agree on every operation; "
        "an emulated record and a real record of one vendor must agree on every operation; a "
        "record of another kind on every operation that records of two vendors agree on; other "
        "differences are reported, and the first differing layer is named. On this CPU, also "
        "lists any MKL-routed operator that a training step or a logits pass calls (there must "
        "be none). Exit 1 on a failure, 2 when it cannot run. Rules: "
        "benchmark/reproduce/fingerprint_records.py; emulation: benchmark/reproduce/emulate.py.",
    )
    f.add_argument(
        "--records", default="results/fingerprints", help="folder of records (default: results/fingerprints)"
    )
    f.add_argument("--params", default="params.yaml", help="params file (threads, recipes, zoo; default: params.yaml)")
    f.add_argument(
        "--emulate",
        metavar="MODEL",
        help="measure under QEMU's emulated CPU MODEL (e.g. Icelake-Server, "
        "Skylake-Client, EPYC-Milan; `qemu-x86_64 -cpu help` lists them), in a child process; its record is "
        "QEMU-<MODEL>.json, marked emulated. Slow: the pipeline's operations take ~10 minutes",
    )
    f.add_argument(
        "--all-modes",
        action="store_true",
        help="the tool's operations in all four modes (1 and 2 threads, "
        "oneDNN on and off), not only the pipeline's: for a record",
    )
    f.add_argument(
        "--no-pipeline",
        action="store_true",
        help="only the tool's operations, not the pipeline's per-layer ones (with --emulate: about a minute)",
    )
    f.add_argument("--no-ops", action="store_true", help="only the pipeline's per-layer operations, not the tool's")
    f.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="the pipeline's operations of these zoo entries' "
        "architectures only (default: every architecture of the zoo)",
    )
    f.add_argument("--timeout", type=float, metavar="SECONDS", help="with --emulate: give up after this long (exit 2)")
    f.add_argument(
        "--write",
        action="store_true",
        help="write this machine's (or the emulated CPU's) record into --records as <kind>.json",
    )
    f.add_argument("--show", type=int, default=8, help="differing operations to print per record (default 8)")
    f.set_defaults(handler=run_fingerprint)


def _add_stage(sub) -> None:
    """``reproduce stage``."""
    st = sub.add_parser(
        "stage",
        help="rerun whole stages in a scratch copy (here or on an emulated CPU) and compare "
        "their outputs with the committed dvc.lock",
        description="Copy this checkout into a scratch folder (upstream outputs such as results/data "
        "hard-linked), run the STAGEs there with `dvc repro --single-item --force` (with "
        "--emulate, each stage command under qemu-x86_64 -cpu MODEL: 10-20 minutes a "
        "training epoch) and compare the outputs their dvc.lock records with this "
        "checkout's dvc.lock, byte for byte (measured outputs, e.g. throughput, are not "
        "compared). Exit 1 when an output differs, 2 when it cannot run. Rules: "
        "benchmark/reproduce/rerun.py.",
    )
    st.add_argument("stages", nargs="+", metavar="STAGE", help="e.g. train@mnv3s050 logits@mnv3s050")
    st.add_argument(
        "--emulate",
        metavar="MODEL",
        help="run the stage commands under QEMU's emulated CPU MODEL (e.g. Icelake-Server)",
    )
    st.add_argument("--timeout", type=float, metavar="SECONDS", help="give up after this long (exit 2)")
    st.add_argument(
        "--record",
        metavar="FILE",
        help="add the result to the cross-CPU record FILE "
        "(results/cross_cpu.json), with the CPU kind (emulated or not) and the commit",
    )
    st.add_argument("--note", help="with --record: a note for the record")
    st.set_defaults(handler=run_stage)


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
        rec = testrun.measure(args.pytest_args, setup_s=args.setup_seconds)
    except (RuntimeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"pytest: {rec['passed']} passed, {rec['skipped']} skipped in {rec['wall_s']} s wall (.pytest_cache "
        f"{rec['pytest_cache']} before it); wrote {testrun.write(rec, args.out)}"
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


def run_fingerprint(args) -> int:
    """``reproduce fingerprint``: this CPU's kernel fingerprint against the committed records of CPU kinds, and the
    MKL-routed operators a training step or a logits pass calls; 1 when one must agree and does not."""
    from benchmark.models.zoo import load_zoo
    from benchmark.reproduce import emulate
    from benchmark.reproduce import fingerprint_records as fr
    from benchmark.stages.params_config import load_params

    try:
        params = load_params(args.params)
        zoo = load_zoo(params.zoo, recipes=params.recipes, check_arch=False)
        records = fr.read_records(args.records)
        if args.no_ops and args.no_pipeline:
            raise ValueError("--no-ops and --no-pipeline: nothing left to measure")
        unknown = sorted(set(args.models or ()) - set(zoo))
        if unknown:
            raise ValueError(f"--models: {', '.join(unknown)} not in the zoo {params.zoo} ({', '.join(zoo)})")
        if args.emulate:
            mine = emulate.fingerprint(
                args.emulate,
                params=args.params,
                all_modes=args.all_modes,
                with_ops=not args.no_ops,
                with_pipeline=not args.no_pipeline,
                names=args.models,
                timeout=args.timeout,
            )
    except (ValueError, FileNotFoundError, emulate.EmulationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failing = False
    if args.emulate:
        m = mine["machine"]
        print(
            f"emulated: {m['cpu']} ({m['kind']}: CPUID says {m['stands_for']}) under QEMU {m['qemu']} on "
            f"{m['host']['cpu']} ({m['host']['kind']}), {mine['seconds']:.0f} s"
        )
    else:
        mine, failing = _fingerprint_here(args, params, zoo)
    print(
        f"this {'emulated CPU' if args.emulate else 'machine'}: {mine['machine']['cpu']} ({mine['machine']['kind']}), "
        f"torch {mine['torch']}, {mine['cpu_capability']} kernels, {'pinned' if mine['pinned'] else 'NOT pinned'}: "
        f"{len(mine['hashes'])} operations"
    )
    failing |= not mine["pinned"] or _print_verdicts(fr.compare(mine, records), mine, args.show)
    if not records:
        print(f"no records in {args.records}: nothing to compare with")
    if args.write:
        _write_fingerprint(args.records, mine)
    return 1 if failing else 0


def _fingerprint_here(args, params, zoo) -> tuple[dict, bool]:
    """This machine's fingerprint, after printing the MKL-routed operators; whether there are any (not portable)."""
    from benchmark.reproduce import fingerprint as fp

    mkl = {m: ops for m, ops in fp.mkl_ops_in(params, zoo).items() if ops}
    print(
        "MKL-routed operators in a training step and a logits pass: "
        + ("; ".join(f"{m}: {', '.join(o)}" for m, o in mkl.items()) + " -> NOT PORTABLE" if mkl else "none")
    )
    mine = fp.measure(
        params,
        zoo,
        all_modes=args.all_modes,
        with_ops=not args.no_ops,
        with_pipeline=not args.no_pipeline,
        names=args.models,
    )
    return mine, bool(mkl)


def _write_fingerprint(records: str, mine: dict) -> None:
    """Write fingerprint ``mine`` as a record in folder ``records``, with the git state and today's date."""
    import datetime

    from benchmark.bundle.pack import git_state
    from benchmark.reproduce import fingerprint_records as fr
    from benchmark.storage.store import write_json

    path = Path(records) / fr.record_name(mine)
    write_json(path, {**mine, **git_state(Path(".")), "date": datetime.date.today().isoformat()})
    print(f"wrote {path}")


def _print_verdicts(verdicts: list[dict], mine: dict, show: int) -> bool:
    """Print one line per record and its differing operations; whether any must-agree operation differs."""
    from benchmark.reproduce import fingerprint as fp
    from benchmark.reproduce import fingerprint_records as fr

    failing = False
    for v in verdicts:
        rel = (
            "this CPU kind"
            if v["same_kind"]
            else "the same vendor, real and emulated: must agree"
            if v["stand_in"]
            else "another CPU kind"
        )
        torch_note = "" if v["torch"] == mine["torch"] else f", recorded with torch {v['torch']}"
        print(
            f"vs {v['kind']} ({v['cpu']}; {rel}{torch_note}): {v['shared']} shared operations, {v['equal']} equal, "
            f"{len(v['differ'])} differ" + (f", {len(v['failing'])} of them FAIL (must agree)" if v["failing"] else "")
        )
        first = fr.first_layer(v["failing"] or v["differ"])
        if first:
            print(f"  first differing layer: {first}")
        for k in v["differ"][:show]:
            why = (
                "must agree"
                if k in v["failing"]
                else "MKL-routed, not run by the pipeline"
                if k.endswith(fp.MKL_ROUTED)
                else "reported"
            )
            print(f"  differs: {k} ({why})")
        failing |= bool(v["failing"])
    return failing


def run_stage(args) -> int:
    """``reproduce stage``: rerun whole stages in a scratch copy (here or under an emulated CPU) and compare their
    outputs with the committed dvc.lock; 1 when one differs, 2 when it cannot run."""
    from benchmark.dvcutil.scratch import ScratchError
    from benchmark.reproduce import emulate, rerun

    try:
        result = rerun.run(args.stages, emulate_model=args.emulate, timeout=args.timeout)
    except (ScratchError, emulate.EmulationError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    m, c = result["machine"], result["counts"]
    on = f"{m['cpu']} ({m['kind']}" + (
        f": CPUID says {m['stands_for']}, on {m['host']['kind']})" if m.get("emulated") else ")"
    )
    for o in result["outputs"]:
        print(f"  {o['stage']} {o['path']}: {o['status']}" + (f" ({o['measured']})" if o["measured"] else ""))
    print(
        f"{', '.join(result['stages'])} on {on} in {result['seconds']:.0f} s: {c['identical']} of {c['compared']} "
        f"compared outputs byte-identical to the committed dvc.lock"
        + (f"; differ: {', '.join(c['failing_stages'])}" if c["failing_stages"] else "")
    )
    if args.record:
        from benchmark.reproduce import cross_cpu

        cross_cpu.add(args.record, cross_cpu.stage_entry(result, note=args.note or ""))
        print(f"recorded in {args.record}")
    return 1 if c["failing_stages"] or not c["compared"] else 0
