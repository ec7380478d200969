"""A stage depends only on the code it runs (issue 49), on the real pipeline: the tiny Caltech-256 suite already run
through DVC (the session fixture ``caltech``), copied and changed one layer at a time, ``dvc status`` after each.

* editing every file of one layer, each layer in turn (the metrics, the report, the bundle, the evaluation, the
  loaders of the other suites, the report's config, the model families the zoo does not use), leaves ``data`` and
  every ``train@`` and ``logits@`` stage up to date; editing the training loop makes every ``train@`` stale (the
  negative control); editing the portable kernels or the cost counter makes the stages that run them stale, never
  ``evaluate`` or ``report`` (issue 55: they read logits);
* adding a zoo entry adds that model's stages and changes no existing stage (nor the generated ``dvc.yaml``);
* adding the combiner of docs/tutorials/add-a-combiner.md as a contributor would (its module and its test from the
  page, the pipeline regenerated) makes only ``evaluate`` stale, and one ``dvc repro`` runs ``evaluate`` and
  ``report`` and puts its rows in the results table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))
from test_incremental import DVC_YAML, SUITE, git, repo, run, stale  # noqa: E402,F401  (repo: a committed private copy of the run)
from test_tutorials import blocks  # noqa: E402

from benchmark.dvcgen import suite_pipeline  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MODELS = ("res", "eff")  # the fixture run's zoo (tests/bundle/fixture_run.py)
MODEL_STAGES = {"data", *(f"{s}@{m}" for s in ("train", "logits") for m in MODELS)}
OTHER_LOADERS = ("imagenet", "iwildcam", "cifar", "oxford")  # caltech256 reads benchmark/data/paper/caltech.py alone
LAYERS = {  # layer -> (its files, relative to the repository, and the stages an edit of them makes stale)
    "metrics": (["benchmark/core/metrics.py"], {"evaluate"}),
    "report": (["benchmark/report"], {"report"}),
    "bundle": (["benchmark/bundle"], set()),
    "evaluation": (["benchmark/evaluation"], {"evaluate"}),
    "other suites' loaders": ([f"benchmark/data/paper/{m}.py" for m in OTHER_LOADERS], set()),
    "report config": (["benchmark/config/report_config.py"], {"evaluate", "report"}),
    "other model families": (
        ["benchmark/models/torchvision_zoo.py", "benchmark/models/hub.py"],
        set(),
    ),  # a scratch zoo
}
MODEL_CODE = {  # code that runs models: the stages that run it, never evaluate or report (they read logits)
    "benchmark/models/portable.py": {*(f"{s}@{m}" for s in ("train", "logits") for m in MODELS), "laplace@la-res"},
    "benchmark/models/cost.py": {
        *(f"logits@{m}" for m in MODELS),
        "laplace@la-res",
    },  # the counter: costs are logits@'s
}


def files_of(repo: Path, paths) -> list[Path]:
    out = []
    for rel in paths:
        path = repo / rel
        out += (
            sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
            if path.is_dir()
            else [path]
        )
    return out


def edit(path: Path) -> None:
    """A change of the file's bytes (a comment where it is Python, a newline otherwise)."""
    with open(path, "ab") as f:
        f.write(b"\n# edited\n" if path.suffix == ".py" else b"\n")


def test_each_layer_leaves_data_train_and_logits_up_to_date(repo):
    assert stale(repo) == set(), "the fixture run is up to date"
    lock = yaml.safe_load((repo / SUITE / "dvc.lock").read_text())["stages"]
    assert MODEL_STAGES <= set(lock)
    for layer, (paths, expected) in LAYERS.items():
        files = files_of(repo, paths)
        assert files, layer
        for f in files:
            edit(f)
        got = stale(repo)
        assert not got & MODEL_STAGES, f"editing {layer} ({len(files)} files) made {sorted(got & MODEL_STAGES)} stale"
        assert got == expected, (layer, got)  # the edit was seen: the stages that do run the layer are stale
        git(repo, "checkout", "--", *paths)  # restored: the next layer's edit alone
    assert stale(repo) == set()
    # the negative control: the training loop runs in every train@ stage (and loads the weights in logits@)
    edit(repo / "benchmark" / "models" / "train.py")
    got = stale(repo)
    assert {f"train@{m}" for m in MODELS} <= got and "data" not in got, got
    git(repo, "checkout", "--", "benchmark/models/train.py")
    for path, expected in MODEL_CODE.items():  # and the model code: the stages that run models, never evaluate
        edit(repo / path)
        assert stale(repo) == expected, path
        git(repo, "checkout", "--", path)


def test_a_zoo_entry_and_the_tutorials_combiner_add_their_own_stages_only(repo):
    folder = repo / SUITE
    dvc_yaml = (folder / "dvc.yaml").read_text()
    # a zoo entry: that model's stages (evaluate and report read the zoo file); no existing stage changes
    zoo_file = repo / "zoo" / "caltech256.yaml"
    zoo = yaml.safe_load(zoo_file.read_text())
    zoo["models"]["res2"] = dict(zoo["models"]["res"], seed=2)
    zoo_file.write_text(yaml.safe_dump(zoo))
    assert stale(repo) == {"train@res2", "logits@res2", "evaluate", "report"}
    assert suite_pipeline.render("caltech256", repo)["dvc.yaml"] == dvc_yaml  # the zoo's foreach: no definition changes
    git(repo, "checkout", "--", "zoo/caltech256.yaml")

    # the tutorial's combiner, as a pull request adds it: its module, its test, the regenerated pipeline
    written = []
    for b in blocks(ROOT / "docs" / "tutorials" / "add-a-combiner.md"):
        if b["mark"] == "file":
            (repo / b["arg"]).parent.mkdir(parents=True, exist_ok=True)
            (repo / b["arg"]).write_text(b["code"])
            written.append(b["arg"])
    assert written == ["benchmark/methods/confidence_switch.py", "tests/methods/test_confidence_switch.py"]
    run(["python", "-m", "benchmark", "suite-pipeline", "caltech256"], repo)
    stages = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    assert [n for n, s in stages.items() if "benchmark/methods/confidence_switch.py" in str(s)] == ["evaluate"]
    assert stale(repo) == {"evaluate"}
    touched = sorted(line[3:] for line in git(repo, "status", "--porcelain", "--untracked-files=all").splitlines())
    assert touched == [*written[:1], f"{SUITE}/dvc.yaml", *written[1:]], touched
    out = run(["python", "-m", "dvc", "repro", DVC_YAML], repo)
    ran = {
        line.split(":", 1)[1].rstrip(":").rstrip("'")
        for line in out.splitlines()
        if line.startswith(f"Running stage '{DVC_YAML}:")
    }
    assert ran == {"evaluate", "report"}, out[-3000:]
    assert stale(repo) == set()
    last = json.loads((folder / "results" / "units" / "last_run.json").read_text())
    assert last["computed"] == last["pairs"] >= 1, last  # the new units only: one per pair, as the duos
    rows = pd.read_csv(folder / "results" / "metrics.csv", keep_default_na=False)
    switch = rows[rows.family == "confidence_switch"]
    assert len(switch) and set(switch["members"]) == set(rows.loc[rows.family == "duo", "members"])
