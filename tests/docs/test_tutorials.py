"""Every code block of the tutorials and how-tos (docs/tutorials/*.md, docs/how-to/*.md) runs as written.

A page's blocks run in order, each from the root of the reader's checkout, with the network off: a fresh clone of
this checkout (:func:`checkouts.fresh_clone`: what git tracks, committed), or, for a page marked
``<!-- start: after the main job -->``, a copy of a clone where the embedded default's main job ran and was
committed (the session's ``embedded_run``, on a tiny profile: tests/checkouts.py). Each page is walked once per test
run (shared by the pytest-xdist workers); the tests below read what its walk printed and built.

* ```` ```bash ````: run with ``bash -e``; ```` ```python ````: run as a script;
* ```` ```yaml ```` or ```` ```python ```` preceded by ``<!-- file: PATH -->``: written to ``PATH`` (the reader writes
  that file: a config, a module, a test; later blocks use it); any other YAML block must parse;
* ```` ```text ````: output or a layout, not run;
* a block preceded by ``<!-- skip: REASON -->`` (it needs a GPU, a dataset or a network) is not
  run, but each of its commands must be one this checkout has: ``python -m benchmark ...`` and ``dvc ...`` command
  lines are parsed by their own parsers (options, required arguments, choices), a stage script or shell script must
  exist, anything else must be a plain shell tool.

Blocks of the CONTRIBUTING.md sections written into a page (``<!-- generated:contributing-... -->``,
:mod:`benchmark.docsgen.includes`) are that file's own: its method examples are run by ``tests/test_contributing.py``,
its commands are checked here like skipped blocks.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
HOW_TOS = sorted((ROOT / "docs" / "how-to").glob("*.md"))
PAGES = TUTORIALS + HOW_TOS
BLOCK = re.compile(
    r"(?:^<!-- (?P<mark>skip|file): (?P<arg>[^>]+?) -->\n)?^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```[ \t]*$", re.M | re.S
)
AFTER_RUN = "<!-- start: after the main job -->"  # the page starts where the embedded default's pipeline ran
SHELL_TOOLS = {
    ".",
    "source",
    "export",
    "cd",
    "ls",
    "cat",
    "echo",
    "git",
    "cp",
    "mkdir",
    "open",
    "xdg-open",
    "nvidia-smi",
    "torchrun",
}
SPLIT = {"&&", "||", ";", "|", "&"}
PYTHON_TOOLS = {"pytest", "mkdocs", "pip", "coverage"}  # `python -m <tool>`: installed by the set-up


INCLUDED = re.compile(r"^<!-- generated:(contributing-[\w-]+) -->\n.*?^<!-- /generated:\1 -->\n?", re.M | re.S)


def blocks(path: Path | str) -> list[dict]:
    """The fenced blocks of a page (or of Markdown text), with the mark before each; those of the CONTRIBUTING.md
    sections written into it (:func:`included`) left out."""
    text = path.read_text(encoding="utf-8") if isinstance(path, Path) else path
    return [m.groupdict() for m in BLOCK.finditer(INCLUDED.sub("", text))]


def included(text: str) -> str:
    """The CONTRIBUTING.md sections written into a page's Markdown."""
    return "".join(m.group(0) for m in INCLUDED.finditer(text))


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


def starts_after_run(page: Path) -> bool:
    return AFTER_RUN in page.read_text(encoding="utf-8")


def _run_block(page: Path, i: int, b: dict, cwd: Path, env: dict) -> subprocess.CompletedProcess | None:
    """Run block ``i`` of ``page`` in ``cwd`` (None: nothing to run); AssertionError for a block that cannot run."""
    code, lang = b["code"], b["lang"]
    if b["mark"] == "skip":
        for words in commands(code) if lang == "bash" else []:
            check_command(words)
        return None
    if lang == "python" and b["mark"] == "file":  # a file the reader writes (a module, its test)
        compile(code, b["arg"], "exec")
        target = cwd / b["arg"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code, encoding="utf-8")
        return None
    if lang == "yaml":
        data = yaml.safe_load(code)
        if b["mark"] == "file":
            target = cwd / b["arg"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code, encoding="utf-8")
        assert data is not None, "an empty YAML block"
        return None
    if lang == "text":
        return None
    if lang == "bash":
        argv = ["bash", "-e", "-c", code]
    else:  # a script the reader saved, run in the page's folder: ``python`` from PATH (the tests' warm one)
        script = cwd.parent / "blocks" / f"{page.stem}-{i + 1}.py"
        script.parent.mkdir(exist_ok=True)
        script.write_text(code, encoding="utf-8")
        argv = ["python", str(script)]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def walk(page: Path, folder: Path, run: Path | None) -> Path:
    """Walk ``page`` in ``folder/checkout`` (a fresh clone, or a private copy of the finished ``run``), block by block
    until one fails; each block's outcome (exit code, output) goes to ``folder/walk.json``. Returns ``folder``."""
    from checkouts import env as reader_env
    from checkouts import fresh_clone
    from shared_runs import private_copy

    cwd = folder / "checkout"
    start = time.perf_counter()
    if run is not None:
        private_copy(run, cwd)
    elif any(
        b["mark"] != "skip" and b["lang"] != "text" for b in blocks(page)
    ):  # a page that only names commands needs none
        fresh_clone(cwd)
    # PATH: tests/conftest.py put the virtual environment's bin (python, dvc) on it, behind the tests' warm python
    env = reader_env(PYTHONPATH=str(cwd), NO_MKDOCS_2_WARNING="1")
    steps = [
        {
            "block": 0,
            "lang": "",
            "code": "(the checkout)",
            "ran": False,
            "rc": 0,
            "stdout": "",
            "stderr": "",
            "seconds": round(time.perf_counter() - start, 2),
        }
    ]
    for i, b in enumerate(blocks(page)):
        step = {"block": i + 1, "lang": b["lang"], "code": b["code"], "ran": False, "rc": 0, "stdout": "", "stderr": ""}
        start = time.perf_counter()
        try:
            proc = _run_block(page, i, b, cwd, env)
        except (AssertionError, subprocess.TimeoutExpired, yaml.YAMLError) as e:
            step.update(rc=1, stderr=f"{type(e).__name__}: {e}")
        else:
            if proc is not None:
                step.update(ran=True, rc=proc.returncode, stdout=proc.stdout[-20000:], stderr=proc.stderr[-20000:])
        step["seconds"] = round(time.perf_counter() - start, 2)
        steps.append(step)
        if step["rc"]:
            break
    (folder / "walk.json").write_text(json.dumps(steps, indent=1), encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def walked(tmp_path_factory, request):
    """``walked(page) -> (steps, folder)``: the walk of ``page`` (:func:`walk`), once per test run."""
    from shared_runs import once_per_run

    done: dict = {}

    def get(page: Path):
        if page not in done:
            run = request.getfixturevalue("embedded_run") if starts_after_run(page) else None
            folder = Path(
                once_per_run(tmp_path_factory, f"page-{page.parent.name}-{page.stem}", lambda f: walk(page, f, run))
            )
            done[page] = json.loads((folder / "walk.json").read_text(encoding="utf-8")), folder
        return done[page]

    return get


def test_every_page_block_is_known():
    assert {p.stem for p in TUTORIALS} >= {
        "own-logits",
        "paper-suite",
        "add-a-model",
        "add-a-method",
        "add-a-combiner",
        "submit-results",
    }
    assert {p.stem for p in HOW_TOS} >= {"share-outputs", "add-a-suite", "distributed", "gpu-check", "tests"}
    for page in PAGES:
        for b in blocks(page):
            assert b["lang"] in ("bash", "python", "yaml", "text"), (
                f"{page.name}: a ```{b['lang']} block (say what it is)"
            )
            assert b["mark"] != "file" or b["lang"] in ("yaml", "python"), (
                f"{page.name}: <!-- file: --> before a ```{b['lang']} block"
            )


INCLUDE_ONLY = {"add-a-method", "add-a-suite"}  # pages made of CONTRIBUTING.md sections (checked below)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_page_runs_as_written(page, walked):
    steps, _ = walked(page)
    for s in steps:
        assert s["rc"] == 0, (
            f"{page.relative_to(ROOT)}, block {s['block']} failed (exit {s['rc']}):\n{s['code']}\n"
            f"{s['stdout'][-3000:]}\n{s['stderr'][-3000:]}"
        )
    assert (
        any(s["ran"] for s in steps) or page.stem in INCLUDE_ONLY or all(b["mark"] == "skip" for b in blocks(page))
    ), f"{page.name}: no block ran"


def _page(rel: str, walked) -> tuple[list[dict], Path]:
    """The walk of page ``rel`` (under docs/), which must have run to its end."""
    steps, folder = walked(ROOT / "docs" / rel)
    failed = [s["block"] for s in steps if s["rc"]]
    assert not failed, f"{rel}: block {failed[0]} failed (test_page_runs_as_written says why)"
    return steps, folder


def _step(steps: list[dict], command: str) -> dict:
    """The step whose code holds ``command``."""
    found = [s for s in steps if command in s["code"]]
    assert len(found) == 1, f"{len(found)} blocks hold {command!r}"
    return found[0]


@pytest.mark.slow
def test_add_a_model_recomputes_only_the_new_model_and_the_soup(walked, embedded_run):
    """The page's last block (`dvc status && python -m benchmark run`) in a clone where the embedded default ran: the
    new model's stages, the soup the page names, evaluate (its single and its new pairs only) and the report, each run
    (none handed its old outputs); and what flops and validate-zoo counted for the entry is what the run's models.csv
    holds (issue 50 items 4 and 5)."""
    steps, folder = _page("tutorials/add-a-model.md", walked)
    repro = _step(steps, "dvc status && python -m benchmark run")
    ran = re.findall(r"^  (\S+) +- +(\w+) *(.*)$", repro["stdout"], re.M)
    assert {name for name, _, _ in ran} == {"train@mnv3s075", "logits@mnv3s075", "soup@soup-tiny", "evaluate", "report"}
    assert {(state, note) for _, state, note in ran} == {("done", "")}, ran  # each ran: nothing restored
    assert "every stage of dvc.yaml is up to date" in repro["stdout"]
    before = json.loads((embedded_run / "results" / "units" / "last_run.json").read_text())
    after = json.loads((folder / "checkout" / "results" / "units" / "last_run.json").read_text())
    new_pairs = after["pairs"] - before["pairs"]
    assert new_pairs >= 1 and after["computed"] == 1 + new_pairs  # its single + the pairs it forms
    assert after["reused"] == before["units"]  # everything else read from the unit cache, the soups' units included
    import pandas as pd

    models = pd.read_csv(folder / "checkout" / "results" / "models.csv").set_index("name")
    flops = _step(steps, "python -m benchmark flops mobilenetv3_small_075")["stdout"]
    counted = re.search(
        r"@ 48x48, 10 classes \(suite embedded, params.yaml\): ([0-9.e-]+) GFLOPs .*, ([0-9.]+) M parameters", flops
    )
    assert counted, flops
    assert float(counted[1]) == pytest.approx(models.at["mnv3s075", "gflops"], rel=1e-3)
    assert float(counted[2]) == pytest.approx(models.at["mnv3s075", "params"] / 1e6, abs=1e-3)
    line = next(
        ln for ln in _step(steps, "validate-zoo zoo/embedded.yaml\n")["stdout"].splitlines() if " mnv3s075 " in ln
    )
    words = line.split()
    assert words[words.index("classes") - 1] == "10"
    assert float(words[words.index("GFLOPs") - 1]) == pytest.approx(models.at["mnv3s075", "gflops"], rel=1e-3)


STATE = re.compile(r"  (synced|local only|remote only|missing|not run|in git|not shared)$")


@pytest.mark.slow
def test_share_outputs_a_pulled_clone_recomputes_nothing(walked):
    """Issue 50 item 1: every output travels (through the remote, or git), `remote status` lists every one of them,
    and a fresh clone that pulled them has nothing to run: `dvc status` clean, `dvc repro` runs no stage."""
    steps, folder = _page("how-to/share-outputs.md", walked)
    out = _step(steps, "python -m benchmark remote status")["stdout"].splitlines()
    status = out[next(i for i, line in enumerate(out) if line.split() == ["stage", "output", "state"]) + 1 :]
    states = [STATE.search(line)[1] for line in status]
    assert states and set(states) == {"synced", "in git"}, status  # nothing local only, missing or not shared
    assert sum(s == "in git" for s in states) == 1  # results/summary.json
    assert any(line.split()[1] == "results/cost/tiny-a.json" and line.endswith("synced") for line in status)
    pulled = _step(steps, "git clone -q . ../teammate")
    assert "Data and pipelines are up to date." in pulled["stdout"] and "Running stage" not in pulled["stdout"]
    assert "Stage 'evaluate' didn't change, skipping" in pulled["stdout"]
    teammate = folder / "teammate" / "results"
    assert (teammate / "cost" / "tiny-side.json").read_bytes() == (
        folder / "checkout" / "results" / "cost" / "tiny-side.json"
    ).read_bytes()
    assert (teammate / "units" / "last_run.json").is_file() and (teammate / "methods" / ".keep").is_file()


@pytest.mark.slow
def test_submit_results_bundle_names_its_remote_and_verifies_through_it(walked):
    """The tutorial's order of work: a remote, then the bundle (which names it), the push, and `verify --pull --strict`
    ends verified with one line (--quiet); the site's suite page then names the bundle beside its rows."""
    import pandas as pd

    steps, folder = _page("tutorials/submit-results.md", walked)
    checkout = folder / "checkout"
    bundle = checkout / "leaderboard" / "embedded" / "2026-12-01-alice"
    m = json.loads((bundle / "manifest.json").read_text())
    assert m["remote"] == "team" and m["contributor"] == "Alice (lab X)"
    assert "submit: the manifest names DVC remote 'team'" in _step(steps, "benchmark submit")["stderr"]
    assert {u["kind"] for u in m["units"]} == {"single", "duo", "deep_ensemble", "method"}
    assert len(pd.read_csv(bundle / "rows.csv")) == len(pd.read_csv(checkout / "results" / "metrics.csv"))
    assert "logits@tiny-a" in m["stages"] and "evaluate" in m["stages"] and m["train_size"] == 200
    verified = _step(steps, "--pull --strict")
    assert (
        verified["stdout"].splitlines()
        == [
            line
            for line in verified["stdout"].splitlines()
            if line.startswith(str(Path("leaderboard/embedded/2026-12-01-alice")))
        ]
        and len(verified["stdout"].splitlines()) == 1
    )
    assert ": verified (" in verified["stdout"]
    reports = sorted(p.name for p in (checkout / "results" / "verify").glob("*-rows.csv"))  # one per committed bundle
    committed = sorted(p.name for p in (ROOT / "leaderboard" / "embedded").iterdir() if p.is_dir())
    assert reports == [f"{b}-rows.csv" for b in committed]
    said = _step(steps, "--report")["stdout"]
    assert all(f"per-row report written to results/verify/{b}-rows.csv (" in said for b in committed)
    untracked = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=normal"],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert [
        u for u in untracked if u.startswith("??") and not u[3:].startswith("leaderboard/")
    ] == []  # nothing left in the root
    page = (checkout / "site" / "embedded" / "index.html").read_text(encoding="utf-8")
    origin = page.split('<p class="origin" role="note">')[1].split("</p>")[0]
    assert "2026-12-01-alice</a>" in origin and "Alice (lab X)" in origin
    assert all(f"{b}</a>" in origin for b in committed)


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.stem)
def test_included_and_readme_commands_exist(page):
    """The README's commands and those of the CONTRIBUTING.md sections written into a tutorial parse."""
    text = page.read_text(encoding="utf-8")
    source = text if page.name == "README.md" else included(text)
    checked = 0
    for b in (m.groupdict() for m in BLOCK.finditer(source)):
        for words in commands(b["code"]) if b["lang"] in ("bash", "sh", "") else []:
            check_command(words)
            checked += 1
    assert checked or page.name != "README.md"


def test_the_checker_refuses_what_a_reader_could_not_run():
    for bad in (
        "python -m benchmark nosuchcommand",
        "python -m benchmark metrics",
        "python -m benchmark duo --fit x a",
        "dvc nosuch",
        "python pipelines/nosuch.py",
        "rm -rf /",
    ):
        with pytest.raises(AssertionError):
            for words in commands(bad):
                check_command(words)
    assert commands("A=1 python -m benchmark metrics x.npz --json > out.json && echo ok  # note") == [
        ["python", "-m", "benchmark", "metrics", "x.npz", "--json"],
        ["echo", "ok"],
    ]


SET_UP = re.compile(
    r"^\*\*Set-up:\*\* set-up (?P<n>[12]) of the README \(`bash scripts/setup\.sh(?P<test> test)? ", re.M
)


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_every_tutorial_says_which_set_up_it_needs(page):
    """Before its first step, as README set-up 1 (the main job) or 2 (the test extras: what a page that runs pytest
    needs)."""
    text = page.read_text(encoding="utf-8")
    m = SET_UP.search(text)
    assert m and m.start() < text.index("\n## "), (
        f"{page.name}: no '**Set-up:** set-up N of the README (...' line before its steps"
    )
    assert (m["n"] == "2") == bool(m["test"]), page.name
    runs_pytest = any("python -m pytest" in b["code"] for b in blocks(text) if b["mark"] != "skip")
    assert m["n"] == "2" or not runs_pytest, f"{page.name} runs pytest, which set-up 1 does not install"
