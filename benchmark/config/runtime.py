"""Process-wide settings applied once when :mod:`benchmark` is imported.

Allocator: PyTorch allocates every activation with ``malloc``; glibc serves
large blocks with ``mmap`` and returns them to the OS on ``free``, so a training
step faults the same memory in again and again (on the embedded default, about
a quarter of the CPU time was system time). :func:`tune_malloc` turns that off
(``M_MMAP_MAX = 0``, ``M_TRIM_THRESHOLD = 1 GiB``): freed blocks are reused by
the next step. Measured on a Lite0 training loop (4 steps of 64 images + 3
inference batches, one thread): 1.15 M -> 0.27 M minor page faults, system time
2.5 s -> 0.7 s, user time 8.7 s -> 7.8 s, peak RSS +12 %. Numbers do not change
(allocation addresses never enter a computation). ``UQ_MALLOC=default`` keeps
glibc's behaviour. Other C libraries (musl, macOS) are left alone.

Numerics: :func:`benchmark.config.numerics.pin` pins the CPU kernels (ISA caps, MKL's reproducibility mode)
before torch is imported, so that other x86 CPU kinds produce the same bytes (``UQ_NUMERICS=native``: this
CPU's own kernels).

Timings: when ``UQ_TIMINGS`` names a file, the process appends one JSON line to it at exit: its command line (and the
DVC stage that started it: ``DVC_STAGE``), when it started and ended (epoch seconds), wall time since the process
started (imports included), user and system CPU time (its own, its children's and what its still running children
used, e.g. the evaluate stage's fork server and the workers it reaped), peak RSS and minor page faults, its start-up:
the wall and CPU seconds before the stage's own work began (interpreter, imports, params: :func:`mark_work`, called
by a stage's entry), and which of the heavy packages (:data:`HEAVY`) it imported. ``python -m benchmark reproduce
timings`` runs ``dvc repro`` with it set and tabulates the lines per stage (:mod:`benchmark.reproduce.timing`).
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import json
import os
import sys
import time

from benchmark.config import numerics

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
TRIM_THRESHOLD = 1 << 30

_done = False


def tune_malloc() -> bool:
    """Keep freed memory in the process (glibc only); True when the settings took."""
    if os.environ.get("UQ_MALLOC", "") == "default" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def _process_start() -> float:
    """Epoch seconds when this process started (Linux /proc), else now."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


HEAVY = (
    "torch",
    "timm",
    "torchvision",
    "pandas",
    "pyarrow",
    "matplotlib",
    "seaborn",
    "scipy",
    "sklearn",
    "fvcore",
    "dvc",
    "jinja2",
    "safetensors",
    "numpy",
    "yaml",
)  # top-level packages worth tenths of a second or more to import
_WORK: dict = {}  # the process's start-up: wall and CPU seconds when its stage's own work began (mark_work)


def mark_work() -> None:
    """Note that the stage's own work begins now (the first call counts): what came before is its start-up
    (the interpreter, the imports, the params parsed), recorded with the process's timing."""
    if not _WORK:
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        _WORK.update(wall=time.time(), cpu=ru.ru_utime + ru.ru_stime)


def _live_children_cpu() -> tuple[float, float]:
    """(user, system) CPU seconds of this process's children that are still running, with what they reaped of theirs
    (Linux /proc; (0, 0) elsewhere): a fork server and the workers it waited for, which ``RUSAGE_CHILDREN`` misses."""
    tick, user, system = os.sysconf("SC_CLK_TCK"), 0.0, 0.0
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return 0.0, 0.0
    kids: set[int] = set()
    for t in threads:  # a thread that ends meanwhile (a pool's, at exit) takes its entry along: the others still count
        try:
            with open(f"/proc/self/task/{t}/children") as f:
                kids.update(int(p) for p in f.read().split())
        except (OSError, ValueError):
            continue
    for pid in kids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            user += (int(fields[11]) + int(fields[13])) / tick  # utime + cutime
            system += (int(fields[12]) + int(fields[14])) / tick  # stime + cstime
        except (OSError, ValueError, IndexError):
            continue
    return user, system


def _record_timing(path: str, start: float) -> None:
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    live_user, live_sys = _live_children_cpu()
    end = time.time()
    line = {
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "dvc_stage": os.environ.get("DVC_STAGE"),
        "start": round(start, 3),
        "end": round(end, 3),
        "wall_s": round(end - start, 3),
        "user_s": round(ru.ru_utime + kids.ru_utime + live_user, 3),
        "sys_s": round(ru.ru_stime + kids.ru_stime + live_sys, 3),
        "max_rss_mb": round(max(ru.ru_maxrss, kids.ru_maxrss) / 1024, 1),
        "minor_faults": ru.ru_minflt + kids.ru_minflt,
        "live_children_cpu_s": round(live_user + live_sys, 3),
    }  # counted here, never by a parent's wait
    if _WORK:
        line.update(startup_wall_s=round(_WORK["wall"] - start, 3), startup_cpu_s=round(_WORK["cpu"], 3))
    line["imports"] = [m for m in HEAVY if m in sys.modules]  # what it imported of them, by its end
    try:
        with open(path, "a") as f:  # one short line per process: appends of < 4 KiB do not interleave
            f.write(json.dumps(line) + "\n")
    except OSError:
        pass


def setup() -> None:
    """Apply the settings once per process."""
    global _done
    if _done:
        return
    _done = True
    numerics.pin()
    tune_malloc()
    path = os.environ.get("UQ_TIMINGS")
    if path and os.getpid() == _top_pid():
        atexit.register(_record_timing, path, _process_start())


def _top_pid() -> int:
    """This process, unless it is a worker of a benchmark process (multiprocessing children are counted by their
    parent)."""
    parent = os.environ.get("UQ_TIMINGS_PID")
    if parent and parent != str(os.getpid()) and _is_ancestor(int(parent)):
        return -1
    os.environ["UQ_TIMINGS_PID"] = str(os.getpid())
    return os.getpid()


def _is_ancestor(pid: int) -> bool:
    p = os.getppid()
    for _ in range(8):
        if p == pid:
            return True
        try:
            with open(f"/proc/{p}/stat") as f:
                p = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if p <= 1:
            return False
    return False
