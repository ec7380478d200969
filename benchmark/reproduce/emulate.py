"""Another x86 CPU kind on this machine: the kernel fingerprint measured under QEMU's user-mode emulator.

``qemu-x86_64 -cpu MODEL python ...`` (Debian's ``qemu-user``; ``bash scripts/setup.sh test`` installs it) runs this
project's own Python with the emulated CPU's ``CPUID``: vendor, family, model and instruction sets. MKL and oneDNN
dispatch on what ``CPUID`` says, so an emulated ``Icelake-Server`` takes the Intel code paths on an AMD host (checked:
its fingerprint equals a real Intel Xeon's on every operation both hold, the 41 on which Intel and AMD part included;
CI holds it to that, :mod:`benchmark.reproduce.fingerprint_records`). QEMU 7.2's TCG runs AVX2, not AVX-512, which
the pinned numerics cap anyway; it is slow (a training epoch of the embedded default takes 10-20 minutes), so CI
fingerprints operations, not stages.

:func:`fingerprint` runs :func:`benchmark.reproduce.fingerprint.measure` in a child process under the emulator (its
arguments a list, never a shell string) and returns a record marked ``emulated``: ``machine.kind`` is
``QEMU-<model>``, ``machine.stands_for`` the kind the emulated CPU reports (e.g. ``GenuineIntel-f6-m134``), with the
host and the QEMU version beside it. QEMU's warnings about CPU features TCG does not model do not reach the user.
``python -m benchmark.reproduce.emulate`` is the child's side (it writes the record to ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

QEMU = "qemu-x86_64"
KIND_PREFIX = "QEMU-"
# TCG's notes about features it does not model ("qemu-x86_64: warning: TCG doesn't support requested feature: ...")
_QEMU_NOISE = re.compile(rf"^{QEMU}: warning: ")
_PROGRESS = "fingerprint-progress "  # the child's progress lines: "<prefix><done> <total> <what>"


class EmulationError(RuntimeError):
    """The emulator is missing, refuses the CPU model, or the child failed: the message names which."""


def qemu() -> str:
    """The emulator's path; :class:`EmulationError` naming how to install it when it is missing or the host is not
    x86-64."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        raise EmulationError(
            f"{QEMU} emulates an x86-64 CPU with this project's x86-64 Python: it needs an x86-64 host, "
            f"this one is {platform.machine()}"
        )
    path = shutil.which(QEMU)
    if path is None:
        raise EmulationError(
            f"{QEMU} not found: install Debian's qemu-user (`bash scripts/setup.sh test` does, or "
            "`apt-get install qemu-user`)"
        )
    return path


def version(path: str) -> str:
    """The emulator's version (``7.2.22``), or ``?``."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"version (\S+)", out)
    return m.group(1) if m else "?"


def cpu_models(path: str) -> list[str]:
    """The CPU models the emulator knows (``qemu-x86_64 -cpu help``)."""
    out = subprocess.run([path, "-cpu", "help"], capture_output=True, text=True, check=False).stdout
    return sorted({m.group(1) for m in re.finditer(r"^x86\s+(\S+)", out, re.M)})


def vendor_of(model: str, path: str | None = None) -> str | None:
    """The vendor (``GenuineIntel``, ``AuthenticAMD``) of the emulated CPU ``model``, from the description
    ``qemu-x86_64 -cpu help`` gives it or its first version (``Icelake-Server-v1  Intel Xeon Processor (Icelake)``);
    None when the description names neither."""
    out = subprocess.run([path or qemu(), "-cpu", "help"], capture_output=True, text=True, check=False).stdout
    for name in (model, f"{model}-v1"):
        m = re.search(rf"^x86\s+{re.escape(name)}\s+(.+)$", out, re.M)
        if m and ("AMD" in m.group(1) or "Intel" in m.group(1)):
            return "AuthenticAMD" if "AMD" in m.group(1) else "GenuineIntel"
    return None


def child_command(
    model: str,
    *,
    params: str,
    out: str,
    all_modes: bool,
    with_ops: bool,
    with_pipeline: bool,
    names=None,
    budget: float | None = None,
) -> list[str]:
    """The argument list that runs the child side under the emulated ``model`` (never a shell string)."""
    cmd = [qemu(), "-cpu", model, sys.executable, "-m", "benchmark.reproduce.emulate", "--params", params, "--out", out]
    cmd += ["--all-modes"] * all_modes + ["--no-ops"] * (not with_ops) + ["--no-pipeline"] * (not with_pipeline)
    cmd += ["--budget", f"{budget:g}"] if budget is not None else []
    return cmd + (["--models", *names] if names else [])


def fingerprint(
    model: str,
    *,
    params: str = "params.yaml",
    all_modes: bool = False,
    with_ops: bool = True,
    with_pipeline: bool = True,
    names=None,
    budget: float | None = None,
    timeout: float | None = None,
    progress: bool = True,
    env: dict | None = None,
) -> dict:
    """The fingerprint record of the emulated CPU ``model`` (``qemu-x86_64 -cpu help`` lists them), measured by a child
    process under the emulator with :func:`benchmark.reproduce.fingerprint.measure`'s options; marked as emulated
    (module docstring). ``budget``: seconds for the pipeline's operations (:func:`measure_within`; the record's
    ``not_measured`` names the architectures left out). ``progress``: a progress bar fed by the child. ``env``: the
    child's environment (default: this process's; the emulated CPU's own pins are set by the child's ``import
    benchmark``)."""
    from benchmark.config import numerics

    path = qemu()
    known = cpu_models(path)
    if known and model not in known:
        raise EmulationError(f"{QEMU} has no CPU model {model!r}; it knows: {', '.join(known)}")
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="uq-emulate-") as tmp:
        out = Path(tmp) / "record.json"
        cmd = child_command(
            model,
            params=params,
            out=str(out),
            all_modes=all_modes,
            with_ops=with_ops,
            with_pipeline=with_pipeline,
            names=names,
            budget=budget,
        )
        _run_child(cmd, model, out, timeout, progress, env)
        record = json.loads(out.read_text(encoding="utf-8"))
    me = numerics.cpu()
    seen = record["machine"]
    record["machine"] = {
        "kind": f"{KIND_PREFIX}{model}",
        "emulated": True,
        "stands_for": seen["kind"],
        "cpu": seen["cpu"],
        "isa": seen["isa"],
        "cores": seen["cores"],
        "host": {"kind": me["kind"], "cpu": me["cpu"]},
        "qemu": version(path),
    }
    record["seconds"] = round(time.time() - start, 1)
    return record


def recheck(model: str, params, zoo: dict, keys, *, all_modes: bool, params_path: str = "params.yaml", **kw) -> dict:
    """A second emulated measurement (:func:`fingerprint`, in a fresh child) of only the parts that hold ``keys``: the
    tool's operations (in all four modes with ``all_modes``, as the first run) when one of ``keys`` is one of them,
    and the pipeline's operations of the zoo entries (typed, ``zoo``) whose architecture one of ``keys`` names. A
    difference that is the kernels' comes back byte for byte; one that does not was the emulator's (QEMU 7.2's TCG
    gave one wrong MKL ``exp`` in CI, on an operation its own record and a real Intel's agree on)."""
    from benchmark.reproduce import fingerprint as fp
    from benchmark.reproduce import fingerprint_records as fr

    ops = {k.split("/", 1)[1] for k in keys}
    tool = any(not fr.pipeline_op(k) for k in keys)
    names = [
        n
        for n, e, r in fp._distinct(params, zoo)
        if any(o.startswith(fp.pipeline_key(e, r, "").split("/", 1)[1] + ": ") for o in ops)
    ]
    if not (tool or names):
        raise ValueError(f"none of {sorted(keys)} is an operation of the fingerprint of {params_path}")
    return fingerprint(
        model,
        params=params_path,
        all_modes=all_modes and tool,
        with_ops=tool,
        with_pipeline=bool(names),
        names=names or None,
        **kw,
    )


def _run_child(cmd: list[str], model: str, out: Path, timeout: float | None, progress: bool, env: dict | None) -> None:
    """Run the fingerprint's child process ``cmd`` (its progress fed to a bar) until it has written ``out``; an
    :class:`EmulationError` naming how it failed (a timeout, its exit status and last lines)."""
    from tqdm.auto import tqdm

    bar = tqdm(
        total=1,
        desc=f"{KIND_PREFIX}{model}: starting Python under the emulator",
        disable=not progress,
        leave=False,
        file=sys.stderr,
    )
    kept: list[str] = []
    with subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace", env=env
    ) as child:
        reader = threading.Thread(target=_read_child, args=(child.stderr, bar, kept, model), daemon=True)
        reader.start()
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise EmulationError(
                f"{KIND_PREFIX}{model}: the fingerprint did not finish within {timeout:.0f} s"
            ) from None
        finally:
            reader.join(timeout=5)
            bar.close()
    if child.returncode != 0 or not out.exists():
        tail = "".join(kept[-12:]).strip()
        signal = f" (killed by signal {-child.returncode})" if child.returncode < 0 else ""
        raise EmulationError(
            f"{KIND_PREFIX}{model}: the child process exited with {child.returncode}{signal}"
            + (f":\n{tail}" if tail else "")
        )


def _read_child(stream, bar, kept: list[str], model: str) -> None:
    """Feed the progress bar from the child's progress lines; keep its other lines but QEMU's feature warnings."""
    for line in stream:
        if _QEMU_NOISE.match(line):
            continue
        if line.startswith(_PROGRESS):
            done, total, what = line[len(_PROGRESS) :].rstrip("\n").split(" ", 2)
            bar.total, bar.n = int(total), int(done)
            bar.set_description(f"{KIND_PREFIX}{model}: {what}")
            bar.refresh()
            continue
        kept.append(line)


def _child(argv=None) -> int:
    """The child's side: measure the fingerprint here (under the emulator) and write it to ``--out``."""
    p = argparse.ArgumentParser(
        prog="python -m benchmark.reproduce.emulate",
        description="Measure this machine's kernel fingerprint and write it as JSON (the child "
        "process that `python -m benchmark reproduce fingerprint --emulate MODEL` "
        "runs under qemu-x86_64).",
    )
    p.add_argument("--params", default="params.yaml", help="params file (threads, recipes, zoo)")
    p.add_argument("--out", required=True, help="where to write the record (JSON)")
    p.add_argument("--all-modes", action="store_true", help="the tool's operations in all four modes")
    p.add_argument("--no-ops", action="store_true", help="without the tool's operations")
    p.add_argument("--no-pipeline", action="store_true", help="without the pipeline's per-layer operations")
    p.add_argument("--models", nargs="+", metavar="NAME", help="only these zoo entries' architectures")
    p.add_argument("--budget", type=float, metavar="SECONDS", help="seconds for the pipeline's operations")
    args = p.parse_args(argv)
    from benchmark.models.zoo import load_zoo
    from benchmark.reproduce import fingerprint as fp
    from benchmark.stages.params_config import load_params
    from benchmark.storage.store import write_json

    params = load_params(args.params)
    zoo = load_zoo(params.zoo, recipes=params.recipes, check_arch=False)
    parts = (len(fp.MODES) if args.all_modes else 1) * (not args.no_ops)
    parts += 0 if args.no_pipeline else sum(1 for _ in fp._distinct(params, zoo, args.models))
    done = [0]

    def progress(what: str) -> None:
        print(f"{_PROGRESS}{done[0]} {parts} {what}", file=sys.stderr, flush=True)
        done[0] += 1

    record = measure_within(params, zoo, args, progress)
    write_json(args.out, record)
    return 0


def measure_within(params, zoo: dict, args, progress=None, clock=time.monotonic) -> dict:
    """The record :func:`benchmark.reproduce.fingerprint.measure_as_asked` gives, but with ``args.budget`` seconds (if
    set) for the pipeline's operations: the zoo's architectures smallest input first (then by name: the cheapest
    first, under an emulator that runs them at very different speeds on different hosts), and no architecture
    started once the budget is spent (the one running finishes); those left out are listed in the record's
    ``not_measured`` (empty when none was). At least one architecture is measured."""
    from benchmark.reproduce import fingerprint as fp

    if args.budget is None or args.no_pipeline:
        return fp.measure_as_asked(params, zoo, args, progress)
    record = fp.measure_as_asked(params, zoo, argparse.Namespace(**{**vars(args), "no_pipeline": True}), progress)
    parts = sorted(fp._distinct(params, zoo, args.models), key=lambda p: (p[1].img_size, p[1].arch))
    start, measured, skipped = clock(), 0, []
    for name, _entry, _recipe in parts:
        if measured and clock() - start >= args.budget:
            skipped.append(name)
            continue
        record["hashes"].update(fp.measure(params, zoo, with_ops=False, names=[name], progress=progress)["hashes"])
        measured += 1
    return {**record, "not_measured": skipped}


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(_child())
