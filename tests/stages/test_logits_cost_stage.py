"""The logits stage with --cost: the cost record of the cost stage, written by the same process (no cost stage)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipeline"))
from baseline_tree import make_tree, params  # noqa: E402

from benchmark.models.cost import count_flops, count_params  # noqa: E402
from benchmark.stages import logits_stage, per_model  # noqa: E402
from benchmark.stages.params_config import load_params  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _stage(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TQDM_DISABLE="1")
    return subprocess.run(
        ["python", str(ROOT / "pipelines" / "logits.py"), "--params", "params.yaml", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("logits_cost")
    make_tree(root)
    (root / "params.yaml").write_text(yaml.safe_dump(params(root)))
    return root


@pytest.mark.parametrize("name", ["r", "t-s0"])
def test_logits_with_cost_writes_what_the_cost_stage_writes(tree, name, monkeypatch):
    proc = _stage(tree, "--model", name, "--cost")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in (tree / "results" / "logits" / name).iterdir()) == [
        "ood.safetensors",
        "shift.safetensors",
        "test.safetensors",
        "val.safetensors",
    ]
    folded = json.loads((tree / "results" / "cost" / f"{name}.json").read_text())
    monkeypatch.chdir(tree)
    p = load_params(tree / "params.yaml")
    alone = logits_stage.cost(per_model.model_stage(p, name))  # the cost stage's function, in this process
    assert set(folded) == set(alone)
    assert {k: v for k, v in folded.items() if k != "throughput"} == {
        k: v for k, v in alone.items() if k != "throughput"
    }
    assert folded["throughput"] > 0
    # independent check of the counts: fvcore on the trained model (weights do not change FLOPs or sizes)
    model = per_model.load_trained(per_model.model_stage(p, name))
    assert folded["gflops"] == count_flops(model, folded["img_size"]) and folded["params"] == count_params(model)


def test_logits_without_cost_leaves_the_cost_file_alone(tree):
    target = tree / "results" / "cost" / "t-s1.json"
    assert not target.exists()
    proc = _stage(tree, "--model", "t-s1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tree / "results" / "logits" / "t-s1" / "test.safetensors").exists() and not target.exists()


def test_unknown_model_is_one_line_and_writes_nothing(tree):
    proc = _stage(tree, "--model", "nope", "--cost")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "nope" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tree / "results" / "cost" / "nope.json").exists()


def test_root_dvc_yaml_has_no_cost_stage_and_logits_owns_the_cost_files():
    stages_ = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert "cost" not in stages_
    do = stages_["logits"]["do"]
    assert do["cmd"].split("#")[0].split() == ["python", "pipelines/logits.py", "--model", "${key}", "--cost"]
    assert "results/cost/${key}.json" in do["outs"]  # DVC-cached: a clone that pulls recomputes nothing (issue 50)
    assert "cost" in do["params"] and {"zoo/embedded.yaml": ["models.${key}"]} in do["params"]
    assert "results/cost" in stages_["evaluate"]["deps"]
    assert (
        per_model.stage_config.paths("x")["cost"] == per_model.stage_config.RESULTS / "cost" / "x.json"
    )  # where evaluate reads them
