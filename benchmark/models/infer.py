"""Batched inference: logits of a model over a tensor of inputs or a dataset.

On CUDA the batches go through pinned memory and are copied on a side stream while
the forward of the batch before runs (:func:`cuda_prefetch`); the logits come back
asynchronously (at most ``IN_FLIGHT`` batches queued ahead of the GPU). ``amp`` (params
``logits.amp``, default off) runs the forward under ``torch.autocast`` in bfloat16 or
float16; the logits are returned in float32 either way.
"""

from __future__ import annotations

import contextlib
from collections import deque

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from benchmark.models import portable

AMP_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}  # the names of benchmark.stages.model_params.AMP
IN_FLIGHT = 2  # CUDA: batches whose copies/forwards may be queued before the CPU waits


def amp_dtype(value, where: str = "params 'logits': amp") -> torch.dtype | None:
    """The autocast dtype for an ``amp`` setting: null/false (off), ``bfloat16`` or ``float16``."""
    if value is None or value is False:
        return None
    if value not in AMP_DTYPES:
        raise ValueError(f"{where} must be null (off), bfloat16 or float16, got {value!r}")
    return AMP_DTYPES[value]


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.autocast`` on ``device`` in ``dtype``; a no-op context when ``dtype`` is None."""
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def model_device(model: nn.Module) -> torch.device:
    """The device of ``model``'s parameters (the CPU for a model without any)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def channels_last(model: nn.Module) -> nn.Module:
    """Convolutional ``model`` with its 4-D weights in channels-last order (in place; returned).

    On the CPU, oneDNN's convolutions (above all the depthwise ones of
    EfficientNet/MobileNet) run about 2x faster in training and 1.3-1.6x in
    inference on channels-last tensors (measured: Lite0 at 48 px, batch 64, two
    threads: 0.83 -> 0.42 s per training step). A model without convolutions is
    returned as it is. Checkpoints are saved contiguous, so their files do not change format.
    """
    if any(isinstance(m, nn.Conv2d) for m in model.modules()):
        model.to(memory_format=torch.channels_last)
    return model


def input_format(model: nn.Module) -> torch.memory_format:
    """The memory format a batch should have for ``model``: channels-last when its first 4-D weight is."""
    for p in model.parameters():
        if p.ndim == 4:
            return (
                torch.channels_last
                if (p.is_contiguous(memory_format=torch.channels_last) and not p.is_contiguous())
                else torch.contiguous_format
            )
    return torch.contiguous_format


def batches(inputs: torch.Tensor | Dataset, batch_size: int, *, num_workers: int = 0, pin_memory: bool = False):
    """Yield input batches in order: slices of a (N, 3, S, S) tensor, or the first
    element of each item of a ``Dataset`` of (x, label[, id]) tuples, via a DataLoader."""
    if isinstance(inputs, torch.Tensor):
        if inputs.ndim != 4:
            raise ValueError(f"inputs must be (N, 3, S, S), got shape {tuple(inputs.shape)}")
        for start in range(0, inputs.shape[0], batch_size):
            yield inputs[start : start + batch_size]
        return
    for item in DataLoader(
        inputs, batch_size=batch_size, shuffle=False, num_workers=num_workers, pin_memory=pin_memory
    ):
        yield item[0] if isinstance(item, (tuple, list)) else item


def cuda_prefetch(xs, device: torch.device):
    """Yield the CPU batches ``xs`` on the CUDA ``device``: each one is pinned and copied on a side stream
    while the forward of the one before runs (the usual prefetcher, as timm's ``PrefetchLoader``)."""
    side, main = torch.cuda.Stream(device), torch.cuda.current_stream(device)

    def copy(x: torch.Tensor) -> torch.Tensor:
        x = x if x.is_pinned() else x.pin_memory()
        with torch.cuda.stream(side):
            return x.to(device, non_blocking=True)

    def ready(t: torch.Tensor) -> torch.Tensor:
        main.wait_stream(side)  # the forward waits for the copies queued so far
        t.record_stream(main)  # t's memory, allocated on the side stream, is not reused before main is done with it
        return t

    it = iter(xs)
    first = next(it, None)
    if first is None:
        return
    cur = copy(first)
    for x in it:
        yield ready(cur)  # the consumer queues cur's forward on the main stream ...
        cur = copy(x)  # ... while the next copy runs on the side stream
    yield ready(cur)


@torch.no_grad()
def predict_logits(
    model: nn.Module,
    inputs: torch.Tensor | Dataset,
    *,
    batch_size: int = 256,
    desc: str | None = None,
    progress: bool = False,
    num_workers: int = 0,
    amp: torch.dtype | None = None,
) -> torch.Tensor:
    """Logits of ``model`` (eval mode, on its own device) on ``inputs``, in input order, on the CPU, in float32.

    Returns (N, C) for ordinary models and (M, N, C) for multi-member models whose
    forward returns (M, B, C). ``amp``: autocast dtype of the forward (None: off).
    """
    was_training = model.training
    model.eval()
    device = model_device(model)
    cuda = device.type == "cuda"
    outs, pending = [], deque()
    total = -(-len(inputs) // batch_size)
    try:
        fmt = input_format(model)
        xs = (
            x.contiguous(memory_format=fmt)
            for x in batches(inputs, batch_size, num_workers=num_workers, pin_memory=cuda)
        )
        for x in tqdm(
            cuda_prefetch(xs, device) if cuda else (x.to(device) for x in xs),
            total=total,
            desc=desc,
            disable=not progress,
            leave=False,
        ):
            with autocast(device, amp):
                z = portable.forward(model, x)
            outs.append(z.float().to("cpu", non_blocking=cuda))
            if cuda:  # bound the work queued ahead: wait for the batch IN_FLIGHT back
                pending.append(torch.cuda.Event())
                pending[-1].record(torch.cuda.current_stream(device))
                if len(pending) > IN_FLIGHT:
                    pending.popleft().synchronize()
        if cuda:
            torch.cuda.synchronize(device)  # the asynchronous copies to the CPU are complete
    finally:
        model.train(was_training)
    if not outs:
        raise ValueError("inputs are empty")
    return torch.cat(outs, dim=-2)
