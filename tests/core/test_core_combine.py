"""Prediction records: single, duo variants, ensembles."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmark.core.combine import Prediction, duo_prediction, ensemble_prediction, single_prediction
from benchmark.core.temperature import DuoFit
from benchmark.core.validation import InputError


def _z(seed, n=50, c=6):
    return torch.randn(n, c, generator=torch.Generator().manual_seed(seed)) * 3


FIT = DuoFit(t_base=0.8, t_side=2.5, w_base=1 / 1.6, w_side=1 / 5.0, nll=0.0, mode="converged")


def test_single_prediction():
    z = _z(0)
    p = single_prediction(z, temperature=1.7)
    expected = np.exp(z.numpy() / 1.7)
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(p.probs.numpy(), expected, rtol=1e-5)
    assert torch.equal(p.prediction, torch.as_tensor(expected.argmax(1)))
    np.testing.assert_allclose(p.confidence.numpy(), expected.max(1), rtol=1e-5)
    torch.testing.assert_close(single_prediction(z.numpy()).probs, torch.softmax(z, 1))


def test_duo_weighted_and_confidences():
    zb, zs = _z(1), _z(2)
    manual = torch.softmax((zb / FIT.t_base + zs / FIT.t_side) / 2, 1)
    p = duo_prediction(zb, zs, variant="weighted", fit=FIT)
    torch.testing.assert_close(p.probs, manual)
    assert torch.equal(p.prediction, manual.argmax(1))
    torch.testing.assert_close(p.confidence, manual.max(1).values)
    pub = duo_prediction(zb, zs, variant="weighted", fit=FIT, confidence="published")
    torch.testing.assert_close(pub.confidence, manual[torch.arange(len(zb)), zb.argmax(1)])
    assert torch.equal(pub.prediction, p.prediction)
    assert (pub.confidence <= p.confidence).all() and (pub.confidence < p.confidence).any()


def test_duo_uq_only_keeps_the_base_prediction():
    zb, zs = _z(3), _z(4)
    p = duo_prediction(zb, zs, variant="uq_only", fit=FIT, confidence="published")
    manual = torch.softmax(zb * FIT.w_base + zs * FIT.w_side, 1)
    torch.testing.assert_close(p.probs, manual)
    assert torch.equal(p.prediction, zb.argmax(1))
    torch.testing.assert_close(p.confidence, manual[torch.arange(len(zb)), zb.argmax(1)])
    assert not torch.equal(p.prediction, manual.argmax(1))  # the case distinguishes the variants
    torch.testing.assert_close(duo_prediction(zb, zs, variant="uq_only", fit=FIT).confidence, manual.max(1).values)


def test_duo_unweighted_uses_single_temperatures():
    zb, zs = _z(5), _z(6)
    p = duo_prediction(zb, zs, variant="unweighted", fit=FIT, single_temperatures=(1.3, 0.7))
    manual = torch.softmax((zb / 1.3 + zs / 0.7) / 2, 1)
    torch.testing.assert_close(p.probs, manual)
    torch.testing.assert_close(p.confidence, manual.max(1).values)
    pub = duo_prediction(zb, zs, variant="unweighted", single_temperatures=(1.3, 0.7), confidence="published")
    torch.testing.assert_close(pub.confidence, p.confidence)  # the published code used max p here


@pytest.mark.parametrize("mode", ["probs", "logits"])
def test_ensemble(mode):
    members = torch.stack([_z(s) for s in range(4)])
    p = ensemble_prediction(members, mode=mode)
    if mode == "probs":
        manual = torch.softmax(members, 2).mean(0)
    else:
        manual = torch.softmax(members.mean(0), 1)
    torch.testing.assert_close(p.probs, manual)
    assert torch.equal(p.prediction, manual.argmax(1))
    torch.testing.assert_close(ensemble_prediction(list(members), mode=mode).probs, manual)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: duo_prediction(_z(0), _z(1), variant="weighted"), "fit: the weighted duo needs a DuoFit"),
        (lambda: duo_prediction(_z(0), _z(1), variant="unweighted"), "single_temperatures"),
        (lambda: duo_prediction(_z(0), _z(1), variant="best", fit=FIT), "variant: unknown value"),
        (
            lambda: duo_prediction(_z(0), _z(1), variant="weighted", fit=FIT, confidence="entropy"),
            "confidence: unknown value",
        ),
        (lambda: duo_prediction(_z(0), _z(1, n=40), variant="weighted", fit=FIT), "different number of samples N"),
        (lambda: duo_prediction(_z(0), _z(1, c=5), variant="weighted", fit=FIT), "different number of classes C"),
        (
            lambda: duo_prediction(_z(0), _z(1), variant="unweighted", single_temperatures=(0.0, 1.0)),
            "single_temperatures[0]",
        ),
        (lambda: single_prediction(_z(0), temperature=float("inf")), "temperature: must be a finite"),
        (lambda: single_prediction(torch.full((2, 3), float("inf"))), "logits: contains Inf"),
        (lambda: ensemble_prediction([_z(0), _z(1, c=5)]), "member_logits[0] has shape"),
        (lambda: ensemble_prediction([]), "at least one member"),
        (lambda: ensemble_prediction(_z(0)), "member_logits: must be (M, N, C)"),
        (lambda: Prediction(torch.ones(3, 2) / 2, torch.zeros(2, dtype=torch.long), torch.ones(3)), "Prediction: need"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(InputError) as e:
        call()
    assert message in str(e.value)
