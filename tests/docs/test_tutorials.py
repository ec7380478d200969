"""Every code block of the tutorials (docs/tutorials/*.md) runs as written.

A page's blocks run in order in one fresh git repository holding a copy of this checkout's code, configuration and
committed bundles (:data:`COPIED`: what a reader's clone has, without results), with the network off:

* ```` ```bash ````: run with ``bash -e``; ```` ```python ````: run as a script;
* ```` ```yaml ```` or ```` ```python ```` preceded by ``<!-- file: PATH -->``: written to ``PATH`` (the reader writes
  that file: a config, a module, a test; later blocks use it); any other YAML block must parse;
* ```` ```text ````: output or a layout, not run;
* a block preceded by ``<!-- skip: REASON -->`` (it needs a GPU, a dataset, a network or a finished pipeline) is not
  run, but each of its commands must be one this checkout has: ``python -m benchmark ...`` and ``dvc ...`` command
  lines are parsed by their own parsers (options, required arguments, choices), a stage script or shell script must
  exist, anything else must be a plain shell tool.

Blocks of CONTRIBUTING.md that a tutorial includes (``<!-- include:... -->``) are that file's own: its method
examples are run by ``tests/test_contributing.py``, its commands are checked here like skipped blocks.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
BLOCK = re.compile(r"(?:^<!-- (?P<mark>skip|file): (?P<arg>[^>]+?) -->\n)?^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```[ \t]*$",
                   re.M | re.S)
COPIED = ("benchmark", "pipelines", "scripts", "params.yaml", "dvc.yaml", "zoo", "suites", "leaderboard", ".dvc", ".dvcignore")
SHELL_TOOLS = {".", "source", "export", "cd", "ls", "cat", "echo", "git", "cp", "mkdir", "open", "xdg-open", "nvidia-smi", "torchrun"}
SPLIT = {"&&", "||", ";", "|", "&"}
PYTHON_TOOLS = {"pytest", "mkdocs", "pip"}  # `python -m <tool>`: installed by the set-up


def blocks(path: Path | str) -> list[dict]:
    """The fenced blocks of a page (or of Markdown text), with the mark before each."""
    text = path.read_text(encoding="utf-8") if isinstance(path, Path) else path
    return [m.groupdict() for m in BLOCK.finditer(text)]


def commands(code: str) -> list[list[str]]:
    """The simple commands of a shell block: continuation lines joined, comments dropped, split at && || ; |."""
    out = []
    for line in code.replace("\\\n", " ").splitlines():
        line = re.sub(r"\s\d?>{1,2}&?\s*[^\s;&|]+", " ", line)  # redirections
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lex.whitespace_split, lex.commenters = True, "#"
        words: list[str] = []
        for tok in [*lex, ";"]:
            if tok in SPLIT or set(tok) <= set(";&|"):
                while words and re.match(r"^[A-Za-z_]\w*=", words[0]):  # VAR=value cmd
                    words.pop(0)
                if words:
                    out.append(words)
                words = []
            else:
                words.append(tok)
    return out


def check_command(words: list[str]) -> None:
    """``words`` is a command this checkout has (see the module docstring); AssertionError otherwise."""
    if words[0].endswith("/python") or words[0] == "python3":  # .venv/bin/python
        words = ["python", *words[1:]]
    if words[0] == "python" and words[1] == "-m" and words[2] in PYTHON_TOOLS:
        return
    if words[0] == "python" and words[1:3] == ["-m", "benchmark"]:
        from benchmark.cli.main import build_parser

        try:
            build_parser().parse_args(words[3:])
        except SystemExit as e:
            raise AssertionError(f"`{shlex.join(words)}` does not parse (exit {e.code})") from None
    elif words[0] == "python" and len(words) > 1 and words[1].endswith(".py"):
        assert (ROOT / words[1]).is_file(), f"`{shlex.join(words)}`: no script {words[1]}"
    elif words[0] == "bash":
        assert (ROOT / words[1]).is_file(), f"`{shlex.join(words)}`: no script {words[1]}"
    elif words[0] == "dvc":
        from dvc.cli import DvcParserError, parse_args

        try:
            parse_args(words[1:])
        except DvcParserError:
            raise AssertionError(f"`{shlex.join(words)}` does not parse") from None
    else:
        assert words[0] in SHELL_TOOLS, f"`{shlex.join(words)}`: not a command of this project or a plain shell tool"


@pytest.fixture
def reader(tmp_path):
    """A fresh folder with what a reader's checkout has, and the environment to run blocks in."""
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, tmp_path / name)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    # PATH: tests/conftest.py put the virtual environment's bin (python, dvc) on it, behind the tests' warm python
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "HF_HUB_OFFLINE": "1", "NO_MKDOCS_2_WARNING": "1"}
    return tmp_path, env


def test_every_tutorial_block_is_known():
    assert {p.stem for p in TUTORIALS} >= {"own-logits", "paper-suite", "add-a-model", "add-a-method", "add-a-combiner",
                                          "submit-results"}
    for page in TUTORIALS:
        for b in blocks(page):
            assert b["lang"] in ("bash", "python", "yaml", "text"), f"{page.name}: a ```{b['lang']} block (say what it is)"
            assert b["mark"] != "file" or b["lang"] in ("yaml", "python"), f"{page.name}: <!-- file: --> before a ```{b['lang']} block"


@pytest.mark.slow
@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs_as_written(page, reader):
    cwd, env = reader
    ran = 0
    for i, b in enumerate(blocks(page)):
        code, lang, where = b["code"], b["lang"], f"{page.name}, block {i + 1}"
        if b["mark"] == "skip":
            for words in commands(code) if lang == "bash" else []:
                check_command(words)
            continue
        if lang == "python" and b["mark"] == "file":  # a file the reader writes (a module, its test)
            compile(code, b["arg"], "exec")
            target = cwd / b["arg"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code, encoding="utf-8")
            continue
        if lang == "yaml":
            data = yaml.safe_load(code)
            if b["mark"] == "file":
                target = cwd / b["arg"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(code, encoding="utf-8")
            assert data is not None, where
            continue
        if lang == "text":
            continue
        if lang == "bash":
            argv = ["bash", "-e", "-c", code]
        else:  # a script the reader saved, run in the tutorial's folder: ``python`` from PATH (the tests' warm one)
            script = cwd.parent / f"{cwd.name}-blocks" / f"{page.stem}-{i + 1}.py"
            script.parent.mkdir(exist_ok=True)
            script.write_text(code, encoding="utf-8")
            argv = ["python", str(script)]
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{where} failed (exit {proc.returncode}):\n{code}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        ran += 1
    assert ran or page.stem == "add-a-method", f"{page.name}: no block ran"


@pytest.mark.parametrize("page", [ROOT / "README.md", *TUTORIALS], ids=lambda p: p.stem)
def test_included_and_readme_commands_exist(page):
    """The README's commands and those of the CONTRIBUTING.md sections a tutorial includes parse."""
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import reference
    finally:
        sys.path.pop(0)
    text = page.read_text(encoding="utf-8")
    included = "".join(reference.include(ROOT, m.group("file"), m.group("heading")) for m in reference.INCLUDE.finditer(text))
    source = text if page.name == "README.md" else included
    checked = 0
    for b in blocks(source):
        for words in commands(b["code"]) if b["lang"] in ("bash", "sh", "") else []:
            check_command(words)
            checked += 1
    assert checked or page.name != "README.md"


def test_the_checker_refuses_what_a_reader_could_not_run():
    for bad in ("python -m benchmark nosuchcommand", "python -m benchmark metrics", "python -m benchmark duo --fit x a",
                "dvc nosuch", "python pipelines/nosuch.py", "rm -rf /"):
        with pytest.raises(AssertionError):
            for words in commands(bad):
                check_command(words)
    assert commands("A=1 python -m benchmark metrics x.npz --json > out.json && echo ok  # note") == [
        ["python", "-m", "benchmark", "metrics", "x.npz", "--json"], ["echo", "ok"]]
