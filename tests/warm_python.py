"""A warm ``python`` for the end-to-end tests: DVC stages start in milliseconds instead of seconds.

Every DVC stage of the tiny suites is ``python pipelines/<stage>.py ...``; a fresh interpreter spends 3-5 of the
stage's 5-7 CPU seconds importing torch, timm (with torchvision) and pandas before the stage does anything, and the
end-to-end tests run about a hundred such stages. Here one server process per test run (the xdist workers share it)
imports those third-party libraries once; a ``python`` shim first on ``PATH`` hands each stage to it (argv, folder,
environment and the stdin/stdout/stderr file descriptors over a Unix socket, ``SCM_RIGHTS``) and the server forks a
child that runs the script as ``__main__``, as ``python script.py`` would. The pattern is multiprocessing's
``forkserver`` (which ``tests/robustness`` uses directly).

What a stage sees is what a fresh interpreter gives it:

* it is a fresh fork of a server that has run no code of this repository and no torch kernel, so nothing leaks from
  one stage into the next; the ``benchmark`` package is imported by the stage itself, from its own ``sys.path``
  (script folder, then ``PYTHONPATH``, then the interpreter's), so a test's modified copy of the package is used;
* its exit status (code or signal) is the shim's, signals sent to the shim reach it, and when the shim dies (a test
  killing the pipeline) the stage is killed too;
* its atexit handlers, coverage data (``python -m coverage run``) and non-daemon threads end as at interpreter exit.

The shim runs the real interpreter instead (``exec``: the process is then exactly ``python ...``) whenever no
server could be the same as a fresh one: an interpreter option other than ``-u`` and ``-m`` (``-c``, ``-X``...), no
server, a ``PYTHONPATH`` folder that shadows a library the server has imported, or ``UQ_TIMINGS`` (the process
records its wall time from its start, imports included). An environment that differs from the server's in anything
but the variables in ``HARMLESS`` (the numerics pins ``ATEN_CPU_CAPABILITY``/``MKL_CBWR``, ``UQ_NUMERICS``, thread
counts, ``HF_HUB_OFFLINE`` and ``TQDM_*``, read when their libraries are imported) runs cold the first time; from the
second request with the same such variables on, the server starts a server of that environment (a fresh interpreter
started with it, which imports the libraries under it) and sends the request there (``ENV_SERVERS`` at most): the
simulated CPU's stages, the ranks torchrun starts (``OMP_NUM_THREADS=1``). ``UQBENCH_WARM=0`` in a command's
environment runs it (and what it starts) cold. ``UQBENCH_WARM_LOG=FILE`` records every decision
(tests/test_warm_python.py checks the decisions, the equivalence, and that no library reads a ``HARMLESS`` variable
when it is imported). Also served as a fresh interpreter does: ``-u`` (raw, written-through standard streams), the
cores a process may use (``taskset``: a request on other cores goes to a server started on them), a death by any
signal, SIGKILL included.
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
LOG = "UQBENCH_WARM_LOG"
# what the server imports once (what the stages import that costs: torch, timm -> torchvision, pandas, fvcore...)
PRELOAD = (
    "numpy",
    "torch",
    "torchvision",
    "timm",
    "pandas",
    "yaml",
    "safetensors.torch",
    "fvcore.nn",
    "scipy.stats",
    "sklearn.metrics",
    "matplotlib",
    "jinja2",
    "tqdm",
    "filelock",
    "pyarrow",
    "dvc.cli",
    "dvc.repo",
    # what a dvc command imports after its parser (git access, locks, config: ~0.4 CPU s a command)
    "dvc.scm",
    "scmrepo.git",
    "dulwich.repo",
    "dulwich.client",
    "pygit2",
    "dvc.data_cloud",
    "dvc.lock",
    "dvc.dirs",
    "dvc.cachemgr",
    "dvc_render",
    "ruamel.yaml",
    "configobj",
    "flufl.lock",
    "zc.lockfile",
    "platformdirs",
)
# environment variables a stage may set differently from the server's: none is read when a preloaded library is
# imported or the interpreter starts (PYTHONPATH is applied per stage; PYTHONUNBUFFERED by rewrapping stdio)
# (CUDA_VISIBLE_DEVICES: read when CUDA is initialised, which the server never does; OUTDATED_IGNORE: set by wilds'
# import in a test process, read only by the ``outdated`` package; NO_MKDOCS_2_WARNING: read by mkdocs; neither of
# those is imported by the server). Not here: HF_HUB_OFFLINE (huggingface_hub, imported by timm, reads it on import)
# and TQDM_* (tqdm reads its prefix on import).
HARMLESS = {
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "COLUMNS",
    "LINES",
    "TERM",
    "UQ_TIMINGS_PID",
    "CUDA_VISIBLE_DEVICES",
    "OUTDATED_IGNORE",
    "NO_MKDOCS_2_WARNING",
    "PYTHON",
    "PATH",
}
# (PYTHON: read by scripts/gpu-check.sh, the interpreter reads only PYTHON<NAME> variables; PATH: the stage's own
# applies to what it starts, and no preloaded library looks a program up when imported)
# what torchrun sets for each rank: read by torch.distributed when a process group is set up or an error is recorded
TORCHRUN = {
    "RANK",
    "LOCAL_RANK",
    "GROUP_RANK",
    "ROLE_RANK",
    "ROLE_NAME",
    "LOCAL_WORLD_SIZE",
    "WORLD_SIZE",
    "GROUP_WORLD_SIZE",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_ERROR_FILE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCHELASTIC_SIGNALS_TO_HANDLE",
}
HARMLESS_PREFIXES = ("DVC_", "PYTEST_", "UQBENCH_", "GIT_")
READ_ON_IMPORT = {"DVC_SHOW_TRACEBACK"}  # under a harmless prefix, but read when dvc is imported
# libraries that read the whole environment when imported, and the prefix they keep (no harmless variable has it)
WHOLE_ENV_READERS = {"fsspec/config.py": "FSSPEC_", "tqdm/utils.py": "TQDM_"}
ENV_SERVERS = 4  # servers of other environments one server starts at most (each holds the libraries: ~0.5 GB)
NO_SERVER = {"UQ_TIMINGS"}  # a request with one of these always runs in a fresh interpreter


def harmless(key: str) -> bool:
    return key not in READ_ON_IMPORT and (key in HARMLESS or key in TORCHRUN or key.startswith(HARMLESS_PREFIXES))


SHIM = """#!{real} -IS
# the warm {name} of the tests (tests/warm_python.py): a stage goes to the server, anything else to {real}
import sys
sys.path.insert(0, {here!r})
import warm_python
warm_python.client({real!r}, {module!r})
"""


def _log(event: dict) -> None:
    path = os.environ.get(LOG)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(event) + "\n")


# ---------------------------------------------------------------------------------------------------------- client
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


def _cpus() -> list[int] | None:
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


def client(real: str, module: str | None = None) -> None:
    """The shim: hand ``python ARGS`` to the server, or exec the real interpreter. ``module``: the shim is that
    module's console script (``dvc ARGS`` is ``python -m dvc ARGS``)."""
    args = ["-m", module, *sys.argv[1:]] if module else sys.argv[1:]
    form = warm_form(args) if os.environ.get("UQBENCH_WARM", "1") != "0" else None  # (=0: this command cold)
    sock = _connect(os.environ.get(ENV)) if form else None
    if sock is None:
        os.execv(real, [real, *args])
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            pass
    # sys.executable: what a fresh interpreter started through this shim would report (the shim's folder's python)
    executable = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "python")
    request = json.dumps(
        {
            "argv": form[1],
            "unbuffered": form[0],
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "fds": fds,
            "pgid": os.getpgrp(),
            "executable": executable,
            "cpus": _cpus(),
        }
    ).encode()
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


# ---------------------------------------------------------------------------------------------------------- server
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


def _recv_request(conn: socket.socket):
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    while len(head) < 4:
        more = conn.recv(4 - len(head))
        if not more:
            raise EOFError("client went away")
        head += more
    (size,) = struct.unpack("!I", head)
    body = bytearray()
    while len(body) < size:
        chunk = conn.recv(min(1 << 16, size - len(body)))
        if not chunk:
            raise EOFError("client went away")
        body += chunk
    return json.loads(body), fds


def _base_path() -> list[str]:
    """The interpreter's own ``sys.path`` (stdlib, site-packages): the server's, less its script folder and
    PYTHONPATH."""
    extra = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    return [p for p in sys.path[1:] if os.path.abspath(p) not in extra]


def env_difference(request: dict, baseline: dict, set_by_imports: dict) -> str | None:
    """The first variable (not ``harmless``) in which the request's environment differs from the server's."""
    env = {**set_by_imports, **request["env"]}
    expected = {**baseline, **set_by_imports}
    for key in sorted(set(env) | set(expected)):
        if env.get(key) != expected.get(key) and not harmless(key):
            return key
    return None


def refusal(request: dict, baseline: dict, set_by_imports: dict, preloaded: set[str]) -> str | None:
    """Why this request must not run in a fork of this server (None: the warm fork is equivalent). ``baseline``: the
    server's environment before it imported anything; ``set_by_imports``: what the imports added to it (a request
    that lacks one of those gets it, as its own imports would set it)."""
    measured = sorted(NO_SERVER & set(request["env"]))
    if measured:
        return f"{measured[0]} set: its process is measured from its start"
    key = env_difference(request, baseline, set_by_imports)
    if key:
        return f"environment differs: {key}"
    if request.get("cpus") != _cpus():
        return f"environment differs: CPU affinity {request.get('cpus')}"
    env = {**set_by_imports, **request["env"]}
    for folder in filter(None, env.get("PYTHONPATH", "").split(os.pathsep)):
        folder = os.path.join(request["cwd"], folder)
        for name in preloaded:
            if os.path.exists(os.path.join(folder, name)) or os.path.exists(os.path.join(folder, name + ".py")):
                return f"PYTHONPATH folder {folder} shadows {name}"
    return None


class EnvServers:
    """The servers of other environments one server starts: for an environment (its variables that are not
    ``harmless``, and the cores it may run on) seen a second time, a fresh interpreter started with the request's
    environment (on those cores) serves it and every later request with the same."""

    def __init__(self, path: str, limit: int):
        self.path, self.limit = path, limit
        self.seen: dict[tuple, int] = {}
        self.started: dict[tuple, str] = {}
        self.procs = []

    def route(self, request: dict, set_by_imports: dict) -> str | None:
        """The socket of the server for this request's environment (started now if it is the second request), or
        None."""
        key = (
            tuple(sorted((k, v) for k, v in {**set_by_imports, **request["env"]}.items() if not harmless(k))),
            tuple(request.get("cpus") or ()),
        )
        self.seen[key] = self.seen.get(key, 0) + 1
        if key not in self.started and self.seen[key] >= 2 and len(self.started) < self.limit:
            import subprocess

            path = f"{self.path}.{len(self.started)}"
            env = {k: v for k, v in request["env"].items() if k != "PYTHONPATH"}  # (applied per request)
            cpus = request.get("cpus")
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), path, str(os.getpid()), "0"],
                    env=env,
                    stdin=subprocess.DEVNULL,  # its output: this server's log
                    preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
                )
            )
            for _ in range(500):  # it listens before it imports anything: then requests queue
                if os.path.exists(path):
                    break
                time.sleep(0.01)
            self.started[key] = path
        return self.started.get(key)


def serve(path: str, parent: int | None = None, env_servers: int = ENV_SERVERS) -> None:
    """Listen on ``path`` first (clients queue while the libraries load), preload, then fork one child per request;
    end when ``parent`` (the pytest process that starts the server: default, this process's parent) is gone.
    ``env_servers``: how many servers of other environments it may start (a server it starts starts none)."""
    parent = os.getppid() if parent is None else parent
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(128)
    os.replace(path + ".tmp", path)
    baseline = dict(os.environ)
    import importlib

    for name in os.environ.get("UQBENCH_WARM_PRELOAD", ",".join(PRELOAD)).split(","):  # (tests: fewer)
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a library that is not installed is simply imported by the stage
            pass
    preloaded = {name.split(".")[0] for name in sys.modules if not name.startswith("_")} - set(sys.stdlib_module_names)
    # what the libraries set in the environment when imported (KMP_DUPLICATE_LIB_OK...): a stage gets it as it would
    set_by_imports = {k: v for k, v in os.environ.items() if baseline.get(k) != v}
    base_path = _base_path()
    others = EnvServers(path, env_servers)
    import warm_worker

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the monitors are reaped by the kernel
    listener.settimeout(2.0)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the pytest process that started it is gone (killed): so is the server
                os._exit(0)
            continue
        conn.settimeout(None)
        fds = []
        try:
            request, fds = _recv_request(conn)
            why = refusal(request, baseline, set_by_imports, preloaded)
            sent = others.route(request, set_by_imports) if why and why.startswith("environment differs") else None
            _log(
                {
                    "argv": request["argv"],
                    "cwd": request["cwd"],
                    "warm": why is None,
                    "why": why,
                    "server": path,
                    **({"sent": sent} if sent else {}),
                }
            )
            if sent:
                conn.sendall(f"server {sent}\n".encode())
            elif why:
                conn.sendall(f"cold {why}\n".encode())
            elif os.fork() == 0:
                listener.close()
                request["env"] = {**request["env"], **set_by_imports}
                warm_worker.monitor(conn, request, fds, base_path)  # never returns
        except (OSError, EOFError, ValueError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()


if __name__ == "__main__":
    serve(
        sys.argv[1],
        int(sys.argv[2]) if len(sys.argv) > 2 else None,
        int(sys.argv[3]) if len(sys.argv) > 3 else ENV_SERVERS,
    )
