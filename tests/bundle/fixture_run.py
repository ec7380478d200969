"""A tiny Caltech-256-layout suite run through DVC (two scratch models and one method output), shared by the tests
that read a finished suite run (tests/conftest.py's ``caltech``: the bundle tests, incremental, simulate, tune);
tests/pipeline/test_paper_suite_pipeline.py grows a copy of it to every method kind. Also runnable as a script:
``python tests/bundle/fixture_run.py DIR`` (for development)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "pipeline"))
sys.path.insert(0, str(ROOT / "tests" / "data" / "paper"))
from test_paper_suite_pipeline import copy_repo, run  # noqa: E402

from benchmark.gpu.fixture import PER_CLASS, TINY_ZOO, tiny_params, write_caltech256  # noqa: E402

METHODS = {  # one method output (last-layer Laplace, no training) so that method units are bundled and verified too
    "sve": {
        "base": "res",
        "members": [],
        "recipe": "finetune",
        "sigma_init": 0.02,
        "seed": 0,
        "patterns": None,
        "train_subset": None,
        "splits": None,
    },
    "baselines": {
        "splits": None,
        "soups": {},
        "lora_ensemble": {},
        "mc_dropout": {},
        "shallow": {},
        "laplace": {"la-res": {"model": "res", "prior_precisions": [1.0, 100.0]}},
    },
}


# dropout in the fine-tune: the MC dropout samples of tests/pipeline/test_paper_suite_pipeline.py, which adds every
# method kind to a copy of this run, sample the dropout the models were trained with (no model is retrained there)
FINETUNE = {"epochs": 1, "batch_size": 5, "lr": 0.003, "select_by": "accuracy", "drop_rate": 0.2}
LOG = "repro.log"  # next to the run's root (``tmp``): what its ``dvc repro`` printed


def caltech_run(tmp: Path) -> Path:
    """Run the suite pipeline in a copy of the repository under ``tmp``; returns the copy's root (``tmp/repo``)."""
    data = write_caltech256(tmp / "data", counts=(PER_CLASS,) * 3)
    root = copy_repo(tmp / "repo", ["caltech256"])
    folder = root / "suites" / "caltech256"
    params = tiny_params("caltech256", data, finetune=FINETUNE)
    params["evaluate"]["workers"] = 1
    (folder / "params.yaml").write_text(yaml.safe_dump(params | METHODS))
    (root / "zoo" / "caltech256.yaml").write_text(yaml.safe_dump(TINY_ZOO))
    run(["git", "init", "-q"], root)
    run(["python", "-m", "dvc", "init", "-q"], root)
    run(["python", "-m", "benchmark", "suite-pipeline", "caltech256"], root)  # ask for the suite: its dvc.yaml
    out = run(["python", "-m", "dvc", "repro", "suites/caltech256/dvc.yaml"], root).stdout  # from the root
    (tmp / LOG).write_text(out)
    return root


if __name__ == "__main__":
    print(caltech_run(Path(sys.argv[1])))
