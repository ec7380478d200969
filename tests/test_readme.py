"""The README's two set-up commands are the ones CI and users run."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(?:bash|sh)\n(.+?)\n```", block, flags=re.S)


def test_readme_has_exactly_two_setup_commands():
    cmds = setup_commands()
    assert len(cmds) == 2, cmds
    assert all("\n" not in c for c in cmds), "each set-up command is one line"
    assert cmds[0].endswith("python -m benchmark run")  # the pipeline two stages at a time (dvc repro's lock)
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command():
    """.ci/run runs the README's test command, its halves (``set-up && tests``) in order with the lint and type checks
    between them."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    setup, tests = setup_commands()[1].split(" && ")
    lint = ".venv/bin/ruff check && .venv/bin/ruff format --check && .venv/bin/mypy"
    assert setup in ci and lint in ci and tests in ci
    assert ci.index(setup) < ci.index(lint) < ci.index(tests)


def test_the_lint_and_type_checks_are_configured_pinned_and_in_pre_commit():
    """ruff and mypy are pinned in the test extra, configured in pyproject.toml, and the pre-commit hooks run the
    same commands as .ci/run."""
    import pytest
    import yaml

    tomllib = pytest.importorskip("tomllib", reason="Python 3.11's TOML reader")

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    test_extra = project["project"]["optional-dependencies"]["test"]
    assert {r.split("==")[0] for r in test_extra if "==" in r} >= {"ruff", "mypy"}
    ruff = project["tool"]["ruff"]
    assert ruff["line-length"] <= 120 and ruff["target-version"] == "py310"
    assert set(ruff["lint"]["select"]) >= {"F", "E", "W", "I", "B", "UP"}
    mypy = project["tool"]["mypy"]
    assert {"benchmark/core", "benchmark/config", "benchmark/storage"} <= set(mypy["files"])
    assert mypy["disallow_untyped_defs"] and "ignore_errors" not in str(project["tool"]["mypy"])
    hooks = {
        h["id"]: h["entry"]
        for r in yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
        for h in r["hooks"]
    }
    assert hooks == {
        "ruff-check": "ruff check --force-exclude",
        "ruff-format": "ruff format --force-exclude",
        "mypy": "mypy",
    }
    assert (ROOT / "benchmark" / "py.typed").is_file() and "py.typed" in project["tool"]["setuptools"]["package-data"][
        "benchmark"
    ]


def test_setup_script_installs_what_the_project_needs():
    script = (ROOT / "scripts" / "setup.sh").read_text()
    assert (
        'pip install -q --no-compile -e ".[test]"' in script and "animal-mnist==0.4" in script and "chromium" in script
    )
    assert "compileall -q -j 0" in script, (
        "--no-compile without the parallel byte-compile leaves every stage compiling at import"
    )
