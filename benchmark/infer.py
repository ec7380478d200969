"""Batched inference: logits of a model over a tensor of inputs or a dataset."""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm


def model_device(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def batches(inputs: torch.Tensor | Dataset, batch_size: int, *, num_workers: int = 0):
    """Yield input batches in order: slices of a (N, 3, S, S) tensor, or the first
    element of each item of a ``Dataset`` of (x, label[, id]) tuples, via a DataLoader."""
    if isinstance(inputs, torch.Tensor):
        if inputs.ndim != 4:
            raise ValueError(f"inputs must be (N, 3, S, S), got shape {tuple(inputs.shape)}")
        for start in range(0, inputs.shape[0], batch_size):
            yield inputs[start : start + batch_size]
        return
    for item in DataLoader(inputs, batch_size=batch_size, shuffle=False, num_workers=num_workers):
        yield item[0] if isinstance(item, (tuple, list)) else item


@torch.no_grad()
def predict_logits(model: nn.Module, inputs: torch.Tensor | Dataset, *, batch_size: int = 256, desc: str | None = None,
                   progress: bool = False, num_workers: int = 0) -> torch.Tensor:
    """Logits of ``model`` (eval mode, on its own device) on ``inputs``, in input order, on the CPU.

    Returns (N, C) for ordinary models and (M, N, C) for multi-member models whose
    forward returns (M, B, C).
    """
    was_training = model.training
    model.eval()
    device = model_device(model)
    outs = []
    total = -(-len(inputs) // batch_size)
    try:
        for x in tqdm(batches(inputs, batch_size, num_workers=num_workers), total=total, desc=desc, disable=not progress, leave=False):
            outs.append(model(x.to(device, non_blocking=True)).float().cpu())
    finally:
        model.train(was_training)
    if not outs:
        raise ValueError("inputs are empty")
    return torch.cat(outs, dim=-2)
