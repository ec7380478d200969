"""Inference cost of a model: fvcore FLOPs, parameters, measured CPU throughput.

fvcore counts one fused multiply-add as one flop, so its "GFLOPs" are
comparable to torchvision's/timm's GMACs and to the numbers in the papers. As
in those published figures, only the multiply-adds of convolutions, linear
layers and matrix products are counted: normalisation layers (folded into the
preceding convolution at inference) and pooling are not (:data:`IGNORED_OPS`).
timm's fused attention (``F.scaled_dot_product_attention``) is invisible to
fvcore, so it is switched off while counting (otherwise ViTs count low): timm
reads the switch when a module is built, so the ``fused_attn`` flag of every
already-built attention module is turned off too, and restored afterwards.
"""
from __future__ import annotations

import time
from collections import Counter

import torch
from torch import nn


IGNORED_OPS = (
    "aten::batch_norm", "aten::layer_norm", "aten::group_norm", "aten::instance_norm",
    "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool1d", "aten::upsample_nearest2d", "aten::upsample_bilinear2d",
)


def _no_flops(inputs, outputs) -> Counter:
    return Counter()


def count_flops(model: nn.Module, img_size: int, *, channels: int = 3) -> float:
    """GFLOPs (fvcore multiply-adds) of one forward of one ``img_size`` image.

    A model returning (M, B, C) (multi-member) is counted as it runs, i.e. all
    members together.
    """
    from fvcore.nn import FlopCountAnalysis

    flagged = [m for m in model.modules() if getattr(m, "fused_attn", False) is True]
    for m in flagged:
        m.fused_attn = False
    try:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            fca = FlopCountAnalysis(model, torch.zeros(1, channels, img_size, img_size))
            fca.unsupported_ops_warnings(False)
            fca.uncalled_modules_warnings(False)
            fca.set_op_handle(**{op: _no_flops for op in IGNORED_OPS})
            total = fca.total()
        model.train(was_training)
    finally:
        for m in flagged:
            m.fused_attn = True
    return total / 1e9


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def static_cost(model: nn.Module, img_size: int) -> dict:
    """``gflops`` and ``params`` of ``model``: what depends on its structure only, so that anyone can recompute it
    (``verify`` does, from the zoo entry built without weights); throughput is measured apart."""
    return {"gflops": count_flops(model, img_size), "params": count_params(model)}


@torch.no_grad()
def measure_throughput(model: nn.Module, img_size: int, *, batch_size: int = 64, iters: int = 5) -> float:
    """Images per second of batched eval-mode inference on this CPU (one warm-up forward)."""
    model.eval()
    x = torch.randn(batch_size, 3, img_size, img_size, generator=torch.Generator().manual_seed(0))
    model(x)
    start = time.perf_counter()
    for _ in range(iters):
        model(x)
    return batch_size * iters / (time.perf_counter() - start)


def sum_cost(costs: dict, members) -> dict:
    """Cost of running ``members`` one after the other (``costs``: model -> its cost record): GFLOPs and parameters add,
    throughput = 1 / sum(1 / throughput); ``balance`` = sidekick / base GFLOPs for a pair (NaN otherwise)."""
    return {"gflops": sum(costs[m]["gflops"] for m in members), "params": sum(costs[m]["params"] for m in members),
            "throughput": 1.0 / sum(1.0 / costs[m]["throughput"] for m in members),
            "balance": costs[members[1]]["gflops"] / costs[members[0]]["gflops"] if len(members) == 2 else float("nan")}
