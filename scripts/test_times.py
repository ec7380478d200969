"""Where the test suite's time goes: per test file, per fixture and per test.

As a pytest plugin (``-p test_times`` with ``scripts/`` on ``PYTHONPATH``, or ``-p scripts.test_times``) it appends one
JSON line per test phase and per fixture set-up to the file named by ``UQBENCH_TEST_TIMES`` (every xdist worker appends
to the same file); as a script it sums such a file::

    UQBENCH_TEST_TIMES=/tmp/times.jsonl PYTHONPATH=scripts python -m pytest -p test_times
    python scripts/test_times.py /tmp/times.jsonl [--top 25]

A fixture's time is its own set-up (the fixtures it requests are counted separately), once per scope instance: a
session fixture counts once per process (once per xdist worker unless it is shared across workers)."""
from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict

import pytest


def _write(record: dict) -> None:
    path = os.environ.get("UQBENCH_TEST_TIMES")
    if path:
        record["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(path, "a", encoding="utf-8") as f:  # one short line per write: appends from workers do not mix
            f.write(json.dumps(record) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    start = time.perf_counter()
    yield
    _write({"kind": "fixture", "name": fixturedef.argname, "scope": fixturedef.scope,
            "node": request.node.nodeid, "seconds": time.perf_counter() - start})


def pytest_runtest_logreport(report):
    # under xdist the controller gets every worker's report again, tagged with its ``node``: count each test once,
    # where it ran
    if report.when and getattr(report, "node", None) is None:
        _write({"kind": "test", "node": report.nodeid, "when": report.when, "seconds": report.duration,
                "outcome": report.outcome})


def summarise(lines: list[dict], top: int) -> str:
    per_file, per_fixture, per_test = defaultdict(float), defaultdict(lambda: [0.0, 0, ""]), defaultdict(float)
    total = 0.0
    if any(r.get("worker", "main") != "main" for r in lines):  # an xdist run written before the controller was left out
        lines = [r for r in lines if not (r["kind"] == "test" and r.get("worker", "main") == "main")]
    for r in lines:
        if r["kind"] == "test":
            per_file[r["node"].split("::")[0]] += r["seconds"]
            per_test[r["node"]] += r["seconds"]
            total += r["seconds"]
        else:
            f = per_fixture[r["name"]]
            f[0] += r["seconds"]
            f[1] += 1
            f[2] = r["scope"]
    out = [f"tests: {len(per_test)}, summed test time (set-up + call + teardown): {total:.0f} s", "",
           "| file | seconds | share |", "| --- | ---: | ---: |"]
    out += [f"| {k} | {v:.1f} | {100 * v / total:.1f} % |" for k, v in sorted(per_file.items(), key=lambda kv: -kv[1])[:top]]
    out += ["", "| fixture (scope) | set-ups | seconds |", "| --- | ---: | ---: |"]
    out += [f"| {k} ({s}) | {n} | {v:.1f} |"
            for k, (v, n, s) in sorted(per_fixture.items(), key=lambda kv: -kv[1][0])[:top]]
    out += ["", "| test | seconds |", "| --- | ---: |"]
    out += [f"| {k} | {v:.1f} |" for k, v in sorted(per_test.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="JSON lines written by the plugin (UQBENCH_TEST_TIMES)")
    ap.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    args = ap.parse_args(argv)
    with open(args.file, encoding="utf-8") as f:
        print(summarise([json.loads(line) for line in f if line.strip()], args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
