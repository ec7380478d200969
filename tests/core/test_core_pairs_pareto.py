"""Pair enumeration and the Pareto frontier."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.core.pairs import Pair, enumerate_pairs
from benchmark.core.pareto import pareto_front
from benchmark.core.validation import InputError

# GFLOPs from REFERENCE.md (torchvision metadata); params are the torchvision counts
ZOO = [
    {"name": "convnext_base", "gflops": 15.36, "params": 88591464},
    {"name": "convnext_tiny", "gflops": 4.46, "params": 28589128},
    {"name": "resnet50", "gflops": 4.09, "params": 25557032},
    {"name": "efficientnet_b0", "gflops": 0.39, "params": 5288548},
]


def test_every_ordered_pair_with_a_cheaper_sidekick():
    pairs = enumerate_pairs(ZOO)
    assert len(pairs) == 6  # 4 models with distinct GFLOPs: 4 * 3 / 2
    assert all(isinstance(p, Pair) for p in pairs)
    assert [(p.base, p.sidekick) for p in pairs] == sorted((p.base, p.sidekick) for p in pairs)
    rn = next(p for p in pairs if (p.base, p.sidekick) == ("resnet50", "efficientnet_b0"))
    assert rn.balance == pytest.approx(0.39 / 4.09) and round(rn.balance, 4) == 0.0954
    assert rn.gflops == pytest.approx(4.48) and rn.params == 25557032 + 5288548
    assert all(0 < p.balance < 1 for p in pairs)
    assert enumerate_pairs(list(reversed(ZOO))) == pairs


def test_balance_range_and_equal_gflops():
    kept = enumerate_pairs(ZOO, balance_range=(0.05, 0.3))
    assert {(p.base, p.sidekick) for p in kept} == {
        ("resnet50", "efficientnet_b0"),
        ("convnext_tiny", "efficientnet_b0"),
        ("convnext_base", "convnext_tiny"),
        ("convnext_base", "resnet50"),
    }
    assert all(0.05 <= p.balance <= 0.3 for p in kept)
    twins = [{"name": "a", "gflops": 1.0, "params": 1}, {"name": "b", "gflops": 1.0, "params": 2}]
    assert enumerate_pairs(twins) == []


@pytest.mark.parametrize(
    "models, kwargs, message",
    [
        (ZOO + [{"name": "resnet50", "gflops": 1.0, "params": 1}], {}, "duplicate names ['resnet50']"),
        ([{"name": "x", "gflops": 0.0, "params": 1}], {}, "models[0] (x): gflops must be"),
        ([{"name": "x", "gflops": float("nan"), "params": 1}], {}, "gflops must be"),
        ([{"name": "x", "gflops": 1.0, "params": 1.5}], {}, "params must be an integer"),
        ([{"name": "x", "gflops": 1.0}], {}, "models[0]: missing keys ['params']"),
        (["x"], {}, "models[0]: must be a mapping"),
        (ZOO, {"balance_range": (0.5, 0.1)}, "balance_range"),
    ],
)
def test_bad_models(models, kwargs, message):
    with pytest.raises(InputError) as e:
        enumerate_pairs(models, **kwargs)
    assert message in str(e.value)


def _brute_force(cost, value, higher):
    v = np.where(np.isnan(value), np.nan, value if higher else -value)
    keep = np.zeros(len(cost), dtype=bool)
    for i in range(len(cost)):
        if np.isnan(v[i]):
            continue
        dominated = False
        for j in range(len(cost)):
            if j == i or np.isnan(v[j]):
                continue
            if cost[j] <= cost[i] and v[j] >= v[i] and (cost[j] < cost[i] or v[j] > v[i]):
                dominated = True
        keep[i] = not dominated
    return keep


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("higher", [True, False])
def test_pareto_against_brute_force(seed, higher):
    rng = np.random.default_rng(seed)
    n = 60
    cost = rng.integers(0, 12, n).astype(float)  # many equal costs
    value = rng.integers(0, 8, n).astype(float)  # many equal values and exact duplicates
    value[rng.random(n) < 0.1] = np.nan
    np.testing.assert_array_equal(pareto_front(cost, value, higher), _brute_force(cost, value, higher))


def test_pareto_hand_worked():
    cost = [1.0, 2.0, 2.0, 3.0, 1.0, 4.0]
    acc = [0.70, 0.80, 0.75, 0.80, 0.70, 0.90]
    assert pareto_front(cost, acc).tolist() == [True, True, False, False, True, True]
    nll = [0.9, 0.8, 0.85, 0.8, 0.9, float("nan")]
    assert pareto_front(cost, nll, higher_is_better=False).tolist() == [True, True, False, False, True, False]
    assert pareto_front([1.0], [-np.inf]).tolist() == [True]
    assert pareto_front([], []).tolist() == []


def test_pareto_bad_input():
    with pytest.raises(ValueError, match="1-D of equal length"):
        pareto_front([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="cost contains NaN"):
        pareto_front([np.nan], [1.0])
