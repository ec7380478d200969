"""What the CPU says it is (benchmark/config/cpuid.py), against the kernel's own reading of the same CPU
(/proc/cpuinfo, natively the two must agree), and how pinning decides on it (benchmark/config/numerics.py)."""

from __future__ import annotations

import pytest

from benchmark.config import cpuid, numerics

OWN = cpuid.read()


def _proc() -> dict[str, str]:
    return numerics._cpuinfo()


@pytest.mark.skipif(OWN is None or not _proc(), reason="needs an x86-64 Linux machine")
def test_cpuid_names_the_cpu_as_the_kernel_does():
    info = _proc()
    assert OWN["vendor"] == info["vendor_id"]
    assert (OWN["family"], OWN["model"]) == (int(info["cpu family"]), int(info["model"]))
    assert OWN["kind"] == f"{info['vendor_id']}-f{info['cpu family']}-m{info['model']}"
    assert OWN["name"] == info["model name"].strip()


@pytest.mark.skipif(OWN is None or not _proc(), reason="needs an x86-64 Linux machine")
def test_cpuid_features_are_the_kernels_flags():
    flags = set(_proc()["flags"].split())
    for name in cpuid.FEATURES:
        if name in flags or name not in ("avx512_fp16", "amx_bf16", "amx_tile", "amx_int8", "avx_vnni"):
            # the kernel lists every feature the CPU reports that it supports (it hides the AMX and FP16 ones it does
            # not enable); natively the two readings agree
            assert (name in OWN["flags"]) == (name in flags), name
    assert OWN["os_avx"] == ("avx" in flags)


def test_pinning_asks_the_cpu_not_proc_cpuinfo(monkeypatch):
    """Under an emulator /proc/cpuinfo is the host's: a CPU that says it has no AVX2 is not pinned, whatever the file
    says (the caps would end the process with SIGILL)."""
    monkeypatch.setattr(numerics.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(numerics, "cpu_flags", lambda: {"avx2", "fma"})  # the host's file
    for flags, os_avx, ok in [
        (["avx", "sse4_2"], True, False),
        (["avx", "avx2", "fma"], True, True),
        (["avx", "avx2", "fma"], False, False),
    ]:
        monkeypatch.setattr(numerics.cpuid, "read", lambda f=flags, o=os_avx: {"flags": f, "os_avx": o})
        assert numerics.pinnable() is ok
    monkeypatch.setattr(numerics.cpuid, "read", lambda: None)  # the instructions cannot run here: the file decides
    assert numerics.pinnable() is True


def test_an_unpinnable_cpu_takes_back_a_parent_processs_pins_and_says_so(monkeypatch):
    monkeypatch.setattr(numerics, "pinnable", lambda: False)
    env = dict(numerics.PINNED, ONEDNN_MAX_CPU_ISA="AVX512_CORE")  # inherited caps; a user's own value stays
    assert numerics.pin(env) == {"mode": "pinned", "pinned": False, "unpinnable": True}
    assert env == {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}
    monkeypatch.setattr(numerics, "_applied", {"mode": "pinned", "pinned": False, "unpinnable": True})
    monkeypatch.setattr(numerics, "cpu", lambda: {"kind": "GenuineIntel-f6-m26", "cpu": "Nehalem"})
    monkeypatch.setattr(numerics, "state", lambda: {"numerics": "pinned", "pinned": False, "cpu_capability": "DEFAULT"})
    note = numerics.unpinnable_note()
    assert "\n" not in note and "no AVX2 and FMA" in note and "cannot give the committed bytes" in note
    assert "judges this run's numbers by their noise" in note and "GenuineIntel-f6-m26" in note and "DEFAULT" in note
    monkeypatch.setattr(numerics, "_applied", {"mode": "pinned", "pinned": True})
    assert numerics.unpinnable_note() is None
