"""Proof (issue 12, item 5): adding a method is one module, one test and one params entry.

A copy of the repository (its git files) gets a toy method ``benchmark/methods/toy.py``, a test
``tests/methods/test_toy.py`` and a ``baselines.toy`` entry in a suite's params.yaml; the suite
pipeline is regenerated and run through DVC on the tiny Caltech-256 fixture. The toy stage is in
the generated dvc.yaml, its rows in the results table, its row on the leaderboard, and no other
file of the repository changed.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "pipeline"))
from test_paper_suite_pipeline import PER_CLASS, TINY_ZOO, tiny_params, write_caltech256  # noqa: E402

pytestmark = pytest.mark.slow

TOY_MODULE = '''"""Toy method: a trained zoo model with its logits scaled (the registry proof)."""
from dataclasses import dataclass, field

from torch import nn

from benchmark.stages import per_model
from benchmark.stages.registry import check, parse_config, register_method


@dataclass(frozen=True)
class ToyConfig:
    model: str
    scale: float = field(default=0.5, metadata=check(above=0))


class Scaled(nn.Module):
    def __init__(self, model, scale):
        super().__init__()
        self.model, self.scale = model, scale

    def forward(self, x):
        return self.model(x) * self.scale


@register_method(kind="toy", family="toy", title="toy", config=ToyConfig, needs=("checkpoints",))
def toy(params, key, *, progress=True):
    cfg = parse_config(ToyConfig, params["baselines"]["toy"][key], f"baselines.toy.{key}")
    entry, model = per_model.load_trained(params, cfg.model)
    info = {"family": "toy", "method": f"x{cfg.scale}", "base": cfg.model}
    return per_model.method_output(params, key, Scaled(model, cfg.scale), entry, info, splits=["val", "test"],
                                   progress=progress)
'''

TOY_TEST = '''import pytest

from benchmark.stages.registry import get_method, parse_config


def test_toy_config():
    cfg = get_method("toy").config
    assert parse_config(cfg, {"model": "m"}, "w").scale == 0.5
    with pytest.raises(ValueError, match="scale must be > 0"):
        parse_config(cfg, {"model": "m", "scale": 0}, "w")
'''


def run(cmd, cwd):
    """``cmd`` in the copy ``cwd`` with its package first on the path (the venv holds an editable install of ROOT)."""
    env = {k: v for k, v in os.environ.items() if k != "UQBENCH_DATA"}
    env.update(HF_HUB_OFFLINE="1", TQDM_DISABLE="1", PYTHONUNBUFFERED="1", PYTHONPATH=str(cwd))
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_a_toy_method_is_one_module_one_test_and_one_params_entry(tmp_path):
    repo = tmp_path / "repo"
    files = git("ls-files", "-z", cwd=ROOT).split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file() and not f.startswith(("results/", "reports/", "leaderboard/")):
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            (repo / f).write_bytes(src.read_bytes())
    folder = repo / "suites" / "caltech256"
    data = write_caltech256(tmp_path / "data", counts=(PER_CLASS,) * 3)
    # the tiny profile: fixture data, two small models, no other method (test setup, committed as the baseline)
    params = tiny_params("caltech256", data, finetune={"epochs": 1, "batch_size": 5, "lr": 0.003, "select_by": "accuracy"})
    params["sve"]["members"] = []
    params["evaluate"].update(n_bootstrap=0, deep_ensembles=[], workers=1)
    params["report"].update(formats=["png"], plot_metrics=["accuracy", "aurc"])
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (repo / "zoo" / "caltech256.yaml").write_text(yaml.safe_dump(TINY_ZOO))
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base", cwd=repo)

    # the three files of a new method
    (repo / "benchmark" / "methods" / "toy.py").write_text(TOY_MODULE)
    (repo / "tests" / "methods" / "test_toy.py").write_text(TOY_TEST)
    params["baselines"]["toy"] = {"toy-res": {"model": "res", "scale": 0.5}}
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    run([sys.executable, "-m", "benchmark", "suite-pipeline", "caltech256"], repo)  # regenerate
    run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/methods/test_toy.py"], repo)
    stages = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    assert stages["toy"]["foreach"] == "${baselines.toy}"
    assert stages["toy"]["do"]["cmd"] == "python ../../pipelines/method.py --kind toy --key ${key}"

    assert (repo / ".dvc" / "config").is_file()  # the repository is a DVC project (its git files)
    out = run([sys.executable, "-m", "dvc", "repro", "suites/caltech256/dvc.yaml"], repo).stdout  # from the root
    assert "Running stage 'suites/caltech256/dvc.yaml:toy@toy-res'" in out
    m = pd.read_csv(folder / "results" / "metrics.csv")
    toy = m[m.family == "toy"]
    assert not toy.empty and set(toy["base"]) == {"res"} and set(toy["method"]) == {"x0.5"} and "test" in set(toy["split"])
    single = m[(m.family == "single") & (m.base == "res") & (m.fit == "converged")]
    # scaling the logits keeps the predictions: the toy's accuracy is the base model's
    acc = lambda d: d[(d.metric == "accuracy") & (d.split == "test")]["value"].iloc[0]  # noqa: E731
    assert acc(toy) == pytest.approx(acc(single))
    page = "".join(p.read_text(errors="ignore") for p in (folder / "reports").rglob("*") if p.suffix in (".html", ".json", ".js", ".csv"))
    assert "toy" in page

    changed = git("status", "--porcelain", "--untracked-files=all", cwd=repo).splitlines()
    touched = sorted({line[3:] for line in changed if not line[3:].startswith((".dvc", "suites/caltech256/results",
                                                                                 "suites/caltech256/reports"))
                      and not line.endswith(".gitignore")})  # DVC's own files and the .gitignore entries of its outputs
    assert touched == ["benchmark/methods/toy.py", "suites/caltech256/dvc.lock", "suites/caltech256/dvc.yaml",
                       "suites/caltech256/params.yaml", "tests/methods/test_toy.py"], touched
