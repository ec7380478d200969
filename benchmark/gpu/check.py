"""One prepared check of the GPU path (``scripts/gpu-check.sh``): one table of figures, exit 1 on a failed check.

Checks (``--only`` picks some; each row says pass, fail, info or skipped and why):

* ``a``: train + logits of two embedded zoo entries with ``device: cuda`` through DVC in a temporary
  copy of the repository (tiny profile), then the logits stage again on the CPU from the same checkpoints:
  max |softmax difference| < 1e-3 and argmax agreement > 99.5 %.
* ``b``: logits throughput at 224 px, batch 256, of resnet50, efficientnet_b0 and vit_base_patch16_224
  (random weights): :func:`benchmark.models.infer.predict_logits` from CPU tensors (the logits stage's path)
  against timm's inference benchmark (``benchmark.py``: one random batch already on the GPU, warm-up,
  timed forwards with a synchronise after each), float32 and autocast (``logits.amp``); target >= 0.9x.
* ``c``: the train stage (one step) and the logits stage under torchrun, one process per GPU, NCCL; a DDP +
  SyncBatchNorm step through :func:`benchmark.models.distributed.wrap`.
* ``d``: SVE with M = 8 members, one batched forward against the 8 members exported as dense models one
  after the other, batch 64 (the ratio is reported; the outputs must agree).
* ``e``: the Caltech-256 fixture suite (:mod:`benchmark.gpu.fixture`) through DVC on the GPU (up to ``evaluate`` when
  the report stage's packages are missing: then that stage is a skipped row).

Without CUDA the same steps run on the CPU with small sizes where they can (``a``, ``b``, ``c`` with gloo,
``d``): that checks the harness, not the GPU, and the table says which GPU checks were skipped; ``e`` is
skipped (its CPU run is tests/pipeline/test_paper_suite_pipeline.py) unless ``--cpu-full``.

The checks: :mod:`benchmark.gpu.model_checks` (``b``, ``d``), :mod:`benchmark.gpu.pipeline_checks` (``a``),
:mod:`benchmark.gpu.torchrun_check` (``c``), :mod:`benchmark.gpu.caltech_check` (``e``); this module runs them and
writes the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from benchmark.gpu.common import Ctx, Row, skipped_caltech

CHECKS = ("a", "b", "c", "d", "e")


# -- the run: checks, table, outputs -------------------------------------------------------------------------

NEEDS = {"a": 120, "b": 30, "c": 40, "d": 10, "e": 150}  # rough seconds a check needs on the GPU


def run_checks(ctx: Ctx, only) -> None:
    """Run the checks named in ``only`` (a to e) with ``ctx``'s device and time budget, adding their rows to ``ctx``."""
    from benchmark.gpu import caltech_check, model_checks, torchrun_check
    from benchmark.gpu import pipeline_checks as pipe

    steps = {
        "a": pipe.check_embedded,
        "b": model_checks.check_throughput,
        "c": torchrun_check.check_torchrun,
        "d": model_checks.check_sve,
        "e": caltech_check.check_caltech,
    }
    if not ctx.gpu:
        ctx.add(
            Row(
                "GPU",
                "no CUDA device",
                "CUDA device",
                "skipped",
                "GPU checks skipped: a, b, c, d run on the CPU with small sizes (harness only)"
                + ("" if ctx.cpu_full else "; e needs --cpu-full"),
            )
        )
    for name in ("b", "d", "a", "c", "e"):  # cheapest first: a short budget still yields the throughput figures
        if name not in only:
            continue
        if name == "e" and not ctx.gpu and not ctx.cpu_full:
            ctx.add(
                skipped_caltech(
                    "GPU check skipped without CUDA; its CPU run: tests/pipeline/test_paper_suite_pipeline.py (or "
                    "--cpu-full)"
                )
            )
            continue
        if ctx.gpu and ctx.left() < NEEDS[name]:
            ctx.add(Row(f"{name} (all)", "-", "runs", "skipped", f"time budget: {ctx.left():.0f} s left"))
            continue
        print(
            f"[{name}] {time.strftime('%H:%M:%S')}" + (f" ({ctx.left():.0f} s of the budget left)" if ctx.gpu else ""),
            flush=True,
        )
        try:
            steps[name](ctx)
        except Exception as e:  # one broken check must not hide the others' figures
            traceback.print_exc()  # the table keeps one line; the log gets the cause
            ctx.add(
                Row(
                    f"{name} (all)",
                    f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:200],
                    "runs",
                    "fail",
                )
            )


def environment(device) -> dict:
    """The date, torch and the device the checks ran on (CUDA version and GPU count on a GPU)."""
    import torch

    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "device": "cpu",
        "gpus": 0,
    }
    if device.type == "cuda":
        info.update(device=torch.cuda.get_device_name(device), gpus=torch.cuda.device_count(), cuda=torch.version.cuda)
    return info


def table(rows, *, markdown: bool = False) -> str:
    """The rows as an aligned text table, or Markdown with ``markdown``."""
    head = ("check", "value", "target", "status")
    cells = [
        (r.check, r.value, r.target, r.status + (f": {r.note}" if r.note and r.status != "pass" else "")) for r in rows
    ]
    if markdown:
        esc = [tuple(c.replace("|", "\\|") for c in row) for row in cells]
        return "\n".join(
            ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(row) + " |" for row in esc]
        )
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(head[:3])]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)) + "  status"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3] for row in cells]
    return "\n".join(lines)


def write_out(path: Path, rows, env: dict) -> None:
    """Write the rows and the environment to ``path``, atomically: JSON when it ends in ``.json``, else Markdown."""
    from benchmark.storage.store import atomic_path

    path = Path(path)
    if path.suffix == ".json":
        text = json.dumps({"environment": env, "rows": [asdict(r) for r in rows]}, indent=2)
    else:
        where = f"{env['device']} ({env['gpus']} GPU), torch {env['torch']}" + (
            f", CUDA {env['cuda']}" if "cuda" in env else ""
        )
        text = f"GPU check of {env['date']} on {where}:\n\n{table(rows, markdown=True)}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text)


def parse_only(value: str) -> list[str]:
    """``--only``: comma-separated check names, each one of :data:`CHECKS`."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [n for n in names if n not in CHECKS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown checks {bad or value!r}; choose from {','.join(CHECKS)}")
    return names


def main(argv=None) -> int:
    """``scripts/gpu-check.sh``: run the checks, print and write their table; 0 when none failed, 1 otherwise."""
    parser = argparse.ArgumentParser(
        prog="scripts/gpu-check.sh",
        description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 when no check failed (skipped checks are not failures), 1 otherwise, "
        "2 on bad arguments.",
    )
    parser.add_argument(
        "--only", type=parse_only, default=list(CHECKS), help="comma-separated checks to run (default a,b,c,d,e)"
    )
    parser.add_argument("--out", type=Path, help="also write the table: JSON if the name ends in .json, else Markdown")
    parser.add_argument(
        "--budget",
        type=float,
        default=470.0,
        help="seconds for a GPU run (default 470: under 8 minutes); checks that no longer fit are skipped",
    )
    parser.add_argument(
        "--amp", choices=("bfloat16", "float16"), default="bfloat16", help="autocast dtype of the mixed-precision rows"
    )
    parser.add_argument(
        "--cpu-full", action="store_true", help="without CUDA, also run e (the Caltech-256 suite) on the CPU"
    )
    parser.add_argument(
        "--keep", type=Path, help="keep the temporary repository copies under this folder (default: removed)"
    )
    args = parser.parse_args(argv)
    if args.budget <= 0:
        parser.error("--budget must be > 0 seconds")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env = environment(device)
    print(
        f"GPU check: {env['device']}, torch {env['torch']}, {env['date']}; checks {','.join(args.only)}; budget "
        f"{args.budget:.0f} s",
        flush=True,
    )
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-check-", ignore_cleanup_errors=True) as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ctx = Ctx(device, work, start + args.budget, cpu_full=args.cpu_full, amp=args.amp)
        run_checks(ctx, args.only)
    rows = ctx.rows
    print(f"\nGPU check on {env['device']} ({time.monotonic() - start:.0f} s):\n{table(rows)}")
    if args.out:
        write_out(args.out, rows, env)
        print(f"table written to {args.out}")
    failed = [r.check for r in rows if r.status == "fail"]
    print(f"{len(failed)} failed check(s)" + (": " + "; ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
