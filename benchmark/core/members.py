"""Loss and uncertainty scores of multi-member predictions: member logits (M, B, C) of an ensemble."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def _check_logits(logits: Tensor) -> Tensor:
    if not isinstance(logits, Tensor) or logits.dim() != 3 or min(logits.shape) < 1:
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a non-empty (members, batch, classes) tensor, got {shape}")
    return logits


def member_cross_entropy(logits: Tensor, labels: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """Mean over members of each member's mean cross-entropy on the same batch.

    ``(1 / M) sum_m (1 / B) sum_i -log softmax(logits[m, i])[labels[i]]`` for
    (M, B, C) logits, all members trained jointly on every batch (SVE, shallow and
    LoRA ensembles); (B, C) logits are one member (plain cross-entropy). With
    ``label_smoothing`` each member's target is smoothed as in ``F.cross_entropy``.
    """
    if isinstance(logits, Tensor) and logits.dim() == 2:
        logits = logits.unsqueeze(0)
    m, b, c = _check_logits(logits).shape
    if labels.shape != (b,) or labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ValueError(f"labels must be an integer tensor of shape ({b},), got {labels.dtype} {tuple(labels.shape)}")
    if b and (labels.min() < 0 or labels.max() >= c):
        raise ValueError(f"labels must lie in [0, {c}), got range [{int(labels.min())}, {int(labels.max())}]")
    return F.cross_entropy(logits.reshape(m * b, c), labels.repeat(m), label_smoothing=label_smoothing)


def _entropy(p: Tensor) -> Tensor:
    return -torch.special.xlogy(p, p).sum(-1)


def member_uncertainty(logits: Tensor) -> dict[str, Tensor]:
    """Ensemble prediction and uncertainty scores from member logits (M, B, C).

    With ``p_m = softmax(logits[m])`` and ``p = mean_m p_m`` (natural log, nats):

    * ``probs_mean`` (B, C): ``p``, the ensemble prediction;
    * ``predictive_entropy`` (B,): ``H[p] = -sum_c p_c log p_c``;
    * ``expected_entropy`` (B,): ``mean_m H[p_m]`` (aleatoric part);
    * ``mutual_information`` (B,): ``H[p] - mean_m H[p_m]`` (epistemic part, >= 0;
      clamped at 0 against rounding);
    * ``disagreement`` (B,): fraction of members whose argmax differs from ``argmax p``.
    """
    dtype = torch.float64 if _check_logits(logits).dtype == torch.float64 else torch.float32
    probs = torch.softmax(logits, dim=-1, dtype=dtype)
    mean = probs.mean(0)
    predictive = _entropy(mean)
    expected = _entropy(probs).mean(0)
    disagreement = (probs.argmax(-1) != mean.argmax(-1)).float().mean(0)
    return {
        "probs_mean": mean,
        "predictive_entropy": predictive,
        "expected_entropy": expected,
        "mutual_information": (predictive - expected).clamp_min(0),
        "disagreement": disagreement,
    }
