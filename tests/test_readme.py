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
    assert cmds[0].endswith("dvc repro")
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert setup_commands()[1] in ci


def test_setup_script_installs_what_the_project_needs():
    script = (ROOT / "scripts" / "setup.sh").read_text()
    assert 'pip install -q --no-compile -e ".[test]"' in script and "animal-mnist==0.4" in script and "chromium" in script
    assert "compileall -q -j 0" in script, "--no-compile without the parallel byte-compile leaves every stage compiling at import"
