"""What the Slurm path adds over a serial ``dvc repro``: the embedded default from scratch, in scratch copies of this
checkout, once by ``dvc repro`` with per-stage timing records (``python -m benchmark reproduce timings``'s
:func:`benchmark.reproduce.timing.run_repro`) and once per ``JOBS`` through ``cluster submit`` on a one-node Slurm
started here (:func:`benchmark.cluster.check.local_check`, with the same timing records), on the same machine.

Each Slurm run must give the serial run's stage outputs (the check fails otherwise). Run for real with
``pytest --benchmark-enable tests/benchmarks/test_bench_cluster.py`` (about three times the main job's ``dvc repro``):
the figures go to ``results/cluster.json`` (the how-to's table, docs/how-to/cluster.md). With benchmarks disabled
(the test command) it is skipped: the Slurm path is tested on the tiny suites (tests/cluster/).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from benchmark.cluster.check import local_check
from benchmark.dvcutil.scratch import copy_checkout
from benchmark.reproduce import timing

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "results" / "cluster.json"
JOBS = (1, 2)  # stage jobs at once on the one-node cluster: 1 isolates the overhead, 2 is what the node holds
pytestmark = pytest.mark.slow


def _stage_walls(log: Path, stages: set[str]) -> dict[str, float]:
    recs = timing.read_records(log) if log.exists() else timing.read_records_empty()
    recs = recs[recs["stage"].isin(stages)]
    return dict(zip(recs["stage"], recs["wall_s"].astype(float)))


def test_bench_slurm_path_against_serial_dvc_repro(benchmark, tmp_path):
    if benchmark.disabled:
        pytest.skip("measured with --benchmark-enable only: the embedded default from scratch three times")
    from benchmark.storage.store import write_json

    work = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir=ROOT / ".dvc" / "tmp"))
    try:
        serial = work / "serial"
        copy_checkout(ROOT, "dvc.yaml", serial)
        rec = timing.run_repro(work / "serial-timings.json", cwd=serial)
        stages = {s["stage"] for s in rec["stages"]}
        runs = []
        for jobs in JOBS:
            log = work / f"timings-{jobs}.jsonl"

            def once(jobs=jobs, log=log):
                return local_check(
                    ROOT / "dvc.yaml",
                    jobs=jobs,
                    workdir=work,
                    serial_lock=serial / "dvc.lock",
                    extra_env={"UQ_TIMINGS": str(log)},
                    log=lambda *a: None,
                )

            result = benchmark.pedantic(once, rounds=1, iterations=1) if jobs == JOBS[-1] else once()
            assert result.ok, result.report()
            walls = _stage_walls(log, stages)
            spans = result.stage_wall_s
            overhead = [spans[s] - walls[s] for s in walls if s in spans]
            runs.append(
                {
                    "jobs": jobs,
                    "wall_s": round(result.wall_s, 1),
                    "max_concurrent": result.max_concurrent,
                    "stages_wall_s": round(sum(walls.values()), 1),
                    "job_overhead_s": round(sum(overhead) / max(1, len(overhead)), 2),
                    "outputs": result.outputs,
                }
            )
        figures = {
            "pipeline": "dvc.yaml",
            "stages": len(stages),
            "date": time.strftime("%Y-%m-%d"),
            "machine": timing.machine(),
            "serial": {"wall_s": rec["repro_wall_s"], "stages_wall_s": rec["stages_wall_s"]},
            "slurm": runs,
            "note": "wall times of a machine shared with other work are indicative",
        }
        benchmark.extra_info.update({f"jobs={r['jobs']}": r["wall_s"] for r in runs} | {"serial": rec["repro_wall_s"]})
        write_json(RECORD, figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)
