"""LoRA-Ensemble (Halbheer et al., 2024): ``M`` LoRA adapters on the attention of one frozen ViT.

Every adapted projection ``y = W x + b`` (by default the fused ``attn.qkv`` and
the output ``attn.proj`` of every block) becomes, for member ``m``,

    y = W x + b + (alpha / r) B_m A_m x,   A_m (r, in), B_m (out, r)

with ``W``, ``b`` and the rest of the ViT frozen and shared. Each member has its
own linear head. LoRA's initialisation: ``A_m ~ U(-1/sqrt(in), 1/sqrt(in))``
(seeded, different per member), ``B_m = 0``, so every member starts with the
pretrained features; the heads are drawn independently like ``nn.Linear``'s
(``U(-1/sqrt(D), 1/sqrt(D))``, seeded).

Members are batched: the input is repeated ``M`` times along the batch
(member-major, rows ``[m B, (m + 1) B)`` are member ``m``'s) and each adapted
layer adds every member's update to its own rows; the forward returns (M, B, C).

Applies to ViTs only (a ``nn.Linear`` named ``*.attn.qkv``); anything else, e.g.
a CNN, raises ``ValueError`` naming the method and the model.

Cost (what fvcore counts on the wrapper): ``M`` forwards plus the adapters,
``GFLOPs = M (one forward + tokens * sum_layers r (in + out)) / 1e9``.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.methods.last_layer import linear_head, penultimate

METHOD = "LoRA-Ensemble"
TARGETS = (r"\.attn\.qkv$", r"\.attn\.proj$")


def target_layers(model: nn.Module, model_name: str, targets: Sequence[str] = TARGETS) -> list[str]:
    """Names of the attention projections to adapt; ``ValueError`` unless ``model`` is a ViT."""
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not any(re.search(TARGETS[0], n) for n in linears):
        raise ValueError(f"{METHOD} does not apply to model {model_name!r} ({type(model).__name__}): it has no attention "
                         "projections (no nn.Linear '*.attn.qkv'); LoRA-Ensemble needs a ViT")
    chosen = [n for n in linears if any(re.search(t, n) for t in targets)]
    if not chosen:
        raise ValueError(f"{METHOD} of model {model_name!r}: targets {list(targets)} match no nn.Linear layer")
    return chosen


def check_adapter(members, rank, alpha, model_name: str = "") -> None:
    where = f"{METHOD} of model {model_name!r}"
    for key, v in (("members", members), ("rank", rank)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{where}: {key} must be an integer >= 1, got {v!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0 or not math.isfinite(alpha):
        raise ValueError(f"{where}: alpha must be a finite number > 0, got {alpha!r}")


class LoRAEnsembleLinear(nn.Module):
    """A frozen ``nn.Linear`` plus ``M`` low-rank updates, applied to member-major stacked rows."""

    def __init__(self, base: nn.Linear, members: int, rank: int, alpha: float, gen: torch.Generator):
        super().__init__()
        self.base = base.requires_grad_(False)
        bound = 1.0 / math.sqrt(base.in_features)
        self.lora_a = nn.Parameter((torch.rand(members, base.in_features, rank, generator=gen) * 2 - 1) * bound)  # A_m^T
        self.lora_b = nn.Parameter(torch.zeros(members, rank, base.out_features))  # B_m^T
        self.scale = alpha / rank

    def forward(self, x: Tensor) -> Tensor:
        y = F.linear(x, self.base.weight, self.base.bias)
        m = self.lora_a.shape[0]
        xm = x.reshape(m, -1, x.shape[-1])
        delta = torch.bmm(torch.bmm(xm, self.lora_a), self.lora_b)
        return y + self.scale * delta.reshape(y.shape)


class LoRAEnsemble(nn.Module):
    """(B, 3, S, S) -> (M, B, C) logits of ``M`` LoRA members around the frozen ViT ``model`` (changed in place)."""

    def __init__(self, model: nn.Module, *, members: int, rank: int, alpha: float | None = None,
                 targets: Sequence[str] = TARGETS, seed: int = 0, model_name: str = ""):
        super().__init__()
        name = model_name or type(model).__name__
        alpha = float(rank) if alpha is None else alpha
        check_adapter(members, rank, alpha, name)
        head = linear_head(model, METHOD, name)
        self.layer_names = target_layers(model, name, targets)  # fails before the model is touched
        model.requires_grad_(False)
        gen = torch.Generator().manual_seed(int(seed))
        for layer in self.layer_names:
            parent, _, child = layer.rpartition(".")
            setattr(model.get_submodule(parent), child, LoRAEnsembleLinear(model.get_submodule(layer), members, rank, alpha, gen))
        self.members, self.rank, self.model = members, rank, model
        bound = 1.0 / math.sqrt(head.in_features)
        self.head_weight = nn.Parameter((torch.rand(members, head.in_features, head.out_features, generator=gen) * 2 - 1) * bound)
        self.head_bias = nn.Parameter((torch.rand(members, 1, head.out_features, generator=gen) * 2 - 1) * bound)

    def forward(self, x: Tensor) -> Tensor:
        b = x.shape[0]
        f = penultimate(self.model, x.repeat(self.members, *([1] * (x.dim() - 1))))
        return torch.bmm(f.reshape(self.members, b, -1), self.head_weight) + self.head_bias

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Adapters and member heads."""
        return [p for p in self.parameters() if p.requires_grad]

    def adapter_macs(self, tokens: int) -> int:
        """Multiply-adds of one member's adapters for one image of ``tokens`` tokens."""
        layers = [m for m in self.model.modules() if isinstance(m, LoRAEnsembleLinear)]
        return tokens * sum(self.rank * (m.base.in_features + m.base.out_features) for m in layers)
