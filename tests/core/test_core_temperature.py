"""Temperature and duo fits: optimality of `converged`, step-for-step `paper-exact`."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from published_fit import published_duo as _published_duo  # tests/published_fit.py
from published_fit import published_single as _published_single

from benchmark.core.temperature import DuoFit, FitError, TemperatureFit, fit_duo, fit_temperature
from benchmark.core.validation import InputError


def _logits(seed, n=800, c=12, signal=2.5, scale=2.0, labels=None):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g) if labels is None else labels
    n = y.shape[0]
    z = torch.randn(n, c, generator=g)
    z[torch.arange(n), y] += signal * torch.rand(n, generator=g) * 2
    return (z * scale).float(), y


def _nll64(weights, logits, labels):
    """Independent float64 NLL of softmax(sum_j w_j z_j)."""
    s = sum(w * z.double() for w, z in zip(weights, logits))
    return F.cross_entropy(s, labels).item()


def _grad64(weights, logits, labels):
    w = torch.tensor(weights, dtype=torch.float64, requires_grad=True)
    s = sum(w[j] * z.double() for j, z in enumerate(logits))
    F.cross_entropy(s, labels).backward()
    return w.grad


def test_converged_single_is_the_optimum():
    z, y = _logits(0)
    fit = fit_temperature(z, y)
    assert isinstance(fit, TemperatureFit) and fit.mode == "converged"
    w = 1.0 / fit.temperature
    assert _grad64([w], [z], y).abs().max() < 1e-6
    assert fit.nll == pytest.approx(_nll64([w], [z], y), abs=1e-12)
    grid = torch.cat([torch.arange(0.05, 5.05, 0.05), torch.linspace(0.9, 1.1, 201) * fit.temperature])
    assert min(_nll64([1 / t], [z], y) for t in grid.tolist()) >= fit.nll - 1e-12


def test_converged_duo_is_the_global_optimum():
    z1, y = _logits(1)
    z2, _ = _logits(2, labels=y, signal=1.5, scale=0.7)
    fit = fit_duo(z1, z2, y)
    assert isinstance(fit, DuoFit) and fit.mode == "converged"
    assert fit.w_base == pytest.approx(1 / (2 * fit.t_base)) and fit.w_side == pytest.approx(1 / (2 * fit.t_side))
    assert _grad64([fit.w_base, fit.w_side], [z1, z2], y).abs().max() < 1e-6
    assert fit.nll == pytest.approx(_nll64([fit.w_base, fit.w_side], [z1, z2], y), abs=1e-12)
    grid = torch.arange(0.05, 5.05, 0.2).tolist()
    best_grid = min(_nll64([1 / (2 * a), 1 / (2 * b)], [z1, z2], y) for a in grid for b in grid)
    assert best_grid >= fit.nll - 1e-12
    for dw in ([1e-3, 0], [0, 1e-3], [-1e-3, 0], [0, -1e-3], [1e-3, -1e-3]):  # local check around the optimum
        assert _nll64([fit.w_base + dw[0], fit.w_side + dw[1]], [z1, z2], y) >= fit.nll - 1e-12


def test_useless_sidekick_gets_near_zero_weight():
    z1, y = _logits(3, n=3000, c=10)
    noise = torch.randn(z1.shape, generator=torch.Generator().manual_seed(4)) * 3
    fit = fit_duo(z1, noise, y)
    single = fit_temperature(z1, y)
    assert abs(fit.w_side) < 0.02 * fit.w_base
    assert fit.nll <= single.nll + 1e-12
    assert fit.w_base == pytest.approx(1 / single.temperature, rel=0.05)


def test_identical_members_split_the_single_weight():
    z, y = _logits(5)
    fit = fit_duo(z, z, y)  # singular Hessian: any split of the weight is optimal
    assert fit.w_base + fit.w_side == pytest.approx(1 / fit_temperature(z, y).temperature, rel=1e-6)


def test_separable_validation_set_has_no_finite_optimum():
    y = torch.arange(50) % 5
    z = torch.zeros(50, 5)
    z[torch.arange(50), y] = 3.0  # every prediction correct with a margin
    with pytest.raises(FitError, match="no minimum at a finite temperature"):
        fit_temperature(z, y)


def test_paper_exact_single_follows_the_published_loop():
    z, y = _logits(6, n=400, c=8, scale=0.4)
    grid_t, final_t = _published_single(z, y)
    fit = fit_temperature(z, y, mode="paper-exact")
    assert fit.mode == "paper-exact"
    assert fit.temperature == pytest.approx(final_t, rel=1e-5)
    assert fit.temperature != grid_t  # the refinement moved away from the grid point
    assert fit.nll == pytest.approx(_nll64([1 / fit.temperature], [z], y), abs=1e-12)


def test_paper_exact_duo_follows_the_published_loop_and_is_not_converged():
    z1, y = _logits(7, n=400, c=8, scale=0.5)
    z2, _ = _logits(8, c=8, labels=y, scale=0.3)
    (grid_b, grid_s), (tb, ts) = _published_duo(z1, z2, y)
    fit = fit_duo(z1, z2, y, mode="paper-exact")
    assert (fit.t_base, fit.t_side) == pytest.approx((tb, ts), rel=1e-5)  # see test_core_paper_fit.py
    assert (fit.w_base, fit.w_side) == (1 / (2 * fit.t_base), 1 / (2 * fit.t_side))
    assert (tb, ts) != (grid_b, grid_s)
    converged = fit_duo(z1, z2, y)
    assert converged.nll <= fit.nll + 1e-12


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: fit_temperature(torch.randn(5, 3), torch.tensor([0, 1, 2, 0, 1]), mode="exact"),
            "mode: unknown value",
        ),
        (lambda: fit_temperature(torch.randn(5, 3), torch.tensor([0, 1, 2, 0, 3])), "labels: values must be in [0, 3)"),
        (lambda: fit_temperature(torch.full((2, 3), float("nan")), torch.tensor([0, 1])), "logits: contains NaN"),
        (
            lambda: fit_duo(torch.randn(5, 3), torch.randn(4, 3), torch.zeros(5, dtype=torch.long)),
            "different number of samples N",
        ),
        (
            lambda: fit_duo(torch.randn(5, 3), torch.randn(5, 4), torch.zeros(5, dtype=torch.long)),
            "different number of classes C",
        ),
        (lambda: fit_duo(torch.randn(5, 3), torch.randn(5, 3), torch.zeros(4, dtype=torch.long)), "labels: has N=4"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(InputError) as e:
        call()
    assert message in str(e.value)
