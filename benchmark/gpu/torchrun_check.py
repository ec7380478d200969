"""Check ``c`` of :mod:`benchmark.gpu.check`: the train stage (one step) and the logits stage under torchrun (NCCL on
CUDA, gloo on the CPU) in check ``a``'s repository copy (:mod:`benchmark.gpu.pipeline_checks`), and a DDP +
SyncBatchNorm step (``python -m benchmark.gpu.torchrun_check ddp-step``, its worker).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import yaml

from benchmark.gpu.common import ROOT, Ctx, Row
from benchmark.gpu.pipeline_checks import DDP_MODEL, MODELS, agreement_rows, compare_logits, last_error, run


def _torchrun(n: int, *args) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n), *args]


def check_torchrun(ctx: Ctx) -> None:
    """Check ``c``: a training stage (one step) and a logits stage under torchrun on the device, and a DDP step through
    :func:`benchmark.models.distributed.wrap`, on check ``a``'s data and checkpoints."""
    import torch

    root = ctx.embedded
    if root is None or not (root / "results" / "data").is_dir():
        ctx.add(
            Row(
                "c torchrun stages",
                "-",
                "runs",
                "skipped",
                "needs the data and checkpoints of check a (run a,c together)",
            )
        )
        return
    n, backend = (torch.cuda.device_count(), "nccl") if ctx.gpu else (1, "gloo")
    if not ctx.gpu:
        ctx.add(
            Row(
                "c torchrun with NCCL",
                "-",
                "runs",
                "skipped",
                "no CUDA device: one process with gloo instead (harness only)",
            )
        )
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["distributed"].update(nproc_per_node=n, backend=backend)
    (root / "params-ddp.yaml").write_text(yaml.safe_dump(params))
    where = f"{n} process{'es' if n > 1 else ''}, {backend}"
    _torchrun_train(ctx, root, n, where)
    _torchrun_logits(ctx, root, n, where)
    _torchrun_ddp_step(ctx, n, where)


def _torchrun_train(ctx: Ctx, root: Path, n: int, where: str) -> None:
    """Check ``c``'s training stage of :data:`DDP_MODEL`, one step, under torchrun with ``n`` processes: its row."""
    code, out, t = run(
        _torchrun(n, "pipelines/train.py", "--model", DDP_MODEL, "--params", "params-ddp.yaml", "--no-progress"),
        root,
        ctx.left(),
    )
    record = root / "results" / "checkpoints" / DDP_MODEL / "train.json"
    if code or not record.exists():
        ctx.add(
            Row(
                f"c train stage, one step, under torchrun ({where})",
                f"exit {code}",
                "exit 0, train.json",
                "fail",
                last_error(out),
            )
        )
    else:
        hist = json.loads(record.read_text())["history"]
        ok = len(hist) == 1 and math.isfinite(hist[0]["train_loss"])
        ctx.add(
            Row(
                f"c train stage, one step, under torchrun ({where})",
                f"{t:.0f} s, loss {hist[0]['train_loss']:.3f}" if hist else "no epoch",
                "exit 0, finite loss",
                "pass" if ok else "fail",
            )
        )


def _torchrun_logits(ctx: Ctx, root: Path, n: int, where: str) -> None:
    """Check ``c``'s logits stage under torchrun against check ``a``'s one-process logits: its rows."""
    m = MODELS[1]
    code, out, t = run(
        _torchrun(n, "pipelines/logits.py", "--model", m, "--params", "params-ddp.yaml", "--no-progress"),
        root,
        ctx.left(),
    )
    if code:
        ctx.add(Row(f"c logits stage under torchrun ({where})", f"exit {code}", "exit 0", "fail", last_error(out)))
    else:
        diff, agree, rows = compare_logits(
            root / "results" / f"logits-{ctx.device.type}" / m, root / "results" / "logits" / m
        )
        ctx.add(*agreement_rows(f"c logits of {m} under torchrun ({where}) vs one process", diff, agree, rows))


def _torchrun_ddp_step(ctx: Ctx, n: int, where: str) -> None:
    """Check ``c``'s DDP step through :func:`benchmark.models.distributed.wrap` under torchrun: its row."""
    code, out, t = run(
        _torchrun(n, "-m", "benchmark.gpu.torchrun_check", "ddp-step", ctx.device.type), ROOT, ctx.left()
    )
    result = next((json.loads(ln) for ln in reversed(out.splitlines()) if ln.startswith("{")), None)
    ok = code == 0 and result is not None and result["finite"] and (result["sync_bn"] > 0 or not ctx.gpu)
    value = f"exit {code}" if result is None else f"{result['sync_bn']} SyncBatchNorm layers, loss {result['loss']:.3f}"
    ctx.add(
        Row(
            f"c DDP step via distributed.wrap ({where})",
            value,
            "SyncBatchNorm on CUDA, finite loss",
            "pass" if ok else "fail",
            "" if ok else last_error(out),
        )
    )


def ddp_step(device_type: str) -> dict:
    """Worker of the DDP check: init the group, wrap a BatchNorm CNN, one step with the global-batch loss."""
    import timm
    import torch

    from benchmark.models import distributed
    from benchmark.stages.model_params import DistConfig

    device = distributed.init(DistConfig(), torch.device(device_type))
    torch.manual_seed(0)
    model, net = distributed.wrap(timm.create_model("resnet18", num_classes=10).to(device), device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 64, 64, device=device), torch.randint(0, 10, (16,), device=device)
    lo, hi = distributed.shard_bounds(16)
    loss, value = distributed.global_batch_loss(torch.nn.functional.cross_entropy(net(x[lo:hi]), y[lo:hi]), hi - lo, 16)
    loss.backward()
    opt.step()
    result = {
        "rank": distributed.rank(),
        "sync_bn": sum(isinstance(mod, torch.nn.SyncBatchNorm) for mod in model.modules()),
        "loss": value.item(),
        "finite": math.isfinite(value.item()),
    }
    distributed.shutdown()
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["ddp-step"] and len(sys.argv) == 3:
        print(json.dumps(ddp_step(sys.argv[2])), flush=True)
    else:
        sys.exit("usage: python -m benchmark.gpu.torchrun_check ddp-step cpu|cuda  (under torchrun)")
