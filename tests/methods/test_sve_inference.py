"""SVE inference: cached member weights, the cost model that picks them, and their invalidation."""

from __future__ import annotations

import copy
import math

import pytest
import timm
import torch
import torch.nn.functional as F
from test_sve import reference_member_weight
from torch import nn

from benchmark.core.members import member_cross_entropy
from benchmark.methods.sve import SingularValueEnsemble
from benchmark.methods.sve_layers import WEIGHT_READ_COST, SVELayer, SVELinear

torch.set_num_threads(1)


def small_vit(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return timm.create_model("test_vit", pretrained=False, img_size=32)


def expected_linear(layer: SVELinear, weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Member-major ``x`` (M B, ..., in) through each member's dense formula, from the layer's current parameters."""
    sv, bias = layer.singular_values.detach(), layer.bias.detach()
    return torch.cat(
        [
            F.linear(xm, reference_member_weight(weight, sv[m], layer.chunks).to(x.dtype), bias[m])
            for m, xm in enumerate(x.chunk(layer.members))
        ]
    )


def count_cache_reads(monkeypatch) -> list[int]:
    calls = [0]
    real = SVELayer.cached_weights

    def spy(self):
        calls[0] += 1
        return real(self)

    monkeypatch.setattr(SVELayer, "cached_weights", spy)
    return calls


def test_auto_inference_uses_cached_weights_where_the_cost_model_says(monkeypatch):
    g = torch.Generator().manual_seed(9)
    torch.manual_seed(9)
    members, lin = 3, nn.Linear(12, 18)
    layer = SVELinear(lin.weight, lin.bias, torch.randn(members, 12, generator=g) * 0.3).eval()
    # d = 12 * 18 = 216 multiply-adds per row dense; factored a = r (in + out) = 12 * 30 = 360; the cache pays
    # iff M T (a - d) > c (M d - a), i.e. T > c (3 * 216 - 360) / (3 * 144) = c * 2 / 3
    threshold = math.floor(WEIGHT_READ_COST * 2 / 3)
    assert not layer.cache_pays(threshold) and layer.cache_pays(threshold + 1)
    calls = count_cache_reads(monkeypatch)
    for rows, cached in ((threshold, 0), (threshold + 1, 1)):
        x = torch.randn(members, rows, 12, generator=g)
        with torch.no_grad():
            y = layer(x)
        assert calls[0] == cached
        torch.testing.assert_close(y, expected_linear(layer, lin.weight.detach(), x), atol=1e-5, rtol=1e-4)
    layer(x).sum().backward()  # gradients flow: factored, never the cache
    assert calls[0] == 1 and layer.singular_values.grad is not None


def _step(layer, x):
    opt = torch.optim.AdamW(layer.parameters(), lr=0.1)
    layer(x).square().sum().backward()  # gradients flow: the uncached path
    opt.step()


def _load(layer, x):
    state = {k: v * 1.5 if k in ("singular_values", "bias") else v for k, v in layer.state_dict().items()}
    layer.load_state_dict(state)


def _data_then_clear(layer, x):
    layer.singular_values.data.mul_(1.5)  # .data bypasses the version counter: clear by hand
    layer.clear_cache()


def _data_then_eval(layer, x):
    layer.singular_values.data.mul_(1.5)
    layer.eval()


def _in_place(layer, x):
    with torch.no_grad():
        layer.singular_values[1].mul_(-1)


CHANGES = {
    "optimizer-step": _step,
    "load_state_dict": _load,
    "in-place": _in_place,
    "data-then-clear_cache": _data_then_clear,
    "data-then-eval": _data_then_eval,
    "double": lambda layer, x: layer.double(),
}  # a stale float32 cache would fail on float64 input


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("chunks", [1, 3])
def test_cached_weights_follow_parameter_changes(change, chunks):
    g = torch.Generator().manual_seed(10)
    torch.manual_seed(10)
    lin = nn.Linear(12, 18)
    layer = SVELinear(
        lin.weight,
        lin.bias,
        torch.randn(2, chunks * min(18 // chunks, 12), generator=g) * 0.3,
        chunks=chunks,
        mode="materialized",
    ).eval()
    x = torch.randn(4, 5, 12, generator=g)
    with torch.no_grad():
        before = layer(x)  # builds the cache
    CHANGES[change](layer, x)
    if change == "double":
        x = x.double()
    with torch.no_grad():
        after = layer(x)
    expected = expected_linear(layer, lin.weight.detach(), x)
    if change != "double":
        assert (expected - before).abs().max() > 1e-2  # the values change: a stale cache would fail below
    torch.testing.assert_close(after, expected, atol=1e-5, rtol=1e-4)


def test_ensemble_inference_after_an_optimizer_step_matches_exported_members(monkeypatch):
    sve = SingularValueEnsemble(
        small_vit(), members=2, num_classes=4, pretrained=False, allow_random_init=True, sigma_init=0.1
    ).eval()  # stays in eval mode: only the version counters flag the change
    g = torch.Generator().manual_seed(11)
    x, y = torch.randn(3, 3, 32, 32, generator=g), torch.randint(0, 4, (3,), generator=g)
    calls = count_cache_reads(monkeypatch)
    with torch.no_grad():
        before = sve(x)
    assert calls[0] > 0
    opt = torch.optim.AdamW(sve.trainable_parameters(), lr=0.05)
    member_cross_entropy(sve(x), y).backward()
    opt.step()
    with torch.no_grad():
        after = sve(x)
        for m in range(2):
            expected = sve.export_member(m)(x)
            assert (expected - before[m]).abs().max() > 1e-2
            torch.testing.assert_close(after[m], expected, atol=1e-4, rtol=1e-4)


def test_auto_mode_trains_exactly_like_factored():
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(12))
    outs = []
    for mode in ("auto", "factored"):
        sve = SingularValueEnsemble(
            small_vit(), members=2, num_classes=4, pretrained=False, allow_random_init=True, sigma_init=0.1, mode=mode
        ).train()
        out = sve(x)
        out.square().sum().backward()
        outs.append((out, [p.grad for p in sve.trainable_parameters()]))
    assert torch.equal(outs[0][0], outs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(outs[0][1], outs[1][1]))


def test_input_gradient_through_cache_built_in_inference_mode(monkeypatch):
    sve = (
        SingularValueEnsemble(
            small_vit(),
            members=2,
            num_classes=4,
            pretrained=False,
            allow_random_init=True,
            sigma_init=0.1,
            mode="materialized",
        )
        .eval()
        .requires_grad_(False)
    )
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(13))
    calls = count_cache_reads(monkeypatch)
    with torch.inference_mode():
        sve(x)
    xg = x.clone().requires_grad_()
    sve(xg).square().sum().backward()  # frozen parameters: the cached weights, now saved for backward
    assert calls[0] == 2 * len(sve.sve_layers())
    ref = copy.deepcopy(sve)
    for layer in ref.sve_layers():
        layer.mode = "factored"
    xr = x.clone().requires_grad_()
    ref(xr).square().sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad, atol=1e-4, rtol=1e-3)
