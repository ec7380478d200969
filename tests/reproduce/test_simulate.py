"""The simulated other CPU (benchmark/reproduce/simulate.py): stage selection and comparison rules, and (slow) a
tiny suite's train and logits stages rerun on a simulated AVX2-only CPU: identical under pinning, different
with each CPU's own kernels on an AVX-512 host (the negative control: the simulation changes the kernels)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.config import numerics
from benchmark.reproduce import lockfile, simulate

ROOT = Path(__file__).resolve().parents[2]


def test_targets_name_a_stage_of_a_dvc_file():
    t = simulate.Target.parse("suites/c/dvc.yaml:train@m")
    assert (t.dvcfile, t.stage, t.lock, str(t)) == ("suites/c/dvc.yaml", "train@m", "suites/c/dvc.lock", "suites/c/dvc.yaml:train@m")
    t = simulate.Target.parse("logits@m")
    assert (t.dvcfile, t.lock, str(t)) == ("dvc.yaml", "dvc.lock", "logits@m")


LOCK = {"data": {"outs": {"results/data": "d.dir"}, "deps": {"pipelines/data.py": "p"}},
        "train@m": {"outs": {"results/checkpoints/m": "c.dir"}, "deps": {"results/data/train.npz": "t", "benchmark/models": "b.dir"}},
        "logits@m": {"outs": {"results/logits/m": "l.dir", "results/cost/m.json": "x"},
                     "deps": {"results/data": "d.dir", "results/checkpoints/m": "c.dir"}}}


def test_upstream_outputs_are_the_deps_other_stages_produce():
    both = [simulate.Target.parse(s) for s in ("train@m", "logits@m")]
    # a file of an output folder counts; the checkpoint is made in the copy
    assert simulate.upstream({"dvc.lock": LOCK}, both) == ["results/data/train.npz", "results/data"]
    assert simulate.upstream({"dvc.lock": LOCK}, both[1:]) == ["results/data", "results/checkpoints/m"]
    suite = {"suites/s/dvc.lock": LOCK}
    assert simulate.upstream(suite, [simulate.Target.parse("suites/s/dvc.yaml:train@m")]) == ["suites/s/results/data/train.npz"]


def test_outputs_compared_and_measured_ones_listed():
    sim = {"data": LOCK["data"], "train@m": {"outs": {"results/checkpoints/m": "OTHER.dir"}, "deps": LOCK["train@m"]["deps"]},
           "logits@m": {"outs": {"results/logits/m": "l2.dir", "results/cost/m.json": "y"},
                        "deps": {"results/data": "d.dir", "results/checkpoints/m": "OTHER.dir"}}}
    ts = [simulate.Target.parse(s) for s in ("train@m", "logits@m")]
    rep = simulate.compare({"dvc.lock": LOCK}, {"dvc.lock": sim}, ts).set_index("path")["status"].to_dict()
    assert rep == {"results/checkpoints/m": "different", "results/logits/m": "different", "results/cost/m.json": "measured"}


def test_inputs_that_differ_from_the_checkouts_lock_are_refused():
    sim = {"train@m": {"outs": LOCK["train@m"]["outs"], "deps": {"results/data/train.npz": "t", "benchmark/models": "EDITED.dir"}}}
    with pytest.raises(simulate.SimulateError, match=r"inputs \['benchmark/models'\] differ .* run `dvc repro` first"):
        simulate.compare({"dvc.lock": LOCK}, {"dvc.lock": sim}, [simulate.Target.parse("train@m")])


def test_default_stages_train_and_score_a_scratch_sidekick_and_a_seed_group_base():
    from benchmark.models.zoo import load_yaml

    stages = simulate.default_stages(ROOT)
    zoo = load_yaml(ROOT / "zoo" / "embedded.yaml")["models"]
    models = list(dict.fromkeys(s.split("@")[1] for s in stages))
    assert stages == [f"{k}@{m}" for m in models for k in ("train", "logits")] and len(models) == 2
    assert zoo[models[0]]["role"] == "sidekick" and zoo[models[1]]["role"] == "base"


def test_an_unknown_stage_is_one_clear_error(capsys):
    from benchmark.cli.main import main

    assert main(["reproduce", "simulate", "--stages", "train@no-such-model"]) == 2
    err = capsys.readouterr().err
    assert "no stage 'train@no-such-model'" in err and "Traceback" not in err


def _capability() -> str:
    code = "import torch; torch.ones(2).exp(); print(torch.backends.cpu.get_cpu_capability())"
    env = {k: v for k, v in os.environ.items() if k not in (*numerics.PINNED, numerics.ENV, *simulate.OTHER_CPU)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout.strip()


@pytest.mark.slow
@pytest.mark.skipif(not numerics.pinnable(), reason="needs an x86-64 CPU with AVX2")
def test_a_tiny_suite_reproduces_on_the_simulated_cpu_and_native_kernels_do_not(caltech_copy):
    root = caltech_copy  # the tiny Caltech-layout suite run through DVC (tests/bundle/fixture_run.py), a private copy
    stages = [f"suites/caltech256/dvc.yaml:{s}" for s in ("train@res", "logits@res")]
    # this process pinned its own environment on import (benchmark.config.numerics): the runs start from a clean one
    env = {k: v for k, v in os.environ.items() if k not in (numerics.ENV, "UQ_TIMINGS", *numerics.PINNED, *simulate.OTHER_CPU)}

    def sim(**extra):
        return subprocess.run(["python", "-m", "benchmark", "reproduce", "simulate", "--stages", *stages], cwd=root,
                              env={**env, "TQDM_DISABLE": "1", **extra}, capture_output=True, text=True, timeout=900)

    out = sim()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 of 2 outputs byte-identical to this checkout's dvc.lock (1 embed a measured time or a run record, not compared)" in out.stdout
    assert not list((root / ".dvc" / "tmp").glob("simulate-*"))  # the scratch copy is gone
    if _capability() == "AVX2":
        pytest.skip("this CPU's own kernels are AVX2: the simulation cannot differ from it")
    # negative control: both runs with each CPU's own kernels; the simulated CPU's must give other bytes. Compared on
    # the logits (train.json records the numerics, so a checkpoint folder differs between the modes anyway)
    pinned = lockfile.read(root / "suites" / "caltech256" / "dvc.lock")["logits@res"]["outs"]["results/logits/res"]
    proc = subprocess.run(["python", "-m", "dvc", "repro", "-s", "-f", *stages], cwd=root, capture_output=True,
                          text=True, env={**env, numerics.ENV: "native"}, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    native = lockfile.read(root / "suites" / "caltech256" / "dvc.lock")["logits@res"]["outs"]["results/logits/res"]
    assert native != pinned  # this host's own kernels are not the pinned ones
    out = sim(**{numerics.ENV: "native"})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "different suites/caltech256/results/logits/res" in out.stdout


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
    simulate.make_copy(root, dest, [], ["results/data/train.npz", "results/data"])
    copied = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file() and ".git/" not in p.as_posix())
    assert copied == [".gitignore", "code.py", "new.py", "results/data/train.npz", "results/data/val.npz", "results/summary.json"]
    assert (dest / "results" / "data" / "val.npz").stat().st_ino == (root / "results" / "data" / "val.npz").stat().st_ino
    assert (dest / "code.py").stat().st_ino != (root / "code.py").stat().st_ino  # copied: a stage may rewrite it
