"""Batched inference: logits of a model over a tensor of inputs."""
from __future__ import annotations

import torch
from torch import nn
from tqdm.auto import tqdm


@torch.no_grad()
def predict_logits(model: nn.Module, inputs: torch.Tensor, *, batch_size: int = 256, desc: str | None = None,
                   progress: bool = False) -> torch.Tensor:
    """Logits of ``model`` (eval mode) on ``inputs`` (N, 3, S, S), in input order.

    Returns (N, C) for ordinary models and (M, N, C) for multi-member models whose
    forward returns (M, B, C).
    """
    if inputs.ndim != 4:
        raise ValueError(f"inputs must be (N, 3, S, S), got shape {tuple(inputs.shape)}")
    was_training = model.training
    model.eval()
    outs = []
    try:
        for start in tqdm(range(0, inputs.shape[0], batch_size), desc=desc, disable=not progress, leave=False):
            outs.append(model(inputs[start : start + batch_size]).float())
    finally:
        model.train(was_training)
    if not outs:
        raise ValueError("inputs are empty")
    return torch.cat(outs, dim=-2)
