"""benchmark.core.validation: each kind of bad input is one InputError that names the argument and the problem."""

import numpy as np
import pytest
import torch

from benchmark.core.validation import InputError, as_float_matrix, as_labels, as_scores


@pytest.mark.parametrize(
    "value, message",
    [
        ([[1.0, 2.0], [3.0]], r"^logits: cannot convert to an array \(ValueError: "),  # ragged
        (np.array([[1.0, "a"]], dtype=object), r"^logits: cannot convert to a numeric array \(got dtype object\)$"),
        (np.ones((2, 3), dtype=bool), r"^logits: must be real floating point, got torch.bool$"),
        (np.ones((2, 3), dtype=np.complex64), r"^logits: must be real floating point, got torch.complex64$"),
    ],
)
def test_matrices_that_are_not_real_numbers(value, message):
    with pytest.raises(InputError, match=message):
        as_float_matrix(value, "logits")


def test_integer_matrices_become_float32_and_a_finite_overflowing_sum_is_not_a_nan():
    t = as_float_matrix(np.arange(6).reshape(2, 3), "logits")
    assert t.dtype == torch.float32 and t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    big = torch.full((3, 2), 3.0e38)  # every value finite, their float32 sum is inf: re-checked value by value
    assert torch.equal(as_float_matrix(big, "logits"), big)
    big[2, 1] = float("nan")
    with pytest.raises(InputError, match=r"^logits: contains NaN \(first non-finite value in row 2\)$"):
        as_float_matrix(big, "logits")


@pytest.mark.parametrize(
    "value, kw, message",
    [
        (np.zeros((2, 2), dtype=np.int64), {}, r"^labels: must be 1-D \(N,\), got shape \(2, 2\)$"),
        (np.zeros(0, dtype=np.int64), {}, r"^labels: is empty$"),
        (np.array([0.0, 1.0]), {}, r"^labels: must be integer class indices, got torch.float64$"),
        (np.array([True, False]), {}, r"^labels: must be integer class indices, got torch.bool$"),
        (np.array([0, 1, 2]), {"n": 2}, r"^labels: has N=3 but the predictions have N=2$"),
        (np.array([0, -1]), {}, r"^labels: values must be in >= 0, found range \[-1, 0\]$"),
        (np.array([0, 5]), {"num_classes": 5}, r"^labels: values must be in \[0, 5\), found range \[0, 5\]$"),
    ],
)
def test_bad_labels(value, kw, message):
    with pytest.raises(InputError, match=message):
        as_labels(value, **kw)


def test_labels_become_int64():
    t = as_labels(np.array([2, 0, 1], dtype=np.int8), num_classes=3, n=3)
    assert t.dtype == torch.int64 and t.tolist() == [2, 0, 1]


@pytest.mark.parametrize(
    "value, kw, message",
    [
        (np.zeros((2, 1)), {}, r"^score: must be 1-D \(N,\), got shape \(2, 1\)$"),
        (np.zeros(0), {}, r"^score: is empty$"),
        (np.array([True, False]), {}, r"^score: must be real numbers, got torch.bool$"),
        (np.array([1 + 1j]), {}, r"^score: must be real numbers, got torch.complex128$"),
        (np.zeros(3), {"n": 4}, r"^score: has N=3 but the predictions have N=4$"),
        (np.array([0.5, np.inf]), {}, r"^score: contains Inf \(first non-finite value in row 1\)$"),
    ],
)
def test_bad_scores(value, kw, message):
    with pytest.raises(InputError, match=message):
        as_scores(value, "score", **kw)
