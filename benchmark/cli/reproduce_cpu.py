"""``python -m benchmark reproduce`` actions that compare CPU kinds: ``fingerprint`` (this CPU's kernel bytes, or an
emulated one's, against the committed records of other kinds) and ``stage`` (whole stages rerun in a scratch copy,
here or on an emulated CPU, against the committed dvc.lock)."""

from __future__ import annotations

import sys
from pathlib import Path


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
    _add_emulation_flags(f)
    f.add_argument(
        "--write",
        action="store_true",
        help="write this machine's (or the emulated CPU's) record into --records as <kind>.json",
    )
    f.add_argument("--show", type=int, default=8, help="differing operations to print per record (default 8)")
    f.set_defaults(handler=run_fingerprint)


def _add_emulation_flags(f) -> None:
    """``reproduce fingerprint``'s flags that only ``--emulate`` reads."""
    f.add_argument("--timeout", type=float, metavar="SECONDS", help="with --emulate: give up after this long (exit 2)")
    f.add_argument(
        "--unless-native",
        action="store_true",
        help="with --emulate: leave out the pipeline's operations when the emulated CPU's vendor is this machine's "
        "(`reproduce fingerprint` without --emulate measures them natively; TCG is slow on some hosts)",
    )
    f.add_argument(
        "--pipeline-budget",
        type=float,
        metavar="SECONDS",
        help="with --emulate: spend about this long on the pipeline's operations: the zoo's architectures smallest "
        "input first, none started after SECONDS (the one running finishes), those left out named (CI: TCG runs "
        "them several times slower on some hosts than on others); not with --write",
    )
    f.add_argument(
        "--no-recheck",
        action="store_true",
        help="with --emulate: judge the first run as it is (by default, parts whose must-agree operations parted are "
        "measured again in a fresh process and judged on that: a kernel gives the same bytes twice, TCG once did not)",
    )


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
        _check_flags(args, params, zoo)
        if args.emulate:
            with_pipeline = not args.no_pipeline and not (args.unless_native and _native_vendor(args.emulate))
            if args.no_ops and not with_pipeline:
                print("nothing to measure under the emulator: its pipeline's operations are measured natively here")
                return 0
            mine = emulate.fingerprint(
                args.emulate,
                params=args.params,
                all_modes=args.all_modes,
                with_ops=not args.no_ops,
                with_pipeline=with_pipeline,
                names=args.models,
                budget=args.pipeline_budget,
                timeout=args.timeout,
            )
    except (ValueError, FileNotFoundError, emulate.EmulationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failing = False
    if args.emulate:
        _print_emulated(mine, args)
    else:
        mine, failing = _fingerprint_here(args, params, zoo)
    print(
        f"this {'emulated CPU' if args.emulate else 'machine'}: {mine['machine']['cpu']} ({mine['machine']['kind']}), "
        f"torch {mine['torch']}, {mine['cpu_capability']} kernels, {'pinned' if mine['pinned'] else 'NOT pinned'}: "
        f"{len(mine['hashes'])} operations"
    )
    verdicts = fr.compare(mine, records)
    if args.emulate and not args.no_recheck and any(v["failing"] for v in verdicts):
        try:
            mine, verdicts = _recheck(args, params, zoo, mine, records, verdicts)
        except emulate.EmulationError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    failing |= not mine["pinned"] or _print_verdicts(verdicts, mine, args.show)
    if not records:
        print(f"no records in {args.records}: nothing to compare with")
    if args.write:
        _write_fingerprint(args.records, mine)
    return 1 if failing else 0


def _check_flags(args, params, zoo: dict) -> None:
    """``ValueError`` naming what ``reproduce fingerprint``'s flags ask that cannot be done."""
    if args.no_ops and args.no_pipeline:
        raise ValueError("--no-ops and --no-pipeline: nothing left to measure")
    unknown = sorted(set(args.models or ()) - set(zoo))
    if unknown:
        raise ValueError(f"--models: {', '.join(unknown)} not in the zoo {params.zoo} ({', '.join(zoo)})")
    if args.pipeline_budget is not None and (args.write or not args.emulate):
        raise ValueError("--pipeline-budget: only with --emulate, and not with --write (a record holds every part)")


def _print_emulated(mine: dict, args) -> None:
    """What ran under the emulator, and which architectures' pipeline operations the budget left out."""
    m = mine["machine"]
    print(
        f"emulated: {m['cpu']} ({m['kind']}: CPUID says {m['stands_for']}) under QEMU {m['qemu']} on "
        f"{m['host']['cpu']} ({m['host']['kind']}), {mine['seconds']:.0f} s"
    )
    if mine.get("not_measured"):
        print(
            f"the pipeline's operations of {', '.join(mine['not_measured'])} not measured under the emulator: "
            f"the {args.pipeline_budget:g} s of --pipeline-budget were spent on the smaller architectures"
        )


def _native_vendor(model: str) -> bool:
    """Whether the emulated ``model``'s vendor is this machine's (printed when it is: the pipeline's operations of that
    vendor are then measured natively, by ``reproduce fingerprint`` without ``--emulate``)."""
    from benchmark.config.numerics import cpu
    from benchmark.reproduce import emulate

    host = cpu()["kind"].split("-", 1)[0]
    same = emulate.vendor_of(model) == host
    if same:
        print(
            f"this machine is a {host}, the vendor of {model}: the pipeline's operations are measured natively "
            "(`reproduce fingerprint`), not under the emulator (--unless-native)"
        )
    return same


def _recheck(args, params, zoo, mine: dict, records: list[dict], verdicts: list[dict]) -> tuple[dict, list[dict]]:
    """An emulated fingerprint whose must-agree operations parted: their parts measured again in a fresh child
    (:func:`benchmark.reproduce.emulate.recheck`); the record and verdicts judged on that second run, and what
    changed between the two runs printed (the emulator's transient faults: a kernel gives the same bytes every run)."""
    from benchmark.reproduce import emulate
    from benchmark.reproduce import fingerprint_records as fr

    parted = sorted({k for v in verdicts for k in v["failing"]})
    n = len(parted)
    print(
        f"{n} operation{'s' * (n != 1)} that must agree parted: measuring their parts again in a fresh emulated process"
    )
    again = emulate.recheck(
        args.emulate, params, zoo, parted, all_modes=args.all_modes, params_path=args.params, timeout=args.timeout
    )
    settled, changed = fr.settle(mine, again)
    for k in changed:
        print(f"  not the same twice: {k}: {mine['hashes'][k]} in the first run, {again['hashes'][k]} in the second")
    verdicts = fr.compare(settled, records)
    still = sorted({k for v in verdicts for k in v["failing"]})
    print(
        f"second run ({again['seconds']:.0f} s): {len(parted) - len(still)} of {len(parted)} no longer part"
        + (" (the first run's bytes were the emulator's transient faults, not kernel routes)" if changed else "")
        + (f"; {len(still)} part again: they fail" if still else "")
    )
    return settled, verdicts


def mkl_ops_in_evaluation(n: int = 600) -> list[str]:
    """The MKL-routed ATen operators (:data:`benchmark.reproduce.fingerprint.MKL_OPS`) that the evaluation calls on
    one thread, as the evaluate stage's workers run it, on seeded logits: both temperature fits of a model and of a
    duo, a duo's and an ensemble's predictions, and their metrics with a bootstrap (:mod:`benchmark.core`). Reported,
    not failed: another vendor's evaluation of the same logits is judged by its noise (:mod:`benchmark.reproduce.gate`,
    "Another CPU vendor"). Here, not in the fingerprint module: ``reproduce`` imports no more than six packages."""
    import torch
    import torch.nn.functional as F

    from benchmark.core import combine, evaluate, temperature
    from benchmark.reproduce.fingerprint import MKL_OPS, NUM_CLASSES, cpu_profile, gen

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        y = torch.arange(n) % NUM_CLASSES
        zb, zs = (gen(600 + i, n, NUM_CLASSES) * 2 + F.one_hot(y, NUM_CLASSES) * (2 - i / 2) for i in (0, 1))
        with cpu_profile() as prof:
            for mode in temperature.FIT_MODES:
                temperature.fit_temperature(zb, y, mode)
                fit = temperature.fit_duo(zb, zs, y, mode)
            duo = combine.duo_prediction(zb, zs, variant="weighted", fit=fit)
            for pred in (duo, combine.ensemble_prediction([zb, zs])):
                evaluate.evaluate(pred, y, n_bootstrap=20)
        return sorted({e.name for e in prof.events()} & MKL_OPS)
    finally:
        torch.set_num_threads(threads)


def _fingerprint_here(args, params, zoo) -> tuple[dict, bool]:
    """This machine's fingerprint, after printing the MKL-routed operators; whether there are any (not portable)."""
    from benchmark.reproduce import fingerprint as fp

    mkl = {m: ops for m, ops in fp.mkl_ops_in(params, zoo).items() if ops}
    print(
        "MKL-routed operators in a training step and a logits pass: "
        + ("; ".join(f"{m}: {', '.join(o)}" for m, o in mkl.items()) + " -> NOT PORTABLE" if mkl else "none")
    )
    ev = mkl_ops_in_evaluation()
    print(
        "MKL-routed operators in the evaluation (temperature fits, predictions, metrics and bootstrap; reported: "
        "another vendor's evaluation of the same logits is judged by its noise): " + (", ".join(ev) or "none")
    )
    mine = fp.measure_as_asked(params, zoo, args)
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


ADDERS = (_add_fingerprint, _add_stage)
