"""Scratch copies of a checkout (benchmark/dvcutil/scratch.py): which stage a target names, which upstream outputs
it reads, and what the copy holds (tune and pinning-cost run stages in such copies)."""

from __future__ import annotations

import subprocess

from benchmark.dvcutil import scratch


def test_targets_name_a_stage_of_a_dvc_file():
    t = scratch.Target.parse("suites/c/dvc.yaml:train@m")
    assert (t.dvcfile, t.stage, t.lock, str(t)) == (
        "suites/c/dvc.yaml",
        "train@m",
        "suites/c/dvc.lock",
        "suites/c/dvc.yaml:train@m",
    )
    t = scratch.Target.parse("logits@m")
    assert (t.dvcfile, t.lock, str(t)) == ("dvc.yaml", "dvc.lock", "logits@m")


LOCK = {
    "data": {"outs": {"results/data": "d.dir"}, "deps": {"pipelines/data.py": "p"}},
    "train@m": {
        "outs": {"results/checkpoints/m": "c.dir"},
        "deps": {"results/data/train.npz": "t", "benchmark/models": "b.dir"},
    },
    "logits@m": {
        "outs": {"results/logits/m": "l.dir", "results/cost/m.json": "x"},
        "deps": {"results/data": "d.dir", "results/checkpoints/m": "c.dir"},
    },
}


def test_upstream_outputs_are_the_deps_other_stages_produce():
    both = [scratch.Target.parse(s) for s in ("train@m", "logits@m")]
    # a file of an output folder counts; the checkpoint is made in the copy
    assert scratch.upstream({"dvc.lock": LOCK}, both) == ["results/data/train.npz", "results/data"]
    assert scratch.upstream({"dvc.lock": LOCK}, both[1:]) == ["results/data", "results/checkpoints/m"]
    suite = {"suites/s/dvc.lock": LOCK}
    assert scratch.upstream(suite, [scratch.Target.parse("suites/s/dvc.yaml:train@m")]) == [
        "suites/s/results/data/train.npz"
    ]


def test_the_scratch_copy_has_the_checkouts_files_and_links_the_upstream_outputs(tmp_path):
    root, dest = tmp_path / "root", tmp_path / "copy"
    (root / "results" / "data").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / ".gitignore").write_text("/results/*\n!/results/summary.json\n")
    (root / "code.py").write_text("x = 1\n")
    (root / "results" / "summary.json").write_text("{}\n")
    (root / "results" / "data" / "train.npz").write_bytes(b"t")
    (root / "results" / "data" / "val.npz").write_bytes(b"v")
    (root / "results" / "ignored.bin").write_bytes(b"i")
    subprocess.run(["git", "add", "code.py", ".gitignore"], cwd=root, check=True)
    (root / "new.py").write_text("y = 2\n")  # untracked, not ignored: part of the checkout
    scratch.make_copy(root, dest, [], ["results/data/train.npz", "results/data"])
    copied = sorted(
        p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file() and ".git/" not in p.as_posix()
    )
    assert copied == [
        ".gitignore",
        "code.py",
        "new.py",
        "results/data/train.npz",
        "results/data/val.npz",
        "results/summary.json",
    ]
    assert (dest / "results" / "data" / "val.npz").stat().st_ino == (
        root / "results" / "data" / "val.npz"
    ).stat().st_ino
    assert (dest / "code.py").stat().st_ino != (root / "code.py").stat().st_ino  # copied: a stage may rewrite it
