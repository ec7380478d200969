"""Where the test suite's time goes: per test file, per fixture and per test.

As a pytest plugin (``-p test_times`` with ``scripts/`` on ``PYTHONPATH``, or ``-p scripts.test_times``) it appends one
JSON line per test phase and per fixture set-up to the file named by ``UQBENCH_TEST_TIMES`` (every xdist worker appends
to the same file); as a script it sums such a file::

    UQBENCH_TEST_TIMES=/tmp/times.jsonl PYTHONPATH=scripts python -m pytest -p test_times
    python scripts/test_times.py /tmp/times.jsonl [--top 25]

A fixture's time is its own set-up (the fixtures it requests are counted separately), once per scope instance: a
session fixture counts once per process (once per xdist worker unless it is shared across workers).

The CPU time of every process the run starts (stages, DVC, Chromium, fresh interpreters...), by kind: with
``UQBENCH_PROC_CPU=FILE`` the plugin, in the process pytest was started as, reads ``/proc`` every 0.1 s and writes each
process it saw descend from it (command, parent, CPU seconds at its last reading) to FILE at the end (Linux; a
process that lives under 0.1 s may be missed, and one's last 0.1 s is not counted: the figures are lower bounds)::

    UQBENCH_PROC_CPU=/tmp/procs.json PYTHONPATH=scripts python -m pytest -p test_times
    python scripts/test_times.py --procs /tmp/procs.json"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from collections import defaultdict

import pytest


def _write(record: dict) -> None:
    path = os.environ.get("UQBENCH_TEST_TIMES")
    if path:
        record["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
        record["at"] = round(time.time(), 3)  # when the phase or set-up ended (wall clock): lines up with /proc/stat
        with open(path, "a", encoding="utf-8") as f:  # one short line per write: appends from workers do not mix
            f.write(json.dumps(record) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    start = time.perf_counter()
    yield
    _write(
        {
            "kind": "fixture",
            "name": fixturedef.argname,
            "scope": fixturedef.scope,
            "node": request.node.nodeid,
            "seconds": time.perf_counter() - start,
        }
    )


def pytest_runtest_logreport(report):
    # under xdist the controller gets every worker's report again, tagged with its ``node``: count each test once,
    # where it ran
    if report.when and getattr(report, "node", None) is None:
        _write(
            {
                "kind": "test",
                "node": report.nodeid,
                "when": report.when,
                "seconds": report.duration,
                "outcome": report.outcome,
            }
        )


class ProcSampler:
    """Every process under ``root`` (a pid), sampled from ``/proc`` every ``interval`` seconds in a thread."""

    def __init__(self, root: int, interval: float = 0.1):
        self.root, self.interval, self.seen = root, interval, {}
        self.hz = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="proc-cpu", daemon=True)

    def start(self) -> ProcSampler:
        self.sample()
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read().decode(errors="replace")
                fields = stat[stat.rfind(")") + 2 :].split()  # the command name in (...) may hold spaces
                ppid, ticks, start = int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[19])
                rec = self.seen.get((int(name), start))
                if rec is None:
                    with open(f"/proc/{name}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:300]
                    self.seen[(int(name), start)] = rec = {"pid": int(name), "ppid": ppid, "cmd": cmd, "cpu_s": 0.0}
                rec["cpu_s"] = ticks / self.hz
            except (OSError, IndexError, ValueError):  # gone between listdir and read
                continue

    def stop(self) -> list[dict]:
        """The processes that descend from ``root`` (itself included), by the parent each had when first seen."""
        self._stop.set()
        self._thread.join()
        self.sample()
        parent = {pid: r["ppid"] for (pid, _), r in self.seen.items()}
        ours = []
        for rec in self.seen.values():
            pid, hops = rec["pid"], 0
            while pid not in (self.root, 0, 1) and pid in parent and hops < 64:
                pid, hops = parent[pid], hops + 1
            if pid == self.root:
                ours.append(rec)
        return ours


def pytest_configure(config):
    path = os.environ.get("UQBENCH_PROC_CPU")
    if path and "PYTEST_XDIST_WORKER" not in os.environ and os.path.isdir("/proc"):
        config._proc_cpu = (path, ProcSampler(os.getpid()).start())


def pytest_unconfigure(config):
    if hasattr(config, "_proc_cpu"):
        from benchmark.storage.store import write_json  # atomic (temp file + rename)

        path, sampler = config._proc_cpu
        write_json(path, sampler.stop())


KINDS = (  # (kind, pattern on the command line), first match wins
    ("warm python server and the stages it forks", r"warm_server\.py"),
    ("pytest (controller and xdist workers: in-process test code)", r"-m pytest|exec\(eval\(sys\.stdin\.readline"),
    ("Chromium", r"chrom"),
    ("Playwright driver (node)", r"\bnode\b"),
    ("multiprocessing forkserver and its children", r"multiprocessing"),
    ("python -m dvc", r"-m dvc\b|/dvc\b"),
    ("python -m benchmark ...", r"-m benchmark\b"),
    ("stage scripts, fresh interpreter (pipelines/*.py)", r"pipelines/\w+\.py"),
    ("python -c, fresh interpreter", r"python\S* (-\w+ )*-c\b"),
)


def kind_of(cmd: str) -> str:
    for kind, pattern in KINDS:
        if re.search(pattern, cmd):
            return kind
    return "other: " + (os.path.basename(cmd.split(" ")[0]) or "?")


def summarise_procs(procs: list[dict], top: int) -> str:
    """CPU seconds per kind of process (:data:`KINDS`), most first."""
    per = defaultdict(lambda: [0.0, 0])
    for p in procs:
        k = per[kind_of(p["cmd"])]
        k[0] += p["cpu_s"]
        k[1] += 1
    total = sum(v[0] for v in per.values()) or 1.0
    out = [
        f"processes: {len(procs)}, CPU seconds: {total:.0f} (lower bounds: sampled every 0.1 s)",
        "",
        "| process kind | processes | CPU seconds | share |",
        "| --- | ---: | ---: | ---: |",
    ]
    out += [
        f"| {k} | {n} | {v:.1f} | {100 * v / total:.1f} % |"
        for k, (v, n) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]
    ]
    return "\n".join(out)


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
    out = [
        f"tests: {len(per_test)}, summed test time (set-up + call + teardown): {total:.0f} s",
        "",
        "| file | seconds | share |",
        "| --- | ---: | ---: |",
    ]
    out += [
        f"| {k} | {v:.1f} | {100 * v / total:.1f} % |" for k, v in sorted(per_file.items(), key=lambda kv: -kv[1])[:top]
    ]
    out += ["", "| fixture (scope) | set-ups | seconds |", "| --- | ---: | ---: |"]
    out += [
        f"| {k} ({s}) | {n} | {v:.1f} |" for k, (v, n, s) in sorted(per_fixture.items(), key=lambda kv: -kv[1][0])[:top]
    ]
    out += ["", "| test | seconds |", "| --- | ---: |"]
    out += [f"| {k} | {v:.1f} |" for k, v in sorted(per_test.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "file",
        help="JSON lines written by the plugin (UQBENCH_TEST_TIMES), or with --procs its "
        "process list (UQBENCH_PROC_CPU)",
    )
    ap.add_argument("--procs", action="store_true", help="FILE is a process list: CPU seconds per kind of process")
    ap.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    args = ap.parse_args(argv)
    if args.procs:
        with open(args.file, encoding="utf-8") as f:
            print(summarise_procs(json.load(f), args.top))
        return 0
    with open(args.file, encoding="utf-8") as f:
        print(summarise([json.loads(line) for line in f if line.strip()], args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
