"""scripts/ci-bundles.sh: every changed bundle is verified whatever its name (NUL-separated paths), or the path is
refused in one line (exit 2) when it is outside the safe character set or not inside a bundle folder; never skipped."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from helpers import read_rows, write_rows

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ci-bundles.sh"


def _git(cwd, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.quotepath=true", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(pristine, tmp_path):
    """A git repository whose leaderboard/ holds the pristine bundle, committed."""
    repo = tmp_path / "repo"
    shutil.copytree(pristine, repo / "leaderboard" / "caltech256" / "b1")
    (repo / "leaderboard" / "README.md").write_text("bundles\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    return repo


def script(repo, *args):
    # PYTHON: the first python on PATH, as the script defaults to (in the tests, the warm python: tests/warm_python.py)
    env = dict(os.environ, PYTHON="python", CI_NO_REMOTE="1")
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], cwd=repo, env=env, capture_output=True, text=True)


def _commit(repo, msg="change"):
    _git(repo, "add", "-A", ".")
    _git(repo, "commit", "-qm", msg)


def test_an_added_bundle_is_verified(repo, pristine):
    shutil.copytree(pristine, repo / "leaderboard" / "caltech256" / "b2")
    (repo / "leaderboard" / "README.md").write_text("more\n")
    _commit(repo)
    proc = script(repo, "verify", "HEAD~1")
    assert proc.returncode == 0, proc.stderr
    assert "bundles to verify: 1" in proc.stdout and "b2: self-reported" in proc.stdout


@pytest.mark.parametrize("name", ["bé", "b 2", "b\n2", "b\t2", "b\\2", "B2$(id)", "b2'", "b*"])
def test_a_name_outside_the_safe_set_is_refused_not_skipped(repo, pristine, name):
    shutil.copytree(pristine, repo / "leaderboard" / "caltech256" / name)
    _commit(repo)
    proc = script(repo, "verify", "HEAD~1")
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(err) == 1 and err[0].startswith("ci-bundles: refusing "), proc.stderr
    assert "may only use the characters" in err[0]


@pytest.mark.parametrize(
    "path", ["leaderboard/notes.md", "leaderboard/caltech256/manifest.json", "leaderboard/caltech256/x.csv"]
)
def test_a_file_outside_a_bundle_folder_is_refused(repo, path):
    (repo / path).write_text("{}")
    _commit(repo)
    proc = script(repo, "verify", "HEAD~1")
    assert proc.returncode == 2 and "ci-bundles: refusing" in proc.stderr and path in proc.stderr


def test_an_edited_bundle_is_verified_and_fails(repo):
    rows = read_rows(repo / "leaderboard" / "caltech256" / "b1")
    rows.loc[0, "value"] = "0.123"
    write_rows(repo / "leaderboard" / "caltech256" / "b1", rows, keep_hash=True)
    _commit(repo)
    proc = script(repo, "verify", "HEAD~1")
    assert proc.returncode == 2 and "the file was edited" in proc.stderr


def test_a_deleted_file_makes_its_bundle_verified_again(repo):
    (repo / "leaderboard" / "caltech256" / "b1" / "models.csv").unlink()
    _commit(repo)
    proc = script(repo, "verify", "HEAD~1")
    assert proc.returncode == 2 and "bundles to verify: 1" in proc.stdout and "models.csv: missing" in proc.stderr


def test_a_removed_bundle(repo):
    shutil.rmtree(repo / "leaderboard" / "caltech256" / "b1")
    _commit(repo)
    proc = script(repo, "verify", "HEAD~1")
    assert proc.returncode == 0 and "leaderboard/caltech256/b1: removed" in proc.stdout


def test_verify_all_and_publish_with_records(repo, pristine, records, tmp_path):
    bad = repo / "leaderboard" / "caltech256" / "bad"
    shutil.copytree(pristine, bad)
    (bad / "evil.html").write_text("<script>")
    recs = tmp_path / "records"
    proc = script(repo, "verify-all", recs)
    assert proc.returncode == 0 and "bundles: 2, verified: 0" in proc.stdout  # no logits here: nothing recorded
    assert "::warning::leaderboard/caltech256/bad: not verified" in proc.stdout
    proc = script(repo, "publish", tmp_path / "site", records)  # the session's records: b1 verified
    assert proc.returncode == 3 and "left out leaderboard/caltech256/bad" in proc.stderr
    entries = pd.read_csv(tmp_path / "site" / "caltech256" / "data" / "entries.csv.gz")
    assert dict(zip(entries["bundle"], entries["status"])) == {"b1": "verified"}
