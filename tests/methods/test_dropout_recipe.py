"""The recipe's ``drop_rate``: validated, the model is built with it, training uses it, train.json records it."""

from __future__ import annotations

import pytest
import torch

from benchmark.models import factory
from benchmark.models.train import Recipe, fine_tune
from benchmark.models.zoo import parse_entry
from benchmark.storage import store

ENTRY = parse_entry("d", {"arch": "test_efficientnet", "init": "scratch", "img_size": 32, "seed": 0, "recipe": "drop"})


def test_recipe_drop_rate_defaults_to_zero_and_is_validated():
    assert Recipe.from_params("r", {"epochs": 1, "batch_size": 4, "lr": 0.1}).drop_rate == 0.0
    assert Recipe.from_params("r", {"epochs": 1, "batch_size": 4, "lr": 0.1, "drop_rate": 0.2}).drop_rate == 0.2
    for bad, why in (
        (1.0, r"must be a number in \[0, 1\), got 1.0"),
        (-0.1, "must be >= 0"),
        ("0.2", "must be a number, got the string '0.2': YAML 1.1"),
        (True, "must be a finite number"),
    ):
        with pytest.raises(ValueError, match=rf"recipe 'r': drop_rate {why}"):
            Recipe.from_params("r", {"epochs": 1, "batch_size": 4, "lr": 0.1, "drop_rate": bad})
    with pytest.raises(ValueError, match=r"recipe 'p': epochs 0 means no training"):  # nothing is fine-tuned with it
        Recipe.from_params("p", {"epochs": 0, "drop_rate": 0.2})


def _train_mode_outputs(model, x):
    model.train()
    with torch.no_grad():  # BatchNorm uses the batch statistics both times: only dropout can make them differ
        return model(x), model(x)


def test_model_is_built_with_the_recipe_dropout():
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    plain = factory.create(ENTRY, 3, load_weights=False)
    drop = factory.create(ENTRY, 3, load_weights=False, drop_rate=0.2)
    assert (plain.drop_rate, drop.drop_rate) == (0.0, 0.2)
    assert plain.state_dict().keys() == drop.state_dict().keys()  # no weights: checkpoints load either way
    a, b = _train_mode_outputs(plain, x)
    assert torch.equal(a, b)
    a, b = _train_mode_outputs(drop, x)
    assert not torch.equal(a, b)  # dropout is active while fine-tuning


def test_train_json_records_the_drop_rate(tmp_path):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 3, 32, 32, generator=g), torch.arange(16) % 3
    recipe = Recipe.from_params("drop", {"epochs": 1, "batch_size": 8, "lr": 0.01, "drop_rate": 0.2})
    model = factory.create(ENTRY, 3, load_weights=False, drop_rate=recipe.drop_rate)
    record = fine_tune(model, (x, y), (x[:6], y[:6]), recipe, seed=0, folder=tmp_path, fingerprint="f", progress=False)
    assert record["recipe"]["drop_rate"] == 0.2
    assert store.read_json(tmp_path / "train.json")["recipe"]["drop_rate"] == 0.2
