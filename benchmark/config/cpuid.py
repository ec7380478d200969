"""What the CPU itself says it is: the x86 ``CPUID`` and ``XGETBV`` instructions, run in this process.

``/proc/cpuinfo`` describes the machine the kernel runs on, not always the CPU a process sees: under a user-mode
emulator (QEMU's ``qemu-x86_64 -cpu MODEL``) it is the host's file while the instructions the process may execute are
the emulated model's, and a hypervisor may mask features. Pinning the kernels to AVX2
(:mod:`benchmark.config.numerics`) on a CPU that has no AVX2 ends the process with ``SIGILL`` at its first tensor
operation, so the decision is taken on what ``CPUID`` answers (and ``XGETBV``: the operating system saves the AVX
registers) in this process.

The two instructions run from a page of executable memory (``mmap`` + ``ctypes``; the machine code is below, byte
by byte, with its assembly). Where that is impossible (not x86-64, not Linux or another POSIX system, a kernel that
refuses writable executable memory) :func:`read` returns None and callers fall back to ``/proc/cpuinfo``. Nothing here
imports torch: it runs before torch is imported (``import benchmark``).
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import platform
import struct
from typing import Any

# void cpuid(uint32 leaf, uint32 subleaf, uint32 out[4]) -- System V ABI: edi, esi, rdx
_CPUID = bytes.fromhex(
    "53"  # push rbx            (callee-saved; CPUID writes it)
    "4989d0"  # mov  r8, rdx        (out)
    "89f8"  # mov  eax, edi       (leaf)
    "89f1"  # mov  ecx, esi       (subleaf)
    "0fa2"  # cpuid
    "418900"  # mov  [r8], eax
    "41895804"  # mov  [r8+4], ebx
    "41894808"  # mov  [r8+8], ecx
    "4189500c"  # mov  [r8+12], edx
    "5b"  # pop  rbx
    "c3"
)  # ret
# uint64 xgetbv(uint32 xcr) -- edi
_XGETBV = bytes.fromhex(
    "89f9"  # mov  ecx, edi
    "0f01d0"  # xgetbv              (edx:eax = XCR[ecx])
    "48c1e220"  # shl  rdx, 32
    "4809d0"  # or   rax, rdx
    "c3"
)  # ret

# (leaf, subleaf, register index in eax/ebx/ecx/edx, bit) of the features a record names, in /proc/cpuinfo's spelling
FEATURES = {
    "fma": (1, 0, 2, 12),
    "avx": (1, 0, 2, 28),
    "f16c": (1, 0, 2, 29),
    "avx2": (7, 0, 1, 5),
    "avx512f": (7, 0, 1, 16),
    "avx512dq": (7, 0, 1, 17),
    "avx512ifma": (7, 0, 1, 21),
    "avx512cd": (7, 0, 1, 28),
    "avx512bw": (7, 0, 1, 30),
    "avx512vl": (7, 0, 1, 31),
    "avx512vbmi": (7, 0, 2, 1),
    "avx512_vbmi2": (7, 0, 2, 6),
    "avx512_vnni": (7, 0, 2, 11),
    "avx512_bitalg": (7, 0, 2, 12),
    "avx512_vpopcntdq": (7, 0, 2, 14),
    "avx512_fp16": (7, 0, 3, 23),
    "amx_bf16": (7, 0, 3, 22),
    "amx_tile": (7, 0, 3, 24),
    "amx_int8": (7, 0, 3, 25),
    "avx_vnni": (7, 1, 0, 4),
    "avx512_bf16": (7, 1, 0, 5),
}
_OSXSAVE = (1, 0, 2, 27)
_XCR0_AVX = 0b110  # SSE and AVX (YMM) state enabled by the operating system


def _function(code: bytes, restype: Any, *argtypes: Any) -> Any:
    """A callable running ``code`` from its own executable page (kept alive with the callable)."""
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    fn = ctypes.CFUNCTYPE(restype, *argtypes)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
    fn._page = page  # type: ignore[attr-defined]
    return fn


def supported() -> bool:
    """Whether this process can run the instructions at all (x86-64 with ``mmap``'s executable pages)."""
    return platform.machine().lower() in ("x86_64", "amd64") and hasattr(mmap, "PROT_EXEC")


@functools.lru_cache(maxsize=1)
def read() -> dict | None:
    """``vendor`` (e.g. ``GenuineIntel``), ``family`` and ``model`` (the displayed ones, extended fields included),
    ``kind`` (``<vendor>-f<family>-m<model>``, as :func:`benchmark.config.numerics.cpu` names a CPU kind), ``name``
    (the brand string), ``flags`` (the :data:`FEATURES` this CPU has, sorted) and ``os_avx`` (the operating system
    saves the AVX registers); None where the instructions cannot be run here."""
    if not supported():
        return None
    try:
        raw = _function(_CPUID, None, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32 * 4))
    except (OSError, ValueError, TypeError, AttributeError):  # no writable executable memory (hardened kernels)
        return None

    def cpuid(leaf: int, sub: int = 0) -> tuple[int, int, int, int]:
        out = (ctypes.c_uint32 * 4)()
        raw(leaf, sub, ctypes.byref(out))
        a, b, c, d = out
        return a, b, c, d

    top, b, c, d = cpuid(0)
    vendor = struct.pack("<III", b, d, c).decode("ascii", "replace")
    eax1 = cpuid(1)[0]
    family, model = (eax1 >> 8) & 0xF, (eax1 >> 4) & 0xF
    if family in (6, 15):
        model += ((eax1 >> 16) & 0xF) << 4
    if family == 15:
        family += (eax1 >> 20) & 0xFF
    regs = {(leaf, sub): cpuid(leaf, sub) for leaf, sub in {(1, 0), (7, 0), (7, 1)} if leaf <= top}
    has = {
        name for name, (leaf, sub, reg, bit) in FEATURES.items() if (regs.get((leaf, sub), (0,) * 4)[reg] >> bit) & 1
    }
    os_avx = False
    leaf, sub, reg, bit = _OSXSAVE
    if (regs[(leaf, sub)][reg] >> bit) & 1:
        try:
            os_avx = _function(_XGETBV, ctypes.c_uint64, ctypes.c_uint32)(0) & _XCR0_AVX == _XCR0_AVX
        except (OSError, ValueError, TypeError, AttributeError):
            os_avx = False
    name = ""
    if cpuid(0x80000000)[0] >= 0x80000004:
        brand = b"".join(struct.pack("<4I", *cpuid(0x80000002 + i)) for i in range(3)).split(b"\0")[0]
        name = brand.decode("ascii", "replace").strip()
    return {
        "vendor": vendor,
        "family": family,
        "model": model,
        "kind": f"{vendor}-f{family}-m{model}",
        "name": name,
        "flags": sorted(has),
        "os_avx": os_avx,
    }
