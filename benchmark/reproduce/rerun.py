"""Whole stages again, here or on an emulated CPU kind: do they give the committed ``dvc.lock``'s outputs byte for byte?

``python -m benchmark reproduce stage train@mnv3s050 logits@mnv3s050 [--emulate Icelake-Server] [--record FILE]``
copies the checkout into a scratch folder (:func:`benchmark.dvcutil.scratch.make_copy`: tracked files, and hard
links to the upstream outputs the stages read, e.g. ``results/data``), runs the stages there with
``dvc repro --single-item --force`` and compares the outputs that the scratch run's ``dvc.lock`` records with the
checkout's ``dvc.lock`` (:func:`benchmark.dvcutil.lockfile.compare_outputs`; a measured output such as a cost
record's throughput is not compared). Nothing of the checkout is touched but the record.

With ``--emulate MODEL``, DVC runs natively and every stage command (``python pipelines/...``) runs under
``qemu-x86_64 -cpu MODEL`` (:mod:`benchmark.reproduce.emulate`): a ``python`` first on the scratch run's ``PATH`` starts
the project's own interpreter under the emulator and keeps QEMU's feature warnings from the output. An epoch of the
embedded default takes 10-20 minutes there: this is a command (or a benchmark), not a test.

``--record`` adds the result to ``results/cross_cpu.json`` (:func:`benchmark.reproduce.cross_cpu.stage_entry`) as a
run of the emulated kind (or of this machine), with its commit.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmark.bundle.pack import git_state
from benchmark.dvcutil import lockfile
from benchmark.dvcutil.scratch import ScratchError, Target, checked_inputs, make_copy

# the `python` of an emulated scratch run: the project's interpreter under the emulator, QEMU's warnings filtered out
_SHIM = r"""#!{python}
import os, subprocess, sys
cmd = [{qemu!r}, "-cpu", {model!r}, {python!r}, *sys.argv[1:]]
child = subprocess.Popen(cmd, stderr=subprocess.PIPE)
pending = b""
while True:
    chunk = os.read(child.stderr.fileno(), 65536)
    if not chunk:
        break
    pending += chunk
    cut = max(pending.rfind(b"\n"), pending.rfind(b"\r"))  # whole lines (ended by \n or tqdm's \r) leave at once
    if cut >= 0:
        text, pending = pending[: cut + 1], pending[cut + 1 :]
        kept = [line for line in text.splitlines(keepends=True) if not line.startswith(b"qemu-x86_64: warning: ")]
        sys.stderr.buffer.write(b"".join(kept))
        sys.stderr.buffer.flush()
sys.stderr.buffer.write(pending)
sys.exit(child.wait())
"""


def _shim(folder: Path, model: str) -> Path:
    """A ``python`` in ``folder`` that runs this interpreter under the emulated CPU ``model``."""
    from benchmark.reproduce import emulate

    qemu = emulate.qemu()
    known = emulate.cpu_models(qemu)
    if known and model not in known:
        raise emulate.EmulationError(f"{emulate.QEMU} has no CPU model {model!r}; it knows: {', '.join(known)}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "python"
    path.write_text(_SHIM.format(python=sys.executable, qemu=qemu, model=model), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def run(stages: list[str], *, root=".", emulate_model: str | None = None, timeout: float | None = None) -> dict:
    """Run ``stages`` (``train@mnv3s050``, or ``suites/<s>/dvc.yaml:stage``) in a scratch copy of ``root``, under the
    emulated CPU ``emulate_model`` when given, and compare their outputs with ``root``'s ``dvc.lock``. Returns
    ``stages``, ``outputs`` (one dict per compared output: stage, path, committed, fresh, status), ``counts``
    (:func:`benchmark.dvcutil.lockfile.summarize`), ``seconds``, ``machine`` (the CPU the stages ran on: this one,
    or the emulated one with ``emulated``/``stands_for``/``host``/``qemu``), ``commit`` and ``dirty`` (the checkout's
    code when the run started: :func:`benchmark.bundle.pack.git_state`). :class:`ScratchError` when the stages or
    their inputs are missing, or DVC fails."""
    from benchmark.config import numerics

    root = Path(root).resolve()
    targets = [Target.parse(s) for s in stages]
    if len({t.lock for t in targets}) != 1:
        raise ScratchError(f"stages {stages}: give the stages of one pipeline at a time")
    locks, links = checked_inputs(root, targets)
    code = git_state(root)  # the code that runs: the checkout as it is now (a commit made meanwhile is not it)
    base = root / ".dvc" / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rerun-", dir=base))
    try:
        env = {k: v for k, v in os.environ.items() if k != "UQ_TIMINGS"}
        env["PYTHONPATH"] = os.pathsep.join([str(work), *filter(None, [os.environ.get("PYTHONPATH")])])
        if emulate_model:
            env["PATH"] = os.pathsep.join(
                [str(_shim(work / ".emulate-bin", emulate_model).parent), env.get("PATH", "")]
            )
        make_copy(root, work, targets, links)
        start = time.time()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "dvc", "repro", "--single-item", "--force", *[str(t) for t in targets]],
                cwd=work,
                env=env,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise ScratchError(f"{', '.join(stages)}: not finished within {timeout:.0f} s") from None
        seconds = time.time() - start
        if proc.returncode != 0:
            raise ScratchError(f"{', '.join(stages)}: `dvc repro` failed (exit {proc.returncode}; its output is above)")
        fresh = lockfile.read(work / targets[0].lock)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    committed = locks[targets[0].lock]
    names = {t.stage for t in targets}
    report = lockfile.compare_outputs({s: committed[s] for s in names}, {s: fresh.get(s, {}) for s in names})
    machine = _machine(emulate_model) if emulate_model else numerics.cpu()
    return {
        "stages": [str(t) for t in targets],
        "outputs": report.to_dict("records"),
        "counts": lockfile.summarize(report),
        "seconds": round(seconds, 1),
        "machine": machine,
        "commit": code["commit"],
        "dirty": code["dirty"],
    }


def _machine(model: str) -> dict:
    """The emulated CPU ``model`` as a record names it (its CPUID's kind, read under the emulator)."""
    from benchmark.config import numerics
    from benchmark.reproduce import emulate

    qemu = emulate.qemu()
    code = "from benchmark.config import numerics; import json; print(json.dumps(numerics.cpu()))"
    proc = subprocess.run(
        [qemu, "-cpu", model, sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    seen = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 and proc.stdout.strip() else {}
    me = numerics.cpu()
    return {
        "kind": f"{emulate.KIND_PREFIX}{model}",
        "emulated": True,
        "stands_for": seen.get("kind", "?"),
        "cpu": seen.get("cpu", model),
        "host": {"kind": me["kind"], "cpu": me["cpu"]},
        "qemu": emulate.version(qemu),
    }
