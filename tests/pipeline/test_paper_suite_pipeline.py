"""The paper suites' DVC pipeline folders: generated files, data source, epochs-0 recipes, one suite end to end."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import load_file
from timm.data import create_transform, resolve_data_config

from benchmark.cli.main import main as cli_main
from benchmark.data.paper.common import DatasetLayoutError
from benchmark.data.paper.suites import list_suites, load_suite
from benchmark.dvcgen import suite_pipeline
from benchmark.models import factory
from benchmark.models.train import Recipe, fine_tune
from benchmark.stages import entry, stage_config, suite_source
from benchmark.stages import per_model as stages
from benchmark.stages.params_config import load_params, parse_params
from benchmark.storage import store

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "data" / "paper"))
from paper_layouts import write_imagenet, write_imagenet_v2  # noqa: E402

from benchmark.gpu.fixture import LITE0, PER_CLASS, TINY_ZOO, method_params, tiny_params  # noqa: E402


def run(cmd, cwd):
    env = {k: v for k, v in os.environ.items() if k != "UQBENCH_DATA"}
    env.update(HF_HUB_OFFLINE="1", TQDM_DISABLE="1", PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def copy_repo(dst: Path, suites=()) -> Path:
    """What DVC needs of the repository: code, stage scripts, zoos, the suite files and folders (as committed:
    params.yaml, no dvc.yaml, which a checkout materialises on request), with the code's hash-checked bytecode
    (tests/precompiled.py: used only while its source is unchanged)."""
    ignore = shutil.ignore_patterns("results", "reports", "dvc.lock", "dvc.yaml", ".dvc")
    for name in ("benchmark", "pipelines", "zoo"):
        shutil.copytree(ROOT / name, dst / name, ignore=ignore)
    (dst / "suites").mkdir()
    shutil.copy(ROOT / "suites" / ".gitignore", dst / "suites")
    for s in suites:
        shutil.copy(ROOT / "suites" / f"{s}.yaml", dst / "suites")
        shutil.copytree(ROOT / "suites" / s, dst / "suites" / s, ignore=ignore)
    return dst


def dvc_project(root: Path) -> None:
    """``git init`` + ``dvc init`` in ``root`` (one DVC project: suite folders are plain folders of it)."""
    run(["git", "init", "-q"], root)
    run(["python", "-m", "dvc", "init", "-q"], root)


# -- (1) generated pipeline folders -------------------------------------------------------------------


def test_committed_suite_folders_equal_the_generator():
    names = list_suites(ROOT / "suites")
    assert names and all((ROOT / "suites" / n / "params.yaml").is_file() for n in names)
    for name in names:
        assert suite_pipeline.check(name, ROOT) == [], f"regenerate: python -m benchmark suite-pipeline {name}"
    assert cli_main(["suite-pipeline", "--all", "--check", "--root", str(ROOT)]) == 0
    # committed: params.yaml; never a suite's dvc.yaml (materialised on request) nor a sub-repository marker
    tracked = subprocess.run(
        ["git", "ls-files", "suites"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert {f"suites/{n}/params.yaml" for n in names} <= set(tracked)
    assert not [f for f in tracked if f.endswith("/dvc.yaml") or "/.dvc/" in f], tracked
    # not git-ignored: DVC refuses a git-ignored dvc.yaml; dvc.lock stays committable (a shared suite run)
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "suites/caltech256/dvc.yaml", "suites/caltech256/dvc.lock"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ignored.returncode == 1 and ignored.stdout == "", ignored.stdout


def test_check_detects_drift_and_write_keeps_params(tmp_path, capsys):
    root = copy_repo(tmp_path, ["caltech256", "dtd"])
    folder = root / "suites" / "caltech256"
    # unasked suites: nothing to check beyond params.yaml, and --all materialises none of them
    assert cli_main(["suite-pipeline", "--all", "--check", "--root", str(root)]) == 0
    assert cli_main(["suite-pipeline", "--all", "--root", str(root)]) == 0
    assert not list(root.glob("suites/*/dvc.yaml"))
    # asking for one suite writes its dvc.yaml; --all then keeps that one current and still skips the other
    assert suite_pipeline.write("caltech256", root) == [folder / "dvc.yaml"]
    assert "dvc repro suites/caltech256/dvc.yaml" in (folder / "dvc.yaml").read_text()
    pristine = (folder / "dvc.yaml").read_text()
    assert cli_main(["suite-pipeline", "--all", "--check", "--root", str(root)]) == 0
    capsys.readouterr()
    (folder / "dvc.yaml").write_text(pristine.replace("persist: true", "persist: false"))
    assert cli_main(["suite-pipeline", "--all", "--check", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "suites/caltech256/dvc.yaml: out of date" in err
    assert "regenerate with: python -m benchmark suite-pipeline caltech256 " in err and " dtd" not in err
    assert cli_main(["suite-pipeline", "--all", "--root", str(root)]) == 0
    assert (folder / "dvc.yaml").read_text() == pristine and not (root / "suites" / "dtd" / "dvc.yaml").exists()
    # a folder left over from the sub-repository layout: named, with what to do
    (root / "suites" / "dtd" / ".dvc").mkdir()
    assert cli_main(["suite-pipeline", "--all", "--check", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "suites/dtd/.dvc: a leftover DVC sub-repository" in err and "rm -r" in err
    assert (
        cli_main(["suite-pipeline", "dtd", "--root", str(root)]) == 2
        and not (root / "suites" / "dtd" / "dvc.yaml").exists()
    )
    (root / "suites" / "dtd" / ".dvc").rmdir()
    (folder / "dvc.yaml").write_text((folder / "dvc.yaml").read_text().replace("persist: true", "persist: false"))
    params = yaml.safe_load((folder / "params.yaml").read_text())
    params["recipes"]["finetune"]["lr"] = 0.5
    params["data_root"] = "/my/data"
    (folder / "params.yaml").write_text(yaml.safe_dump(params))
    problems = suite_pipeline.check("caltech256", root)
    assert any("dvc.yaml: out of date" in p for p in problems) and any("['recipes'] differ" in p for p in problems)
    assert cli_main(["suite-pipeline", "caltech256", "--check", "--root", str(root)]) == 2
    assert "regenerate with" in capsys.readouterr().err
    written = suite_pipeline.write("caltech256", root)
    assert written == [folder / "dvc.yaml"]  # the user's params.yaml is kept
    assert (folder / "dvc.yaml").read_text() == suite_pipeline.render("caltech256", root)["dvc.yaml"]
    assert yaml.safe_load((folder / "params.yaml").read_text())["data_root"] == "/my/data"


def test_dvc_parses_every_suite_folder(tmp_path):
    names = list_suites(ROOT / "suites")
    root = copy_repo(tmp_path, names)
    dvc_project(root)
    assert cli_main(["suite-pipeline", *names, "--root", str(root)]) == 0
    for name in names:  # from the root: the suite folders are plain folders of the root project
        out = run(
            ["python", "-m", "dvc", "stage", "list", "--fail", "--name-only", f"suites/{name}/dvc.yaml"], root
        ).stdout.split()
        out = [s.removeprefix(f"suites/{name}/dvc.yaml:") for s in out]
        zoo = load_suite(name, suites_dir=ROOT / "suites").zoo
        entries = yaml.safe_load((ROOT / zoo).read_text())["models"]
        per_model = {f"{stage}@{m}" for stage in ("train", "logits") for m in entries}  # logits --cost: no cost stage
        fixed = {"data", "evaluate", "report"}
        members = yaml.safe_load((ROOT / "suites" / name / "params.yaml").read_text())["sve"]["members"]
        sve = {"sve", "sve-train"} if members else set()  # one stage writes every size; baselines: none by default
        assert set(out) == per_model | fixed | sve
        if name == "cifar100":  # the SVE paper's setting sweeps M up to 16
            assert "results/methods/sve-m16" in (root / "suites" / name / "dvc.yaml").read_text()


# -- (3) a missing data root: one clear error before anything trains ---------------------------------


def _suite_folder(tmp_path: Path, suite: str, zoo: dict, params: dict) -> Path:
    root = tmp_path / "repo"
    (root / "suites" / suite).mkdir(parents=True)
    (root / "zoo").mkdir()
    shutil.copy(ROOT / "suites" / f"{suite}.yaml", root / "suites")
    (root / load_suite(suite, suites_dir=ROOT / "suites").zoo).write_text(yaml.safe_dump(zoo))
    (root / "suites" / suite / "params.yaml").write_text(yaml.safe_dump(params))
    return root / "suites" / suite


def test_missing_data_root_is_one_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("UQBENCH_DATA", raising=False)
    params = tiny_params("caltech256", "x")
    params["data_root"] = None
    folder = _suite_folder(tmp_path, "caltech256", TINY_ZOO, params)
    monkeypatch.chdir(folder)
    p = load_params()
    with pytest.raises(DatasetLayoutError) as e:
        suite_source.prepare_data(suite_source.for_params(p))
    msg = str(e.value)
    assert "suite 'caltech256'" in msg and "no data root is set" in msg and "UQBENCH_DATA" in msg
    assert "256_ObjectCategories/001.ak47/001_0001.jpg" in msg  # the expected layout
    missing = tmp_path / "nowhere"
    p = dataclasses.replace(p, data_root=str(missing))
    with pytest.raises(
        DatasetLayoutError, match=r"suite 'caltech256': caltech256: root folder .*nowhere.* not found"
    ) as e:
        suite_source.prepare_data(suite_source.for_params(p))
    assert "256_ObjectCategories" in str(e.value)
    # through the stage script's wrapper: one line "error: ...", exit status 2, nothing written
    (folder / "params.yaml").write_text(yaml.safe_dump(dict(params, data_root=str(missing))))
    assert (
        entry.stage_main(
            "data", lambda source, a: suite_source.prepare_data(source), argv=[], load=suite_source.data_source
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("error: suite 'caltech256'") and str(missing) in err
    with pytest.raises(store.StoreError, match="run the data stage first"):
        stages.train(stages.model_stage(p, "res"), progress=False)
    assert not (folder / "results").exists()


# -- (4) epochs 0: the pretrained weights are the checkpoint --------------------------------------------


def test_recipe_epochs_0_keeps_the_initial_weights(tmp_path):
    assert Recipe.from_params("none", {"epochs": 0, "select_by": "macro_f1"}) == Recipe(epochs=0, select_by="macro_f1")
    with pytest.raises(ValueError, match="recipe 'none': epochs 0 means no training; .* got \\['lr'\\]"):
        Recipe.from_params("none", {"epochs": 0, "lr": 0.1})
    with pytest.raises(ValueError, match="recipe 'r': training \\(epochs 2\\) needs batch_size >= 1, lr > 0"):
        Recipe.from_params("r", {"epochs": 2, "batch_size": 8})
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.LazyLinear(5))
    model(torch.zeros(1, 3, 8, 8))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    record = fine_tune(model, None, None, Recipe(epochs=0), seed=0, folder=tmp_path, fingerprint="fp", progress=False)
    saved = load_file(str(tmp_path / "model.safetensors"))
    assert saved.keys() == before.keys() and all(torch.equal(saved[k], before[k]) for k in before)
    assert record["trained"] is False and record["history"] == [] and record["fingerprint"] == "fp"
    assert json.loads((tmp_path / "train.json").read_text())["trained"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors", "train.json"]


def test_imagenet_like_suite_without_training(tmp_path, monkeypatch):
    """Stage functions on an ImageNet-layout fixture: epochs-0 checkpoint = the initial model, logits on the index."""
    data = tmp_path / "data"
    write_imagenet(data / "imagenet", per_class=(8, 7, 9))
    write_imagenet_v2(data / "imagenetv2-matched-frequency-format-val")
    zoo = {"models": {"res": dict(TINY_ZOO["models"]["res"], recipe="none")}}
    folder = _suite_folder(tmp_path, "imagenet", zoo, tiny_params("imagenet", data))
    monkeypatch.chdir(folder)
    p = dataclasses.replace(load_params(), num_workers=2)  # images decoded in DataLoader worker processes
    assert sorted(suite_source.prepare_data(suite_source.for_params(p))) == ["shift", "test", "val"]
    spec = load_suite("imagenet", suites_dir=ROOT / "suites")
    want = spec.load_splits(data)
    for split, s in want.items():  # the index: the loaders' ids and labels, no pixels
        idx = np.load(f"results/data/{split}.npz")
        assert sorted(idx.files) == ["ids", "labels", "name"]
        assert np.array_equal(idx["ids"], s.ids) and np.array_equal(idx["labels"], s.labels)
    stage = stages.model_stage(p, "res")
    record = stages.train(stage, progress=False)
    assert record["trained"] is False
    fresh = factory.create(stage_config.entry(p, "res"), spec.num_classes).state_dict()
    saved = load_file("results/checkpoints/res/model.safetensors")
    assert all(torch.equal(saved[k], fresh[k]) for k in fresh)
    assert stages.logits(stage, stages.load_trained(stage), progress=False) == ["shift", "test", "val"]
    test = store.load_logits_file("results/logits/res/test.safetensors")
    assert tuple(test.logits.shape) == (len(want["test"]), 1000)
    assert np.array_equal(test.ids.numpy(), want["test"].ids) and np.array_equal(
        test.labels.numpy(), want["test"].labels
    )
    # the same model on the same images, one by one with the transform the published code builds from the model
    model = factory.create(stage_config.entry(p, "res"), 1000).eval()
    tf = create_transform(**resolve_data_config({"input_size": (3, 32, 32)}, model=model))
    x = torch.stack([tf(want["test"].image(i)) for i in range(3)])
    with torch.no_grad():
        assert torch.allclose(model(x), test.logits[:3], atol=1e-5)


def test_device_param(tmp_path):
    raw = tiny_params("caltech256", tmp_path)
    raw.pop("device")
    assert suite_source.device(parse_params(raw)) == torch.device("cpu")  # the default: unchanged CPU behaviour
    auto = parse_params(dict(raw, device="auto"))
    assert suite_source.device(auto) == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(
        ValueError, match=r"params.yaml: device must be text \(one of \['auto', 'cpu', 'cuda'\]\), got 'gpu'"
    ):
        parse_params(dict(raw, device="gpu"))
    if not torch.cuda.is_available():
        with pytest.raises(stage_config.ConfigError, match="torch sees no CUDA device"):
            suite_source.device(parse_params(dict(raw, device="cuda")))


def test_paper_recipe_must_select_like_the_suite(tmp_path, monkeypatch):
    params = tiny_params("iwildcam", tmp_path, finetune={"epochs": 1, "batch_size": 4, "lr": 0.01})
    folder = _suite_folder(tmp_path, "iwildcam", TINY_ZOO, params)
    monkeypatch.chdir(folder)
    with pytest.raises(
        stage_config.ConfigError, match="recipe 'finetune' selects by 'accuracy' but suite 'iwildcam' by 'macro_f1'"
    ):
        stages.train(stages.model_stage(load_params(), "res"), progress=False)


# -- (2) one paper suite end to end through DVC, on CPU ---------------------------------------------------


@pytest.mark.slow
def test_caltech256_suite_through_dvc(caltech, caltech_copy):
    """The shared run (the session fixture ``caltech``: tests/bundle/fixture_run.py, two models and a last-layer
    Laplace) on a private copy, grown to every method kind the suite template renders and a pretrained model used
    as it is (recipe ``epochs: 0``): the second ``dvc repro`` runs only what is new."""
    sys.path.insert(0, str(ROOT / "tests" / "bundle"))
    from fixture_run import FINETUNE, LOG

    root = caltech_copy
    folder = root / "suites" / "caltech256"
    params = yaml.safe_load((folder / "params.yaml").read_text())
    params = tiny_params(
        "caltech256",
        params["data_root"],
        finetune=FINETUNE,
        none={"epochs": 0},
        sve={"epochs": 1, "batch_size": 5, "lr": 0.01, "select_by": "accuracy"},
    )
    params["evaluate"]["workers"] = 1
    (folder / "params.yaml").write_text(yaml.safe_dump(params | method_params()))
    assert suite_pipeline.write("caltech256", root) == [folder / "dvc.yaml"]  # sve.members selects the SVE stages
    (root / "zoo" / "caltech256.yaml").write_text(yaml.safe_dump({"models": {**TINY_ZOO["models"], "lite": LITE0}}))
    # from the root, as the README says: the suite folder is a plain folder of the root DVC project
    first = (caltech.parent / LOG).read_text()
    out = run(["python", "-m", "dvc", "repro", "suites/caltech256/dvc.yaml"], root).stdout
    prefix = "Running stage 'suites/caltech256/dvc.yaml:"
    ran = {line.removeprefix(prefix).rstrip(":").rstrip("'") for line in out.splitlines() if line.startswith(prefix)}
    for stage in ("data", "train@res", "logits@res", "train@eff"):  # DVC names stages by their dvc.yaml
        assert f"Running stage 'suites/caltech256/dvc.yaml:{stage}'" in first and stage not in ran, out
    new = {
        "train@lite",
        "logits@lite",
        "sve-train",
        "sve",
        "mc_dropout@mcd-eff",
        "shallow@sh-eff",
        "evaluate",
        "report",
    }
    assert new <= ran, out
    assert (
        "Running stage 'suites/caltech256/dvc.yaml:laplace@la-res'" in first
    )  # (its params changed here: it may rerun)
    m = pd.read_csv(folder / "results" / "metrics.csv")
    assert set(m["suite"]) == {"caltech256"}
    assert set(m["family"]) == {"single", "duo", "sve", "mc_dropout", "laplace", "shallow_ensemble"}
    assert set(m.loc[m.family == "single", "base"]) == {"res", "eff", "lite"}
    duos = m[m.family == "duo"]
    assert ("res", "eff") in set(zip(duos["base"], duos["sidekick"], strict=True))
    index = suite_source.read_index(folder / "results" / "data" / "test.npz", "test")
    for name, lead in (("sve-m2", (2,)), ("mcd-eff", (3,)), ("la-res", ()), ("sh-eff", (2,))):
        lf = store.load_logits_file(folder / "results" / "methods" / name / "test.safetensors")
        assert np.array_equal(lf.ids.numpy(), index.ids) and tuple(lf.logits.shape) == (*lead, len(index.ids), 257)
    assert (folder / "results" / "method_checkpoints" / "sh-eff" / "train.json").exists()  # joint: trained, resumable
    # the published split (torch random_split, seed 42) of 36 images in category order, labels = category
    n = 3 * PER_CLASS
    parts = torch.utils.data.random_split(
        range(n),
        [int(0.7 * n), int(0.15 * n), n - int(0.7 * n) - int(0.15 * n)],
        generator=torch.Generator().manual_seed(42),
    )
    test = store.load_logits_file(folder / "results" / "logits" / "eff" / "test.safetensors")
    assert test.ids.tolist() == list(parts[2].indices) and test.labels.tolist() == [
        i // PER_CLASS for i in parts[2].indices
    ]
    assert tuple(test.logits.shape) == (len(parts[2]), 257)
    assert (folder / "reports" / "index.html").stat().st_size > 1000
    status = run(["python", "-m", "dvc", "status", "--json", "suites/caltech256/dvc.yaml"], root).stdout
    assert json.loads(status or "{}") == {}
    lock = yaml.safe_load((folder / "dvc.lock").read_text())[
        "stages"
    ]  # the suite's own lock, deps from the suite folder
    assert "train@res" in lock and any(d["path"] == "../../pipelines/train.py" for d in lock["train@res"]["deps"])
    assert all((folder / d["path"]).exists() for s in lock.values() for d in s.get("deps", []))
    assert (root / ".dvc" / "cache").is_dir() and not (folder / ".dvc").exists()  # the root project's cache
    # ... and the root project's remote serves the suite (a foreach group named through the suite's dvc.yaml)
    run(["python", "-m", "dvc", "remote", "add", "-d", "team", str(root.parent / "remote")], root)
    pushed = run(["python", "-m", "benchmark", "remote", "push", "suites/caltech256/dvc.yaml:logits"], root).stdout
    assert "to remote 'team'" in pushed and "suites/caltech256/dvc.yaml:logits@res" in pushed, pushed
    # the root project next to it: `dvc status` lists the embedded pipeline's stages, the (asked for, run) suite is
    # up to date; another suite, not asked for, never appears
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, root / name)
    shutil.copy(ROOT / "suites" / "dtd.yaml", root / "suites")
    shutil.copytree(
        ROOT / "suites" / "dtd", root / "suites" / "dtd", ignore=shutil.ignore_patterns("dvc.yaml", "results")
    )
    pending = json.loads(run(["python", "-m", "dvc", "status", "--json"], root).stdout or "{}")
    assert "data" in pending and not [s for s in pending if "suites/" in s], pending
