"""Benchmark of the evaluate stage's all-pairs sweep on a synthetic zoo.

``python -m benchmark.evaluation.sweep_bench --models 40 --workers 2`` writes seeded
synthetic logits of K models (float32 safetensors, ``--test`` + ``--val``
samples, ``--classes`` classes) with their zoo and cost files into a temporary
folder, then runs the real evaluate stage (:func:`benchmark.evaluation.stage.run`)
in a child process: every single model and all K(K-1)/2 duos, converged fit,
all metrics, no bootstrap. The paper-exact fit is off: its 625-point grid takes
about 7 s per pair. It reports the wall time and the peak memory of the whole
process tree (the stage and its workers), then runs the stage again, which must
recompute nothing, and deletes the folder (unless ``--keep``).

Every ``--interval`` seconds it reads ``/proc/<pid>/{stat,status,smaps_rollup}``
of every process of the tree (the stage, the fork server, the workers): the peak
of the summed ``VmRSS`` (with its anonymous and file-backed parts), which counts
a page shared by several processes (libraries, the fork server's imports,
page-cache pages of the logits) once per process and so overstates the memory
used; the peak of the summed ``Pss``, which splits shared pages between their
users (the physical memory the tree holds); the sum of each process's own peak
``VmHWM`` (an upper bound); and the CPU seconds of the tree (user + system,
as last sampled), which show the work done when the machine is shared. Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
import yaml
from tqdm.auto import tqdm

from benchmark.storage import store

RECIPE = {"scratch": {"epochs": 1, "batch_size": 16, "lr": 0.01}}


def params(workers: int, *, fits=("converged",), n_bootstrap: int = 0, deep_ensembles=()) -> dict:
    """Stage parameters of the sweep (relative paths: run it in the zoo's folder)."""
    return {
        "suite": "synthetic",
        "zoo": "zoo.yaml",
        "threads": workers,
        "recipes": RECIPE,
        "data": {},  # logits given
        "logits": {"batch_size": 256},
        "cost": {"throughput_batch": 64, "throughput_iters": 5},  # (costs given too)
        "evaluate": {
            "fits": list(fits),
            "n_bootstrap": n_bootstrap,
            "bootstrap_splits": ["test"],
            "deep_ensembles": list(deep_ensembles),
            "workers": workers,
        },
    }


def _split_logits(n: int, classes: int, models: int, seed: int, progress: bool):
    """Yield (model index, logits (n, C) float32, labels) for one split.

    ``z_k = scale_k (0.6 shared + 0.8 own_k + (strength_k + 1.2 difficulty) onehot(y))``:
    a component shared by all models (correlated errors), a model's own noise, a
    true-class margin with a per-sample difficulty, and a temperature (miscalibration).
    ``strength_k`` in [2.5, 5] (top-1 accuracy about 35-90 % at C = 1,000) and
    ``scale_k`` in [0.6, 2.4] are drawn from model k's own seed, so a model's logits
    do not depend on how many models there are.
    """
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    shared = torch.randn(n, classes, generator=g)
    difficulty = torch.randn(n, generator=g)
    rows = torch.arange(n)
    for k in tqdm(range(models), desc=f"logits {n}x{classes}", disable=not progress, leave=False):
        gk = torch.Generator().manual_seed(seed * 1000 + k + 1)
        strength, scale = (
            2.5 + 2.5 * float(torch.rand((), generator=gk)),
            0.6 + 1.8 * float(torch.rand((), generator=gk)),
        )
        z = torch.randn(n, classes, generator=gk).mul_(0.8).add_(shared, alpha=0.6)
        z[rows, labels] += strength + 1.2 * difficulty
        yield k, z.mul_(scale), labels


def make_zoo(
    root, *, models: int, n_test: int, n_val: int, classes: int, n_ood: int = 0, seed: int = 0, progress: bool = True
) -> list[str]:
    """Write ``zoo.yaml``, ``results/cost/<m>.json`` and ``results/logits/<m>/{val,test[,ood]}.safetensors``
    of ``models`` synthetic models under ``root``; returns their names (m00, m01, ...)."""
    root = Path(root)
    names = [f"m{k:02d}" for k in range(models)]
    root.mkdir(parents=True, exist_ok=True)
    zoo = {
        n: {"arch": "resnet18", "init": "scratch", "img_size": 32, "seed": k, "recipe": "scratch"}
        for k, n in enumerate(names)
    }
    (root / "zoo.yaml").write_text(yaml.safe_dump({"models": zoo}))
    for k, n in enumerate(names):  # distinct GFLOPs: every two models form one pair
        store.write_json(
            root / "results" / "cost" / f"{n}.json",
            {
                "name": n,
                "arch": "resnet18",
                "init": "scratch",
                "img_size": 32,
                "seed": k,
                "role": "",
                "gflops": 1.0 + k,
                "params": 1000 * (k + 1),
                "throughput": 100.0 / (k + 1),
            },
        )
    splits = {"val": n_val, "test": n_test} | ({"ood": n_ood} if n_ood else {})
    for i, (split, n) in enumerate(splits.items()):
        for k, z, y in _split_logits(n, classes, models, seed * 10 + i, progress):
            labels = torch.full((n,), -1) if split == "ood" else y
            ids = torch.arange(n) + 10_000_000 * i
            store.save_logits_file(root / "results" / "logits" / names[k] / f"{split}.safetensors", z, labels, ids)
    return names


class TreeMonitor:
    """Samples memory and CPU time of a process and its descendants from ``/proc`` in a thread."""

    FIELDS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")
    PSS = ("Pss", "Pss_Anon", "Pss_File")  # /proc/<pid>/smaps_rollup: shared pages split between their users

    def __init__(self, pid: int, interval: float = 0.1):
        self.pid, self.interval = pid, interval
        self.pss = Path(f"/proc/{os.getpid()}/smaps_rollup").exists()
        self.peak = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0}  # kB, at the sample with the largest summed VmRSS
        self.peak_pss = dict.fromkeys(self.PSS, 0)  # kB, at the sample with the largest summed Pss
        self.hwm: dict[int, int] = {}  # pid -> VmHWM (kB)
        self.cpu: dict[int, float] = {}  # pid -> user + system CPU seconds, last seen
        self.max_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    stat = Path(f"/proc/{d}/stat").read_text()
                except OSError:
                    continue
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
        out, todo = [], [self.pid]
        while todo:
            p = todo.pop()
            out.append(p)
            todo += children.get(p, [])
        return out

    def sample(self) -> None:
        """Add one sample of the process tree: CPU seconds per process and the summed memory fields."""
        total = dict.fromkeys(self.FIELDS + self.PSS, 0)
        procs = 0
        for p in self._tree():
            try:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
                self.cpu[p] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
                lines = Path(f"/proc/{p}/status").read_text().splitlines()
                lines += Path(f"/proc/{p}/smaps_rollup").read_text().splitlines() if self.pss else []
            except OSError:
                continue
            vals = {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in lines) if k in total}
            for k, v in vals.items():
                total[k] += v
            if "VmHWM" in vals:
                self.hwm[p] = max(self.hwm.get(p, 0), vals["VmHWM"])
                procs += 1
        self.max_procs = max(self.max_procs, procs)
        if total["VmRSS"] > self.peak["VmRSS"]:
            self.peak = {k: total[k] for k in self.peak}
        if total["Pss"] > self.peak_pss["Pss"]:
            self.peak_pss = {k: total[k] for k in self.PSS}

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


_STAGE = (
    "import json; from benchmark.evaluation.stage import run; from benchmark.stages.params_config import load_params; "
    "print(json.dumps(run(load_params('params.yaml'), progress=False)))"
)


def run_stage(root, interval: float = 0.1) -> dict:
    """Run the evaluate stage in a child process in ``root``; its result with wall time and memory."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _STAGE], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with TreeMonitor(proc.pid, interval) as mem:
        out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"evaluate stage failed (exit {proc.returncode}):\n{err[-4000:]}")
    mb = 1 / 1024
    return {
        "stage": json.loads(out.strip().splitlines()[-1]),
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(mem.cpu.values()), 1),
        "peak_rss_mb": round(mem.peak["VmRSS"] * mb),
        "peak_rss_anon_mb": round(mem.peak["RssAnon"] * mb),
        "peak_rss_file_mb": round(mem.peak["RssFile"] * mb),
        "sum_hwm_mb": round(sum(mem.hwm.values()) * mb),
        "peak_pss_mb": round(mem.peak_pss["Pss"] * mb),
        "peak_pss_anon_mb": round(mem.peak_pss["Pss_Anon"] * mb),
        "peak_pss_file_mb": round(mem.peak_pss["Pss_File"] * mb),
        "processes": mem.max_procs,
    }


def sweep(root, *, workers: int, interval: float = 0.1) -> dict:
    """Run the stage twice in ``root`` (made by :func:`make_zoo`): the sweep, then a rerun that should reuse
    every unit (it recomputes them all if the evaluation code changed in between)."""
    store.write_text(Path(root) / "params.yaml", yaml.safe_dump(params(workers)))
    return {"first": run_stage(root, interval), "rerun": run_stage(root, interval)}


def _parser() -> argparse.ArgumentParser:
    """The command line of :func:`main`."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmark.evaluation.sweep_bench",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    from benchmark.config.yaml_input import cli_int

    ap.add_argument("--models", type=int, default=40, help="K models: K(K-1)/2 pairs (default 40)")
    ap.add_argument("--workers", type=int, default=2, help="evaluate.workers: worker processes (default 2)")
    ap.add_argument("--test", type=int, default=47_500, help="test samples (default 47,500)")
    ap.add_argument("--val", type=int, default=2_500, help="validation samples (default 2,500)")
    ap.add_argument("--classes", type=int, default=1_000, help="classes (default 1,000)")
    ap.add_argument(
        "--seed", type=cli_int(0), default=0, help="seed of the synthetic logits, an integer >= 0 (default 0)"
    )
    ap.add_argument("--dir", default=None, help="parent folder of the temporary zoo (default: the system temp folder)")
    ap.add_argument("--keep", action="store_true", help="keep the zoo folder (printed) instead of deleting it")
    ap.add_argument("--interval", type=float, default=0.1, help="memory sampling interval in seconds (default 0.1)")
    ap.add_argument("--json", default=None, help="also write the report to this JSON file")
    ap.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return ap


def _timed(a: argparse.Namespace, root: Path) -> dict:
    """Generate the synthetic zoo of ``a`` in ``root`` and time the sweep over it: the report."""
    t0 = time.perf_counter()
    make_zoo(
        root,
        models=a.models,
        n_test=a.test,
        n_val=a.val,
        classes=a.classes,
        seed=a.seed,
        progress=not a.no_progress,
    )
    report = {
        "models": a.models,
        "pairs": a.models * (a.models - 1) // 2,
        "workers": a.workers,
        "n_test": a.test,
        "n_val": a.val,
        "classes": a.classes,
        "cpus": os.cpu_count(),
        "generate_s": round(time.perf_counter() - t0, 1),
    }
    report |= sweep(root, workers=a.workers, interval=a.interval)
    report["s_per_pair_per_worker"] = round(report["first"]["wall_s"] * a.workers / max(1, report["pairs"]), 3)
    return report


def main(argv=None) -> int:
    """``python -m benchmark.evaluation.sweep_bench``: the all-pairs sweep timed on synthetic logits; its exit
    status."""
    ap = _parser()
    a = ap.parse_args(argv)
    for name in ("models", "workers", "test", "val", "classes"):
        if getattr(a, name) < (2 if name in ("models", "classes") else 1):
            ap.error(f"--{name} must be at least {2 if name in ('models', 'classes') else 1}, got {getattr(a, name)}")
    gb = a.models * (a.test + a.val) * a.classes * 4 / 1e9
    root = Path(tempfile.mkdtemp(prefix="sweep_bench_", dir=a.dir))
    print(
        f"zoo: {a.models} models x ({a.test} + {a.val}) x {a.classes} float32 = {gb:.1f} GB in {root}", file=sys.stderr
    )
    try:
        report = _timed(a, root)
    finally:
        if a.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(report, indent=2))
    if a.json:
        store.write_json(a.json, report)
    if report["rerun"]["stage"]["computed"]:
        print(
            f"error: the rerun recomputed {report['rerun']['stage']['computed']} units instead of none "
            "(was the code of a unit, e.g. benchmark/methods/rows.py, edited meanwhile?)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
