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
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from benchmark.gpu.common import SOFTMAX_TOL, SPEED_MIN, Ctx, Row

CHECKS = ("a", "b", "c", "d", "e")
ARCHS = ("resnet50", "efficientnet_b0", "vit_base_patch16_224")
SVE_ARCHS = ("tf_efficientnet_lite0", "vit_tiny_patch16_224")


def judge(ok: bool, gpu: bool = True) -> str:
    """A row's status: pass or fail on a GPU; ``info`` on the CPU, where the GPU's targets do not apply."""
    return ("pass" if ok else "fail") if gpu else "info"


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- (b) logits throughput against timm's inference benchmark --------------------------------------------


def timm_ips(model, x, steps: int, warmup: int, amp) -> float:
    """timm's ``InferenceBenchmarkRunner``: eval, no_grad, one batch on the device, warm-up, timed synchronised
    steps."""
    import torch

    from benchmark.models.infer import autocast

    def step() -> float:
        t = time.perf_counter()
        with autocast(x.device, amp):
            model(x)
        _sync(x.device)
        return time.perf_counter() - t

    with torch.no_grad():
        for _ in range(warmup):
            step()
        total = sum(step() for _ in range(steps))
    return steps * x.shape[0] / total


def ours_ips(model, x_cpu, batch: int, rounds: int, amp) -> float:
    """:func:`benchmark.models.infer.predict_logits` over CPU inputs (copies, forward, logits back), after one warm
    call."""
    from benchmark.models.infer import predict_logits

    predict_logits(model, x_cpu[:batch], batch_size=batch, amp=amp)
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        predict_logits(model, x_cpu, batch_size=batch, amp=amp)
        times.append(time.perf_counter() - t)
    return x_cpu.shape[0] / statistics.median(times)


def check_throughput(ctx: Ctx) -> None:
    """Check ``b``: inference throughput of the zoo's architectures on the device, timm's benchmark loop against the
    project's logits pass."""
    import timm
    import torch

    from benchmark.models.infer import amp_dtype

    size, batch, n_batches, steps, warmup, rounds = (224, 256, 8, 40, 10, 3) if ctx.gpu else (32, 2, 2, 2, 1, 1)
    torch.backends.cudnn.benchmark = True  # timm's benchmark.py sets it; so does the logits stage on CUDA
    g = torch.Generator().manual_seed(0)
    x_cpu = torch.randn(n_batches * batch, 3, size, size, generator=g)
    for arch in ARCHS:
        kwargs = {"img_size": size} if arch.startswith("vit") and size != 224 else {}
        model = timm.create_model(arch, pretrained=False, num_classes=1000, **kwargs).eval().to(ctx.device)
        x = x_cpu[:batch].to(ctx.device)
        for precision in ("float32", ctx.amp):
            amp = amp_dtype(None if precision == "float32" else precision)
            ref = timm_ips(model, x, steps, warmup, amp)
            ours = ours_ips(model, x_cpu, batch, rounds, amp)
            ratio = ours / ref
            ctx.add(
                Row(
                    f"b logits throughput {arch} {size}px B{batch} {precision}",
                    f"{ratio:.2f}x (ours {ours:,.0f} / timm {ref:,.0f} img/s)",
                    f">= {SPEED_MIN}x",
                    judge(ratio >= SPEED_MIN, ctx.gpu),
                    "" if ctx.gpu else "CPU, small size: harness only, not judged",
                )
            )
        del model, x
        if ctx.gpu:
            torch.cuda.empty_cache()


# -- (d) SVE: M = 8 batched against 8 sequential members ----------------------------------------------------


@contextlib.contextmanager
def full_float32():
    """cuDNN and cuBLAS in full float32 (no TF32) inside the block; the previous settings after it."""
    import torch

    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _sve_and_members(arch: str, size: int, members: int, device):
    """An SVE of ``members`` on a randomly initialised ``arch`` (seed 0) and its members exported dense, on
    ``device``."""
    import timm
    import torch

    from benchmark.methods.sve import SingularValueEnsemble

    kwargs = {"img_size": size} if arch.startswith("vit") and size != 224 else {}
    torch.manual_seed(0)
    sve = SingularValueEnsemble(
        timm.create_model(arch, pretrained=False, **kwargs),
        members=members,
        num_classes=10,
        pretrained=False,
        allow_random_init=True,
        sigma_init=0.1,
    ).eval()
    dense = [sve.export_member(m).eval().to(device) for m in range(members)]
    sve.to(device)
    return sve, dense


def _batched_vs_sequential(batched, sequential, device, steps: int) -> tuple[float, float, dict[str, float]]:
    """The two passes' max softmax difference (PyTorch's default TF32, then full float32) and their seconds per
    pass."""
    import torch

    def softmax_diff() -> float:
        return (batched().float().softmax(-1) - sequential().float().softmax(-1)).abs().max().item()

    with torch.no_grad():
        diff_tf32 = softmax_diff()  # PyTorch's default: cuDNN convolutions in TF32 (10-bit mantissa) on CUDA
        with full_float32():  # the judged agreement: the two computations, not TF32's rounding of each
            diff = softmax_diff()
        times = {}
        for name, fn in (("batched", batched), ("sequential", sequential)):
            fn()
            _sync(device)
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            _sync(device)
            times[name] = (time.perf_counter() - t) / steps
    return diff_tf32, diff, times


def check_sve(ctx: Ctx) -> None:
    """Check ``d``: an SVE's members batched against each member run alone: their softmax agrees in float32; the two
    passes' times are reported."""
    import torch

    members, size, batch, steps = (8, 224, 64, 20) if ctx.gpu else (8, 32, 4, 1)
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(0)).to(ctx.device)
    for arch in SVE_ARCHS:
        sve, dense = _sve_and_members(arch, size, members, ctx.device)

        def batched(sve=sve):  # (bound here: the loop's next architecture must not change it)
            return sve(x)

        def sequential(dense=dense):
            return torch.stack([d(x) for d in dense])

        diff_tf32, diff, times = _batched_vs_sequential(batched, sequential, ctx.device, steps)
        where = f"{arch} {size}px M{members} B{batch}"
        ctx.add(
            Row(
                f"d SVE batched vs sequential members {where}: max |Δ softmax|",
                f"{diff:.1e} (TF32 allowed: {diff_tf32:.1e})",
                f"< {SOFTMAX_TOL:g} in float32",
                "pass" if diff < SOFTMAX_TOL else "fail",
            ),
            Row(
                f"d SVE sequential / batched time {where}",
                f"{times['sequential'] / times['batched']:.2f}x "
                f"({times['batched'] * 1e3:.1f} ms vs {times['sequential'] * 1e3:.1f} ms)",
                "reported",
                "info",
                "" if ctx.gpu else "CPU, small size",
            ),
        )
        del sve, dense
        if ctx.gpu:
            torch.cuda.empty_cache()


# -- the run: checks, table, outputs -------------------------------------------------------------------------

NEEDS = {"a": 120, "b": 30, "c": 40, "d": 10, "e": 150}  # rough seconds a check needs on the GPU


def run_checks(ctx: Ctx, only) -> None:
    """Run the checks named in ``only`` (a to e) with ``ctx``'s device and time budget, adding their rows to ``ctx``."""
    from benchmark.gpu import pipeline_checks as pipe

    steps = {
        "a": pipe.check_embedded,
        "b": check_throughput,
        "c": pipe.check_torchrun,
        "d": check_sve,
        "e": pipe.check_caltech,
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
                Row(
                    "e Caltech-256 fixture suite through DVC",
                    "-",
                    "runs",
                    "skipped",
                    "GPU check skipped without CUDA; its CPU run: tests/pipeline/test_paper_suite_pipeline.py (or "
                    "--cpu-full)",
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
