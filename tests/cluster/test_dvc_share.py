"""``python -m benchmark reproduce dvc-share`` (benchmark/reproduce/dvc_share.py) on the toy pipeline: every stage
replaced by a copy of its outputs, ``dvc repro`` and the local parallel run timed from a clean copy, the same lock."""
from __future__ import annotations

import sys

import pytest
import yaml
from toy import run

from benchmark.reproduce import dvc_share
from benchmark.reproduce.scratch import ScratchError

pytestmark = pytest.mark.slow  # a DVC process per stage


def test_the_runners_replay_the_toy_run_with_the_same_lock(toy_repo, tmp_path):
    with pytest.raises(ScratchError, match=r"no a.txt \(stage a\); run the pipeline first"):
        dvc_share.replay_copy(toy_repo, tmp_path / "early")
    run([sys.executable, "-m", "dvc", "repro", "-q"], toy_repo)
    copy = dvc_share.replay_copy(toy_repo, tmp_path / "replay")
    cmd = yaml.safe_load((copy / "dvc.yaml").read_text())["stages"]["c"]["cmd"]
    assert cmd == f'mkdir -p "$(dirname c.txt)" && cp -a {toy_repo}/c.txt c.txt'  # no gate, no work: a copy
    rec = dvc_share.measure(toy_repo, jobs=(2,), repeats=1, workdir=tmp_path)
    assert rec["stages"] == 5 and rec["lock_bytes"] > 0  # the runners left the same dvc.lock (else RuntimeError)
    assert [(r["runner"], r["jobs"]) for r in rec["runs"]] == [("dvc repro", 1), ("benchmark run", 2)]
    assert all(r["wall_s"] > 0 and r["cpu_s"] > 0 for r in rec["runs"])
    table = dvc_share.table(rec)
    assert "| `dvc repro` |" in table and "| `python -m benchmark run --jobs 2` |" in table and "5 stages" in table
    assert not (tmp_path / "dvc-share").exists()  # the scratch copy is removed
