"""One Caltech-256-layout suite run through DVC and one bundle made from it, shared by the bundle tests."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fixture_run import caltech_run  # noqa: E402

from benchmark.cli.main import main as cli_main  # noqa: E402

SUITE = "caltech256"


@pytest.fixture(scope="session")
def caltech(tmp_path_factory) -> Path:
    """Root of a repository copy whose suites/caltech256 pipeline has run (results/, dvc.lock).

    ``UQBENCH_BUNDLE_FIXTURE=DIR`` reuses a run made by ``python tests/bundle/fixture_run.py DIR`` (development)."""
    import os

    if os.environ.get("UQBENCH_BUNDLE_FIXTURE"):
        return Path(os.environ["UQBENCH_BUNDLE_FIXTURE"]) / "repo"
    return caltech_run(tmp_path_factory.mktemp("caltech"))


@pytest.fixture(scope="session")
def pristine(caltech, tmp_path_factory) -> Path:
    """A bundle submitted (and verified, recorded) from the fixture run; never modified."""
    out = tmp_path_factory.mktemp("bundles") / SUITE / "b1"
    import os

    cwd = os.getcwd()
    os.chdir(caltech)
    try:
        assert cli_main(["submit", "--suite", SUITE, "--out", str(out), "--contributor", "tests <b>&"]) == 0
    finally:
        os.chdir(cwd)
    return out


@pytest.fixture
def bundle(pristine, tmp_path) -> Path:
    """A private copy of the pristine bundle (tests edit it)."""
    dst = tmp_path / "leaderboard" / SUITE / pristine.name
    shutil.copytree(pristine, dst)
    return dst


@pytest.fixture
def results(caltech) -> Path:
    return caltech / "suites" / SUITE / "results"
