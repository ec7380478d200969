"""dvc.lock keeps only the stages dvc.yaml defines: DVC never drops a removed stage's entry, so a lock rebuilt from an
older one would go on recording outputs no committed code produces (and every stage of ``dvc repro`` parses it)."""

import os
from pathlib import Path

import pytest
import yaml

from benchmark.dvcutil import lockfile

ROOT = Path(__file__).resolve().parents[2]

LOCK = """schema: '2.0'
stages:
  data:
    cmd: python pipelines/data.py
    deps:
    - path: pipelines/data.py
      hash: md5
      md5: 0123456789abcdef0123456789abcdef
      size: 10
    outs:
    - path: results/data
      hash: md5
      md5: 11111111111111111111111111111111.dir
      size: 5
      nfiles: 2
  train@gone:
    cmd: python pipelines/train.py --model gone
    outs:
    - path: results/checkpoints/gone
      hash: md5
      md5: 22222222222222222222222222222222.dir
  cost@gone:
    cmd: python pipelines/cost.py --model gone
"""


def test_prune_drops_only_stages_the_pipeline_no_longer_has(tmp_path):
    path = tmp_path / "dvc.lock"
    path.write_text(LOCK)
    assert lockfile.prune(path, {"data", "train@kept"}) == ["train@gone", "cost@gone"]
    after = yaml.safe_load(path.read_text())
    assert list(after["stages"]) == ["data"]
    assert after["stages"]["data"] == yaml.safe_load(LOCK)["stages"]["data"], "a kept entry is rewritten unchanged"
    assert after["schema"] == "2.0"
    assert lockfile.read(path)["data"]["outs"] == {"results/data": "11111111111111111111111111111111.dir"}


def test_prune_writes_nothing_when_no_entry_is_stale(tmp_path):
    path = tmp_path / "dvc.lock"
    path.write_text(LOCK)
    os.utime(path, (1, 1))
    assert lockfile.prune(path, {"data", "train@gone", "cost@gone"}) == []
    assert path.read_text() == LOCK and path.stat().st_mtime == 1


def test_prune_refuses_a_file_that_is_not_a_lock_and_leaves_it(tmp_path):
    path = tmp_path / "dvc.lock"
    path.write_text("- just\n- a list\n")
    with pytest.raises(ValueError, match="not a dvc.lock"):
        lockfile.prune(path, {"data"})
    assert path.read_text() == "- just\n- a list\n"


def test_the_committed_lock_records_only_stages_of_the_committed_pipeline():
    stages = lockfile.current_stages(ROOT)
    assert stages, "DVC could not list the root pipeline's stages"
    recorded = set(lockfile.parse(lockfile.committed_text("dvc.lock", ROOT), "dvc.lock"))
    assert recorded - stages == set(), f"dvc.lock entries of stages dvc.yaml no longer has: {sorted(recorded - stages)}"
    assert stages - recorded == set(), f"stages dvc.lock has no record of: {sorted(stages - recorded)}"
