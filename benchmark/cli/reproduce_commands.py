"""``python -m benchmark reproduce {check,timings,readme}`` (registered in :mod:`benchmark.cli.main`).

    python -m benchmark reproduce check              # fresh results/ vs the committed bundle and summary
    python -m benchmark reproduce timings --force    # dvc repro -f with per-stage timings -> results/timings.json
    python -m benchmark reproduce readme --write     # README result blocks from the committed files
    python -m benchmark reproduce test-time          # the README's test command, timed -> results/test_command.json
    python -m benchmark reproduce fingerprint        # this CPU's kernel bytes vs the records of other CPU kinds

Exit codes: 0 fine, 1 the run does not reproduce (check), the README is stale
(readme --check) or a kernel parts from its records
(fingerprint), 2 malformed input.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_reproduce_command(subparsers) -> None:
    p = subparsers.add_parser("reproduce", help="reproducibility gate, per-stage timings, README result tables",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="reproduce_command", metavar="ACTION", required=True)

    c = sub.add_parser("check", help="compare a fresh run with the committed results: exactly where the logits are the "
                       "same, within each row's noise where they differ",
                       description="Compare results/metrics.csv with the rows of the committed embedded bundle, "
                                   "results/summary.json with its committed version (git HEAD) and dvc.lock's stage "
                                   "outputs with HEAD:dvc.lock. A row with the committed inputs (inputs_hash) must "
                                   "agree to 1e-9; a row with other inputs within k x its noise (seed spread and "
                                   "bootstrap error); when both runs pinned the CPU numerics, other inputs and other "
                                   "stage outputs fail. Rules: benchmark/reproduce/gate.py. Exit 1 when anything fails.")
    c.add_argument("--results", default="results", help="the fresh run's results folder (default: results)")
    c.add_argument("--bundle", help="committed bundle (default: the newest under leaderboard/embedded)")
    c.add_argument("--summary", default="results/summary.json", help="summary path, compared with its git HEAD version")
    c.add_argument("--lock", default="dvc.lock", help="the fresh run's dvc.lock, compared with its git HEAD version")
    c.add_argument("--params", default="params.yaml", help="params file (evaluate.main_fit, evaluate.bootstrap_level)")
    c.add_argument("--allow-other-inputs", action="store_true",
                   help="a CPU kind on which pinning did not give the same bytes: judge rows with other logits by their "
                        "noise and report (not fail on) differing stage outputs, even when both runs pinned the numerics")
    c.add_argument("--report", help="write the per-row comparison as CSV here")
    c.add_argument("--show", type=int, default=15, help="failing rows to print, largest first")
    c.add_argument("--record", metavar="FILE", help="add this check to the cross-CPU record FILE (results/cross_cpu.json: "
                   "CPU kind, commit, counts, verdict), from which the README and the reproducibility page are generated")
    c.add_argument("--ran-on", metavar="KIND", help="with --record: the CPU kind that made the fresh run, when it was "
                   "another machine (a kind of results/fingerprints/, e.g. GenuineIntel-f6-m167; default: this machine's)")
    c.add_argument("--note", help="with --record: a note for the record (e.g. what the run is a replay of)")
    c.set_defaults(handler=run_check)

    t = sub.add_parser("timings", help="run dvc repro with per-stage timing records; write results/timings.json")
    t.add_argument("--force", action="store_true", help="dvc repro -f (rerun every stage)")
    t.add_argument("--install-seconds", type=float, help="install time to record beside the repro (clone-to-leaderboard)")
    t.add_argument("--out", default="results/timings.json", help="output JSON (default: results/timings.json)")
    t.add_argument("--jobs", type=int, default=1, help="stages at a time: more than 1 runs `python -m benchmark run "
                   "--jobs N` (the same DAG, the same outputs) instead of dvc repro")
    t.set_defaults(handler=run_timings)

    im = sub.add_parser("imports", help="time each stage script's start (python -X importtime SCRIPT --help); add the "
                                        "figures to results/stage_imports.json under a label",
                        description="For every stage of the checkout's dvc.yaml, run its script with -X importtime and "
                                    "--help (the interpreter and the imports of its entry: what the stage pays before "
                                    "any work) a few times and keep the fastest by CPU; add the figures under LABEL to "
                                    "the record, from which the performance page's table is generated (measure two "
                                    "checkouts, before and after a change, on the same machine). Rules: "
                                    "benchmark/reproduce/import_times.py.")
    im.add_argument("--label", required=True, help="the figures' name in the record (e.g. a commit)")
    im.add_argument("--root", default=".", help="the checkout to measure (default: this one)")
    im.add_argument("--repeats", type=int, default=3, help="runs per script; the fastest is kept (default 3)")
    im.add_argument("--out", default="results/stage_imports.json", help="the record (default: results/stage_imports.json)")
    im.set_defaults(handler=run_imports)

    ds = sub.add_parser("dvc-share", help="DVC's own time around the stages: the pipeline with every stage replaced by a "
                                          "copy of its outputs; write results/dvc_share.json",
                        description="In a scratch copy of this checkout, replace every stage's command by a copy of its "
                                    "outputs from this checkout's finished run, and time `dvc repro` and `python -m "
                                    "benchmark run --jobs N` there from a clean state (no outputs, no cache, the committed "
                                    "dvc.lock): what DVC does around the stages, without their work. The runners must "
                                    "leave the same dvc.lock. Rules: benchmark/reproduce/dvc_share.py.")
    ds.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="the parallel runner's --jobs to time (default: 1 2)")
    ds.add_argument("--repeats", type=int, default=2, help="runs of each runner, interleaved; the fastest is kept")
    ds.add_argument("--out", default="results/dvc_share.json", help="the record (default: results/dvc_share.json)")
    ds.set_defaults(handler=run_dvc_share)

    e = sub.add_parser("test-time", help="run the test suite (python -m pytest) timed; write results/test_command.json",
                       description="Run `python -m pytest` here, as the README's test command does, and record its wall "
                                   "seconds, the counts of passed and skipped tests, whether .pytest_cache existed before, "
                                   "the commit and the machine. A run with a failed or erroring test is not recorded. "
                                   "`bash scripts/measure-tests.sh` times the install too. Rules: benchmark/reproduce/testrun.py.")
    e.add_argument("--setup-seconds", type=float, help="install time to record beside the run (bash scripts/setup.sh test)")
    e.add_argument("--out", default="results/test_command.json", help="the record (default: results/test_command.json)")
    e.add_argument("pytest_args", nargs="*", metavar="PYTEST_ARG", help="arguments for pytest, after `--` (default: none, "
                   "the whole suite as pyproject.toml configures it)")
    e.set_defaults(handler=run_test_time)

    u = sub.add_parser("tune", help="choose a recipe's lr on validation: one stage run per grid point, in scratch copies",
                       description="Run a training stage once per learning rate, each in a scratch copy of this checkout "
                                   "whose params.yaml differs only in recipes.<recipe>.lr (the recipe's budget unchanged), "
                                   "score each run by the validation score its train.json records, and write the grid to "
                                   "results/tuning.json. Exit 1 when params.yaml's lr is not the best of the grid. "
                                   "Rules: benchmark/reproduce/tune.py.")
    u.add_argument("--stage", required=True, help="the training stage, e.g. train@lite0-s0 or sve-train")
    u.add_argument("--recipe", required=True, help="the recipe whose lr is tuned (params.yaml recipes.<name>)")
    u.add_argument("--lr", nargs="+", type=float, required=True, metavar="LR", help="the grid")
    u.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="another params.yaml key for every run, e.g. sve.members=[2] (YAML value)")
    u.add_argument("--out", default="results/tuning.json", help="the tuning record (default: results/tuning.json)")
    u.set_defaults(handler=run_tune)

    n = sub.add_parser("pinning-cost", help="time a training stage with pinned and with native CPU numerics",
                       description="Run a training stage in scratch copies of this checkout, alternately with "
                                   "UQ_NUMERICS=pinned and UQ_NUMERICS=native, and write the medians of the stage "
                                   "process's wall and CPU seconds and their ratio to results/numerics.json. "
                                   "Rules: benchmark/reproduce/pinning_cost.py.")
    n.add_argument("--stage", default="train@lite0-s0", help="the stage to time (default: train@lite0-s0)")
    n.add_argument("--repeats", type=int, default=2, help="runs per mode (default 2)")
    n.add_argument("--out", default="results/numerics.json", help="the record (default: results/numerics.json)")
    n.set_defaults(handler=run_pinning_cost)

    f = sub.add_parser("fingerprint", help="this CPU's kernel fingerprint against the committed records of CPU kinds",
                       description="Hash the float32 operations the pipeline's stages run (the kernel-fingerprint tool's "
                                   "operations, and each layer, gradient and logits of a training step and a logits pass "
                                   "of every zoo architecture, with the project's own code) under the pinned numerics, and "
                                   "compare them with the records in --records: a record of this CPU kind must agree on "
                                   "every operation, a record of another kind on every operation that records of two "
                                   "vendors agree on; other differences are reported. Also lists any MKL-routed operator that a "
                                   "training step or a logits pass calls (there must be none). Exit 1 on a failure. "
                                   "Rules: benchmark/reproduce/fingerprint.py.")
    f.add_argument("--records", default="results/fingerprints", help="folder of records (default: results/fingerprints)")
    f.add_argument("--params", default="params.yaml", help="params file (threads, recipes, zoo; default: params.yaml)")
    f.add_argument("--all-modes", action="store_true", help="the tool's operations in all four modes (1 and 2 threads, "
                   "oneDNN on and off), not only the pipeline's: for a record")
    f.add_argument("--write", action="store_true", help="write this machine's record into --records as <kind>.json")
    f.add_argument("--show", type=int, default=8, help="differing operations to print per record (default 8)")
    f.set_defaults(handler=run_fingerprint)

    r = sub.add_parser("readme", help="regenerate (or check) the README's result blocks from committed files")
    r.add_argument("--file", action="append", metavar="FILE",
                   help="a file with generated blocks (repeatable; default: the README and the docs pages that have them)")
    g = r.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="rewrite the stale blocks")
    g.add_argument("--check", action="store_true", help="exit 1 when a block is stale")
    r.set_defaults(handler=run_readme)


def run_check(args) -> int:
    from benchmark.reproduce import check

    try:
        return check.run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def run_timings(args) -> int:
    from benchmark.reproduce.timing import run_repro

    try:
        rec = run_repro(args.out, force=args.force, install_s=args.install_seconds, jobs=args.jobs)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{rec['command']}: {rec['repro_wall_s']} s wall ({rec['stages_wall_s']} s in {len(rec['stages'])} stage processes; "
          f"{rec['floor_ratio']}x the compute floor of {rec['compute_floor_s']} s); wrote {args.out}")
    return 0


def run_imports(args) -> int:
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
    from benchmark.reproduce import dvc_share
    from benchmark.reproduce.scratch import ScratchError
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
    return 0


def run_test_time(args) -> int:
    from benchmark.reproduce import testrun

    try:
        rec = testrun.measure(args.pytest_args, setup_s=args.setup_seconds)
    except (RuntimeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"pytest: {rec['passed']} passed, {rec['skipped']} skipped in {rec['wall_s']} s wall (.pytest_cache "
          f"{rec['pytest_cache']} before it); wrote {testrun.write(rec, args.out)}")
    return 0


def run_tune(args) -> int:
    from benchmark.reproduce import tune

    try:
        record = tune.tune(args.stage, args.recipe, args.lr, sets=[tune.parse_assignment(a) for a in args.set])
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for g in record["grid"]:
        print(f"lr {g['lr']:g}: validation {g['select_by']} {g['val_score']:.4f} (epoch {g['best_epoch']}, {g['wall_s']:.0f} s)")
    path = tune.write(record, args.out)
    problem = tune.check(record)
    print(f"wrote {path}" + (f"; {problem}" if problem else f"; params.yaml's lr {record['params_lr']:g} is the best of the grid"))
    return 1 if problem else 0


def run_pinning_cost(args) -> int:
    from benchmark.reproduce import pinning_cost

    try:
        record = pinning_cost.measure(args.stage, args.repeats)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    med, ratio = record["median"], record["ratio"]
    print(f"{args.stage}: pinned {med['pinned']['wall_s']:.1f} s wall / {med['pinned']['cpu_s']:.1f} s CPU, native "
          f"{med['native']['wall_s']:.1f} s / {med['native']['cpu_s']:.1f} s (pinned / native: {ratio['wall_s']:.2f} wall, "
          f"{ratio['cpu_s']:.2f} CPU); wrote {pinning_cost.write(record, args.out)}")
    return 0


def run_readme(args) -> int:
    from benchmark.reproduce import readme

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
        print(f"generated blocks {stale} are stale; run `python -m benchmark reproduce readme --write`", file=sys.stderr)
        return 1
    print(f"{', '.join(files)}: generated blocks up to date")
    return 0


def run_fingerprint(args) -> int:
    from benchmark.models.zoo import load_zoo
    from benchmark.reproduce import fingerprint as fp
    from benchmark.stages.params_config import load_params
    from benchmark.storage.store import write_json

    try:
        params = load_params(args.params)
        zoo = load_zoo(params.zoo, recipes=params.recipes, check_arch=False)
        records = fp.read_records(args.records)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    mkl = {m: ops for m, ops in fp.mkl_ops_in(params, zoo).items() if ops}
    print("MKL-routed operators in a training step and a logits pass: "
          + ("; ".join(f"{m}: {', '.join(o)}" for m, o in mkl.items()) + " -> NOT PORTABLE" if mkl else "none"))
    mine = fp.measure(params, zoo, all_modes=args.all_modes)
    print(f"this machine: {mine['machine']['cpu']} ({mine['machine']['kind']}), torch {mine['torch']}, "
          f"{mine['cpu_capability']} kernels, {'pinned' if mine['pinned'] else 'NOT pinned'}: {len(mine['hashes'])} operations")
    failing = bool(mkl) or not mine["pinned"]
    for v in fp.compare(mine, records):
        rel = "this CPU kind" if v["same_kind"] else "another CPU kind"
        torch_note = "" if v["torch"] == mine["torch"] else f", recorded with torch {v['torch']}"
        print(f"vs {v['kind']} ({v['cpu']}; {rel}{torch_note}): {v['shared']} shared operations, {v['equal']} equal, "
              f"{len(v['differ'])} differ" + (f", {len(v['failing'])} of them FAIL (must agree)" if v["failing"] else ""))
        for k in v["differ"][: args.show]:
            why = "must agree" if k in v["failing"] else "MKL-routed, not run by the pipeline" if k.endswith(fp.MKL_ROUTED) else "reported"
            print(f"  differs: {k} ({why})")
        failing |= bool(v["failing"])
    if not records:
        print(f"no records in {args.records}: nothing to compare with")
    if args.write:
        path = Path(args.records) / fp.record_name(mine)
        write_json(path, mine)
        print(f"wrote {path}")
    return 1 if failing else 0
