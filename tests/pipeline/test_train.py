import math

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from benchmark.models.train import Recipe, _shift, fine_tune, lr_factor

RECIPE = Recipe(epochs=3, batch_size=16, lr=0.01, weight_decay=1e-4, warmup_epochs=0.5, shift_pixels=1)


def _data(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, 8, 8, generator=g)
    y = (x[:, 0].mean((1, 2)) > 0).long()
    return x, y


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Dropout(0.2), nn.Flatten(), nn.Linear(4 * 64, 2))


def test_lr_schedule_hand_worked():
    # 10 steps, 4 warm-up: 0.1 -> 1 linearly, then cosine to 0
    assert lr_factor(0, 10, 4, 0.1) == pytest.approx(0.1)
    assert lr_factor(2, 10, 4, 0.1) == pytest.approx(0.55)
    assert lr_factor(4, 10, 4, 0.1) == pytest.approx(1.0)
    assert lr_factor(7, 10, 4, 0.1) == pytest.approx(0.5 * (1 + math.cos(math.pi * 3 / 6)))
    assert lr_factor(10, 10, 4, 0.1) == pytest.approx(0.0)


def test_shift_is_a_translation():
    x = torch.arange(2 * 1 * 5 * 5, dtype=torch.float32).reshape(2, 1, 5, 5)
    g = torch.Generator().manual_seed(0)
    out = _shift(x, 1, g)
    g = torch.Generator().manual_seed(0)
    dx, dy = torch.randint(0, 3, (2,), generator=g), torch.randint(0, 3, (2,), generator=g)
    padded = torch.nn.functional.pad(x, (1, 1, 1, 1), mode="replicate")
    for i in range(2):
        assert torch.equal(out[i], padded[i, :, dy[i] : dy[i] + 5, dx[i] : dx[i] + 5])


def test_training_learns_and_resume_after_kill_gives_identical_weights(tmp_path):
    train, val = _data(64, 0), _data(32, 1)
    full = fine_tune(_model(), train, val, RECIPE, seed=3, folder=tmp_path / "a", fingerprint="fp", progress=False)
    assert full["history"][-1]["train_loss"] < full["history"][0]["train_loss"]
    assert not (tmp_path / "a" / "resume.safetensors").exists()

    # "kill" after the first epoch, then a new process resumes from the checkpoint
    fine_tune(
        _model(),
        train,
        val,
        RECIPE,
        seed=3,
        folder=tmp_path / "b",
        fingerprint="fp",
        progress=False,
        stop_after_epoch=0,
    )
    assert (tmp_path / "b" / "resume.safetensors").exists()
    fresh = _model()
    nn.init.zeros_(fresh[0].weight)  # a resumed run must not depend on the new model's init
    resumed = fine_tune(fresh, train, val, RECIPE, seed=3, folder=tmp_path / "b", fingerprint="fp", progress=False)
    assert resumed["history"] == full["history"]
    a, b = load_file(str(tmp_path / "a" / "model.safetensors")), load_file(str(tmp_path / "b" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_stale_checkpoint_with_other_fingerprint_is_discarded(tmp_path):
    train, val = _data(64, 0), _data(32, 1)
    fine_tune(
        _model(), train, val, RECIPE, seed=3, folder=tmp_path, fingerprint="old", progress=False, stop_after_epoch=0
    )
    rec = fine_tune(_model(), train, val, RECIPE, seed=3, folder=tmp_path, fingerprint="new", progress=False)
    assert [h["epoch"] for h in rec["history"]] == [0, 1, 2]


def test_bad_recipe_is_named():
    with pytest.raises(ValueError, match=r"recipe 'r': missing keys \[\], unknown keys \['momentum'\]"):
        Recipe.from_params("r", {"epochs": 1, "batch_size": 2, "lr": 0.1, "momentum": 0.9})
    with pytest.raises(ValueError, match="recipe 'r': epochs 0 means no training"):
        Recipe.from_params("r", {"epochs": 0, "batch_size": 2, "lr": 0.1})
    with pytest.raises(ValueError, match="recipe 'r'.*needs batch_size >= 1"):
        Recipe.from_params("r", {"epochs": 2, "batch_size": 0, "lr": 0.1})


def test_diverging_loss_raises(tmp_path):
    x, y = _data(32, 0)
    x[0, 0, 0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="lower the learning rate"):
        fine_tune(
            _model(),
            (x, y),
            (x, y),
            Recipe(epochs=1, batch_size=32, lr=0.1),
            seed=0,
            folder=tmp_path,
            fingerprint="f",
            progress=False,
        )
