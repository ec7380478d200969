"""How long ``.ci/run`` takes, step by step: ``results/ci_run.json``, from a timed trace of one run.

``bash scripts/measure-ci.sh`` runs ``.ci/run`` in a fresh clone of this checkout's HEAD under ``bash -x`` with a
time stamp in every trace line (``PS4='+ <epoch seconds> '``), then ``python -m benchmark.reproduce.ci_timing TRACE
--out results/ci_run.json`` turns the trace into the record: each top-level command of the script, its seconds (until
the next one starts) and its kind (:data:`KINDS`: set-up, lint, tests, fingerprint, emulated CPU kinds, main job and
gate, Slurm), the total, the machine and the commit. The docs' figure
(:func:`benchmark.docsgen.record_tables.ci_table`) is generated from it.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

RECORD = Path("results") / "ci_run.json"
TARGET_S = 45 * 60  # issue 53: the matrix of CPU kinds on every commit within 45 minutes on 2 cores
# the kind of a step, by the first pattern its command matches
KINDS = (
    ("set-up", r"scripts/setup\.sh"),
    ("lint and types", r"\b(ruff|mypy)\b"),
    ("tests", r"-m pytest"),
    ("emulated CPU kinds", r"reproduce fingerprint .*--emulate"),
    ("fingerprint", r"reproduce fingerprint"),
    ("main job and gate", r"reproduce (timings|check)|\bverify\b"),
    ("Slurm", r"cluster local-check"),
)
_LINE = re.compile(r"^\+ (?P<t>\d+(?:\.\d+)?) (?P<cmd>.*)$")


def kind_of(command: str) -> str | None:
    """The kind of a step (:data:`KINDS`), None for the script's own plumbing (echo, cd, export...)."""
    return next((name for name, pattern in KINDS if re.search(pattern, command)), None)


def parse_trace(text: str, end: float) -> list[dict]:
    """The top-level commands of a ``bash -x`` trace with ``PS4='+ <epoch seconds> '`` (nested lines, ``++``, are a
    command's own), each with its seconds until the next top-level command (the last: until ``end``);
    ``ValueError`` when there is none."""
    marks = [(float(m["t"]), m["cmd"]) for m in map(_LINE.match, text.splitlines()) if m]
    if not marks:
        raise ValueError("no time-stamped trace line (+ <epoch seconds> <command>): was it run with bash -x and PS4?")
    ends = [t for t, _ in marks[1:]] + [end]
    return [{"command": cmd, "kind": kind_of(cmd), "seconds": round(e - t, 1)} for (t, cmd), e in zip(marks, ends)]


def record(steps: list[dict], *, machine: dict, commit: str | None, passed: bool) -> dict:
    """``results/ci_run.json``: the steps, the seconds per kind, the total, whether the run passed, the machine and
    commit, the date and the target."""
    by_kind: dict[str, float] = {}
    for s in steps:
        by_kind[s["kind"] or "other"] = round(by_kind.get(s["kind"] or "other", 0.0) + s["seconds"], 1)
    return {
        "steps": steps,
        "by_kind": by_kind,
        "total_s": round(sum(s["seconds"] for s in steps), 1),
        "passed": passed,
        "target_s": TARGET_S,
        "machine": machine,
        "commit": commit,
        "date": datetime.date.today().isoformat(),
    }


def main(argv=None) -> int:
    """``python -m benchmark.reproduce.ci_timing TRACE [--end T] [--failed] --out FILE``."""
    p = argparse.ArgumentParser(
        prog="python -m benchmark.reproduce.ci_timing",
        description="Turn a time-stamped bash -x trace of .ci/run into results/ci_run.json "
        "(bash scripts/measure-ci.sh makes the trace).",
    )
    p.add_argument("trace", help="the trace (stderr of PS4='+ $(date +%%s.%%N) ' bash -x .ci/run)")
    p.add_argument("--end", type=float, required=True, help="epoch seconds when the run ended")
    p.add_argument("--failed", action="store_true", help="the run failed (recorded as such)")
    p.add_argument("--commit", help="the commit that ran")
    p.add_argument("--out", default=str(RECORD), help=f"the record (default: {RECORD})")
    args = p.parse_args(argv)
    from benchmark.config.numerics import cpu
    from benchmark.storage.store import write_json

    try:
        steps = parse_trace(Path(args.trace).read_text(encoding="utf-8", errors="replace"), args.end)
    except (OSError, ValueError) as e:
        print(f"error: {args.trace}: {e}", file=sys.stderr)
        return 2
    me = cpu()
    rec = record(
        steps,
        machine={"cpu": me["cpu"], "kind": me["kind"], "cpus": me["cores"]},
        commit=args.commit,
        passed=not args.failed,
    )
    write_json(args.out, rec)
    print(
        f".ci/run: {rec['total_s'] / 60:.1f} min ({'passed' if rec['passed'] else 'FAILED'}); "
        + ", ".join(f"{k} {v / 60:.1f} min" for k, v in rec["by_kind"].items())
        + f"; wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
