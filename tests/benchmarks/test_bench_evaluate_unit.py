"""The evaluate stage's unit of work at the embedded default's size, in one torch thread.

One base-sidekick duo (:func:`benchmark.methods.duo.duo_unit`): both fits
(converged, paper-exact) on 500 x 10 validation logits, the four duo variants
on test (2,500), shift (1,800) and OOD (1,000) with 1,000 percentile-bootstrap
resamples on test and OOD, and the paired bootstrap against the base; and one
single model (:func:`benchmark.methods.single.single_unit`). The evaluate stage of
the embedded default runs 35 duos and 10 singles (plus ensembles and methods),
one torch thread per worker (``evaluate.workers``).

Measured on the 2-core machine of the embedded default (CPU seconds, loaded):
a duo unit 3.4 s before the stratified OOD bootstrap scored per tie group and
the resamples drawn once per process, 2.0 s after (and 15-35 s at two torch
threads). Run for real with
``pytest --benchmark-enable tests/benchmarks/test_bench_evaluate_unit.py``.
"""

from __future__ import annotations

import pytest
import torch

from benchmark.config.evaluate import EvalConfig
from benchmark.methods.duo import duo_unit
from benchmark.methods.rows import ModelMemo
from benchmark.methods.single import single_unit

CLASSES = 10
SIZES = {"val": 500, "test": 2500, "shift": 1800, "ood": 1000}


def _logits(seed: int, strength: float):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for i, (split, n) in enumerate(SIZES.items()):
        y = torch.randint(0, CLASSES, (n,), generator=torch.Generator().manual_seed(100 + i))
        z = torch.randn(n, CLASSES, generator=g)
        if split != "ood":
            z[torch.arange(n), y] += strength
        out[split] = (z * 1.7, y if split != "ood" else torch.full((n,), -1))
    return out


@pytest.fixture(scope="module")
def members():
    return _logits(0, 2.5), _logits(1, 1.5)


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


CFG = EvalConfig(suite="bench", n_bootstrap=1000, bootstrap_splits=("test", "ood"))


def test_bench_duo_unit(benchmark, members, one_thread):
    lb, ls = members
    rows, paired = benchmark(lambda: duo_unit(CFG, "base", "side", lb, ls, memo=ModelMemo()))
    assert {r["split"] for r in rows} == {"test", "shift", "ood"} and {p["split"] for p in paired} == {"test"}
    assert all(
        r["ci_low"] <= r["value"] <= r["ci_high"] for r in rows if r["split"] == "test" and r["metric"] == "accuracy"
    )


def test_bench_single_unit(benchmark, members, one_thread):
    rows = benchmark(lambda: single_unit(CFG, "base", members[0], memo=ModelMemo()))
    assert len({(r["fit"], r["split"]) for r in rows}) == 2 * 3
