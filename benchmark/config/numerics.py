"""CPU numerics pinned so that two x86 CPU kinds produce the same bytes (with :mod:`benchmark.models.portable`).

A fine-tune amplifies a last-bit rounding difference into a different model, and
PyTorch's CPU kernels round differently per CPU: ATen picks vectorised kernels by
the CPU's instruction set (AVX2 or AVX-512), oneDNN's JIT convolutions do too, and
MKL picks code paths by ISA *and* vendor. Measured on the embedded default
(``README``, "Reproducibility"): an AMD EPYC with AVX2 only, an AMD EPYC with
AVX-512 and an Intel Xeon with AVX-512 gave three different checkpoints of every
model, and the test-split AURC of one model doubled between them.

Pinning (the default, ``UQ_NUMERICS`` unset or ``pinned``) sets, before torch is
imported:

* ``ATEN_CPU_CAPABILITY=avx2``: ATen's vectorised kernels at AVX2 on every x86 CPU;
* ``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN's JIT kernels (convolutions) capped at AVX2;
* ``MKL_CBWR=AVX2,STRICT``: MKL's conditional numerical reproducibility mode
  (documented to fix MKL's code path; it does so on one vendor, not across
  vendors: see below);

and the stages fix the number of torch threads (params ``threads``), so a
reduction is split the same way on any machine. ``UQ_NUMERICS=native`` keeps
each CPU's fastest kernels (same machine kind: still byte-identical).

Checked (``tests/reproduce/test_numerics.py``): with the AVX2 caps, a Zen 5
machine with AVX-512 trained byte for byte the checkpoints that an AMD EPYC
without AVX-512 trained (``../shared/reference-runs/amd-epyc-avx2``), and a CPU of
this vendor without AVX-512, simulated by the ISA switches, trains the same bytes.
Across vendors the pins do not suffice: MKL's small matrix products and its vector
math (``torch.sqrt``, ``exp``: AdamW's update) give other bytes on an Intel Xeon
than on an AMD EPYC (the kernel fingerprints, ``results/fingerprints/``), so under
pinning, training and logits run without MKL (:mod:`benchmark.models.portable`).

A CPU without AVX2 and FMA (an old workstation, a CPUID-masked virtual machine) is asked, not assumed: the caps
would make ATen run AVX2 instructions it lacks (``SIGILL`` at the first tensor operation), so :func:`pinnable` reads
the CPU's own ``CPUID`` (:mod:`benchmark.config.cpuid`; ``/proc/cpuinfo`` is the host's under an emulator), and there
the pins are not applied (a pinned parent process's are taken back), the records say so (``pinned: false`` and the
capability really used), a stage says in one line that the committed bytes cannot be promised
(:func:`unpinnable_note`), and the gate judges such a run by its noise.

Nothing here imports torch: :func:`pin` must run before it (``import benchmark``
calls it through :mod:`benchmark.config.runtime`).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, MutableMapping

from benchmark.config import cpuid

ENV = "UQ_NUMERICS"
MODES = ("pinned", "native")
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2,STRICT"}
# what a stage records of the numerics it ran with (train.json, cost records, timings)
_applied: dict = {}


def requested_mode(environ: Mapping[str, str] | None = None) -> str:
    """``UQ_NUMERICS`` (default ``pinned``); anything else is a clear error."""
    environ = os.environ if environ is None else environ
    mode = environ.get(ENV, "pinned") or "pinned"
    if mode not in MODES:
        raise ValueError(f"{ENV}={mode!r}: must be one of {list(MODES)}")
    return mode


def _cpuinfo() -> dict[str, str]:
    """The first value of each field of ``/proc/cpuinfo`` (the first CPU's; empty off Linux)."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                k, _, v = line.partition(":")
                info.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return info


def cpu_flags() -> set[str]:
    """The CPU feature flags of this Linux machine (empty elsewhere)."""
    return set(_cpuinfo().get("flags", "").split())


def cpu() -> dict:
    """This CPU: ``kind`` (vendor, family and model: what a kernel fingerprint record is of), ``cpu`` (its name),
    ``isa`` (its vector instruction set flags) and ``cores``. Read from the CPU itself (:mod:`benchmark.config.cpuid`:
    right under an emulator too, where ``/proc/cpuinfo`` is the host's), else from ``/proc/cpuinfo`` (Linux), else
    the platform's."""
    own = cpuid.read()
    if own is not None:
        isa = [f for f in own["flags"] if f.startswith(("avx", "amx", "fma"))]
        return {"kind": own["kind"], "cpu": own["name"] or platform.processor(), "isa": isa, "cores": os.cpu_count()}
    info = _cpuinfo()
    flags = info.get("flags", "").split()
    vendor, family, model = (
        info.get("vendor_id", platform.machine()),
        info.get("cpu family", "?"),
        info.get("model", "?"),
    )
    return {
        "kind": f"{vendor}-f{family}-m{model}",
        "cpu": info.get("model name", platform.processor()),
        "isa": sorted(f for f in flags if f.startswith(("avx", "amx", "fma"))),
        "cores": os.cpu_count(),
    }


def pinnable(machine: str | None = None, flags: set[str] | None = None) -> bool:
    """Pinning needs an x86-64 CPU with AVX2 and FMA (every x86 server CPU since 2013) whose operating system saves
    the AVX registers. Asked of the CPU itself (:mod:`benchmark.config.cpuid`) unless ``flags`` are given; where it
    cannot be asked, ``/proc/cpuinfo``'s flags (which the kernel clears when it does not save the registers)."""
    machine = platform.machine().lower() if machine is None else machine.lower()
    if machine not in ("x86_64", "amd64"):
        return False
    if flags is None:
        own = cpuid.read()
        if own is not None:
            return {"avx2", "fma"} <= set(own["flags"]) and own["os_avx"]
        flags = cpu_flags()
    return {"avx2", "fma"} <= flags


def pin(environ: MutableMapping[str, str] | None = None) -> dict:
    """Apply the requested mode to ``environ`` (default: this process's environment) and return what was applied.

    Must run before torch runs its first CPU kernel (ATen fixes its choice then): :func:`state` tells
    whether it took."""
    environ = os.environ if environ is None else environ
    mode = requested_mode(environ)
    applied = {"mode": mode, "pinned": False}
    if mode == "pinned" and pinnable():
        environ.update(PINNED)
        applied["pinned"] = True
    elif mode == "pinned":
        # no AVX2/FMA here: the caps would force instructions this CPU lacks (SIGILL at the first tensor operation);
        # a parent process's pins (a pinned process starting this one, e.g. under an emulator) are taken back
        applied["unpinnable"] = True
        for k, v in PINNED.items():
            if environ.get(k) == v:
                del environ[k]
    if environ is os.environ:
        _applied.clear()
        _applied.update(applied)
    return applied


def state() -> dict:
    """What this process runs with: the mode, whether pinning took, and torch's CPU capability."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    return {
        "numerics": _applied.get("mode", requested_mode()),
        "pinned": bool(_applied.get("pinned")) and capability == PINNED["ATEN_CPU_CAPABILITY"].upper(),
        "cpu_capability": capability,
    }


def unpinnable_note() -> str | None:
    """One line for a user whose CPU cannot run the pinned numerics (no AVX2 and FMA), None elsewhere: what it cannot
    promise and how its numbers will be judged."""
    if not _applied.get("unpinnable"):
        return None
    me = cpu()
    return (
        f"numerics: this CPU ({me['cpu'] or me['kind']}, {me['kind']}) has no AVX2 and FMA, so the pinned numerics "
        f"cannot give the committed bytes here; it runs its own kernels ({state()['cpu_capability']}) and "
        f"`reproduce check` judges this run's numbers by their noise"
    )


def check_pinned() -> None:
    """Raise ValueError when pinning was asked for on a CPU that supports it but did not take (torch ran a CPU kernel
    before :mod:`benchmark` was imported): the outputs would not be byte-identical across CPU kinds."""
    if _applied.get("pinned") and not state()["pinned"]:
        raise ValueError(
            f"CPU numerics not pinned: torch chose {state()['cpu_capability']} kernels before benchmark "
            f"was imported (import benchmark first, or set {ENV}=native to run with this CPU's own kernels)"
        )
