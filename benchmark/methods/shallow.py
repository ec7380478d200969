"""Shallow ensemble: one shared backbone, ``M`` linear heads trained jointly.

``z_m = W_m f(x) + b_m`` for ``m = 1..M`` with ``f`` the penultimate features of a
timm classifier (see :mod:`benchmark.methods.last_layer`); the forward returns
(M, B, C) member logits (the ensemble prediction is the mean of the softmaxes).
The heads are initialised independently (``nn.Linear``'s default
``U(-1/sqrt(D), 1/sqrt(D))``, seeded) and trained together on the mean member
cross-entropy (:func:`benchmark.core.members.member_cross_entropy`).

Two ways to train (``backbone``):

* ``joint`` (the method as published): the backbone starts from the model's
  initial (pretrained) weights and trains together with the ``M`` heads, every
  head's loss flowing into the shared features; costs one fine-tune.
* ``frozen`` (the cheap profile): the backbone stays at a fine-tuned checkpoint
  and only the heads train, on its features (the backbone runs once per training
  image). The heads' only sources of diversity are then their initialisations
  and the shared mini-batch order, so expect less diversity.

Cost either way: one forward, with ``M`` heads in place of one classifier:
``GFLOPs = one forward + (M - 1) C D / 1e9``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from benchmark.methods.last_layer import BackboneHead

METHOD = "shallow ensemble"


def check_members(members, model_name: str = "") -> int:
    if isinstance(members, bool) or not isinstance(members, int) or members < 2:
        raise ValueError(f"{METHOD} of model {model_name!r}: members must be an integer >= 2, got {members!r}")
    return members


class EnsembleHeads(nn.Module):
    """``M`` linear heads: features (B, D) or (B, D, 1, 1) -> (M, B, C)."""

    def __init__(self, features: int, classes: int, members: int, *, seed: int = 0):
        super().__init__()
        check_members(members)
        bound = 1.0 / math.sqrt(features)
        gen = torch.Generator().manual_seed(int(seed))
        self.weight = nn.Parameter((torch.rand(members, features, classes, generator=gen) * 2 - 1) * bound)  # W_m^T
        self.bias = nn.Parameter((torch.rand(members, 1, classes, generator=gen) * 2 - 1) * bound)

    def forward(self, f: Tensor) -> Tensor:
        f = f.flatten(1)
        return torch.bmm(f.unsqueeze(0).expand(self.weight.shape[0], -1, -1), self.weight) + self.bias


BACKBONES = ("joint", "frozen")


class ShallowEnsemble(BackboneHead):
    """(B, 3, S, S) -> (M, B, C): the backbone of ``model`` and :class:`EnsembleHeads`.

    ``backbone="frozen"`` keeps the backbone in eval mode without gradients;
    ``"joint"`` trains it with the heads.
    """

    def __init__(self, model: nn.Module, heads: EnsembleHeads, *, model_name: str = "", backbone: str = "frozen"):
        if backbone not in BACKBONES:
            raise ValueError(f"{METHOD} of model {model_name!r}: backbone must be one of {BACKBONES}, got {backbone!r}")
        super().__init__(model, heads, METHOD, model_name, frozen=backbone == "frozen")
        model.get_classifier().requires_grad_(False)  # unused: the heads replace it
        if heads.weight.shape[1:] != (self.in_features, self.num_classes):
            raise ValueError(f"{METHOD} of model {model_name!r}: heads map {heads.weight.shape[1]} features to "
                             f"{heads.weight.shape[2]} classes, the model has {self.in_features} -> {self.num_classes}")
