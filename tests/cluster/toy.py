"""A tiny DVC project whose stages are shell commands, for the tests of ``python -m benchmark cluster``.

The toy pipeline is a diamond and a tail, ``a -> b@x, b@<Y> -> c -> d`` (``BY``: a stage name full of shell syntax);
each command first runs ``gate.sh NAME``, which the tests use to steer a job without touching the stage's inputs: a
file ``fail-NAME`` makes the command fail, a file ``hold-NAME`` makes it wait (after creating ``started-NAME``) until
the file is removed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmark.cluster.check import set_cpus

ROOT = Path(__file__).resolve().parents[2]
BY = "b@y; $(touch pwned) `touch pwned`"  # the second b stage (its gate name: b-y)
TOY = """\
stages:
  a:
    cmd: sh gate.sh a && echo "seed ${data.seed}" > a.txt
    params: [data.seed]
    outs: [a.txt]
  b:
    foreach:   # stage names b@x and b@<Y>: a name that a shell would run something for reaches Slurm as it is
      x: x
      "y; $(touch pwned) `touch pwned`": y
    do:
      cmd: sh gate.sh b-${item} && cat a.txt > b-${item}.txt && echo ${item} >> b-${item}.txt
      deps: [a.txt]
      outs:
        - b-${item}.txt
  c:
    cmd: sh gate.sh c && cat b-x.txt b-y.txt > c.txt
    deps: [b-x.txt, b-y.txt]
    outs: [c.txt]
  d:
    cmd: sh gate.sh d && cat c.txt > d.txt
    deps: [c.txt]
    outs: [d.txt]
"""
GATE = """\
[ -e "fail-$1" ] && { echo "gate: $1 fails" >&2; exit 1; }
if [ -e "hold-$1" ]; then
  touch "started-$1"
  n=0
  while [ -e "hold-$1" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
fi
exit 0
"""


def run(cmd, cwd, **kw):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def make_toy(root: Path, cpus: int | None = 1) -> Path:
    """The toy DVC project in ``root`` (git and DVC initialised; the repository's params.yaml, with
    ``cluster.resources.default.cpus`` when ``cpus``)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "dvc.yaml").write_text(TOY)
    (root / "gate.sh").write_text(GATE)
    shutil.copy(ROOT / "params.yaml", root / "params.yaml")
    if cpus:
        set_cpus(root / "params.yaml", cpus)
    run(["git", "init", "-q"], root)
    run([sys.executable, "-m", "dvc", "init", "-q"], root)
    return root


def until(condition, timeout: float = 120, what: str = "the condition"):
    """Poll ``condition()`` until it is true; fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}", pytrace=False)
