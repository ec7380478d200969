"""The last layer of a timm classifier: penultimate features and the linear head.

For a timm model, ``model(x) == classifier(penultimate(model, x))`` in eval mode:
``forward_features`` then ``forward_head(pre_logits=True)`` (pooling, head
norm, flatten; timm's head dropout is a no-op in eval mode) give the features
the final ``nn.Linear`` classifier (``get_classifier()``) maps to logits.
MC dropout and the last-layer Laplace approximation act on exactly this pair.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset


def linear_head(model: nn.Module, method: str, model_name: str) -> nn.Linear:
    """The model's final ``nn.Linear`` classifier; ``ValueError`` naming the method and model if it has none."""
    missing = [
        a for a in ("forward_features", "forward_head", "get_classifier") if not callable(getattr(model, a, None))
    ]
    if missing:
        raise ValueError(
            f"{method} does not apply to model {model_name!r} ({type(model).__name__}): it is not a timm "
            f"classifier (no {', '.join(missing)}), so it has no separate last layer"
        )
    head = model.get_classifier()
    if not isinstance(head, nn.Linear):
        raise ValueError(
            f"{method} does not apply to model {model_name!r} ({type(model).__name__}): its classifier is "
            f"{type(head).__name__}, not a single nn.Linear"
        )
    return head


def penultimate(model: nn.Module, x: Tensor) -> Tensor:
    """(B, D) features the classifier of ``model`` reads (call with ``model`` in eval mode)."""
    return model.forward_head(model.forward_features(x), pre_logits=True)


@torch.no_grad()
def penultimate_batched(
    model: nn.Module, inputs: Tensor | Dataset, *, batch_size: int = 256, num_workers: int = 0
) -> Tensor:
    """:func:`penultimate` over (N, 3, S, S) inputs or a Dataset of (x, label[, id]), in batches, on the CPU.

    The model runs in eval mode (restored after) on its own device.
    """
    from benchmark.models.infer import batches, model_device

    was_training = model.training
    model.eval()
    device = model_device(model)
    try:
        return torch.cat(
            [penultimate(model, x.to(device)).cpu() for x in batches(inputs, batch_size, num_workers=num_workers)]
        )
    finally:
        model.train(was_training)


class BackboneHead(nn.Module):
    """(B, 3, S, S) -> ``head(penultimate features of model)``.

    The shared shape of last-layer methods (Laplace head, shallow-ensemble heads):
    only ``head`` differs. With ``frozen`` (the default) the backbone always stays
    in eval mode and only ``head`` can learn; otherwise backbone and head train
    together. Raises when ``model`` has no linear classifier to replace.
    """

    def __init__(self, model: nn.Module, head: nn.Module, method: str, model_name: str = "", *, frozen: bool = True):
        super().__init__()
        classifier = linear_head(model, method, model_name or type(model).__name__)
        self.in_features, self.num_classes = classifier.in_features, classifier.out_features
        self.model, self.head, self.frozen = model, head, frozen
        model.requires_grad_(not frozen)
        if frozen:
            model.eval()

    def train(self, mode: bool = True) -> BackboneHead:
        """Train mode for the head; a frozen backbone stays in eval mode (its batch norm statistics fixed)."""
        super().train(mode)
        if self.frozen:
            self.model.eval()
        return self

    def forward(self, x: Tensor) -> Tensor:
        """Images (B, 3, S, S) -> the head's logits of the backbone's penultimate features."""
        return self.head(penultimate(self.model, x))
