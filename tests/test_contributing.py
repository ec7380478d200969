"""CONTRIBUTING's "Add a method" examples run as written: its code blocks (a weight-free and a weight-based method,
their tests, their params entries) are taken from the file, the methods registered, their tests run, their stages
run on a tiny tree and the evaluate stage puts their rows in the results table."""

from __future__ import annotations

import re
import sys
from contextlib import chdir
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent / "pipeline"))
from baseline_tree import CLASSES, ZOO, make_tree, params, run_method, typed  # noqa: E402

import benchmark.methods  # noqa: E402
from benchmark.dvcgen import suite_pipeline  # noqa: E402
from benchmark.evaluation import stage as evaluate  # noqa: E402
from benchmark.methods import registry  # noqa: E402
from benchmark.models.zoo import parse_entry  # noqa: E402
from benchmark.stages.logits_stage import logits_and_cost  # noqa: E402
from benchmark.stages.per_model import model_stage  # noqa: E402
from benchmark.storage import store  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(python|yaml)\n# (\S+)\n(.*?)^```", re.M | re.S)


def blocks() -> dict[str, str]:
    """path -> code of every fenced block of CONTRIBUTING.md whose first line names the file it is."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return {path: f"# {path}\n{code}" for _, path, code in BLOCK.findall(text)}


@pytest.fixture
def examples(tmp_path, monkeypatch):
    """The example modules importable as ``benchmark.methods.<kind>`` (from a temporary folder), registered in a
    copy of the registry; both undone afterwards."""
    code = blocks()
    modules = {Path(p).stem: c for p, c in code.items() if p.startswith("benchmark/methods/")}
    assert set(modules) == {"fixed_temperature", "flip_tta"}, sorted(code)
    folder = tmp_path / "methods"
    folder.mkdir()
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(text)
    registry.discover()  # every shipped method registered in the registry itself before it is swapped for a copy
    monkeypatch.setattr(benchmark.methods, "__path__", [*benchmark.methods.__path__, str(folder)])
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_COSTS", dict(registry._COSTS))
    yield code
    for name in modules:
        sys.modules.pop(f"benchmark.methods.{name}", None)


def test_the_examples_register_as_one_contract(examples):
    free, based = registry.get_method("fixed_temperature"), registry.get_method("flip_tta")
    assert (free.needs, based.needs) == (("logits",), ("checkpoints",))
    assert free.group == based.group == "stage" and free.config and based.config and free.run and based.run
    assert {"fixed_temperature", "flip_tta"} <= set(registry.list_methods("stage"))
    stages = suite_pipeline.method_stages({"fixed_temperature": {}, "flip_tta": {}})
    assert set(stages) == {"fixed_temperature", "flip_tta"}
    assert stages["fixed_temperature"]["deps"] == ["results/logits/${item.model}", "results/cost/${item.model}.json"]
    assert stages["flip_tta"]["deps"] == ["results/checkpoints/${item.model}"]
    assert not stages["fixed_temperature"]["runs_models"] and stages["flip_tta"]["runs_models"]


def test_the_example_tests_pass(examples):
    tests = {p: c for p, c in examples.items() if p.startswith("tests/methods/")}
    assert set(tests) == {"tests/methods/test_fixed_temperature.py", "tests/methods/test_flip_tta.py"}
    ran = 0
    for path, text in tests.items():
        namespace: dict = {}
        exec(compile(text, path, "exec"), namespace)  # noqa: S102 (the repository's own documentation)
        for name, fn in namespace.items():
            if name.startswith("test_") and callable(fn):
                fn()
                ran += 1
    assert ran == 2


def test_the_examples_run_through_their_stages_and_the_evaluate_stage(examples, tmp_path):
    entries = yaml.safe_load(examples["params.yaml"])["baselines"]
    for kind in entries:  # the documented entries name an embedded zoo model; the tree's is t-s0
        entries[kind] = {key: dict(e, model="t-s0") for key, e in entries[kind].items()}
    root = tmp_path / "tree"
    make_tree(root)
    p = params(root, **entries)
    with chdir(root):
        for name in ZOO:
            logits_and_cost(model_stage(typed(p), name), progress=False)
        free = run_method(p, "fixed_temperature", "ftemp-lite0-s0")["ftemp-lite0-s0"]
        based = run_method(p, "flip_tta", "flip-lite0-s0")["flip-lite0-s0"]
        evaluate.run(typed(p), progress=False)
    zoo_test = store.load_logits_file(root / "results" / "logits" / "t-s0" / "test.safetensors")
    ft = store.load_logits_file(root / "results" / "methods" / "ftemp-lite0-s0" / "test.safetensors")
    assert torch.allclose(ft.logits * 2.0, zoo_test.logits) and torch.equal(ft.ids, zoo_test.ids)
    flip = store.load_logits_file(root / "results" / "methods" / "flip-lite0-s0" / "test.safetensors")
    assert flip.logits.shape == (2, *zoo_test.logits.shape) and torch.allclose(
        flip.logits[0], zoo_test.logits, atol=1e-5
    )
    cost = store.read_json(root / "results" / "cost" / "t-s0.json")
    assert free["gflops"] == cost["gflops"] and based["gflops"] == pytest.approx(2 * cost["gflops"], rel=1e-6)
    # what verify recomputes: each example's registered cost function gives its stage's cost record, without weights
    entry = parse_entry("t-s0", ZOO["t-s0"])
    for family, record, members in (("fixed_temperature", free, 1), ("flip_tta", based, 2)):
        cfg = registry.get_method(family).config(model="t-s0")
        assert registry.output_cost(family)(record, entry, CLASSES, members, cfg) == {
            k: record[k] for k in ("gflops", "params")
        }
        with pytest.raises(ValueError, match="members"):
            registry.output_cost(family)(record, entry, CLASSES, members + 1, cfg)
    rows = pd.read_csv(root / "results" / "metrics.csv", keep_default_na=False)
    acc = rows[(rows.split == "test") & (rows.metric == "accuracy") & (rows.confidence == "max")]
    single = acc[(acc.family == "single") & (acc.base == "t-s0")]["value"].iloc[0]
    assert acc[acc.family == "fixed_temperature"]["value"].tolist() == [pytest.approx(single)]  # T keeps the argmax
    assert set(acc[acc.family == "flip_tta"]["method"]) == {"hflip"}
    assert set(rows[rows.family == "flip_tta"]["confidence"]) == {
        "max",
        "mutual_info",
        "entropy",
        "agreement",
    }  # 2 members
