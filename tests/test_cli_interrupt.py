"""Ctrl-C anywhere in `python -m benchmark ...`: one line on stderr, exit code 130, and what the command was writing
cleaned up as for any other exception (atomic writes leave neither a temporary file nor a half-written output)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import benchmark.cli.logits_commands as logits_commands
from benchmark.cli.main import INTERRUPTED, main
from benchmark.storage.atomic import atomic_path

ROOT = Path(__file__).resolve().parents[1]
LINE = "interrupted: python -m benchmark {} stopped (Ctrl-C)\n"


def test_ctrl_c_inside_a_command_is_one_line_and_130(tmp_path, monkeypatch, capsys):
    target = tmp_path / "out.csv"

    def long_step(args):
        with atomic_path(target) as tmp:
            tmp.write_text("half of it")
            raise KeyboardInterrupt  # what SIGINT raises in the middle of the write

    monkeypatch.setattr(logits_commands, "run_metrics", long_step)
    assert main(["metrics", "x.npz"]) == INTERRUPTED == 130
    out, err = capsys.readouterr()
    assert out == "" and err == LINE.format("metrics")
    assert list(tmp_path.iterdir()) == []  # neither the output nor its temporary file


def test_ctrl_c_while_the_command_line_is_built(monkeypatch, capsys):
    import benchmark.cli.main as cli

    def interrupted(subparsers):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "COMMANDS", [interrupted])
    assert main(["metrics"]) == 130
    assert capsys.readouterr().err == "interrupted: python -m benchmark stopped (Ctrl-C)\n"


@pytest.mark.slow
def _has_files(folder: Path) -> bool:
    try:
        return any(folder.iterdir())
    except FileNotFoundError:  # renamed into place meanwhile
        return False


def test_sigint_to_a_publish_in_its_long_step_keeps_the_previous_site(tmp_path):
    """A real child process: `publish` is interrupted while it writes the site (its temporary folder exists); the
    previous site stays as it was, no temporary folder is left, stderr is one line, the exit code 130."""
    bundles = tmp_path / "leaderboard" / "embedded"
    bundle = sorted(p.parent for p in (ROOT / "leaderboard" / "embedded").glob("*/manifest.json"))[-1]
    for i in range(3):  # more to read and merge: a longer step
        shutil.copytree(bundle, bundles / f"{bundle.name}-{i}")
    out = tmp_path / "out" / "site"
    cmd = [
        sys.executable,
        "-m",
        "benchmark",
        "publish",
        "--bundles",
        str(tmp_path / "leaderboard"),
        "--out",
        str(out),
        "--quiet",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=ROOT, timeout=600)
    before = (out / "embedded" / "index.html").read_bytes()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        end = time.monotonic() + 300
        # atomic_dir's folder with a first file in it: publish is writing the site (a Ctrl-C in atomic_dir's own
        # set-up is tests/pipeline/test_store.py's test_a_ctrl_c_in_the_set_up_leaves_no_temporary)
        while not any(p.name.startswith(".site.") and _has_files(p) for p in out.parent.iterdir()):
            assert child.poll() is None, f"publish ended before it was interrupted: {child.communicate()}"
            assert time.monotonic() < end, "publish never started writing"
            time.sleep(0.005)
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, stderr
    assert stderr == LINE.format("publish") and stdout == ""
    assert sorted(p.name for p in out.parent.iterdir()) == ["site"]  # no temporary folder left
    assert (out / "embedded" / "index.html").read_bytes() == before
