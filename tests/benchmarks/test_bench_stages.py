"""Per-stage figures of the model stages (data, train, logits --cost) on a tiny profile of the embedded default.

Every generated pipeline (the root one and each suite's) writes each model's cost in its logits stage
(``--cost``): there is no cost stage.

Each stage runs in a fresh subprocess (as DVC runs it: ``python pipelines/<stage>.py``)
with ``UQ_TIMINGS`` set, so the figures are the ones `python -m benchmark
reproduce timings` records for a real run (wall time with imports, user and
system CPU time, peak RSS, minor page faults); they are stored in the
benchmark's ``extra_info``. The full-size per-stage table of the embedded default
is in the README ("Where the time goes"). Run for real with
``pytest --benchmark-enable tests/benchmarks/test_bench_stages.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmark.reproduce import timing

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # each stage in a fresh interpreter, timed
ZOO = {"models": {"tiny": {"arch": "test_resnet", "init": "scratch", "img_size": 16, "seed": 0, "recipe": "scratch"}}}
STAGES = [
    ("data", "data", []),
    ("train", "train", ["--model", "tiny"]),
    ("logits", "logits", ["--model", "tiny", "--cost"]),
]  # (benchmark id, stage script, arguments)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("stages")
    shutil.copytree(ROOT / "pipelines", root / "pipelines")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["data"].update(
        train=200,
        val=100,
        test=200,
        shift=100,
        ood=100,
        corruption_subset=50,
        corruptions=["gaussian_noise"],
        severities=[1],
    )
    params["recipes"]["scratch"]["epochs"] = 1
    params["cost"].update(throughput_batch=8, throughput_iters=1)
    params["zoo"] = "zoo.yaml"
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    (root / "zoo.yaml").write_text(yaml.safe_dump(ZOO))
    return root


@pytest.mark.parametrize("name, stage, args", STAGES, ids=[s for s, _, _ in STAGES])
def test_bench_stage(benchmark, tiny, name, stage, args):
    log = tiny / f"{name}.jsonl"
    env = dict(os.environ, UQ_TIMINGS=str(log), HF_HUB_OFFLINE="1", TQDM_DISABLE="1", PYTHONPATH=str(ROOT))
    env.pop("UQ_TIMINGS_PID", None)

    def run():
        log.unlink(missing_ok=True)
        proc = subprocess.run(
            [sys.executable, f"pipelines/{stage}.py", *args], cwd=tiny, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-2000:]

    benchmark.pedantic(run, rounds=1, iterations=1)
    rec = timing.read_records(log).iloc[-1].to_dict()
    assert rec["stage"] == (stage if not args else f"{stage}@tiny")
    assert rec["wall_s"] > 0 and rec["max_rss_mb"] > 50
    if "--cost" in args:
        assert json.loads((tiny / "results" / "cost" / "tiny.json").read_text())["gflops"] > 0
    benchmark.extra_info.update({k: rec[k] for k in ("wall_s", "user_s", "sys_s", "max_rss_mb", "minor_faults")})
