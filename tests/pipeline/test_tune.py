"""``reproduce tune``: one training-stage run per learning rate in scratch copies, scored on validation."""

import json

import pytest

from benchmark.dvcutil import lockfile
from benchmark.models import tune

STAGE = "suites/caltech256/dvc.yaml:train@res"


def test_set_key_changes_one_existing_key_only():
    params = {"recipes": {"finetune": {"lr": 0.1, "epochs": 2}}, "sve": {"members": [1, 2]}}
    out = tune.set_key(params, "recipes.finetune.lr", 0.5)
    assert out == {"recipes": {"finetune": {"lr": 0.5, "epochs": 2}}, "sve": {"members": [1, 2]}}
    assert params["recipes"]["finetune"]["lr"] == 0.1  # a copy
    with pytest.raises(ValueError, match="no key 'recipes.scratch'"):
        tune.set_key(params, "recipes.scratch.lr", 1.0)


def test_assignment_values_are_yaml():
    assert tune.parse_assignment("sve.members=[2]") == ("sve.members", [2])
    assert tune.parse_assignment("sve.train_subset=null") == ("sve.train_subset", None)
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        tune.parse_assignment("sve.members")


def test_best_and_check_name_the_winning_lr():
    rec = {
        "recipe": "sve",
        "params_lr": 0.03,
        "grid": [{"lr": 0.01, "val_score": 0.92}, {"lr": 0.03, "val_score": 0.944}, {"lr": 0.1, "val_score": 0.86}],
    }
    assert tune.best(rec)["lr"] == 0.03 and tune.check(rec) is None
    rec["params_lr"] = 0.1
    assert tune.check(rec) == "recipes.sve.lr = 0.1 in params.yaml, but lr 0.03 scored best on validation (0.9440)"
    tie = {"recipe": "r", "params_lr": 0.01, "grid": [{"lr": 0.02, "val_score": 0.5}, {"lr": 0.01, "val_score": 0.5}]}
    assert tune.best(tie)["lr"] == 0.01  # ties: the smaller lr


def test_write_keeps_one_entry_per_recipe(tmp_path):
    path = tmp_path / "tuning.json"
    tune.write({"recipe": "a", "grid": [1]}, path)
    tune.write({"recipe": "b", "grid": [2]}, path)
    tune.write({"recipe": "a", "grid": [3]}, path)
    assert json.loads(path.read_text()) == {"a": {"recipe": "a", "grid": [3]}, "b": {"recipe": "b", "grid": [2]}}


@pytest.mark.slow
def test_tune_runs_the_stage_per_lr_without_touching_the_checkout(caltech_copy):
    """On the tiny suite's finished run (a private copy: other tests read the shared one meanwhile): two lrs, two real
    trainings (each its own validation score, the recipe's budget unchanged), and the checkout's own lock and outputs
    stay as they were."""
    caltech = caltech_copy
    before = lockfile.read(caltech / "suites/caltech256/dvc.lock")
    ckpt = caltech / "suites/caltech256/results/checkpoints/res/train.json"
    record_before = ckpt.read_bytes()
    rec = tune.tune(STAGE, "finetune", [0.003, 0.3], root=caltech, progress=False)
    assert [g["lr"] for g in rec["grid"]] == [0.003, 0.3]
    assert all(0.0 <= g["val_score"] <= 1.0 and g["select_by"] == "accuracy" for g in rec["grid"])
    assert rec["budget"]["epochs"] == 1 and rec["params_lr"] == 0.003
    assert lockfile.read(caltech / "suites/caltech256/dvc.lock") == before and ckpt.read_bytes() == record_before
    assert not list((caltech / ".dvc" / "tmp").glob("tune-*"))  # scratch copies removed
    with pytest.raises(ValueError, match="not in suites/caltech256/params.yaml recipes"):
        tune.tune(STAGE, "nope", [0.1], root=caltech, progress=False)
