"""A warm ``python`` for the end-to-end tests: DVC stages start in milliseconds instead of seconds.

Every DVC stage of the tiny suites is ``python pipelines/<stage>.py ...``; a fresh interpreter spends 3-5 of the
stage's 5-7 CPU seconds importing torch, timm (with torchvision) and pandas before the stage does anything, and the
end-to-end tests run about a hundred such stages. Here one server process per pytest worker imports those
third-party libraries once; a ``python`` shim first on ``PATH`` hands each stage to it (argv, working folder,
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

The shim runs the real interpreter instead (``exec``: the process is then exactly ``python ...``) whenever the server
could differ from a fresh one: an interpreter option other than ``-m`` (``-c``, ``-u``, ``-X``...), no server, or an
environment that differs from the server's in anything but the variables in ``HARMLESS`` (the numerics pins
``ATEN_CPU_CAPABILITY``/``MKL_CBWR``, ``UQ_NUMERICS``, ``UQ_TIMINGS``, thread counts, ``PYTHON*`` options other than
``PYTHONPATH`` all take effect when torch is imported or the interpreter starts), or a ``PYTHONPATH`` folder that
shadows a library the server has imported. ``UQBENCH_WARM_LOG=FILE`` records every decision (tests/test_warm_python.py
checks the decisions and the equivalence).
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
PRELOAD = ("numpy", "torch", "torchvision", "timm", "pandas", "yaml", "safetensors.torch", "fvcore.nn", "scipy.stats",
           "sklearn.metrics", "matplotlib", "jinja2", "tqdm", "filelock", "pyarrow", "dvc.cli", "dvc.repo")
# environment variables a stage may set differently from the server's: none is read when a preloaded library is
# imported or the interpreter starts (PYTHONPATH is applied per stage; PYTHONUNBUFFERED by rewrapping stdio)
# (CUDA_VISIBLE_DEVICES: read when CUDA is initialised, which the server never does; OUTDATED_IGNORE: set by wilds'
# import in a test process, read only by the ``outdated`` package; NO_MKDOCS_2_WARNING: read by mkdocs; neither of
# those is imported by the server)
HARMLESS = {"PWD", "OLDPWD", "SHLVL", "_", "PYTHONPATH", "PYTHONUNBUFFERED", "TQDM_DISABLE", "HF_HUB_OFFLINE",
            "COLUMNS", "LINES", "TERM", "UQ_TIMINGS_PID", "CUDA_VISIBLE_DEVICES", "OUTDATED_IGNORE", "NO_MKDOCS_2_WARNING",
            "PYTHON", "PATH"}
# (PYTHON: read by scripts/gpu-check.sh, the interpreter reads only PYTHON<NAME> variables; PATH: the stage's own
# applies to what it starts, and no preloaded library looks a program up when imported)
HARMLESS_PREFIXES = ("DVC_", "PYTEST_", "UQBENCH_", "GIT_")

SHIM = '''#!{real} -IS
# the warm {name} of the tests (tests/warm_python.py): a stage goes to the server, anything else to {real}
import sys
sys.path.insert(0, {here!r})
import warm_python
warm_python.client({real!r}, {module!r})
'''


def _log(event: dict) -> None:
    path = os.environ.get(LOG)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(event) + "\n")


# ---------------------------------------------------------------------------------------------------------- client
def client(real: str, module: str | None = None) -> None:
    """The shim: hand ``python ARGS`` to the server, or exec the real interpreter. ``module``: the shim is that
    module's console script (``dvc ARGS`` is ``python -m dvc ARGS``)."""
    args = ["-m", module, *sys.argv[1:]] if module else sys.argv[1:]
    path = os.environ.get(ENV)
    warm_form = bool(args) and ((args[0] == "-m" and len(args) > 1) or not args[0].startswith("-"))
    sock = None
    if path and warm_form:
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)
        except OSError:
            sock = None
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
    request = json.dumps({"argv": args, "cwd": os.getcwd(), "env": dict(os.environ), "fds": fds,
                          "pgid": os.getpgrp(), "executable": executable}).encode()
    socket.send_fds(sock, [struct.pack("!I", len(request))], fds)
    sock.sendall(request)
    reply = sock.makefile("rb")
    first = reply.readline().decode().split()
    if not first or first[0] != "pid":  # refused ("cold <why>") or the server went away: run the real interpreter
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
    size, = struct.unpack("!I", head)
    body = bytearray()
    while len(body) < size:
        chunk = conn.recv(min(1 << 16, size - len(body)))
        if not chunk:
            raise EOFError("client went away")
        body += chunk
    return json.loads(body), fds


def _base_path() -> list[str]:
    """The interpreter's own ``sys.path`` (stdlib, site-packages): the server's, less its script folder and PYTHONPATH."""
    extra = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    return [p for p in sys.path[1:] if os.path.abspath(p) not in extra]


def refusal(request: dict, baseline: dict, set_by_imports: dict, preloaded: set[str]) -> str | None:
    """Why this request must run in a fresh interpreter (None: the warm fork is equivalent). ``baseline``: the
    server's environment before it imported anything; ``set_by_imports``: what the imports added to it (a request
    that lacks one of those gets it, as its own imports would set it)."""
    env = {**set_by_imports, **request["env"]}
    expected = {**baseline, **set_by_imports}
    for key in sorted(set(env) | set(expected)):
        if env.get(key) != expected.get(key) and key not in HARMLESS and not key.startswith(HARMLESS_PREFIXES):
            return f"environment differs: {key}"
    for folder in filter(None, env.get("PYTHONPATH", "").split(os.pathsep)):
        folder = os.path.join(request["cwd"], folder)
        for name in preloaded:
            if os.path.exists(os.path.join(folder, name)) or os.path.exists(os.path.join(folder, name + ".py")):
                return f"PYTHONPATH folder {folder} shadows {name}"
    return None


def serve(path: str, parent: int | None = None) -> None:
    """Listen on ``path`` first (clients queue while the libraries load), preload, then fork one child per request;
    end when ``parent`` (the pytest process that starts the server: default, this process's parent) is gone."""
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
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the monitors are reaped by the kernel
    listener.settimeout(2.0)
    while True:
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            if os.getppid() != parent:  # the pytest process that started it is gone (killed): so is the server
                os._exit(0)
            continue
        conn.settimeout(None)
        fds = []
        try:
            request, fds = _recv_request(conn)
            why = refusal(request, baseline, set_by_imports, preloaded)
            _log({"argv": request["argv"], "cwd": request["cwd"], "warm": why is None, "why": why})
            if why:
                conn.sendall(f"cold {why}\n".encode())
            elif os.fork() == 0:
                listener.close()
                request["env"] = {**request["env"], **set_by_imports}
                _monitor(conn, request, fds, base_path)  # never returns
        except (OSError, EOFError, ValueError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()


def _monitor(conn: socket.socket, request: dict, fds: list[int], base_path: list[str]) -> None:
    """Fork the worker, tell the client its pid, wait for it (killing it when the client goes away), send its status."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        worker = os.fork()
        if worker == 0:
            conn.close()
            _work(request, fds, base_path)  # never returns
        for fd in fds:
            os.close(fd)
        conn.sendall(f"pid {worker}\n".encode())
        import select

        try:
            pidfd = os.pidfd_open(worker)  # readable when the worker ends (Linux 5.3+)
        except (AttributeError, OSError):
            pidfd = None  # else: poll
        watching = [conn] + ([pidfd] if pidfd is not None else [])
        while True:
            ready, _, _ = select.select(watching, [], [], None if pidfd is not None else 0.05)
            if conn in ready and not conn.recv(1):  # the client died: so does its stage
                os.kill(worker, signal.SIGKILL)
                watching.remove(conn)
            done, status = os.waitpid(worker, os.WNOHANG) if pidfd is None or pidfd in ready else (0, 0)
            if done:
                sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
                reply = f"signal {sig}\n" if sig else f"exit {os.WEXITSTATUS(status)}\n"
                try:
                    conn.sendall(reply.encode())
                except OSError:
                    pass
                os._exit(0)
    finally:
        os._exit(0)


def _work(request: dict, fds: list[int], base_path: list[str]) -> None:
    """Become ``python ARGV`` in the client's folder, environment and standard streams."""
    code = 1
    try:
        for target in (0, 1, 2):
            if target in request["fds"]:
                os.dup2(fds[request["fds"].index(target)], target)
            else:
                os.close(target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            os.setpgid(0, request["pgid"])  # in the shim's process group, as a child of it would be
        except OSError:
            pass
        os.chdir(request["cwd"])
        if "multiprocessing.process" in sys.modules:  # the folder a fresh interpreter starts in: spawned and
            sys.modules["multiprocessing.process"].ORIGINAL_DIR = os.getcwd()  # forkserver children resolve from it
        os.environ.clear()
        os.environ.update(request["env"])
        if "PYTHONUNBUFFERED" in os.environ:
            sys.stdout.reconfigure(write_through=True)
            sys.stderr.reconfigure(write_through=True)
        sys.executable = request["executable"]  # a child it starts with sys.executable goes through the shim too
        if "numpy" in sys.modules:  # numpy's global generator: seeded from the OS in each process, as if fresh
            sys.modules["numpy"].random.seed()
        argv = request["argv"]
        user = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        head = os.getcwd() if argv[0] == "-m" else os.path.dirname(os.path.abspath(argv[0]))
        sys.path[:] = [head, *user, *base_path]
        import importlib

        importlib.invalidate_caches()
        _restart_coverage()
        import runpy

        try:
            if argv[0] == "-m":
                sys.argv = [argv[1], *argv[2:]]  # runpy sets argv[0] to the module's file
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            else:
                sys.argv = list(argv)
                _run_script(argv[0], runpy)
            code = 0
        except SystemExit as e:
            code = _exit_code(e.code)
        except BaseException:  # noqa: BLE001 - as the interpreter does: traceback, status 1
            import traceback

            traceback.print_exc()
            code = 1
        code = _shutdown(code)
    finally:
        os._exit(code)


def _run_script(arg: str, runpy) -> None:
    """``python ARG`` for a file: ``__main__`` with an absolute ``__file__`` and code file name and a source loader,
    ``sys.argv[0]`` as given (as the interpreter does since 3.9; ``runpy.run_path`` would leave ``__file__``
    relative, and a spawned child would then look for the script in the server's folder). A folder or zip with a
    ``__main__.py`` goes through ``runpy.run_path``."""
    path = os.path.abspath(arg)
    if not os.path.isfile(path) or not path.endswith(".py"):
        runpy.run_path(arg, run_name="__main__")
        return
    import builtins
    import importlib.machinery
    import types

    main = types.ModuleType("__main__")
    loader = importlib.machinery.SourceFileLoader("__main__", path)
    main.__dict__.update(__file__=path, __loader__=loader, __spec__=None, __cached__=None, __builtins__=builtins)
    code = compile(loader.get_data(path), path, "exec", dont_inherit=True)
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _restart_coverage() -> None:
    """Under ``coverage run`` (the server was started with it, ``patch = subprocess``): measure this child on its own."""
    if "coverage" in sys.modules:
        from coverage import Coverage

        if Coverage.current() is not None:
            from coverage.control import _after_fork_in_child

            _after_fork_in_child()


def _shutdown(code: int) -> int:
    """What the interpreter does at exit: join non-daemon threads, run atexit handlers, flush the streams."""
    import atexit
    import threading

    try:
        threading._shutdown()
    except Exception:  # noqa: BLE001
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    return code


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
