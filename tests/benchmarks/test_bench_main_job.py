"""The README's main job as a new user runs it, from a clean state: in a scratch copy of this checkout (the files git
tracks, no output, no DVC cache), the install (``bash scripts/setup.sh``, timed) and ``dvc repro`` with per-stage timing
records (:func:`benchmark.reproduce.timing.run_repro`): its wall time, the stages' CPU seconds, each stage's start-up
(interpreter, imports, params: before its first real work) and DVC's seconds around it, and the figure to lower, the
run's wall time over its compute floor ``(CPU - start-up) / cores`` (issue 56: at most 1.2x). Then the same DAG two
stages at a time (``python -m benchmark run --jobs 2``, :mod:`benchmark.cluster.parallel`) in a second copy, which must
end in the serial run's stage outputs (every one that embeds no measured time, byte for byte).

Run for real with ``pytest --benchmark-enable tests/benchmarks/test_bench_main_job.py`` (an install and the pipeline
twice: about three times the main job): the figures go to ``results/timings.json`` (the README's main-job line and the
performance page's table, ``python -m benchmark reproduce readme --write``). ``UQBENCH_MAIN_JOB_INSTALL=0`` measures
``dvc repro`` with this environment instead of installing one; ``UQBENCH_MAIN_JOB_JOBS=1`` leaves out the parallel run.
With benchmarks disabled (the test command) it is skipped: the stages are tested on tiny suites, the parallel run on
the toy pipeline (tests/cluster/test_cluster_local_run.py).
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

from benchmark.cluster.check import copy_checkout
from benchmark.dvcutil import lockfile
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


def test_bench_main_job_from_a_clean_state(benchmark, monkeypatch):
    if benchmark.disabled:
        pytest.skip("measured with --benchmark-enable only: an install and the embedded default from scratch twice")
    from benchmark.storage.store import write_json

    jobs = int(os.environ.get("UQBENCH_MAIN_JOB_JOBS", "2"))
    work = Path(tempfile.mkdtemp(prefix="bench-main-job-", dir=ROOT / ".dvc" / "tmp"))
    try:
        serial = work / "serial"
        copy_checkout(ROOT, "dvc.yaml", serial)
        python, install_s = _install(serial)
        monkeypatch.setenv("PYTHONPATH", str(serial))  # this copy's package, whichever environment runs it

        def once():
            return timing.run_repro(work / "serial.json", install_s=install_s, cwd=serial, python=python)

        rec = benchmark.pedantic(once, rounds=1, iterations=1)
        benchmark.extra_info.update(
            {
                k: rec[k]
                for k in (
                    "repro_wall_s",
                    "cpu_s",
                    "startup_cpu_s",
                    "compute_floor_s",
                    "floor_ratio",
                    "dvc_overhead_s",
                    "install_s",
                )
            }
        )
        if jobs > 1:
            parallel = work / "parallel"
            copy_checkout(ROOT, "dvc.yaml", parallel)
            monkeypatch.setenv("PYTHONPATH", str(parallel))
            par = timing.run_repro(work / "parallel.json", cwd=parallel, python=python, jobs=jobs)
            locks = lockfile.read(serial / "dvc.lock"), lockfile.read(parallel / "dvc.lock")
            outputs = lockfile.summarize(lockfile.compare_outputs(*locks))
            assert not outputs["failing_stages"] and outputs["identical"] > 0, outputs  # the same bytes
            assert list(locks[0]) == list(locks[1])  # dvc.lock in the serial run's order
            rec["parallel"] = {
                k: par[k]
                for k in (
                    "command",
                    "jobs",
                    "repro_wall_s",
                    "cpu_s",
                    "startup_cpu_s",
                    "compute_floor_s",
                    "floor_ratio",
                    "load",
                )
            } | {"outputs": outputs}
            benchmark.extra_info[f"jobs={jobs}"] = par["repro_wall_s"]
        write_json(RECORD, rec)
    finally:
        shutil.rmtree(work, ignore_errors=True)
