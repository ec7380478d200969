"""Sharing DVC outputs through a remote (benchmark.storage.remote): a local-folder remote carries a logits file
to a second clone without rerunning its stage; an unreachable or empty remote fails with one message
naming the remote, its URL and the stage."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from benchmark.cli.remote_commands import main as cli_main
from benchmark.storage import remote
from benchmark.storage.store import load_logits_file

MAKE_LOGITS = '''"""Stage logits@<model>: a seeded logits file; each run appends the model to ran.log (not a DVC
output)."""
import sys

import torch

from benchmark.storage.store import save_logits_file

model = sys.argv[1]
g = torch.Generator().manual_seed(len(model))
save_logits_file(f"results/logits/{model}/test.safetensors", torch.randn(50, 10, generator=g),
                 torch.randint(0, 10, (50,), generator=g), ids=torch.arange(50), meta={"model": model})
with open("ran.log", "a") as f:
    f.write(model + "\\n")
'''
DVC_YAML = """stages:
  logits:
    foreach: [tiny, small]
    do:
      cmd: python make_logits.py ${item}
      deps:
        - make_logits.py
      outs:
        - results/logits/${item}
"""
LOGITS = "results/logits/tiny/test.safetensors"


def sh(*cmd, cwd) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def dvc(*args, cwd) -> str:
    return sh("python", "-m", "dvc", *args, cwd=cwd)


def git(*args, cwd) -> str:
    return sh("git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args, cwd=cwd)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A git + DVC project whose two logits stages ran, with a committed default remote 'team' (a local folder)."""
    root = tmp_path_factory.mktemp("source")
    (root / "make_logits.py").write_text(MAKE_LOGITS)
    (root / "dvc.yaml").write_text(DVC_YAML)
    (root / ".gitignore").write_text("ran.log\n")
    git("init", "-q", cwd=root)
    dvc("init", "-q", cwd=root)
    dvc("repro", cwd=root)
    dvc("remote", "add", "-d", "team", str(tmp_path_factory.mktemp("team-remote")), cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "logits", cwd=root)
    assert sorted((root / "ran.log").read_text().split()) == ["small", "tiny"]  # the marker records runs
    return root


def add_local_remote(project: Path, name: str, url: str) -> None:
    """What `dvc remote add --local NAME URL` writes (without starting DVC)."""
    with open(project / ".dvc" / "config.local", "a") as f:
        f.write(f"['remote \"{name}\"']\n    url = {url}\n")


def clone(source: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "clone"
    git("clone", "-q", str(source), str(dst), cwd=tmp_path)
    return dst


def test_pushed_logits_reach_a_second_clone_without_rerunning_the_stage(source, tmp_path, capsys):
    outs = {"logits@tiny": "results/logits/tiny", "logits@small": "results/logits/small"}
    assert remote.status(root=source) == {s: {p: "local only"} for s, p in outs.items()}
    sent = remote.push(root=source)
    assert sent.remote.name == "team" and set(sent.stages) == set(outs) and sent.files >= 2
    assert remote.status(root=source) == {s: {p: "synced"} for s, p in outs.items()}

    dst = clone(source, tmp_path)
    assert not (dst / LOGITS).exists()
    got = remote.pull(["logits@tiny"], root=dst)
    assert got.stages == ("logits@tiny",) and got.files >= 1
    assert (dst / LOGITS).read_bytes() == (source / LOGITS).read_bytes()
    a, b = load_logits_file(source / LOGITS), load_logits_file(dst / LOGITS)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.labels, b.labels) and torch.equal(a.ids, b.ids)
    assert not (dst / "ran.log").exists()  # the stage command never ran in the clone
    assert not (dst / "results/logits/small").exists()  # only the target was pulled
    assert json.loads(dvc("status", "--json", "logits@tiny", cwd=dst)) == {}  # DVC: up to date, nothing to rerun

    capsys.readouterr()
    assert cli_main(["remote", "status", "--json", "--root", str(dst)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "logits@tiny": {outs["logits@tiny"]: "synced"},
        "logits@small": {outs["logits@small"]: "remote only"},
    }


def test_pull_from_a_remote_without_the_outputs_names_the_remote_and_the_stage(source, tmp_path):
    dst = clone(source, tmp_path)
    empty = tmp_path / "empty-remote"
    empty.mkdir()
    add_local_remote(dst, "empty", str(empty))
    with pytest.raises(remote.RemoteError) as e:
        remote.pull(["logits@small"], remote="empty", root=dst)
    msg = str(e.value)
    assert f"remote 'empty' ({empty})" in msg and "does not have the outputs of stage logits@small" in msg
    assert "results/logits/small" in msg and "logits@tiny" not in msg


def _unreachable(tmp_path: Path, kind: str) -> str:
    if kind == "parent-is-a-file":
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("x")
        return str(blocker / "remote")
    return "http://127.0.0.1:1/uqbench"  # loopback port 1: connection refused at once, no network involved


@pytest.mark.parametrize("kind", ["parent-is-a-file", "refused-http"])
@pytest.mark.parametrize("action,verb", [("push", "pushing"), ("pull", "pulling"), ("status", "checking")])
def test_unreachable_remote_fails_with_its_name_url_and_the_stage(source, tmp_path, kind, action, verb):
    dst = clone(source, tmp_path)
    url = _unreachable(tmp_path, kind)
    add_local_remote(dst, "broken", url)
    with pytest.raises(remote.RemoteError) as e:
        getattr(remote, action)(["logits@tiny"], remote="broken", root=dst)
    msg = str(e.value)
    assert msg.startswith(f"remote 'broken' ({url}) unreachable while {verb} stage logits@tiny: ")
    assert ("NotADirectoryError" if kind == "parent-is-a-file" else "Connect") in msg
    assert "Traceback" not in msg and "\n" not in msg


def test_cli_prints_one_error_line_for_an_unreachable_remote(source, tmp_path):
    dst = clone(source, tmp_path)
    url = _unreachable(tmp_path, "parent-is-a-file")
    add_local_remote(dst, "broken", url)
    proc = subprocess.run(
        ["python", "-m", "benchmark.cli.remote_commands", "remote", "push", "logits@tiny", "-r", "broken"],
        cwd=dst,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(
        f"error: remote 'broken' ({url}) unreachable while pushing stage logits@tiny: NotADirectoryError"
    )


def test_bad_remote_names_and_targets_are_named(source, tmp_path):
    dst = clone(source, tmp_path)
    with pytest.raises(remote.RemoteError, match=r"no DVC remote named 'nope' \(configured: team\)"):
        remote.push(remote="nope", root=dst)
    with pytest.raises(remote.RemoteError, match=r"'logits@huge' is neither a stage nor a DVC output"):
        remote.pull(["logits@huge"], root=dst)
    dvc("remote", "default", "--unset", cwd=dst)
    with pytest.raises(remote.RemoteError, match=r"no DVC remote given and no default remote \(configured: team\)"):
        remote.pull(root=dst)
    with pytest.raises(remote.RemoteError, match="is not inside a DVC project"):
        remote.status(root=tmp_path)


def test_stages_that_never_ran_are_reported_not_pushed(source, tmp_path):
    dst = clone(source, tmp_path)
    (dst / "dvc.yaml").write_text(
        DVC_YAML + "  extra:\n    cmd: python make_logits.py extra\n    outs:\n      - results/logits/extra\n"
    )
    with pytest.raises(remote.RemoteError, match=r"nothing to push for stage extra: .*run `dvc repro extra` first"):
        remote.push(["extra"], root=dst)
    assert remote.status(["extra"], root=dst) == {"extra": {"results/logits/extra": "not run"}}


def test_status_lists_outputs_dvc_does_not_cache_as_in_git_or_not_shared(source, tmp_path):
    """Issue 50 item 1: `remote status` lists every output; one with `cache: false` travels only through git:
    'in git' when git tracks it, else 'not shared' (a fresh clone lacks it and would run its stage again)."""
    dst = clone(source, tmp_path)
    (dst / "dvc.yaml").write_text(
        DVC_YAML + "  summary:\n    cmd: echo {} > summary.json\n    outs:\n"
        "      - summary.json:\n          cache: false\n"
    )
    assert remote.status(["summary"], root=dst) == {"summary": {"summary.json": "not shared"}}
    (dst / "summary.json").write_text("{}\n")
    git("add", "summary.json", cwd=dst)
    states = remote.status(root=dst)
    assert states["summary"] == {"summary.json": "in git"} and set(states) == {"summary", "logits@tiny", "logits@small"}
