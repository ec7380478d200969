"""Group-aware metrics against scikit-learn per group and hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import f1_score

from benchmark.core.groups import group_accuracy, group_macro_f1, group_summary, macro_f1, worst_group
from benchmark.core.validation import InputError


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    n, c, g = 600, 12, 7
    y = rng.integers(0, c, n)
    pred = np.where(rng.random(n) < 0.6, y, rng.integers(0, c, n))
    groups = rng.integers(0, g, n)
    groups[groups == 4] = 5  # group id 4 is empty
    return pred, y, groups


@pytest.mark.parametrize("present", ["union", "true"])
def test_group_macro_f1_matches_sklearn_per_group(data, present):
    pred, y, groups = data
    f1, n = group_macro_f1(pred, y, groups, present=present)
    assert f1.shape == (7,) and torch.isnan(f1[4]) and n[4] == 0
    for k in set(groups.tolist()):
        m = groups == k
        labels = None if present == "union" else np.unique(y[m])  # WILDS: labels=unique(y_true)
        ref = f1_score(y[m], pred[m], average="macro", labels=labels, zero_division=0)
        assert f1[k].item() == pytest.approx(ref, abs=1e-12)
        assert n[k] == m.sum()


def test_macro_f1_matches_sklearn(data):
    pred, y, _ = data
    assert macro_f1(pred, y) == pytest.approx(f1_score(y, pred, average="macro"), abs=1e-12)
    ref = f1_score(y, pred, average="macro", labels=np.unique(y), zero_division=0)
    assert macro_f1(pred, y, present="true") == pytest.approx(ref, abs=1e-12)


def test_group_accuracy_by_direct_loop(data):
    pred, y, groups = data
    acc, n = group_accuracy(pred, y, groups)
    for k in range(7):
        m = groups == k
        if m.any():
            assert acc[k].item() == pytest.approx((pred[m] == y[m]).mean(), abs=1e-12)
        else:
            assert torch.isnan(acc[k]) and n[k] == 0


def test_hand_worked_case():
    # group 0: y = [0, 0, 1], pred = [0, 1, 1] -> acc 2/3; F1_0 = 2*1/(2+1) = 2/3, F1_1 = 2*1/(1+2) = 2/3
    # group 1: y = [2, 2], pred = [0, 2]      -> acc 1/2; F1_2 = 2*1/(2+1) = 2/3, F1_0 = 0 (predicted, absent)
    pred, y, g = [0, 1, 1, 0, 2], [0, 0, 1, 2, 2], [0, 0, 0, 1, 1]
    acc, n = group_accuracy(pred, y, g)
    assert acc.tolist() == pytest.approx([2 / 3, 1 / 2]) and n.tolist() == [3, 2]
    f1, _ = group_macro_f1(pred, y, g)
    assert f1.tolist() == pytest.approx([2 / 3, 1 / 3])
    f1_true, _ = group_macro_f1(pred, y, g, present="true")
    assert f1_true.tolist() == pytest.approx([2 / 3, 2 / 3])
    assert worst_group(acc, n) == (pytest.approx(0.5), 1)
    assert worst_group(acc, n, min_count=3) == (pytest.approx(2 / 3), 0)
    s = group_summary(pred, y, g)
    assert s["accuracy"] == pytest.approx(3 / 5) and s["worst_group_macro_f1"] == pytest.approx(1 / 3)
    assert s["mean_group_accuracy"] == pytest.approx((2 / 3 + 1 / 2) / 2) and s["n_groups"] == 2


def test_bad_inputs_are_named():
    with pytest.raises(InputError, match="pred: has N=2 but the predictions have N=3"):
        group_accuracy([0, 1], [0, 1, 1], [0, 0, 0])
    with pytest.raises(InputError, match=r"groups: values must be in >= 0"):
        group_macro_f1([0, 1], [0, 1], [0, -1])
    with pytest.raises(InputError, match="no group has at least 5 samples"):
        worst_group([0.5, 0.7], [2, 3], min_count=5)
    with pytest.raises(InputError, match="present"):
        macro_f1([0], [0], present="pred")
