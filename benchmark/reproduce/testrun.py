"""How long the README's test command takes: one timed ``pytest`` run, recorded in ``results/test_command.json``.

``bash scripts/measure-tests.sh`` (in a fresh clone, on a quiet machine) times the install (``bash scripts/setup.sh
test``) and then runs :func:`measure`: ``python -m pytest`` as the README runs it, with a JUnit XML report in a
temporary folder for the counts and the seconds per test file. A run with a failed or erroring test, or none at all, is
not recorded (nothing is written over the committed record). The README's "what holds" line is rendered from the record
(:func:`benchmark.docsgen.facts.test_command_line`); the target is :data:`TARGET_S` on 2 cores, the install excluded."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from benchmark.bundle.pack import git_state
from benchmark.reproduce.timing import machine
from benchmark.storage import store

TARGET_S = 360  # the whole suite on 2 cores, the install excluded (issue 27)
COUNTS = ("tests", "failures", "errors", "skipped")


def junit_counts(path) -> dict[str, int]:
    """The counts of a JUnit XML report, summed over its ``<testsuite>`` elements: ``tests``, ``failures``,
    ``errors``, ``skipped`` and ``passed`` (= tests - failures - errors - skipped)."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        raise ValueError(f"{path}: not a JUnit XML report ({e})") from None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if not suites:
        raise ValueError(f"{path}: no <testsuite> element (root <{root.tag}>)")
    out = dict.fromkeys(COUNTS, 0)
    for s in suites:
        for k in COUNTS:
            try:
                out[k] += int(s.get(k, 0))
            except ValueError:
                raise ValueError(f"{path}: <testsuite {k}={s.get(k)!r}> is not a count") from None
    out["passed"] = out["tests"] - out["failures"] - out["errors"] - out["skipped"]
    return out


def junit_file_seconds(path) -> dict[str, float]:
    """Seconds per test file in a JUnit XML report (each test's set-up, call and tear-down, pytest's ``time``), the
    longest first: where a run's time went, to compare two runs file by file. A test's file is its ``classname`` up to
    its ``test_`` module (``tests.cluster.test_run.TestX`` -> ``tests/cluster/test_run.py``)."""
    root = ET.parse(path).getroot()
    out: dict[str, float] = {}
    for case in root.iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
        name = "/".join(parts[: module + 1]) + ".py"
        out[name] = out.get(name, 0.0) + float(case.get("time") or 0.0)
    return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def measure(pytest_args=(), *, setup_s: float | None = None, root=".", python: str = sys.executable) -> dict:
    """Run ``python -m pytest *pytest_args`` in ``root`` and return its record: pytest's wall seconds (the process,
    start to exit), the counts, whether ``.pytest_cache`` existed before (``empty``: the paper-scale bundles are made
    in the run), ``setup_s`` (the install before it, when given), the commit and whether the checkout had
    uncommitted changes, the machine and the date.
    ``RuntimeError`` when a test failed or erred, or when pytest ran none or left no report."""
    root = Path(root)
    cache = "present" if (root / ".pytest_cache").is_dir() else "empty"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [python, "-m", "pytest", *pytest_args, f"--junitxml={report}"]
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, cwd=root).returncode
        wall = time.perf_counter() - t0
        if not report.is_file():
            raise RuntimeError(f"pytest exited with code {rc} and wrote no report; nothing recorded")
        counts = junit_counts(report)
        files = junit_file_seconds(report)
    if rc != 0 or counts["failures"] or counts["errors"] or not counts["passed"]:
        raise RuntimeError(
            f"pytest exited with code {rc} ({counts['passed']} passed, {counts['failures']} failed, "
            f"{counts['errors']} errors); nothing recorded"
        )
    return {
        "command": " ".join(["python -m pytest", *pytest_args]),
        "wall_s": round(wall, 1),
        "setup_s": None if setup_s is None else round(setup_s, 1),
        "pytest_cache": cache,
        **{k: counts[k] for k in ("passed", "skipped")},
        "target_s": TARGET_S,
        "git": git_state(root),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": machine(),
        "files_s": [[f, s] for f, s in files.items()],  # [test file, seconds], the longest first (a list keeps it)
    }


def measure_beside(pytest_args=(), *, setup_s: float | None = None, other=None, rounds: int = 1) -> dict:
    """:func:`measure` here; with ``other`` (another commit's clone, set up with its own ``.venv``), then the same
    command there, right after on the same machine, kept under ``baseline``: two walls of the same hour compare (the
    machine's speed drifts by tens of percent within hours). ``rounds`` > 1: each side that many times, in the order
    here, other, other, here, ... (a drift during the runs falls on both sides alike); ``wall_s`` is each side's mean,
    ``walls_s`` its runs, ``files_s`` its files' means. Every run starts from an empty ``.pytest_cache`` (both sides
    make the paper-scale bundles alike). ``ValueError`` naming ``other`` when it has no ``.venv/bin/python``, or for
    ``rounds`` < 1, before anything runs."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if other is None:
        return measure(pytest_args, setup_s=setup_s)
    python = Path(other) / ".venv" / "bin" / "python"
    if not python.is_file():
        raise ValueError(f"{other}: no .venv/bin/python (a clone set up with `bash scripts/setup.sh test`)")
    runs: dict[str, list[dict]] = {"here": [], "other": []}
    for side in abba(rounds):
        root = "." if side == "here" else other
        # every run from an empty .pytest_cache, the other commit's clone's first too: the paper-scale bundles made
        # in each (a clone measured before keeps them cached: its first run had them for free, 2026-12-07)
        shutil.rmtree(Path(root) / ".pytest_cache", ignore_errors=True)
        runs[side].append(
            measure(pytest_args, setup_s=setup_s, root=root, python=sys.executable if side == "here" else str(python))
        )
    order = ", ".join("here" if s == "here" else str(other) for s in abba(rounds))
    base = _mean_runs(runs["other"])
    keep = ("wall_s", "walls_s", "passed", "skipped", "pytest_cache", "git", "files_s")
    note = (
        "measured right after, on the same machine"
        if rounds == 1
        else f"{rounds} runs a side, in the order {order}; the mean of each side"
    )
    return {**_mean_runs(runs["here"]), "order": order, "baseline": {**{k: base[k] for k in keep}, "note": note}}


def abba(rounds: int) -> list[str]:
    """The order of :func:`measure_beside`'s runs: ``here``, ``other``, ``other``, ``here``, ... (``rounds`` each)."""
    return [s for i in range(rounds) for s in (("here", "other") if i % 2 == 0 else ("other", "here"))]


def _mean_runs(records: list[dict]) -> dict:
    """The first of ``records`` with ``wall_s`` the mean of their walls, ``walls_s`` the walls and ``files_s`` each
    file's mean seconds (the longest first)."""
    walls = [r["wall_s"] for r in records]
    files: dict[str, list[float]] = {}
    for r in records:
        for f, s in r["files_s"]:
            files.setdefault(f, []).append(s)
    mean = {f: round(sum(v) / len(records), 1) for f, v in files.items()}
    return {
        **records[0],
        "wall_s": round(sum(walls) / len(walls), 1),
        "walls_s": walls,
        "files_s": [[f, s] for f, s in sorted(mean.items(), key=lambda kv: -kv[1])],
    }


def write(record: dict, out) -> Path:
    """Write the record atomically (temp file + rename)."""
    store.write_json(out, record)
    return Path(out)
