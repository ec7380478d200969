"""One bundle made from the Caltech-256-layout suite run through DVC (the session fixture ``caltech`` of
tests/conftest.py), shared by the bundle tests."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmark.cli.main import main as cli_main

SUITE = "caltech256"


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
