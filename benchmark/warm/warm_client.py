"""The client side of the warm ``python`` (:mod:`benchmark.warm`): the shim that stands first on ``PATH`` as
``python`` (and ``dvc``) and hands a command line to the server, or becomes the real interpreter.

Run by the shim as a top-level module (``python -IS``: the standard library only, nothing of the benchmark package
is imported), and imported as :mod:`benchmark.warm.warm_client` by the package.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time

ENV = "UQBENCH_WARM_PYTHON"  # the server's socket; unset: every ``python`` is the real one
LOG = "UQBENCH_WARM_LOG"  # a file: the server appends every decision to it

SHIM = """#!{real} -IS
# a warm {name} (benchmark/warm): a command line the server can run goes to it, anything else to {real}
import sys
sys.path.insert(0, {here!r})
import warm_client
warm_client.client({real!r}, {module!r})
"""


def warm_form(args: list[str]) -> tuple[bool, list[str]] | None:
    """``(unbuffered, argv)`` of a command line the server can run, ``[-u ...] (-m MODULE | SCRIPT) ARGS``; None for
    anything else (another option, ``-c``, a script read from stdin, the interactive interpreter). (``-u``: the
    streams are the interpreter's; ``sys.flags.unbuffered`` stays 0, so a ``spawn`` child gets no ``-u``.)"""
    unbuffered = False
    while args and args[0] == "-u":
        unbuffered, args = True, args[1:]
    if args and ((args[0] == "-m" and len(args) > 1) or not args[0].startswith("-")):
        return unbuffered, args
    return None


def cpus() -> list[int] | None:
    """The cores this process may run on (``taskset``): OpenMP sizes its thread pool from them when it is loaded."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def _connect(path: str | None) -> socket.socket | None:
    if not path:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def _open_fds() -> list[int]:
    """The standard streams this process has open (0, 1, 2): handed to the server as they are."""
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            pass
    return fds


def _request(form: tuple[bool, list[str]], fds: list[int]) -> bytes:
    """The request for command line ``form`` (:func:`warm_form`): what a fresh interpreter would start from."""
    # sys.executable: what a fresh interpreter started through this shim would report (the shim's folder's python)
    executable = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "python")
    return json.dumps(
        {
            "argv": form[1],
            "unbuffered": form[0],
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "fds": fds,
            "pgid": os.getpgrp(),
            "executable": executable,
            "cpus": cpus(),
        }
    ).encode()


def client(real: str, module: str | None = None) -> None:
    """The shim: hand ``python ARGS`` to the server, or exec the real interpreter. ``module``: the shim is that
    module's console script (``dvc ARGS`` is ``python -m dvc ARGS``)."""
    args = ["-m", module, *sys.argv[1:]] if module else sys.argv[1:]
    form = warm_form(args) if os.environ.get("UQBENCH_WARM", "1") != "0" else None  # (=0: this command cold)
    sock = _connect(os.environ.get(ENV)) if form else None
    if sock is None:
        os.execv(real, [real, *args])
    fds = _open_fds()
    request = _request(form, fds)
    for _ in range(2):  # the server answers, or sends the request on to the server of its environment
        socket.send_fds(sock, [struct.pack("!I", len(request))], fds)
        sock.sendall(request)
        reply = sock.makefile("rb")
        first = reply.readline().decode().split()
        if len(first) == 2 and first[0] == "server":
            sock.close()
            sock = _connect(first[1])
            if sock is None:
                break
            continue
        break
    if sock is None or not first or first[0] != "pid":  # refused ("cold <why>") or gone: the real interpreter
        if sock is not None:
            sock.close()
        os.execv(real, [real, *args])
    worker = int(first[1])

    def forward(signum, _frame):
        try:
            os.kill(worker, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, forward)
    last = reply.readline().decode().split()
    sock.close()
    if len(last) == 2 and last[0] == "signal":
        signum = int(last[1])
        if signum not in (signal.SIGKILL, signal.SIGSTOP):  # (their action cannot be set: it is the default)
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        time.sleep(1)
    os._exit(int(last[1]) if len(last) == 2 and last[0] == "exit" else 1)


def write_shim(folder: str, real: str) -> str:
    """``folder/python`` and ``folder/dvc``, the shims; returns the folder (to put first on ``PATH``)."""
    os.makedirs(folder, exist_ok=True)
    for name, module in (("python", None), ("dvc", "dvc")):
        shim = os.path.join(folder, name)
        with open(shim + ".tmp", "w") as f:
            f.write(SHIM.format(real=real, here=os.path.dirname(os.path.abspath(__file__)), name=name, module=module))
        os.chmod(shim + ".tmp", 0o755)
        os.replace(shim + ".tmp", shim)
    return folder
