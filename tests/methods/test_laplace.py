"""Last-layer Laplace: Hessians against autograd/dense algebra, MAP limit, prior selection, FLOPs."""

import math

import pytest
import timm
import torch
import torch.nn.functional as F
from torch import nn

from benchmark.methods.laplace import LaplaceHead, LastLayerLaplace, fit_hessian, predictive_nll, select_prior_precision
from benchmark.methods.last_layer import penultimate_batched
from benchmark.models.cost import count_flops

D, C, N = 3, 4, 50


@pytest.fixture(scope="module")
def problem():
    g = torch.Generator().manual_seed(0)
    f = torch.randn(N, D, generator=g, dtype=torch.float64)
    w = torch.randn(C, D, generator=g, dtype=torch.float64)
    b = torch.randn(C, generator=g, dtype=torch.float64)
    y = torch.randint(0, C, (N,), generator=g)
    return f, y, w, b


def _jacobians(f):
    """d z_c / d theta[c', i] = [c == c'] f~_i, as (N, C, C*(D+1)) in theta's (C, D+1) row-major order."""
    ft = torch.cat([f, torch.ones(len(f), 1, dtype=f.dtype)], 1)
    return torch.einsum("ce,ni->ncei", torch.eye(C, dtype=f.dtype), ft).reshape(len(f), C, C * (D + 1))


def _lambdas(f, w, b):
    p = torch.softmax(f @ w.T + b, 1)
    return torch.diag_embed(p) - p[:, :, None] * p[:, None, :]


def test_diag_hessian_is_the_diagonal_of_the_exact_nll_hessian(problem):
    f, y, w, b = problem

    def nll(theta):
        return F.cross_entropy(f @ theta[:, :D].T + theta[:, D], y, reduction="sum")

    exact = torch.autograd.functional.hessian(nll, torch.cat([w, b[:, None]], 1))  # (C, D+1, C, D+1)
    h = fit_hessian(f, y, w, b, "diag")
    assert torch.allclose(h.diag, torch.einsum("cici->ci", exact), rtol=1e-10, atol=1e-12)


def test_kron_factors_are_feature_and_output_curvature(problem):
    f, y, w, b = problem
    h = fit_hessian(f, y, w, b, "kron")
    ft = torch.cat([f, torch.ones(N, 1, dtype=f.dtype)], 1)
    a = h.a_vecs @ torch.diag(h.a_vals) @ h.a_vecs.T
    g = h.g_vecs @ torch.diag(h.g_vals) @ h.g_vecs.T
    assert torch.allclose(a, sum(torch.outer(v, v) for v in ft), atol=1e-9)
    assert torch.allclose(g, _lambdas(f, w, b).mean(0), atol=1e-12)


@pytest.mark.parametrize("kind", ["diag", "kron"])
def test_probit_logit_variance_matches_dense_posterior(problem, kind):
    f, y, w, b = problem
    delta = 0.7
    h = fit_hessian(f, y, w, b, kind)
    if kind == "diag":
        cov = torch.diag(1.0 / (h.diag.reshape(-1) + delta))
    else:  # KFAC precision sum_n (f~ f~^T) (x) mean_n Lambda_n, in theta's (c, i) order: G[c, c'] A[i, i']
        ft = torch.cat([f, torch.ones(N, 1, dtype=f.dtype)], 1)
        prec = torch.einsum("ce,ij->ciej", _lambdas(f, w, b).mean(0), ft.T @ ft).reshape(C * (D + 1), -1)
        cov = torch.linalg.inv(prec + delta * torch.eye(C * (D + 1), dtype=f.dtype))
    jac = _jacobians(f)
    dense_var = torch.einsum("ncp,pq,ncq->nc", jac, cov, jac)
    head = LaplaceHead(h, w.float(), b.float(), delta)
    assert torch.allclose(head.logit_variance(f.float()).double(), dense_var, rtol=1e-4, atol=1e-6)
    z = f @ w.T + b
    expected = torch.softmax(z / torch.sqrt(1 + math.pi / 8 * dense_var), 1)  # extended probit
    assert torch.allclose(torch.softmax(head(f.float()).double(), 1), expected, atol=1e-5)


@pytest.mark.parametrize("kind", ["diag", "kron"])
def test_mc_heads_are_samples_of_the_posterior(problem, kind):
    f, y, w, b = problem
    delta, m = 2.0, 20000
    h = fit_hessian(f, y, w, b, kind)
    head = LaplaceHead(h, w.float(), b.float(), delta, predictive="mc", samples=m, seed=0)
    theta = torch.cat([head.heads_wt.transpose(1, 2), head.heads_b.transpose(1, 2)], 2).double().reshape(m, -1)
    if kind == "diag":
        var = 1.0 / (h.diag.reshape(-1) + delta)
        assert torch.allclose(theta.var(0), var, rtol=0.05)
    else:
        ft = torch.cat([f, torch.ones(N, 1, dtype=f.dtype)], 1)
        prec = torch.einsum("ce,ij->ciej", _lambdas(f, w, b).mean(0), ft.T @ ft).reshape(C * (D + 1), -1)
        cov = torch.linalg.inv(prec + delta * torch.eye(C * (D + 1), dtype=f.dtype))
        assert torch.allclose(torch.cov(theta.T), cov, atol=0.05 * cov.diagonal().max())
    assert torch.allclose(
        theta.mean(0), torch.cat([w, b[:, None]], 1).reshape(-1), atol=5 * theta.std(0).max() / math.sqrt(m)
    )


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    model = timm.create_model("test_efficientnet", num_classes=3).eval()
    x = torch.randn(40, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    f = penultimate_batched(model, x)
    y = model.classifier(f).argmax(1)
    return model, f, y


@pytest.mark.parametrize("kind", ["diag", "kron"])
@pytest.mark.parametrize("predictive", ["probit", "mc"])
def test_infinite_prior_precision_is_the_map_model(tiny, kind, predictive):
    model, f, y = tiny
    h = fit_hessian(f, y, model.classifier.weight.detach(), model.classifier.bias.detach(), kind)
    la = LastLayerLaplace(
        model,
        LaplaceHead(h, model.classifier.weight, model.classifier.bias, math.inf, predictive=predictive, samples=3),
    )
    x = torch.randn(5, 3, 32, 32)
    with torch.no_grad():
        out, ref = la(x), model(x)
    if predictive == "probit":
        assert torch.equal(out, ref)
    else:
        assert out.shape == (3, 5, 3)
        for member in out:
            assert torch.allclose(member, ref, atol=1e-5)
    # a finite prior spreads the posterior: the probit predictive is less confident than the MAP
    soft = LastLayerLaplace(model, LaplaceHead(h, model.classifier.weight, model.classifier.bias, 1e-3))
    with torch.no_grad():
        assert (soft(x).softmax(1).max(1).values < ref.softmax(1).max(1).values).all()


@pytest.mark.parametrize("predictive", ["probit", "mc"])
def test_prior_precision_is_the_grid_argmin_of_validation_nll(tiny, predictive):
    model, f, y = tiny
    w, b = model.classifier.weight.detach(), model.classifier.bias.detach()
    h = fit_hessian(f[:30], y[:30], w, b, "kron")
    yv = torch.randint(0, 3, (10,), generator=torch.Generator().manual_seed(2))  # noisy labels: a finite prior helps
    grid = [1e-3, 1e-1, 10.0, 1e3, math.inf]
    best, nll = select_prior_precision(h, w, b, f[30:], yv, grid, predictive=predictive, samples=8, seed=0)
    for d in grid:
        z = LaplaceHead(h, w, b, d, predictive=predictive, samples=8, seed=0)(f[30:])
        probs = z.softmax(-1).mean(0) if z.ndim == 3 else z.softmax(-1)
        assert nll[d] == pytest.approx(float(-probs[torch.arange(10), yv].log().mean()), rel=1e-5)
    assert best == min(grid, key=lambda d: nll[d])
    assert nll[math.inf] == pytest.approx(float(F.cross_entropy(F.linear(f[30:], w, b), yv)), rel=1e-5)


def test_predictive_nll_of_one_member_is_cross_entropy():
    z, y = torch.randn(7, 4), torch.randint(0, 4, (7,))
    assert predictive_nll(z, y) == pytest.approx(float(F.cross_entropy(z, y)), rel=1e-6)
    assert predictive_nll(torch.stack([z, z]), y) == pytest.approx(float(F.cross_entropy(z, y)), rel=1e-6)


@pytest.mark.parametrize("kind", ["diag", "kron"])
@pytest.mark.parametrize("predictive", ["probit", "mc"])
def test_flops_are_one_forward_plus_the_head_formula(tiny, kind, predictive):
    model, f, y = tiny
    d, c, m = model.num_features, 3, 4
    h = fit_hessian(f, y, model.classifier.weight.detach(), model.classifier.bias.detach(), kind)
    head = LaplaceHead(h, model.classifier.weight, model.classifier.bias, 1.0, predictive=predictive, samples=m)
    formula = {("diag", "probit"): c * d, ("kron", "probit"): d * (d + 1) + (d + 1) * c + c * c}.get(
        (kind, predictive), (m - 1) * c * d
    )
    assert head.extra_macs() == formula
    counted = count_flops(LastLayerLaplace(model, head), 32)
    assert counted == pytest.approx(count_flops(model, 32) + formula / 1e9, abs=1e-12)


def test_laplace_needs_a_linear_last_layer():
    with pytest.raises(ValueError, match=r"last-layer Laplace does not apply to model 'plain' \(Sequential\)"):
        LastLayerLaplace(nn.Sequential(nn.Flatten(), nn.Linear(12, 3)), None, model_name="plain")


def test_bad_options_are_named(problem):
    f, y, w, b = problem
    h = fit_hessian(f, y, w, b, "diag")
    with pytest.raises(ValueError, match="hessian must be one of"):
        fit_hessian(f, y, w, b, "full")
    with pytest.raises(ValueError, match="predictive must be one of"):
        LaplaceHead(h, w, b, 1.0, predictive="bma")
    with pytest.raises(ValueError, match="the mc predictive needs samples >= 1"):
        LaplaceHead(h, w, b, 1.0, predictive="mc", samples=0)
    for bad in (0.0, -1.0, float("nan"), "1"):
        with pytest.raises(ValueError, match="prior precision must be a positive number"):
            LaplaceHead(h, w, b, bad)
