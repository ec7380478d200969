"""The server of the warm ``python`` (:mod:`benchmark.warm`): ``python warm_server.py SOCKET [PARENT [ENV_SERVERS
[timed]]]``.

Started as a script (its folder first on ``sys.path``, nothing of the benchmark package imported: a stage imports its
own copy), it listens on ``SOCKET`` first (clients queue while the libraries load), imports :data:`PRELOAD`, then forks
a monitor per request it accepts (:mod:`warm_worker`); :func:`refusal` says when a request must run in a fresh
interpreter instead. It ends when ``PARENT`` (default: its parent) is gone, and on SIGTERM after collecting its
children (their CPU time then counts in its own children's, as a fresh interpreter's would in its parent's).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time

if __package__:  # imported as benchmark.warm.warm_server
    from benchmark.warm import warm_client
else:  # the server script: its folder is sys.path[0]
    import warm_client  # type: ignore[import-not-found,no-redef]

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
    "PS1",
    "PS2",
}
# (PS1, PS2: an activated virtual environment exports its prompt, and bash drops it in the non-interactive shell that
# runs a DVC stage's command; only interactive shells read it. PYTHON: read by scripts/gpu-check.sh, the interpreter
# reads only PYTHON<NAME> variables; PATH: the stage's own
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
NO_SERVER = {"UQ_TIMINGS"}  # a request with one of these runs in a fresh interpreter (unless the server is timed)


def harmless(key: str) -> bool:
    """Whether a request may set environment variable ``key`` differently from the server's (module docstring)."""
    return key not in READ_ON_IMPORT and (key in HARMLESS or key in TORCHRUN or key.startswith(HARMLESS_PREFIXES))


def _log(event: dict) -> None:
    path = os.environ.get(warm_client.LOG)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(event) + "\n")


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


def refusal(
    request: dict, baseline: dict, set_by_imports: dict, preloaded: set[str], *, timed: bool = False
) -> str | None:
    """Why this request must not run in a fork of this server (None: the warm fork is equivalent). ``baseline``: the
    server's environment before it imported anything; ``set_by_imports``: what the imports added to it (a request
    that lacks one of those gets it, as its own imports would set it). ``timed``: a request whose process records its
    time (``UQ_TIMINGS``) is served too (its record then starts at the fork and says it was warm); else it runs in a
    fresh interpreter, whose record includes the interpreter's start and the imports."""
    measured = sorted(NO_SERVER & set(request["env"]))
    if measured and not timed:
        return f"{measured[0]} set: its process is measured from its start"
    key = env_difference(request, baseline, set_by_imports)
    if key:
        return f"environment differs: {key}"
    if request.get("cpus") != warm_client.cpus():
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

    def __init__(self, path: str, limit: int, timed: bool = False):
        self.path, self.limit, self.timed = path, limit, timed
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
            timed = ["timed"] if self.timed else []
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), path, str(os.getpid()), "0", *timed],
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


def _reap(block: bool = False) -> None:
    """Collect ended children (monitors, servers of other environments): their CPU time and that of the processes they
    collected (a monitor's worker) then counts in this process's children's time. ``block``: wait for all."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _preload(baseline: dict) -> tuple[set[str], dict]:
    """Import :data:`PRELOAD` (``UQBENCH_WARM_PRELOAD``: a comma-separated list instead, the tests' fewer); the
    top-level packages then loaded (not the standard library's) and what the imports set in the environment (relative to
    ``baseline``, KMP_DUPLICATE_LIB_OK...: a stage gets it as its own imports would set it)."""
    import importlib

    for name in os.environ.get("UQBENCH_WARM_PRELOAD", ",".join(PRELOAD)).split(","):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a library that is not installed is simply imported by the stage
            pass
    preloaded = {name.split(".")[0] for name in sys.modules if not name.startswith("_")} - set(sys.stdlib_module_names)
    return preloaded, {k: v for k, v in os.environ.items() if baseline.get(k) != v}


def serve(path: str, parent: int | None = None, env_servers: int = ENV_SERVERS, timed: bool = False) -> None:
    """Listen on ``path`` first (clients queue while the libraries load), preload, then fork one child per request;
    end when ``parent`` (the process that starts the server: default, this process's parent) is gone, or on SIGTERM
    once its children have ended (the servers of other environments it started are killed). ``env_servers``: how many
    servers of other environments it may start (a server it starts starts none); ``timed``: see :func:`refusal`."""
    parent = os.getppid() if parent is None else parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in its terminal reaches the stages through their shims
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(128)
    os.replace(path + ".tmp", path)
    baseline = dict(os.environ)
    preloaded, set_by_imports = _preload(baseline)
    base_path = _base_path()
    others = EnvServers(path, env_servers, timed)
    if __package__:
        from benchmark.warm import warm_worker
    else:
        import warm_worker  # type: ignore[import-not-found,no-redef]

    def stop(signum, frame):
        for proc in others.procs:
            proc.kill()
        _reap(block=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    listener.settimeout(2.0)
    while True:
        _reap()
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the process that started it is gone (killed): so is the server
                os._exit(0)
            continue
        conn.settimeout(None)
        fds = []
        try:
            request, fds = _recv_request(conn)
            why = refusal(request, baseline, set_by_imports, preloaded, timed=timed)
            sent = others.route(request, set_by_imports) if why and why.startswith("environment differs") else None
            event = {"argv": request["argv"], "cwd": request["cwd"], "warm": why is None, "why": why, "server": path}
            _log({**event, "sent": sent} if sent else event)
            if sent:
                conn.sendall(f"server {sent}\n".encode())
            elif why:
                conn.sendall(f"cold {why}\n".encode())
            elif os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
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
        len(sys.argv) > 4 and sys.argv[4] == "timed",
    )
