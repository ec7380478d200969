"""The fast paper-exact fit against a line-for-line transcription of the published procedure.

Tolerance (stated in benchmark/core/paper_fit.py and the README): the grid point is
identical (first strict minimum in loop order, exact ties included); after LBFGS the
temperatures agree to 1e-5 relative and the NLL at them to 1e-6 relative (measured on
2,500 x 1,000 ImageNet-like logits: 3e-7 on T; up to 3e-6 on small sets whose NLL is flat
beyond the grid, where the published float32 gradient's rounding steers LBFGS), and bit
for bit where a stopping rule of LBFGS was near (the published closure is then used).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from published_fit import published_duo, published_single  # tests/published_fit.py

import benchmark.core.paper_fit as paper_fit
from benchmark.core.paper_fit import grid_argmin, nll_and_grad
from benchmark.core.temperature import fit_duo, fit_temperature

GRID_DUO = torch.arange(0.05, 5.05, 0.2)
GRID_SINGLE = torch.arange(0.05, 5.05, 0.05)


@pytest.fixture(autouse=True)
def one_thread():
    """Small tensors: one thread, so that OpenMP spinning on a busy machine does not dominate."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _nll(z, y, t):
    return F.cross_entropy(z.double() / t, y).item()


def _case(seed):
    """Validation logits of a base and a sidekick; every fifth case has exact ties, every fifth + 1 near-ties."""
    g = torch.Generator().manual_seed(seed)
    n, c = (300 + 37 * seed % 400, 5 + 7 * seed % 40) if seed % 6 else (150, 1000)
    y = torch.randint(0, c, (n,), generator=g)
    scale = (0.3, 1.0, 3.0, 8.0)[seed % 4]
    zb = torch.randn(n, c, generator=g) * scale
    zb[torch.arange(n), y] += 2 * scale * torch.rand(n, generator=g)
    kind = seed % 5
    if kind == 0:
        zs = zb.clone()  # symmetric: NLL(a, b) == NLL(b, a) bit for bit
    elif kind == 1:
        zs = zb * (1 + 1e-7)  # near-ties along a valley of the grid
    elif kind == 2:
        zs = 0.5 * zb + torch.randn(n, c, generator=g)
    else:
        zs = torch.randn(n, c, generator=g) * scale * 0.5
        zs[torch.arange(n), y] += scale * torch.rand(n, generator=g)
    return zb, zs, y


def _published_grid_index(zb, zs, y):
    best, idx = float("inf"), None
    for i, tb in enumerate(GRID_DUO):
        for j, ts in enumerate(GRID_DUO):
            nll = F.cross_entropy((zb / tb + zs / ts) / 2, y).item()
            if nll < best:
                best, idx = nll, i * len(GRID_DUO) + j
    return idx


@pytest.mark.parametrize("seed", [*range(12), 32])
def test_duo_grid_point_and_trajectory_match_the_published_code(seed):
    zb, zs, y = _case(seed)
    g = len(GRID_DUO)
    published = lambda i: F.cross_entropy((zb / GRID_DUO[i // g] + zs / GRID_DUO[i % g]) / 2, y).item()  # noqa: E731
    assert grid_argmin([zb, zs], y, torch.cartesian_prod(GRID_DUO, GRID_DUO), 2, published) == _published_grid_index(
        zb, zs, y
    )
    _, (tb, ts) = published_duo(zb, zs, y)
    fit = fit_duo(zb, zs, y, mode="paper-exact")
    assert fit.t_base == pytest.approx(tb, rel=1e-5) and fit.t_side == pytest.approx(ts, rel=1e-5)
    nll = lambda a, b: F.cross_entropy((zb.double() / a + zs.double() / b) / 2, y).item()  # noqa: E731
    assert nll(fit.t_base, fit.t_side) == pytest.approx(nll(tb, ts), rel=1e-6)


@pytest.mark.parametrize("seed", range(0, 20, 3))
def test_single_grid_point_and_trajectory_match_the_published_code(seed):
    zb, _, y = _case(seed)
    grid_t, final_t = published_single(zb, y)
    i = grid_argmin([zb], y, GRID_SINGLE[:, None], 1, lambda i: F.cross_entropy(zb / GRID_SINGLE[i].item(), y).item())
    assert GRID_SINGLE[i].item() == grid_t
    t = fit_temperature(zb, y, mode="paper-exact").temperature
    assert t == pytest.approx(final_t, rel=1e-5) and _nll(zb, y, t) == pytest.approx(_nll(zb, y, final_t), rel=1e-6)


def test_identical_members_take_the_first_of_tied_grid_points():
    zb, zs, y = _case(5)
    assert torch.equal(zb, zs)
    i = _published_grid_index(zb, zs, y)
    tb, ts = GRID_DUO[i // 25], GRID_DUO[i % 25]
    twin = F.cross_entropy((zb / ts + zs / tb) / 2, y).item()
    assert twin == F.cross_entropy((zb / tb + zs / ts) / 2, y).item()  # an exact tie in the grid...
    fit = fit_duo(zb, zs, y, mode="paper-exact")
    (gb, gs), (pb, ps) = published_duo(zb, zs, y)
    assert (gb, gs) == (tb.item(), ts.item()) and gb <= gs  # ...resolved as the loop does: first in loop order
    assert (fit.t_base, fit.t_side) == pytest.approx((pb, ps), rel=1e-5)


def test_near_a_stopping_rule_the_published_closure_decides(monkeypatch):
    zb, zs, y = _case(3)
    monkeypatch.setattr(paper_fit, "_near_a_stopping_rule", lambda trace: True)
    _, (tb, ts) = published_duo(zb, zs, y)
    fit = fit_duo(zb, zs, y, mode="paper-exact")
    assert (fit.t_base, fit.t_side) == (tb, ts)  # bit for bit
    _, t = published_single(zb, y)
    assert fit_temperature(zb, y, mode="paper-exact").temperature == t


def test_stopping_rules_that_rounding_could_flip_are_detected():
    near = paper_fit._near_a_stopping_rule
    far = [(1.0, [1.0, 1.0], [0.3, -0.2]), (0.99, [1.01, 0.99], [0.25, -0.15]), (0.98, [1.02, 0.98], [0.2, -0.1])]
    assert not near(far)
    assert near(far[:2] + [(0.99 - 1e-7, [1.02, 0.98], [0.2, -0.1])])  # a loss change of one float32 ulp
    assert near(far[:2] + [(0.98, [1.01 + 1e-7, 0.99], [0.2, -0.1])])  # a step below 1e-6
    assert near(far[:2] + [(0.98, [1.02, 0.98], [3e-5, -1e-5])])  # a gradient near 1e-7
    assert near([(1.0, [1.0], [1e-3]), (0.9, [1.0 + 1e-3], [1e-3 + 1e-7])])  # y.s = 1e-10


def test_grid_falls_back_to_the_published_loop_when_an_evaluation_is_not_finite(monkeypatch):
    zb, zs, y = _case(4)
    monkeypatch.setattr(paper_fit, "nll_and_grad", lambda logits, labels, w: (float("inf"), [0.0] * len(w)))
    monkeypatch.setattr(paper_fit, "_near_a_stopping_rule", lambda trace: True)
    _, (tb, ts) = published_duo(zb, zs, y)
    fit = fit_duo(zb, zs, y, mode="paper-exact")
    assert (fit.t_base, fit.t_side) == (tb, ts)


@pytest.mark.parametrize("w", [[1.0], [0.3, 1.7], [2.5, -0.4], [10.0, 10.0]])
def test_nll_and_grad_against_float64_autograd(w):
    zb, zs, y = _case(7)
    logits = [zb, zs][: len(w)]
    f, g = nll_and_grad(logits, y, w)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    ref = F.cross_entropy(sum(wt[j] * z.double() for j, z in enumerate(logits)), y)
    ref.backward()
    assert f == pytest.approx(ref.item(), rel=1e-6)
    assert g == pytest.approx(wt.grad.tolist(), rel=1e-5, abs=1e-7)
