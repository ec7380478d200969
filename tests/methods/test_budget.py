"""The training budget of a row: the formula on hand-worked cases, the sum over a duo or deep ensemble, and a method
output's own training plus the fine-tunes it builds on (what each registered method declares)."""

from __future__ import annotations

import math

import pytest

from benchmark.core.costs import sum_budget, sum_cost, train_budget
from benchmark.methods import budget, registry
from benchmark.models.train import Recipe

RECIPES = {
    "finetune": Recipe(epochs=4, batch_size=64, lr=0.002),
    "sve": Recipe(epochs=4, batch_size=64, lr=0.03),
    "heads": Recipe(epochs=10, batch_size=64, lr=0.01),
    "pretrained": Recipe(epochs=0),
}
TRAIN = 1000  # images of the train split (the embedded default's)


def test_the_budget_of_one_training_run_by_hand():
    assert train_budget(4, 1000, 3_400_000) == {"train_images": 4_000, "train_params": 3_400_000}  # a fine-tune
    assert train_budget(4, 1000, 52_000, members=8) == {"train_images": 32_000, "train_params": 52_000}  # SVE, M = 8
    assert train_budget(8, 1500, 10) == {"train_images": 12_000, "train_params": 10}
    assert train_budget(0, 1000, 3_400_000) == {"train_images": 0, "train_params": 0}  # pretrained weights as they are


@pytest.mark.parametrize("bad", [-1, 1.5, True, None, "4"])
def test_a_budget_of_a_bad_count_is_refused(bad):
    with pytest.raises(ValueError, match="must be an integer >= 0"):
        train_budget(bad, 1000, 10)


COSTS = {
    "big": {"gflops": 4.0, "params": 40, "throughput": 10.0, "train_images": 4000, "train_params": 40},
    "big2": {"gflops": 4.0, "params": 40, "throughput": 10.0, "train_images": 4000, "train_params": 40},
    "small": {"gflops": 0.5, "params": 5, "throughput": 80.0, "train_images": 8000, "train_params": 5},
    "old": {"gflops": 1.0, "params": 1, "throughput": 1.0},
}  # a cost record written before budgets


def test_a_duo_and_a_deep_ensemble_trained_every_member():
    duo = sum_cost(COSTS, ["big", "small"])
    assert (duo["train_images"], duo["train_params"]) == (12_000, 45)
    ensemble = sum_cost(COSTS, ["big", "big2"])
    assert (ensemble["train_images"], ensemble["train_params"]) == (8_000, 80)
    assert all(math.isnan(v) for v in sum_budget(COSTS, ["big", "old"]).values())  # not recorded: NaN, not 4000


def _own(kind: str, cfg, info: dict) -> dict:
    return budget.own_budget(registry.get_method(kind), cfg, info, RECIPES, TRAIN)


def test_soups_mc_dropout_and_laplace_train_nothing_and_build_on_their_fine_tunes():
    from benchmark.methods.laplace import LaplaceConfig
    from benchmark.methods.mc_dropout import MCDropoutConfig
    from benchmark.methods.soups import SoupConfig

    five = [f"lite0-s{i}" for i in range(5)]
    soup = _own("soups", SoupConfig(models=five), {"ingredients": five[:2]})  # a greedy soup that kept two of them
    assert soup == {"own_train_images": 0, "own_train_params": 0, "builds_on": five}  # all five had to be trained
    assert _own("mc_dropout", MCDropoutConfig(model="lite0-s0", samples=8), {})["builds_on"] == ["lite0-s0"]
    la = _own("laplace", LaplaceConfig(model="lite0-s3", prior_precisions=[1.0]), {})
    assert la == {"own_train_images": 0, "own_train_params": 0, "builds_on": ["lite0-s3"]}
    costs = {n: {"train_images": 4000, "train_params": 3_400_000} for n in five}
    assert budget.row_budget({**soup}, costs) == {"train_images": 5 * 4000.0, "train_params": 5 * 3_400_000.0}


def test_sve_trains_its_members_from_the_pretrained_backbone_only():
    from benchmark.methods.sve_stage import SveConfig

    cfg = SveConfig(base="lite0-s0", members=(1, 2, 4), recipe="sve")
    own = _own("sve", cfg, {"members": 4, "trainable_params": 4 * 13_000})
    assert own == {"own_train_images": 4 * 4 * TRAIN, "own_train_params": 52_000, "builds_on": []}
    costs = {"lite0-s0": {"train_images": 4000, "train_params": 3_400_000}}  # its base's fine-tune is not part of it
    assert budget.row_budget(own, costs) == {"train_images": 16_000.0, "train_params": 52_000.0}
    subset = _own(
        "sve",
        SveConfig(base="lite0-s0", members=(2,), recipe="sve", train_subset=300),
        {"members": 2, "trainable_params": 26_000},
    )
    assert subset["own_train_images"] == 2 * 4 * 300
    with pytest.raises(ValueError, match="trainable_params"):
        _own("sve", cfg, {"members": 4})


def test_shallow_and_lora_ensembles_from_their_recipe_and_members():
    from benchmark.methods.lora_ensemble import LoRAConfig
    from benchmark.methods.shallow import ShallowConfig

    frozen = _own(
        "shallow", ShallowConfig(model="m", members=5, recipe="heads", backbone="frozen"), {"trainable_params": 55}
    )
    assert frozen == {
        "own_train_images": 10 * TRAIN,
        "own_train_params": 55,
        "builds_on": ["m"],
    }  # heads on m's fine-tune
    joint = _own("shallow", ShallowConfig(model="m", members=5, recipe="finetune"), {"trainable_params": 999})
    assert joint == {"own_train_images": 4 * TRAIN, "own_train_params": 999, "builds_on": []}  # one shared backbone
    lora = _own(
        "lora_ensemble", LoRAConfig(model="vit", members=4, rank=8, recipe="finetune"), {"trainable_params": 77}
    )
    assert lora == {"own_train_images": 4 * 4 * TRAIN, "own_train_params": 77, "builds_on": []}
    with pytest.raises(ValueError, match="recipe 'nope'"):
        _own("shallow", ShallowConfig(model="m", members=5, recipe="nope"), {"trainable_params": 1})


def test_a_row_budget_needs_its_fine_tunes_cost_records():
    assert all(math.isnan(v) for v in budget.row_budget({"family": "x"}, {}).values())  # written before budgets
    with pytest.raises(ValueError, match="builds on \\['gone'\\]"):
        budget.row_budget({"family": "x", "own_train_images": 0, "own_train_params": 0, "builds_on": ["gone"]}, {})


def test_every_registered_method_that_writes_outputs_declares_a_training():
    """Default rule or its own: the methods that train (SVE, shallow and LoRA ensembles) say what they train."""
    trains = {k for k in registry.list_methods() if registry.get_method(k).training is not None}
    assert {"sve", "shallow", "lora_ensemble"} <= trains
    assert not {"soups", "mc_dropout", "laplace"} & trains  # the default: nothing of their own, built on their models
