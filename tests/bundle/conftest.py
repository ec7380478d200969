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
    """A bundle submitted from the fixture run (leaderboard-like folder <tmp>/caltech256/b1); never modified."""
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


@pytest.fixture(scope="session")
def records(pristine, caltech, tmp_path_factory) -> Path:
    """The folder of verification records of the pristine bundle (``verify --record-to``, as the deploy workflow
    does)."""
    out = tmp_path_factory.mktemp("records")
    rc = cli_main(
        [
            "verify",
            str(pristine),
            "--logits",
            str(caltech / "suites" / SUITE / "results"),
            "--record-to",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 0 and (out / SUITE / f"{pristine.name}.json").is_file()
    return out


@pytest.fixture
def load():
    """load_bundle without the timm architecture look-ups (as publish)."""
    from benchmark.bundle.schema import load_bundle

    return lambda path: load_bundle(path, check_arch=False)


@pytest.fixture
def fast_report(monkeypatch):
    """publish without drawing the suite pages (tests of intake, status and isolation, not of the report)."""
    from helpers import stub_page

    import benchmark.report

    def build(inputs, out, **kw):
        return stub_page(inputs, out)

    monkeypatch.setattr(benchmark.report, "build_report", build)
