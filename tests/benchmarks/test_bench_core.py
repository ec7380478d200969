"""Numeric-core benchmarks at ImageNet size (CPU, the threads set by tests/conftest.py: 2).

* ``test_bench_metrics``: every metric (``compute_metrics``) of 47,500 x 1,000
  probabilities, from validation of the input to the last metric;
* ``test_bench_duo_fit``: the converged duo fit on 2,500 x 1,000 validation logits;
* ``test_bench_pair_evaluation``: one full pair evaluation: converged duo fit on
  val (2,500 x 1,000), the weighted duo's prediction on test (47,500 x 1,000)
  and every metric with ``n_bootstrap`` = 0 or 1,000 percentile-bootstrap
  resamples. Targets: <= 0.5 s without the bootstrap, <= 2 s more with it.

Run for real with ``pytest --benchmark-enable tests/benchmarks/test_bench_core.py``.
The logits are synthetic, ImageNet-like: 1,000 classes, about 80% top-1
accuracy, the two members' errors correlated.
"""

from __future__ import annotations

import pytest
import torch

from benchmark.core.combine import duo_prediction
from benchmark.core.evaluate import evaluate
from benchmark.core.metrics import compute_metrics
from benchmark.core.temperature import fit_duo

CLASSES, N_VAL, N_TEST = 1000, 2500, 47500


def _split(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    shared = torch.randn(n, CLASSES, generator=g)  # correlated errors of the two members
    rows = torch.arange(n)

    def member(strength, scale):
        z = 0.6 * shared + 0.8 * torch.randn(n, CLASSES, generator=g)
        z[rows, labels] += strength + 1.2 * torch.randn(n, generator=g)
        return (z * scale).contiguous()

    return member(4.2, 2.5), member(3.4, 1.6), labels


@pytest.fixture(scope="module")
def data():
    return {"val": _split(N_VAL, 0), "test": _split(N_TEST, 1)}


def test_bench_metrics(benchmark, data):
    zb, _, y = data["test"]
    probs = torch.softmax(zb, 1)
    res = benchmark(compute_metrics, probs, y)
    benchmark.extra_info["accuracy"] = res["accuracy"]
    assert 0.6 < res["accuracy"] < 0.95


def test_bench_duo_fit(benchmark, data):
    zb, zs, y = data["val"]
    fit = benchmark(fit_duo, zb, zs, y)
    benchmark.extra_info.update(w_base=fit.w_base, w_side=fit.w_side, nll=fit.nll)
    assert fit.w_base > 0 and fit.w_side > 0


@pytest.mark.parametrize("n_bootstrap", [0, 1000])
def test_bench_pair_evaluation(benchmark, data, n_bootstrap):
    (vb, vs, vy), (tb, ts, ty) = data["val"], data["test"]

    def pair():
        fit = fit_duo(vb, vs, vy)
        pred = duo_prediction(tb, ts, variant="weighted", fit=fit)
        return evaluate(pred, ty, n_bootstrap=n_bootstrap, seed=0)

    res = benchmark(pair)
    benchmark.extra_info.update({k: v[0] for k, v in res.items()})
    assert res["accuracy"][0] > 0.6
