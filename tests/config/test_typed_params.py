"""Typed configuration (issue 12 item 3): params.yaml, recipes, zoo entries and suite files are parsed field by
field by one set of helpers (benchmark.config.typed); a wrong type, an unknown or a missing key is one line naming
the file and the field (stage CLI: exit code 2, no traceback); params.yaml is parsed once per process, at the stage's
entry, and handed down typed."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from benchmark.config.evaluate import EvalConfig
from benchmark.models.train import Recipe
from benchmark.stages import params_config, stage_config
from benchmark.stages.entry import stage_main
from benchmark.stages.model_params import ModelParams
from benchmark.stages.params_config import Params, load_params
from benchmark.stages.per_model import ModelStage, model_stage_main

ROOT = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((ROOT / "params.yaml").read_text())


def _write(tmp_path: Path, change=None, name: str = "params.yaml") -> Path:
    p = copy.deepcopy(RAW)
    p["zoo"] = str(ROOT / p["zoo"])
    if change:
        change(p)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(p))
    return path


def _stage_error(path: Path, capsys, fn=lambda stage, args: None, *, whole: bool = False) -> str:
    """Run a per-model stage's command line (``whole``: that of a stage that reads the whole file, as evaluate) on
    params file ``path``: exit code 2 and one line on stderr, returned."""
    if whole:
        assert stage_main("test stage", lambda params, args: None, argv=["--params", str(path)], load=load_params) == 2
    else:
        assert model_stage_main("test stage", fn, ["--params", str(path), "--model", "lite0-s0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_the_committed_params_files_parse():
    for path in [ROOT / "params.yaml", *sorted((ROOT / "suites").glob("*/params.yaml"))]:
        p = load_params(path)
        assert isinstance(p, Params) and p.logits.batch_size >= 1 and p.recipes
        assert all(isinstance(r, Recipe) for r in p.recipes.values())


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda p: p["evaluate"].update(workers="two"), "evaluate: workers must be an integer >= 1, got 'two' (str)"),
        (
            lambda p: p["evaluate"].update(bootstrap_level=True),
            "evaluate: bootstrap_level must be a finite number, got True",
        ),
        (lambda p: p["logits"].update(batchsize=3), "logits: missing keys [], unknown keys ['batchsize']"),
        (lambda p: p["logits"].update(amp="fp8"), "logits: amp must be null (off), bfloat16 or float16, got 'fp8'"),
        (lambda p: p["cost"].pop("throughput_iters"), "cost: missing keys ['throughput_iters'], unknown keys []"),
        (lambda p: p.update(thread=2), "missing keys [], unknown keys ['thread']"),
        (lambda p: p["distributed"].update(nnodes="2"), "distributed: nnodes must be an integer, got '2' (str)"),
        (
            lambda p: p["evaluate"].update(sac_threshold="9.8e-1"),
            "evaluate: sac_threshold must be a number, got the string '9.8e-1': YAML 1.1",
        ),
        (
            lambda p: p["recipes"]["finetune"].update(epochs=2.5),
            "recipes.finetune: epochs must be an integer >= 0, got 2.5",
        ),
        (
            lambda p: p["recipes"]["scratch"].update(momentum=0.9),
            "recipes.scratch: missing keys [], unknown keys ['momentum']",
        ),
        (lambda p: p["recipes"]["sve"].pop("epochs"), "recipes.sve: missing keys ['epochs']"),
    ],
)
def test_a_bad_params_field_is_one_line_naming_file_and_field(tmp_path, capsys, change, message):
    path = _write(tmp_path, change)
    whole = message.startswith("evaluate:")  # a block no per-model stage reads: the evaluate stage's (the whole file)
    err = _stage_error(path, capsys, whole=whole)
    assert err.startswith(f"error: {path}: {message}"), err
    if whole:  # ... and not a per-model stage's: neither its settings nor the code that types them are its dependencies
        assert (
            model_stage_main("test stage", lambda stage, args: None, ["--params", str(path), "--model", "lite0-s0"])
            == 0
        )


def test_lr_1e_3_gets_the_yaml_hint(tmp_path, capsys):
    path = tmp_path / "params.yaml"
    text = (ROOT / "params.yaml").read_text().replace("    lr: 0.002\n", "    lr: 1e-3\n", 1)
    path.write_text(text.replace("zoo: zoo/embedded.yaml", f"zoo: {ROOT / 'zoo/embedded.yaml'}", 1))
    assert yaml.safe_load(path.read_text())["recipes"]["finetune"]["lr"] == "1e-3"  # YAML 1.1: a string
    err = _stage_error(path, capsys)
    assert err.startswith(f"error: {path}: recipes.finetune: lr must be a number, got the string '1e-3': YAML 1.1")
    assert "1.0e-3" in err


def test_a_recipe_outside_params_names_its_entry():
    with pytest.raises(ValueError, match=r"^suites/x.yaml: recipe 'r': lr must be a number, got the string '1e-3'"):
        Recipe.from_params("r", {"epochs": 1, "batch_size": 2, "lr": "1e-3"}, "suites/x.yaml")
    with pytest.raises(ValueError, match=r"recipe 'r': warmup_start_factor must be <= 1, got 1.5"):
        Recipe.from_params("r", {"epochs": 1, "batch_size": 2, "lr": 0.1, "warmup_start_factor": 1.5})


def test_a_bad_zoo_entry_is_one_line_naming_file_and_field(tmp_path, capsys):
    zoo = yaml.safe_load((ROOT / "zoo/embedded.yaml").read_text())
    zoo["models"]["lite0-s0"]["img_size"] = "224"
    zoo_file = tmp_path / "zoo.yaml"
    zoo_file.write_text(yaml.safe_dump(zoo))
    path = _write(tmp_path, lambda p: p.update(zoo=str(zoo_file)))
    err = _stage_error(path, capsys)  # the entry parses the zoo entry
    assert err.startswith(f"error: {zoo_file}: zoo entry 'lite0-s0': img_size must be an integer >= 8, got '224'")


def test_params_are_parsed_once_per_process(tmp_path, monkeypatch):
    path = _write(tmp_path)
    parses = []
    real = params_config.parse_params
    monkeypatch.setattr(params_config, "parse_params", lambda raw, where: parses.append(where) or real(raw, where))
    first = load_params(path)
    assert isinstance(first, Params) and len(parses) == 1
    for _ in range(3):
        assert load_params(path) is first  # read again, not parsed again
    assert len(parses) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):  # handed down as it was parsed: no stage changes it
        first.threads = 99
    _write(tmp_path, lambda p: p["evaluate"].update(workers=1))  # the file changes: parsed again
    assert load_params(path).evaluate.workers == 1 and len(parses) == 2


def test_a_stage_sees_typed_params_and_no_function_below_it_the_mapping(tmp_path):
    """What a stage's ``run`` gets from its entry: the typed Params, its method entries left to the method stages; a
    per-model stage's entry hands down one typed ModelStage (its params blocks, zoo entry, recipe, data source)."""
    path = _write(tmp_path, lambda p: p["baselines"]["mc_dropout"]["mcdrop-lite0-s0"].update(samples="8"))
    seen = []
    assert (
        model_stage_main(
            "test stage", lambda stage, args: seen.append(stage), ["--params", str(path), "--model", "lite0-s0"]
        )
        == 0
    )  # a bad method entry: not this stage's
    (s,) = seen
    assert isinstance(s, ModelStage) and isinstance(s.params, ModelParams) and not isinstance(s.params, Params)
    assert s.entry.name == "lite0-s0" and s.recipe is s.params.recipes[s.entry.recipe] and s.source.kind == "embedded"
    assert s.params.data.kind == "embedded" and not hasattr(s.params, "evaluate")  # only the blocks it reads
    assert (
        stage_main(
            "test stage", lambda params, args: seen.append(params), argv=["--params", str(path)], load=load_params
        )
        == 0
    )
    p = seen[-1]
    assert isinstance(p, Params) and isinstance(p.evaluate, EvalConfig) and p.evaluate.suite == p.suite
    assert p.baselines["mc_dropout"]["mcdrop-lite0-s0"]["samples"] == "8"  # parsed by its method's stage, not here


def test_typed_blocks_give_the_same_settings_as_the_raw_mapping():
    p = load_params(ROOT / "params.yaml")
    raw = RAW["evaluate"]
    assert p.evaluate == EvalConfig.from_params(
        RAW["suite"], raw
    )  # one evaluate config: the stage's, the bundle check's
    assert p.evaluate.settings() == EvalConfig.from_params("embedded", raw).settings()
    assert p.evaluate.workers == raw["workers"] and p.evaluate.deep_ensembles == tuple(raw["deep_ensembles"])
    assert p.logits.batch_size == RAW["logits"]["batch_size"] and p.threads == RAW["threads"]
    assert {n: dataclasses.asdict(r) for n, r in p.recipes.items()} == {
        n: {**{f.name: f.default for f in dataclasses.fields(Recipe) if f.name != "epochs"}, **r}
        for n, r in RAW["recipes"].items()
    }
    assert set(EvalConfig().settings()) == {
        "suite",
        "fits",
        "n_bootstrap",
        "bootstrap_splits",
        "bootstrap_level",
        "seed",
        "ece_bins",
        "sac_threshold",
    }  # what changes a unit's rows (workers does not)
    with pytest.raises(ValueError, match=r"params evaluate: missing keys \[\], unknown keys \['suite'\]"):
        EvalConfig.from_params("x", {"suite": "y"})  # set by the stage, not a key of the block


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("num_classes: 257", "num_classes: '257'", "num_classes must be an integer >= 2, got '257' (str)"),
        ("num_classes: 257", "num_classes: 257\nclasses: 257", "missing keys [], unknown keys ['classes']"),
        ("zoo: zoo/caltech256.yaml\n", "", "missing keys ['zoo'], unknown keys []"),
        ("lr: 1.0e-4", "lr: 1e-4", "recipe 'finetune': lr must be a number, got the string '1e-4': YAML 1.1"),
        (
            "options: {fractions: [0.7, 0.15], seed: 42}",
            "options: [0.7, 0.15]",
            "datasets.caltech256: options must be a mapping",
        ),
    ],
)
def test_a_bad_suite_file_field_is_one_line_naming_file_and_field(tmp_path, capsys, old, new, message):
    from benchmark.cli.main import main as cli_main
    from benchmark.data.paper.suites import SuiteError, load_suite

    text = (ROOT / "suites" / "caltech256.yaml").read_text()
    assert old in text
    (tmp_path / "suites").mkdir()
    path = tmp_path / "suites" / "broken.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(SuiteError) as e:
        load_suite(path)
    assert str(e.value).startswith(f"{path}: {message}"), str(e.value)
    assert cli_main(["suite-pipeline", "--root", str(tmp_path), "broken"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"{path}: {message}" in err, err


def test_suite_and_zoo_files_are_parsed_once_per_process(tmp_path):
    from benchmark.data.paper.suites import load_suite

    path = tmp_path / "small.yaml"
    text = (ROOT / "suites" / "caltech256.yaml").read_text()
    path.write_text(text)
    first = load_suite(path)
    assert load_suite(path) is first  # cached on the path and the file's bytes
    path.write_text(text.replace("num_classes: 257", "num_classes: 256"))
    assert load_suite(path).num_classes == 256  # changed: parsed again
    params = load_params(_write(tmp_path))
    assert stage_config.zoo(params) == stage_config.zoo(params) and stage_config.zoo(params) is not stage_config.zoo(
        params
    )  # a copy each call
    zoo_entry = next(iter(stage_config.zoo(params).values()))
    assert all(
        stage_config.zoo(params)[n] is e for n, e in stage_config.zoo(params).items()
    ) and zoo_entry.name in stage_config.zoo(params)


def test_zoo_without_the_arch_check_skips_only_the_timm_look_up(tmp_path):
    """``check_arch=False`` (the evaluate stage: it builds no model) still checks names, fields and recipes; only an
    architecture timm does not know passes, and the checked and the unchecked parse are cached apart."""
    from benchmark.models.zoo import ZooError

    zoo = yaml.safe_load((ROOT / RAW["zoo"]).read_text())
    name = next(iter(zoo["models"]))
    zoo["models"][name]["arch"] = "no_such_architecture"
    (tmp_path / "zoo.yaml").write_text(yaml.safe_dump(zoo))
    params = load_params(_write(tmp_path, lambda p: p.update(zoo=str(tmp_path / "zoo.yaml"))))
    assert stage_config.zoo(params, check_arch=False)[name].arch == "no_such_architecture"
    with pytest.raises(ZooError, match=f"zoo entry '{name}': unknown timm architecture 'no_such_architecture'"):
        stage_config.zoo(params)  # not served from the unchecked parse's cache
    zoo["models"][name].update(arch="resnet18", recipe="no-such-recipe")
    (tmp_path / "zoo.yaml").write_text(yaml.safe_dump(zoo))
    with pytest.raises(ZooError, match="unknown recipe 'no-such-recipe'"):
        stage_config.zoo(params, check_arch=False)
