"""The forked side of the warm ``python`` (:mod:`benchmark.warm`): a monitor per request, and the worker that
becomes ``python ARGV`` in the client's folder, environment and standard streams (a fresh interpreter's ``__main__``,
``sys.path``, streams, exit status and interpreter exit)."""

from __future__ import annotations

import io
import os
import signal
import socket
import sys


def monitor(conn: socket.socket, request: dict, fds: list[int], base_path: list[str]) -> None:
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
        _streams(bool(request.get("unbuffered") or os.environ.get("PYTHONUNBUFFERED")))
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
    """Under ``coverage run`` (the server was started with it, ``patch = subprocess``): measure this child on its
    own."""
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


def _streams(unbuffered: bool) -> None:
    """Standard output and error as the interpreter sets them up on the client's descriptors (not as the server had
    them): with ``-u`` / ``PYTHONUNBUFFERED`` a text layer written through to the raw file; else buffered, line by line
    on a terminal and always for standard error."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        if old is None:
            continue
        try:
            old.flush()
        except (OSError, ValueError):
            pass
        raw = io.FileIO(fd, "w", closefd=False)
        line = not unbuffered and (name == "stderr" or raw.isatty())
        new = io.TextIOWrapper(
            raw if unbuffered else io.BufferedWriter(raw),
            encoding=old.encoding,
            errors=old.errors,
            line_buffering=line,
            write_through=unbuffered,
        )
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)
