"""The method registry: every method is one registered entry, and everything that lists methods iterates over it."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from benchmark.config.typed import check, parse_config
from benchmark.dvcgen import suite_pipeline
from benchmark.methods import registry
from benchmark.stages import method_stage, stage_config
from benchmark.stages.model_params import load_model_params
from benchmark.stages.params_config import load_params

ROOT = Path(__file__).resolve().parents[2]
STAGES = registry.list_methods("stage")


def test_the_registry_holds_every_method_of_the_benchmark():
    # the list: duo variants, deep ensembles, SVE, soups, MC dropout, Laplace, shallow and LoRA ensembles
    assert {
        "single",
        "duo",
        "deep_ensemble",
        "sve",
        "soups",
        "mc_dropout",
        "laplace",
        "shallow",
        "lora_ensemble",
    } <= set(registry.list_methods())
    assert registry.list_methods("evaluate")[:3] == [
        "single",
        "duo",
        "deep_ensemble",
    ]  # the evaluate stage's unit order
    families = [registry.get_method(k).family for k in registry.list_methods()]
    assert len(set(families)) == len(families)


def test_each_kind_is_its_module_so_a_stage_imports_only_the_method_it_runs():
    """``get_method(kind)`` of a fresh process imports ``benchmark/methods/<kind>.py`` and no other method module."""
    probe = (
        "import sys; from benchmark.methods import registry; registry.get_method('laplace'); "
        "print(sorted(m for m in sys.modules if m.startswith('benchmark.methods.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    loaded = set(eval(out))  # noqa: S307 (our own printed list)
    assert "benchmark.methods.laplace" in loaded
    assert not loaded & {
        f"benchmark.methods.{k}" for k in ("soups", "mc_dropout", "shallow", "lora_ensemble", "duo", "sve")
    }


@pytest.mark.parametrize("kind", STAGES)
def test_each_stage_method_has_a_config_a_params_section_and_a_stage(kind):
    m = registry.get_method(kind)
    assert m.config is not None and callable(m.run) and m.family and m.needs and m.units is None
    assert m.module == f"benchmark.methods.{kind}" and m.script == "method"
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert isinstance(params["baselines"][kind], dict), f"params.yaml baselines has no {kind!r} section"
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert stages[m.stage]["foreach"] == f"${{baselines.{kind}}}"
    assert stages[m.stage]["do"]["cmd"] == f"python pipelines/method.py --kind {kind} --key ${{key}}"
    rendered = suite_pipeline.method_stages()
    assert rendered[m.stage]["section"] == kind
    for entry in params["baselines"][kind].values():  # the shipped entries parse
        parse_config(m.config, entry, f"baselines.{kind}")


@dataclass(frozen=True)
class Cfg:
    model: str
    lr: float = field(default=0.1, metadata=check(above=0))
    sizes: list[int] = field(default_factory=lambda: [1], metadata=check(min_len=1, minimum=1))
    p: float | None = None


@pytest.mark.parametrize(
    "raw, match",
    [
        ({"lr": 0.1}, r"where: missing keys \['model'\], unknown keys \[\]; allowed: \['lr', 'model', 'p', 'sizes'\]"),
        ({"model": "a", "LR": 0.1}, r"unknown keys \['LR'\]"),
        ({"model": 3}, r"where: model must be text, got 3"),
        ({"model": "a", "lr": "1e-3"}, r"where: lr must be a number, got the string '1e-3': YAML 1.1 reads .* 1.0e-3"),
        ({"model": "a", "lr": 0}, r"where: lr must be > 0, got 0"),
        ({"model": "a", "lr": True}, r"where: lr must be a finite number, got True"),
        ({"model": "a", "sizes": []}, r"where: sizes must be a list of at least 1"),
        ({"model": "a", "sizes": [1, 2.5]}, r"where: sizes\[1\] must be an integer >= 1, got 2.5"),
        ({"model": "a", "p": "x"}, r"where: p must be a finite number, got 'x'"),
        (["model"], r"where: must be a mapping with keys \['model'\]"),
    ],
)
def test_parse_config_names_the_field_and_the_problem(raw, match):
    with pytest.raises(ValueError, match=match):
        parse_config(Cfg, raw, "where")


def test_parse_config_fills_defaults_and_accepts_null_for_optional_fields():
    assert parse_config(Cfg, {"model": "a", "p": None}, "w") == Cfg(model="a", lr=0.1, sizes=[1], p=None)


def test_method_entries_are_validated_by_the_generator_and_the_error_names_the_file(tmp_path):
    """Where they are used (the method stages, the pipeline generator), not by the stages that run no method."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["zoo"] = str(ROOT / params["zoo"])
    params["baselines"]["laplace"] = {"la": {"model": "lite0-s0", "prior_precisions": ["1e-3"]}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    assert load_model_params(tmp_path / "p.yaml").recipes  # what data, train@ and logits@ parse: no method entry
    loaded = load_params(tmp_path / "p.yaml")  # the whole file (a method stage's): its entries parsed by their methods
    with pytest.raises(
        stage_config.ConfigError,
        match=r"p.yaml: baselines.laplace.la: prior_precisions\[0\] must be a number, "
        r"got the string '1e-3': YAML 1.1",
    ):
        suite_pipeline.check_methods(tmp_path / "p.yaml")
    with pytest.raises(ValueError, match=r"^baselines.laplace.la: prior_precisions\[0\] must be a number"):
        method_stage.run(loaded, "laplace", "la", progress=False)  # the method's own stage
    params["baselines"]["laplace"] = {}
    params["baselines"]["nope"] = {}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(
        stage_config.ConfigError, match=r"p.yaml: baselines: unknown method kind\(s\) \['nope'\]; registered: \["
    ):
        suite_pipeline.check_methods(tmp_path / "p.yaml")
    params["baselines"].pop("nope")
    params["sve"]["sigma_init"] = -1
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(stage_config.ConfigError, match=r"p.yaml: params.yaml sve: sigma_init must be >= 0, got -1"):
        suite_pipeline.check_methods(tmp_path / "p.yaml")


def test_a_kind_registered_twice_by_two_modules_is_refused():
    fn = registry.get_method("laplace").run
    fake = type(fn)(fn.__code__, fn.__globals__, "other")
    fake.__module__ = "somewhere.else"
    with pytest.raises(ValueError, match=r"method kind 'laplace' is registered twice"):
        registry.register_method(kind="laplace", family="laplace")(fake)


def test_the_generic_stage_script_names_an_unknown_kind_in_one_line(tmp_path):
    proc = subprocess.run(
        [
            "python",
            str(ROOT / "pipelines" / "method.py"),
            "--kind",
            "nope",
            "--key",
            "x",
            "--params",
            str(ROOT / "params.yaml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "unknown method kind 'nope'; registered: [" in proc.stderr.strip().splitlines()[-1]


def test_the_runner_computes_every_unit_through_the_registry(monkeypatch):
    """No method name in the runner: a unit of a newly registered evaluate-time method gets its own rows."""
    from benchmark.evaluation import runner

    calls = []

    def toy_rows(cfg, names, logits, *, info=None, memo=None, release=None):
        calls.append(names)
        return [{"family": "toy", "members": "+".join(names)}], []

    monkeypatch.setitem(
        registry._REGISTRY,
        "toy_eval",
        registry.Method(kind="toy_eval", family="toy", group="evaluate", units=lambda x: [], rows=toy_rows, module="t"),
    )
    assert runner.rows_function("toy_eval") is toy_rows
    assert runner.rows_function(runner.OUTPUT).__module__ == "benchmark.methods.rows"
    assert runner.rows_function("duo") is registry.get_method("duo").rows
    with pytest.raises(ValueError, match="unknown method kind 'nope'"):
        runner.rows_function("nope")


def test_evaluate_units_come_from_the_registry_in_the_order_and_with_the_costs_of_before():
    """The logit-only entries build exactly the units the evaluate stage built by hand (same identities, order,
    costs), so the cached unit keys and the results rows do not change."""
    import math

    from benchmark.config.evaluate import EvalConfig
    from benchmark.core.pairs import enumerate_pairs
    from benchmark.evaluation import stage
    from benchmark.models.zoo import parse_entry

    costs = {
        "a": {"gflops": 4.0, "params": 40, "throughput": 10.0, "train_images": 4000, "train_params": 40},
        "b": {"gflops": 1.0, "params": 10, "throughput": 40.0, "train_images": 8000, "train_params": 10},
        "a2": {"gflops": 4.0, "params": 40, "throughput": 10.0, "train_images": 4000, "train_params": 40},
    }
    base = {"arch": "test_resnet", "init": "scratch", "img_size": 32, "recipe": "r"}
    zoo = {
        "a": parse_entry("a", {**base, "seed": 0}, check_arch=False),
        "b": parse_entry("b", {**base, "arch": "test_efficientnet", "seed": 0}, check_arch=False),
        "a2": parse_entry("a2", {**base, "seed": 1}, check_arch=False),
    }  # a + a2: a deep ensemble of two seeds
    pairs = enumerate_pairs([{"name": n, **c} for n, c in costs.items()])
    info = {
        "gflops": 8.0,
        "params": 80,
        "throughput": 5.0,
        "overhead_percent": 1.5,
        "own_train_images": 300,
        "own_train_params": 7,
        "builds_on": ["a", "a2"],
    }  # e.g. trained heads on a soup of a, a2
    got = stage.unit_list(zoo, costs, EvalConfig(deep_ensembles=(2,)), {"m": info})

    def cost(ms):  # the former evaluate._sum_cost, written out; every member's training counts
        out = {
            "gflops": sum(costs[m]["gflops"] for m in ms),
            "params": sum(costs[m]["params"] for m in ms),
            "throughput": 1.0 / sum(1.0 / costs[m]["throughput"] for m in ms),
        }
        out["balance"] = costs[ms[1]]["gflops"] / costs[ms[0]]["gflops"] if len(ms) == 2 else math.nan
        out["train_images"] = sum(costs[m]["train_images"] for m in ms)
        out["train_params"] = sum(costs[m]["train_params"] for m in ms)
        return out

    want = [(("single", n), None, cost([n])) for n in zoo]
    want += [(("duo", p.base, p.sidekick), None, cost([p.base, p.sidekick])) for p in pairs]
    want += [(("deep_ensemble", "a", "a2"), None, dict(cost(["a", "a2"]), balance=math.nan))]
    want += [
        (
            ("method", "m"),
            info,
            {
                "gflops": 8.0,
                "params": 80,
                "throughput": 5.0,
                "balance": math.nan,
                "overhead_percent": 1.5,
                "extra_params_percent": math.nan,
                "train_images": 300 + 4000 + 4000,
                "train_params": 7 + 40 + 40,
            },
        )
    ]
    assert [u[0] for u in got] == [u[0] for u in want] and len(pairs) >= 2
    for (_, gi, gc), (_, wi, wc) in zip(got, want):
        assert gi == wi and gc.keys() == wc.keys()
        assert all(gc[k] == wc[k] or (math.isnan(gc[k]) and math.isnan(wc[k])) for k in gc)


def _stage_view(stages: dict) -> dict:
    def plain(items):
        return [x if isinstance(x, str) else yaml.safe_dump(x, sort_keys=True) for x in items or []]

    out = {}
    for name, st in stages.items():
        body = st.get("do", st)
        out[name] = {
            "foreach": st.get("foreach"),
            "cmd": body["cmd"],
            "params": plain(body.get("params")),
            "outs": plain(body.get("outs")),
            "metrics": plain(body.get("metrics")),
            "deps": plain(body.get("deps")),
        }
    return out


def test_the_root_dvc_yaml_is_the_template_rendered_for_the_embedded_default():
    """Same stages, commands, params and outputs as the rendered template, at least its dependencies; once the
    root dvc.yaml is the generated one, byte for byte (else: python -m benchmark suite-pipeline embedded)."""
    from benchmark.dvcgen import embedded_pipeline

    text = (ROOT / "dvc.yaml").read_text()
    rendered = embedded_pipeline.render(ROOT)
    have, want = yaml.safe_load(text), yaml.safe_load(rendered)
    assert {k: have.get(k) for k in ("vars", "metrics", "plots")} == {
        k: want.get(k) for k in ("vars", "metrics", "plots")
    }
    h, w = _stage_view(have["stages"]), _stage_view(want["stages"])
    assert list(h) == list(w)
    for name in h:
        assert {k: v for k, v in h[name].items() if k != "deps"} == {k: v for k, v in w[name].items() if k != "deps"}, (
            name
        )
        assert set(h[name]["deps"]) <= set(w[name]["deps"]), (name, sorted(set(h[name]["deps"]) - set(w[name]["deps"])))
    if embedded_pipeline.is_generated(ROOT):
        assert text == rendered, "the root dvc.yaml is out of date: python -m benchmark suite-pipeline embedded"


def test_method_order_does_not_depend_on_which_module_was_imported_first(monkeypatch):
    """Generated dvc.yaml files list method stages in list_methods() order: a test or a stage that imported
    one method module early must not reorder them."""
    before = registry.list_methods()
    items = list(registry._REGISTRY.items())  # modules imported in reverse name order (each module's own order kept)
    shuffled = dict(sorted(items, key=lambda kv: kv[1].module, reverse=True))
    assert list(shuffled) != list(registry._REGISTRY)
    monkeypatch.setattr(registry, "_REGISTRY", shuffled)
    assert registry.list_methods() == before
    weights = registry.list_methods("stage")
    modules = [registry.get_method(k).module for k in weights]
    assert modules == sorted(modules)
