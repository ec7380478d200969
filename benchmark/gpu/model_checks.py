"""The checks of :mod:`benchmark.gpu.check` that run models in this process: ``b``, the logits throughput
(:func:`benchmark.models.infer.predict_logits` against timm's inference benchmark), and ``d``, an SVE's members
batched against each member run alone.
"""

from __future__ import annotations

import contextlib
import statistics
import time

from benchmark.gpu.common import SOFTMAX_TOL, SPEED_MIN, Ctx, Row

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
