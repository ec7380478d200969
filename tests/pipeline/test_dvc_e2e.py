"""The whole pipeline through DVC on a tiny profile (the session's ``embedded_run``: tests/checkouts.py): every result,
DVC's commands at the root. Growing the zoo and submitting the run: the tutorials that do it
(tests/docs/test_tutorials.py)."""

import json
import os
import subprocess

import pandas as pd
import pytest
from checkouts import TINY_ZOO, run

pytestmark = pytest.mark.slow


def dvc(*args, cwd):
    return run(["python", "-m", "dvc", *args], cwd)


@pytest.fixture
def project(embedded_run):
    """The embedded default's tiny run, shared by the test run: read it, never write into it (no DVC command either:
    DVC writes its scratch folder .dvc/tmp); a private copy for that (``copy``)."""
    return embedded_run


@pytest.fixture
def copy(embedded_run, tmp_path):
    from shared_runs import private_copy

    return private_copy(embedded_run, tmp_path / "copy")


def test_repro_builds_every_result(project):
    m = pd.read_csv(project / "results" / "metrics.csv")
    assert set(m["family"]) >= {"single", "duo", "deep_ensemble", "soup", "mc_dropout", "laplace", "sve"}
    singles = m[m.family == "single"]
    assert set(singles["base"]) == set(TINY_ZOO["models"])
    duos = m[m.family == "duo"]
    # pairs: every ordered (base, sidekick) with GFLOPs(base) > GFLOPs(sidekick)
    costs = {
        n: json.loads((project / "results" / "cost" / f"{n}.json").read_text())["gflops"] for n in TINY_ZOO["models"]
    }
    expected = {(b, s) for b in costs for s in costs if costs[b] > costs[s]}
    assert set(zip(duos["base"], duos["sidekick"])) == expected
    assert set(duos["method"]) == {"weighted", "unweighted", "uq_only"}
    assert {"accuracy", "macro_f1", "brier", "nll", "ece", "auroc", "aurc", "eaurc", "augrc", "sac98"} <= set(
        m["metric"]
    )
    assert {"test", "shift", "ood", "corrupt-all-5"} <= set(
        m["split"]
    )  # params corruption_pool: one split per severity
    test = m[(m.split == "test") & (m.metric == "accuracy")]
    assert (
        test["ci_low"].notna().all()
        and (test["ci_low"] <= test["value"]).all()
        and (test["value"] <= test["ci_high"]).all()
    )
    # training budgets, 1 epoch everywhere over 200 train images: a fine-tune 200 images; SVE M x its train_subset of
    # 100 from the pretrained backbone; the soups both fine-tunes; MC dropout and Laplace tiny-a's fine-tune
    first = m[(m.split == "test") & (m.metric == "accuracy")].groupby(["family", "method"])["train_images"].agg(set)
    assert all(first[("single", meth)] == {200} for fam, meth in first.index if fam == "single")
    assert (first[("sve", "m1")], first[("sve", "m2")]) == ({100}, {200})
    assert first[("soup", "uniform")] == first[("soup", "greedy")] == {400}
    assert (
        first[("mc_dropout", first.loc["mc_dropout"].index[0])]
        == first[("laplace", first.loc["laplace"].index[0])]
        == {200}
    )
    assert (m["train_params"] > 0).all()
    summary = json.loads((project / "results" / "summary.json").read_text())
    assert "tiny-a" in summary["single"] and summary["duo"]
    assert (project / "reports" / "index.html").stat().st_size > 1000
    assert (project / "dvc.lock").exists()


# a second `dvc repro` that runs nothing, submit and verify of this run, and adding a zoo entry to it: the docs pages
# walked by tests/docs/test_tutorials.py do all three (share-outputs in a clone that pulled this run's outputs,
# submit-results, add-a-model), and its tests check what they built


def test_dvc_commands_at_the_root_show_the_embedded_default_only(copy):
    """`dvc metrics show`, `dvc plots show` and `dvc status` at the root of a copy of the finished run with
    an unrun paper suite (as committed: its params.yaml, no dvc.yaml): clean output, a compact headline, nothing
    of the suite; once the suite is asked for (its dvc.yaml materialised), `dvc status` includes it."""
    root = copy
    assert sorted(p.name for p in (root / "suites" / "caltech256").iterdir()) == ["params.yaml"]  # a plain folder
    metrics = dvc("metrics", "show", cwd=root)
    lines = metrics.strip().splitlines()
    assert "failed" not in metrics.lower() and lines[0].split()[:2] == ["Path", "accuracy"]
    assert max(map(len, lines)) <= 120, metrics
    assert {"aurc", "auroc", "ece", "nll", "gflops"} <= set(lines[0].split())
    paths = [ln.split()[0] for ln in lines[1:]]
    assert (
        paths
        and all(p.startswith("reports/headline/") for p in paths)
        and "reports/headline/tiny-a/alone.json" in paths
    )
    plots = subprocess.run(
        ["python", "-m", "dvc", "plots", "show"],
        cwd=root,
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        timeout=600,
    )
    assert plots.returncode == 0 and "failed" not in (plots.stdout + plots.stderr).lower(), plots.stderr
    status = dvc("status", cwd=root)
    assert "suites/" not in status and "up to date" in status, status
    run(["python", "-m", "benchmark", "suite-pipeline", "caltech256"], root)  # ask for the suite
    pending = set(json.loads(dvc("status", "--json", cwd=root) or "{}"))
    assert "suites/caltech256/dvc.yaml:data" in pending and all(s.startswith("suites/caltech256/") for s in pending), (
        pending
    )
