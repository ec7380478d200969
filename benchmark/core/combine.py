"""Prediction records and the methods that build them from cached logits.

Every method yields a :class:`Prediction`: probabilities, predicted class and a
confidence score (higher = more confident). Metrics, bootstrap and reports only
ever see prediction records.

Asymmetric Duo (base ``z_b``, sidekick ``z_s``; ``p_duo = softmax(w_b z_b + w_s z_s)``):

* ``weighted``: weights from :func:`~benchmark.core.temperature.fit_duo`,
  prediction ``argmax p_duo``;
* ``unweighted``: each member temperature-scaled alone,
  ``p = softmax((z_b / T_b + z_s / T_s) / 2)``, prediction ``argmax p``;
* ``uq_only``: ``p_duo`` of the fitted duo, prediction ``argmax z_b``.

Confidence ``"max"`` is ``max_c p``. ``"published"`` is the score the published
evaluation code used for that variant: ``p_duo[argmax z_b]`` for ``weighted`` and
``uq_only``, and ``max_c p`` for ``unweighted``.

The duo's mixture weights (:func:`duo_weights`) are defined here and its
probabilities are computed by :mod:`benchmark.core.streaming` (the evaluate
stage's own code), so a duo built here equals the evaluate stage's duo to the bit.
Single models and ensembles use this module's explicit ``exp / sum`` softmax
(the evaluate stage's method and ensemble rows); ``torch.softmax`` differs from it
in the last float bit, so switching would change published numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import isfinite
from typing import TYPE_CHECKING

import numpy as np
import torch

from benchmark.core.streaming import mixture_probs
from benchmark.core.validation import InputError, TensorLike, as_float_matrix, as_logits, check_choice, check_same_shape

if TYPE_CHECKING:
    from benchmark.core.temperature import DuoFit

DUO_VARIANTS = ("weighted", "unweighted", "uq_only")
CONFIDENCES = ("max", "published")
ENSEMBLE_MODES = ("probs", "logits")
_ROWS = 256  # rows per chunk: a few hundred KB per (rows, C) block stays in cache


@dataclass(frozen=True)
class Prediction:
    """The prediction record every method yields."""

    probs: torch.Tensor  # (N, C) float, rows sum to 1
    prediction: torch.Tensor  # (N,) int64 predicted class
    confidence: torch.Tensor  # (N,) float, higher = more confident

    def __post_init__(self) -> None:
        p, y, c = self.probs, self.prediction, self.confidence
        if p.ndim != 2 or y.shape != p.shape[:1] or c.shape != p.shape[:1]:
            raise InputError(
                f"Prediction: need probs (N, C), prediction (N,), confidence (N,); got {tuple(p.shape)}, "
                f"{tuple(y.shape)}, {tuple(c.shape)}"
            )


def _check_temperature(t: float, name: str) -> float:
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not isfinite(t) or t == 0:
        raise InputError(f"{name}: must be a finite non-zero number, got {t!r}")
    return float(t)


def _softmax_(block: torch.Tensor) -> None:
    """In-place row softmax ``exp(z - max z) / sum exp(z - max z)``."""
    block.sub_(block.amax(1, keepdim=True)).exp_()
    block.div_(block.sum(1, keepdim=True))


def _rowwise(
    like: torch.Tensor, fill: Callable[[slice, torch.Tensor], None]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Build probabilities in cache-sized row chunks, with a single (N, C) allocation.

    ``fill(rows, out)`` writes the probabilities of ``rows`` into ``out``. Returns
    ``(probs, max p, argmax p)``.
    """
    n, c = like.shape
    probs = torch.empty(n, c, dtype=like.dtype)
    conf, pred = torch.empty(n, dtype=like.dtype), torch.empty(n, dtype=torch.int64)
    for s in range(0, n, _ROWS):
        rows = slice(s, s + _ROWS)
        fill(rows, probs[rows])
        torch.max(probs[rows], 1, out=(conf[rows], pred[rows]))
    return probs, conf, pred


def _softmax_of_sum(terms: list[tuple[torch.Tensor, float]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``p = softmax(sum_j w_j z_j)`` for ``terms = [(z_j, w_j), ...]``, row-chunked (see :func:`_rowwise`)."""

    def fill(rows: slice, out: torch.Tensor) -> None:
        torch.mul(terms[0][0][rows], terms[0][1], out=out)
        for z, w in terms[1:]:
            out.add_(z[rows], alpha=w)
        _softmax_(out)

    return _rowwise(terms[0][0], fill)


def single_prediction(logits: TensorLike, temperature: float = 1.0) -> Prediction:
    """``p = softmax(logits / T)``; prediction ``argmax p``, confidence ``max p``."""
    z = as_logits(logits, "logits")
    t = _check_temperature(temperature, "temperature")
    probs, conf, pred = _softmax_of_sum([(z, 1.0 / t)])
    return Prediction(probs=probs, prediction=pred, confidence=conf)


def duo_weights(
    variant: str, *, fit: DuoFit | None = None, single_temperatures: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The mixture weights ``(w_b, w_s)`` of a duo variant: the fitted ``(fit.w_base, fit.w_side)``
    for ``weighted`` and ``uq_only``, ``(1 / (2 T_base), 1 / (2 T_side))`` for ``unweighted``."""
    check_choice(variant, "variant", DUO_VARIANTS)
    if variant == "unweighted":
        if single_temperatures is None or len(single_temperatures) != 2:
            raise InputError("single_temperatures: the unweighted duo needs (T_base, T_side), each fitted alone")
        tb = _check_temperature(single_temperatures[0], "single_temperatures[0]")
        ts = _check_temperature(single_temperatures[1], "single_temperatures[1]")
        return 1 / (2 * tb), 1 / (2 * ts)
    if fit is None:
        raise InputError(f"fit: the {variant} duo needs a DuoFit (fit_duo on validation logits)")
    for name in ("w_base", "w_side"):
        if not isfinite(getattr(fit, name)):
            raise InputError(f"fit.{name}: must be finite, got {getattr(fit, name)!r}")
    return fit.w_base, fit.w_side


def duo_predicts_base(variant: str) -> bool:
    """Whether the duo variant predicts the base model's class (``uq_only``) rather than ``argmax p_duo``."""
    return variant == "uq_only"


def duo_prediction(
    base_logits: TensorLike,
    side_logits: TensorLike,
    *,
    variant: str,
    fit: DuoFit | None = None,
    single_temperatures: tuple[float, float] | None = None,
    confidence: str = "max",
) -> Prediction:
    """Asymmetric Duo prediction (see the module docstring for the variants).

    ``fit`` (a :class:`~benchmark.core.temperature.DuoFit`) is needed for
    ``weighted`` and ``uq_only``; ``single_temperatures = (T_base, T_side)``,
    each fitted on its own, for ``unweighted``.
    """
    check_choice(variant, "variant", DUO_VARIANTS)
    check_choice(confidence, "confidence", CONFIDENCES)
    zb = as_logits(base_logits, "base_logits")
    zs = as_logits(side_logits, "side_logits")
    check_same_shape(zb, zs, "base_logits", "side_logits")
    probs, conf, pred = mixture_probs([zb, zs], duo_weights(variant, fit=fit, single_temperatures=single_temperatures))
    if variant == "unweighted":
        return Prediction(probs=probs, prediction=pred, confidence=conf)
    base_pred = zb.argmax(1)
    if confidence == "published":
        conf = probs.gather(1, base_pred[:, None])[:, 0]
    return Prediction(probs=probs, prediction=base_pred if duo_predicts_base(variant) else pred, confidence=conf)


def ensemble_prediction(member_logits: Sequence[torch.Tensor] | torch.Tensor, *, mode: str = "probs") -> Prediction:
    """Ensemble of M members' logits ((M, N, C) or a sequence of (N, C)).

    ``mode="probs"``: ``p = mean_m softmax(z_m)``; ``mode="logits"``:
    ``p = softmax(mean_m z_m)``. Prediction ``argmax p``, confidence ``max p``.
    """
    check_choice(mode, "mode", ENSEMBLE_MODES)
    if isinstance(member_logits, (torch.Tensor, np.ndarray)):
        members = list(as_float_matrix(member_logits, "member_logits", ndim=3))
    else:
        members = [as_logits(m, f"member_logits[{i}]") for i, m in enumerate(member_logits)]
    if not members:
        raise InputError("member_logits: needs at least one member")
    for i, m in enumerate(members[1:], 1):
        check_same_shape(members[0], m, "member_logits[0]", f"member_logits[{i}]")
    if mode == "logits":
        probs, conf, pred = _softmax_of_sum([(m, 1.0 / len(members)) for m in members])
        return Prediction(probs=probs, prediction=pred, confidence=conf)

    def fill(rows: slice, out: torch.Tensor) -> None:
        out.zero_()
        for m in members:
            block = m[rows].clone()
            _softmax_(block)
            out.add_(block)
        out.div_(len(members))

    probs, conf, pred = _rowwise(members[0], fill)
    return Prediction(probs=probs, prediction=pred, confidence=conf)
