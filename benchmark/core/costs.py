"""Cost records added up: what a combination of models costs from its members' records, and the training budget.

A cost record (``results/cost/<model>.json``, counted and measured by :mod:`benchmark.models.cost`) holds ``gflops``,
``params``, ``throughput`` and the training budget (:data:`BUDGET`). The training budget of a result row
(:func:`train_budget`) is what it took to make its models, summed over every training run behind it:
``train_images``, the training images processed (epochs x images per epoch x members that each run the whole network
on every image), and ``train_params``, the parameters those runs trained (all of them for a full fine-tune; the
trainable subset of a method that trains one, e.g. SVE's singular values, biases and heads of all M members).
Pretrained weights used as they are (a recipe with ``epochs: 0``) cost nothing. Deterministic counts, no wall time
(``results/timings.json`` has the wall seconds of each stage). Pure functions of the records: the evaluate stage adds
costs up without the code that counts or measures them.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

BUDGET = ("train_images", "train_params")  # a row's training budget (results schema columns of the same names)


def train_budget(epochs: int, images: int, trainable_params: int, members: int = 1) -> dict:
    """The budget of one training run: ``epochs`` passes over ``images`` training images, each image through
    ``members`` full forward passes (the M members of an SVE or a LoRA-Ensemble; 1 for a model or a shared backbone),
    updating ``trainable_params`` parameters (all members together). ``epochs`` 0 (pretrained weights used as they
    are) costs nothing."""
    for name, v in (
        ("epochs", epochs),
        ("images", images),
        ("trainable_params", trainable_params),
        ("members", members),
    ):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
            raise ValueError(f"training budget: {name} must be an integer >= 0, got {v!r}")
    epochs, images, trainable_params, members = int(epochs), int(images), int(trainable_params), int(members)
    trained = epochs > 0 and images > 0 and members > 0
    return {
        "train_images": epochs * images * members if trained else 0,
        "train_params": trainable_params if trained else 0,
    }


def sum_budget(costs: dict, names: Sequence[str]) -> dict:
    """The budget of the training runs behind ``names`` (``costs``: model -> its cost record with :data:`BUDGET`),
    summed; NaN where a record lacks it (not recorded)."""
    return {k: float(sum(float(costs[m].get(k, float("nan"))) for m in names)) for k in BUDGET}


def sum_cost(costs: dict, members: Sequence[str]) -> dict:
    """Cost of running ``members`` one after the other (``costs``: model -> its cost record): GFLOPs and parameters add,
    throughput = 1 / sum(1 / throughput); ``balance`` = sidekick / base GFLOPs for a pair (NaN otherwise); the
    training budgets add (:func:`sum_budget`: a duo or deep ensemble trained every member)."""
    return {
        "gflops": sum(costs[m]["gflops"] for m in members),
        "params": sum(costs[m]["params"] for m in members),
        "throughput": 1.0 / sum(1.0 / costs[m]["throughput"] for m in members),
        "balance": costs[members[1]]["gflops"] / costs[members[0]]["gflops"] if len(members) == 2 else float("nan"),
        **sum_budget(costs, members),
    }
