"""Incremental by construction (issue 24): on a finished DVC run, a change re-runs exactly its own stages.

A copy of the tiny Caltech-256 suite already run through DVC (the session fixture ``caltech``) is changed step by step,
``dvc status`` checked after each step, then one ``dvc repro`` runs everything that is stale:

* editing a method's module (last-layer Laplace) makes only that method's stage stale;
* editing an evaluate-time method's module (Asymmetric Duos) makes only ``evaluate`` stale, and the evaluate stage then
  recomputes only that method's units (the unit cache is keyed on its module's code);
* adding a zoo entry adds only its ``train@``/``logits@`` stages (``evaluate`` and ``report`` read the zoo file);
* adding a weight-free and a weight-based method, as CONTRIBUTING shows them (their module, their test and their
  params entry: nothing else changes in the repository), adds only their stages.

The repro never runs ``data`` nor the ``train@``/``logits@`` stages of the models already there, and puts the new
methods' rows in the results table and on the leaderboard.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_contributing import blocks  # noqa: E402

pytestmark = pytest.mark.slow
SUITE = "suites/caltech256"
DVC_YAML = f"{SUITE}/dvc.yaml"


def run(cmd, cwd: Path) -> str:
    """``cmd`` in the copy ``cwd``, its package first on the path (DVC's stage commands inherit it)."""
    env = {k: v for k, v in os.environ.items() if k != "UQBENCH_DATA"}
    env.update(HF_HUB_OFFLINE="1", TQDM_DISABLE="1", PYTHONUNBUFFERED="1", PYTHONPATH=str(cwd))
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def stale(repo: Path) -> set[str]:
    """The stages ``dvc status`` lists (changed deps, params or code, or never run), by their name in the suite."""
    out = json.loads(run(["python", "-m", "dvc", "status", "--json", DVC_YAML], repo) or "{}")
    return {name.removeprefix(f"{DVC_YAML}:") for name in out}


def git(repo: Path, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


@pytest.fixture
def repo(caltech, tmp_path) -> Path:
    """A private copy of the finished run, committed (to see which files a change touches)."""
    dst = tmp_path / "repo"
    shutil.copytree(caltech, dst, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "tmp"))
    git(dst, "add", "-A")
    git(dst, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "finished run")
    return dst


def test_a_change_reruns_only_its_own_stages(repo):
    folder = repo / SUITE
    assert stale(repo) == set(), "the fixture run is up to date"
    before = {s for s in yaml.safe_load((folder / "dvc.lock").read_text())["stages"]}
    assert {
        "data",
        "train@res",
        "train@eff",
        "logits@res",
        "logits@eff",
        "laplace@la-res",
        "evaluate",
        "report",
    } <= before

    # 1. a method's numerics edited: only its stage
    append(repo / "benchmark" / "methods" / "laplace.py", "\n# edited: a change to the method's code\n")
    assert stale(repo) == {"laplace@la-res"}
    # 2. an evaluate-time method edited (Asymmetric Duos): only the evaluate stage
    append(repo / "benchmark" / "methods" / "duo.py", "\n# edited: a change to the duo's code\n")
    assert stale(repo) == {"laplace@la-res", "evaluate"}
    # 3. a zoo entry added: its own train@/logits@ stages; evaluate and report read the zoo file
    zoo_file = repo / "zoo" / "caltech256.yaml"
    zoo = yaml.safe_load(zoo_file.read_text())
    zoo["models"]["res2"] = dict(zoo["models"]["res"], seed=2)
    zoo_file.write_text(yaml.safe_dump(zoo))
    assert stale(repo) == {"laplace@la-res", "evaluate", "train@res2", "logits@res2", "report"}
    # 4. a weight-free and a weight-based method added as CONTRIBUTING shows them: module, test, params entry
    code = blocks()
    for path, text in code.items():
        if path.startswith(("benchmark/methods/", "tests/methods/")):
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
    params = yaml.safe_load((folder / "params.yaml").read_text())
    for kind, entries in yaml.safe_load(code["params.yaml"])["baselines"].items():
        params["baselines"][kind] = {key: dict(e, model="res") for key, e in entries.items()}  # the suite's zoo model
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["python", "-m", "benchmark", "suite-pipeline", "caltech256"], repo)  # regenerate
    new = {"fixed_temperature@ftemp-lite0-s0", "flip_tta@flip-lite0-s0"}
    assert stale(repo) == {"laplace@la-res", "evaluate", "train@res2", "logits@res2", "report"} | new
    stages = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    assert "../../results/logits" not in str(stages["fixed_temperature"])  # (paths are the suite folder's)
    assert {"results/logits/${item.model}", "results/cost/${item.model}.json"} <= set(
        stages["fixed_temperature"]["do"]["deps"]
    )
    assert "results/checkpoints/${item.model}" in stages["flip_tta"]["do"]["deps"]
    assert "../../benchmark/methods/flip_tta.py" not in stages["fixed_temperature"]["do"]["deps"]
    changed = git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    touched = sorted(line[3:] for line in changed)
    assert touched == [
        "benchmark/methods/duo.py",
        "benchmark/methods/fixed_temperature.py",
        "benchmark/methods/flip_tta.py",
        "benchmark/methods/laplace.py",
        f"{SUITE}/dvc.yaml",
        f"{SUITE}/params.yaml",
        "tests/methods/test_fixed_temperature.py",
        "tests/methods/test_flip_tta.py",
        "zoo/caltech256.yaml",
    ], touched

    out = run(["python", "-m", "dvc", "repro", DVC_YAML], repo)
    ran = {
        line.split(":", 1)[1].rstrip(":").rstrip("'")
        for line in out.splitlines()
        if line.startswith(f"Running stage '{DVC_YAML}:")
    }
    assert ran == {"laplace@la-res", "evaluate", "train@res2", "logits@res2", "report"} | new, out[-3000:]
    assert stale(repo) == set()
    last = json.loads((folder / "results" / "units" / "last_run.json").read_text())
    # reused: the singles of res and eff and the Laplace output (their code and logits unchanged: the re-run Laplace
    # stage wrote the same logits); recomputed: every duo (duo.py changed), the new model's single, the two new outputs
    assert last["reused"] == 3 and last["computed"] == last["pairs"] + 1 + 2 and last["pairs"] >= 2, last
    rows = pd.read_csv(folder / "results" / "metrics.csv", keep_default_na=False)
    assert {"fixed_temperature", "flip_tta", "laplace", "single", "duo"} <= set(rows["family"])
    assert set(rows.loc[rows.family == "single", "base"]) == {"res", "eff", "res2"}
    page = "".join(
        p.read_text(errors="ignore") for p in (folder / "reports").rglob("*") if p.suffix in (".html", ".json", ".csv")
    )
    assert "fixed_temperature" in page and "flip_tta" in page
