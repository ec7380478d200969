"""Commands on logits files: ``metrics`` (one model) and ``duo`` (fit an Asymmetric Duo, evaluate it), registered in
:mod:`benchmark.cli.main`. torch and the numeric core are imported when one of them runs, not when the command line
is built, so that the other commands start without them."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence

from benchmark.config.yaml_input import cli_int

FILE_HELP = ".npz or .safetensors file with arrays 'logits' (N, C) float and 'labels' (N,) int"


def _load(path: str):
    """Read a logits file (:class:`~benchmark.storage.store.LogitsFile`) and check it: (N, C) finite logits, labels in
    [0, C)."""
    from benchmark.core.validation import InputError, as_labels, as_logits
    from benchmark.storage.store import StoreError, load_logits_file

    f = load_logits_file(path)
    if f.logits.ndim != 2:
        raise StoreError(f"{path}: 'logits' must be (N, C) for this command, got shape {tuple(f.logits.shape)}")
    try:
        as_logits(f.logits, "logits")
        as_labels(f.labels, "labels", num_classes=f.logits.shape[1])
    except InputError as e:
        raise StoreError(f"{path}: {e}") from None
    return f


def _same_classes(*files) -> None:
    from benchmark.storage.store import StoreError

    ref = files[0]
    for f in files[1:]:
        if f.logits.shape[1] != ref.logits.shape[1]:
            raise StoreError(f"{f.path}: C={f.logits.shape[1]} classes but {ref.path} has C={ref.logits.shape[1]}")


def _json_number(v: float):
    return v if math.isfinite(v) else None


def _metrics(pred, labels, args) -> dict:
    """Metric values (and, with --bootstrap, 'ci': metric -> [low, high])."""
    from benchmark.core.evaluate import evaluate

    res = evaluate(pred, labels, n_bootstrap=args.bootstrap, seed=args.seed)
    out = {k: v for k, (v, _, _) in res.items()}
    if args.bootstrap:
        out["ci"] = {k: [lo, hi] for k, (_, lo, hi) in res.items()}
    return out


def _print_json(obj) -> None:
    def clean(o):
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return _json_number(o) if isinstance(o, float) else o

    print(json.dumps(clean(obj), indent=2, allow_nan=False))


def _print_table(columns: dict[str, dict]) -> None:
    """Metrics as rows, one column per entry of ``columns``; CIs in brackets."""
    names = [k for k in next(iter(columns.values())) if k != "ci"]
    header = f"{'metric':<16}" + "".join(f"{c:>28}" for c in columns)
    print(header)
    for m in names:
        cells = []
        for res in columns.values():
            cell = f"{res[m]:.6g}"
            if "ci" in res:
                lo, hi = res["ci"][m]
                cell += f" [{lo:.4g}, {hi:.4g}]"
            cells.append(f"{cell:>28}")
        print(f"{m:<16}" + "".join(cells))


def _add_bootstrap_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap",
        type=cli_int(0),
        default=0,
        metavar="N",
        help="bootstrap resamples for 95%% intervals (default 0: none)",
    )
    p.add_argument("--seed", type=cli_int(0), default=0, help="bootstrap seed, an integer >= 0 (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def add_metrics_command(subparsers) -> None:
    """Register ``metrics`` (every metric of one model's logits) in ``subparsers``."""
    p = subparsers.add_parser(
        "metrics",
        help="every metric of one model's logits",
        description="Print every metric of one model (softmax of the logits as they are; confidence = max softmax).",
    )
    p.add_argument("file", metavar="FILE", help=FILE_HELP)
    _add_bootstrap_options(p)
    p.set_defaults(handler=run_metrics)


def run_metrics(args) -> int:
    """``metrics``: every metric of one logits file, as a table or JSON."""
    from benchmark.core.combine import single_prediction

    f = _load(args.file)
    res = _metrics(single_prediction(f.logits), f.labels, args)
    if args.json:
        _print_json(res)
    else:
        print(f"{args.file}: N={f.logits.shape[0]}, C={f.logits.shape[1]}")
        _print_table({"model": res})
    return 0


class _FitModes(Sequence):
    """The temperature fits (:data:`benchmark.core.temperature.FIT_MODES`), read when ``duo``'s arguments are checked
    or its help is shown: building the parser imports no torch."""

    @staticmethod
    def _modes() -> tuple:
        from benchmark.core.temperature import FIT_MODES

        return FIT_MODES

    def __getitem__(self, i):
        return self._modes()[i]

    def __len__(self) -> int:
        return len(self._modes())


def add_duo_command(subparsers) -> None:
    """Register ``duo`` (an Asymmetric Duo fit on validation logits, evaluated on test logits) in ``subparsers``."""
    p = subparsers.add_parser(
        "duo",
        help="fit an Asymmetric Duo on validation logits and evaluate it on test logits",
        description=(
            "Fit the duo temperatures/weights and each member's temperature on the validation files, then print "
            "the test metrics of the temperature-scaled base and of the weighted, unweighted and UQ-only duos. "
            "Temperatures follow the published convention z = (z_base / T_base + z_side / T_side) / 2, "
            "weights w = 1 / (2T)."
        ),
    )
    for opt in ("base-val", "side-val", "base-test", "side-test"):
        p.add_argument(f"--{opt}", required=True, metavar="F", help=FILE_HELP)
    p.add_argument(
        "--fit",
        choices=_FitModes(),
        default="converged",
        metavar="MODE",
        help="temperature fit, one of %(choices)s: the converged optimum or the published procedure "
        "(default converged)",
    )
    p.add_argument(
        "--confidence",
        choices=("max", "published"),
        default="max",
        help="duo confidence: max (max p_duo) or published (p_duo[argmax z_base], as the published code) (default max)",
    )
    _add_bootstrap_options(p)
    p.set_defaults(handler=run_duo)


def run_duo(args) -> int:
    """``duo``: fit the duo and each member's temperature on the validation files, print the test metrics of the base
    and of each duo variant."""
    from benchmark.core.combine import duo_prediction, single_prediction
    from benchmark.core.temperature import FitError, fit_duo, fit_temperature
    from benchmark.storage.store import StoreError, check_aligned

    bv, sv, bt, st = (_load(p) for p in (args.base_val, args.side_val, args.base_test, args.side_test))
    _same_classes(bv, sv, bt, st)
    check_aligned(bv, sv)
    check_aligned(bt, st)
    try:
        duo = fit_duo(bv.logits, sv.logits, bv.labels, mode=args.fit)
        t_base = fit_temperature(bv.logits, bv.labels, mode=args.fit).temperature
        t_side = fit_temperature(sv.logits, sv.labels, mode=args.fit).temperature
    except FitError as e:
        raise StoreError(f"{args.base_val} + {args.side_val}: {e}") from None
    y = bt.labels
    res = {"base": _metrics(single_prediction(bt.logits, t_base), y, args)}
    for variant in ("weighted", "unweighted", "uq_only"):
        pred = duo_prediction(
            bt.logits,
            st.logits,
            variant=variant,
            fit=duo,
            single_temperatures=(t_base, t_side),
            confidence=args.confidence,
        )
        res[variant] = _metrics(pred, y, args)
    head = {
        "fit": args.fit,
        "confidence": args.confidence,
        "temperatures": {"base": duo.t_base, "sidekick": duo.t_side},
        "weights": {"base": duo.w_base, "sidekick": duo.w_side},
        "single_temperatures": {"base": t_base, "sidekick": t_side},
        "val_nll": duo.nll,
    }
    if args.json:
        _print_json({**head, **res})
    else:
        print(f"fit={args.fit} confidence={args.confidence} test N={bt.logits.shape[0]} C={bt.logits.shape[1]}")
        print(
            f"duo temperatures: base {duo.t_base:.6g}, sidekick {duo.t_side:.6g} (weights {duo.w_base:.6g}, "
            f"{duo.w_side:.6g}); val NLL {duo.nll:.6g}"
        )
        print(f"single temperatures: base {t_base:.6g}, sidekick {t_side:.6g}")
        _print_table(res)
    return 0
