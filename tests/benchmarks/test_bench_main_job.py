"""The README's main job as a new user runs it, from a clean state: in a scratch copy of this checkout (the files git
tracks, no output, no DVC cache), the install (``bash scripts/setup.sh``, timed) and the README's command (``python -m
benchmark run``, the pipeline two stages at a time, :mod:`benchmark.cluster.parallel`) with per-stage timing records
(:func:`benchmark.reproduce.timing.run_repro`): its wall time, the stages' CPU seconds, each stage's start-up
(interpreter, imports, params: before its first real work), and the figure to lower, the run's wall time over its
compute floor ``(CPU - start-up) / cores`` (issue 56: at most 1.2x). Then ``dvc repro`` (one stage at a time, with DVC's
seconds before each stage) in a second copy (:func:`benchmark.reproduce.timing.compare_run`), which must end in the same
stage outputs (every one that embeds no measured time, byte for byte) and the same order of ``dvc.lock``.

Run for real with ``pytest --benchmark-enable tests/benchmarks/test_bench_main_job.py`` (an install and the pipeline
twice) or ``bash scripts/measure-main-job.sh`` in a fresh clone (the same runs): the figures go to
``results/timings.json`` (the README's main-job line and the performance page's table, ``python -m benchmark reproduce
readme --write``). ``UQBENCH_MAIN_JOB_INSTALL=0`` measures with this environment instead of installing one;
``UQBENCH_MAIN_JOB_JOBS=N`` runs N stages at a time first (1: ``dvc repro``), ``UQBENCH_MAIN_JOB_COMPARE=N`` the second
run (0: none). With benchmarks disabled (the test command) it is skipped: the stages are tested on tiny suites, the
parallel run on the toy pipeline (tests/cluster/test_cluster_local_run.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from benchmark.dvcutil.scratch import copy_checkout
from benchmark.reproduce import timing

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "results" / "timings.json"
pytestmark = pytest.mark.slow


def _install(copy: Path) -> tuple[str, float]:
    """``bash scripts/setup.sh`` in ``copy``: (its interpreter, seconds); this environment's with the variable off."""
    if os.environ.get("UQBENCH_MAIN_JOB_INSTALL", "1") == "0":
        return sys.executable, None
    t0 = time.time()
    subprocess.run(["bash", "scripts/setup.sh"], cwd=copy, check=True)
    return str(copy / ".venv" / "bin" / "python"), time.time() - t0


def test_bench_main_job_from_a_clean_state(benchmark):
    if benchmark.disabled:
        pytest.skip("measured with --benchmark-enable only: an install and the embedded default from scratch twice")
    from benchmark.storage.store import write_json

    jobs = int(os.environ.get("UQBENCH_MAIN_JOB_JOBS", "2"))
    compare = int(os.environ.get("UQBENCH_MAIN_JOB_COMPARE", "1"))
    work = Path(tempfile.mkdtemp(prefix="bench-main-job-", dir=ROOT / ".dvc" / "tmp"))
    try:
        first = work / "first"
        copy_checkout(ROOT, "dvc.yaml", first)
        python, install_s = _install(first)

        def once():
            return timing.run_repro(work / "first.json", install_s=install_s, cwd=first, python=python, jobs=jobs)

        rec = benchmark.pedantic(once, rounds=1, iterations=1)
        keys = ("repro_wall_s", "cpu_s", "startup_cpu_s", "compute_floor_s", "floor_ratio", "install_s")
        benchmark.extra_info.update({k: rec[k] for k in keys})
        if compare and compare != jobs:
            timing.compare_run(rec, first, work / "second", jobs=compare, python=python)  # same outputs, or it raises
            benchmark.extra_info[f"jobs={compare}"] = rec["serial" if compare == 1 else "parallel"]["repro_wall_s"]
        write_json(RECORD, rec)
    finally:
        shutil.rmtree(work, ignore_errors=True)
