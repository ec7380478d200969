"""A warm ``python``: stages start in milliseconds instead of seconds, as a fresh interpreter would start them.

Every DVC stage is ``python pipelines/<stage>.py ...``; a fresh interpreter spends 1-5 of a stage's CPU seconds
importing torch, timm (with torchvision) and pandas before the stage does anything. Here one server process imports
those third-party libraries once; a ``python`` shim first on ``PATH`` hands each command line to it (argv, folder,
environment and the stdin/stdout/stderr file descriptors over a Unix socket, ``SCM_RIGHTS``) and the server forks a
child that runs the script as ``__main__``, as ``python script.py`` would. The pattern is multiprocessing's
``forkserver``. Two users start one (:func:`start`): ``python -m benchmark run`` for the stages of its run and the jobs
around them (:mod:`benchmark.cluster.parallel`), and the tests for the stages of the whole test run
(``tests/conftest.py``; its xdist workers share it).

What a stage sees is what a fresh interpreter gives it:

* it is a fresh fork of a server that has run no code of this repository and no torch kernel, so nothing leaks from
  one stage into the next; the ``benchmark`` package is imported by the stage itself, from its own ``sys.path``
  (script folder, then ``PYTHONPATH``, then the interpreter's), so a checkout's own copy of the package is used, and
  it pins the CPU numerics as a fresh process does (the server imported torch under the same pinned environment, and
  :func:`benchmark.config.numerics.check_pinned` refuses a stage whose kernels were chosen otherwise);
* its exit status (code or signal) is the shim's, signals sent to the shim reach it, and when the shim dies (a test
  killing the pipeline) the stage is killed too;
* its atexit handlers, coverage data (``python -m coverage run``) and non-daemon threads end as at interpreter exit.

The shim runs the real interpreter instead (``exec``: the process is then exactly ``python ...``) whenever no server
could be the same as a fresh one: an interpreter option other than ``-u`` and ``-m`` (``-c``, ``-X``...), no server, a
``PYTHONPATH`` folder that shadows a library the server has imported, or ``UQ_TIMINGS`` (the process records its wall
time from its start, imports included) unless the server is a timed one (``benchmark run``'s: the record then starts at
the fork, and the run's timing record marks it ``warm``). An environment that differs from the server's in anything but
the variables in ``HARMLESS`` runs cold the first time (not harmless: the numerics pins
``ATEN_CPU_CAPABILITY``/``MKL_CBWR``, ``UQ_NUMERICS``, thread counts, ``OMP_WAIT_POLICY``, ``HF_HUB_OFFLINE`` and
``TQDM_*``, read when their libraries are imported); from the second request with the same such variables on, the
server starts a server of that environment (a fresh interpreter started with it, which imports the libraries under it)
and sends the request there (``ENV_SERVERS`` at most): the simulated CPU's stages, the ranks torchrun starts
(``OMP_NUM_THREADS=1``). ``UQBENCH_WARM=0`` in a command's environment runs it (and what it starts) cold.
``UQBENCH_WARM_LOG=FILE`` in the server's environment records every decision (tests/test_warm_python.py and
test_warm_harmless.py check the decisions, the equivalence, and that no library reads a ``HARMLESS`` variable when it
is imported). Also served as a fresh interpreter does: ``-u`` (raw, written-through standard streams), the cores a
process may use (``taskset``: a request on other cores goes to a server started on them), a death by any signal,
SIGKILL included.

Modules: :mod:`~benchmark.warm.warm_client` (the shim's side), :mod:`~benchmark.warm.warm_server` (the server,
started as a script: it imports nothing of this package), :mod:`~benchmark.warm.warm_worker` (a request's monitor and
the forked worker).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from benchmark.warm import warm_client, warm_server

ENV, LOG = warm_client.ENV, warm_client.LOG


@dataclass
class Server:
    """A running warm server: its folder (the shims, the socket, its log) and its process."""

    folder: str
    bin_dir: str
    socket: str
    process: subprocess.Popen

    @property
    def python(self) -> str:
        """The ``python`` shim: a command line it can serve goes to the server."""
        return os.path.join(self.bin_dir, "python")

    def environ(self, env) -> dict[str, str]:
        """``env`` with the shims first on ``PATH`` and the server's socket: the ``python`` its commands start is
        served."""
        return {**env, "PATH": self.bin_dir + os.pathsep + env.get("PATH", ""), ENV: self.socket}

    def stop(self, timeout: float = 30.0) -> None:
        """End the server (SIGTERM: it collects its children first, so their CPU time reaches the caller's count; killed
        after ``timeout`` seconds) and remove its folder."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def serving_python(env) -> str | None:
    """The ``python`` shim of the warm server that already serves environment ``env`` (its socket in ``ENV``, its shim
    first on ``PATH``: the tests'), or None."""
    if not env.get(ENV):
        return None
    found = shutil.which("python", path=env.get("PATH"))
    try:
        with open(found or "", encoding="utf-8") as f:
            return found if "warm_client" in f.read(400) else None
    except (OSError, UnicodeDecodeError):
        return None


def start(env=None, *, parent: int | None = None, timed: bool = False, real: str = sys.executable) -> Server:
    """Start a warm server of ``real`` (this interpreter) with environment ``env`` (default: this process's; the shims
    and socket added) in a new temporary folder (a short path: a Unix socket's is at most 107 bytes); it ends when
    ``parent`` (default: this process) is gone. ``timed``: it serves processes that record their time too
    (:func:`warm_server.refusal`). Returns once it listens (its requests queue while it imports the libraries)."""
    folder = tempfile.mkdtemp(prefix="uqwarm-")
    bin_dir = warm_client.write_shim(os.path.join(folder, "bin"), real)
    sock = os.path.join(folder, "sock")
    base = dict(os.environ if env is None else env)
    server_env = {**base, "PATH": bin_dir + os.pathsep + base.get("PATH", ""), ENV: sock}
    argv = [real, warm_server.__file__, sock, str(os.getpid() if parent is None else parent)]
    with open(os.path.join(folder, "server.log"), "w") as log:  # its own output: the preloads' warnings
        proc = subprocess.Popen(
            [*argv, str(warm_server.ENV_SERVERS), *(["timed"] if timed else [])],
            env=server_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    for _ in range(1000):  # it listens before it imports anything
        if os.path.exists(sock) or proc.poll() is not None:
            break
        time.sleep(0.01)
    return Server(folder, bin_dir, sock, proc)
