"""The warm ``python`` (benchmark/warm: the tests' and ``benchmark run``'s) behaves as a fresh interpreter, and refuses
when it could not.

Each case runs the same command through the shim (served by a fork of the warm server) and through the real
interpreter, and compares what the script saw and did; the server's log says which way each request went.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmark.warm import warm_client, warm_server

# the test harness's own checks: a server of their own, each warm run compared with a fresh interpreter
pytestmark = pytest.mark.slow

SCRIPT = r"""
import atexit, json, os, sys, threading, time
import helper_mod
out = {"argv": sys.argv, "name": __name__, "file": __file__, "code_file": sys._getframe().f_code.co_filename,
       "loader": type(__loader__).__name__, "cwd": os.getcwd(), "path0": sys.path[0], "helper": helper_mod.WHERE,
       "stdin": sys.stdin.read(), "foo": os.environ.get("FOO"), "numerics": [os.environ.get(k) for k in
       ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")], "benchmark_loaded": "benchmark" in sys.modules,
       "streams": [[type(s.buffer).__name__, s.write_through, s.line_buffering] for s in (sys.stdout, sys.stderr)],
       "cpus": sorted(os.sched_getaffinity(0))}
if "torch" in sys.argv:  # the kernels torch picks (the numerics pins) and what they compute
    import torch
    torch.manual_seed(0)
    x = torch.randn(8, 3, 16, 16)
    out["conv"] = torch.nn.Conv2d(3, 4, 3)(x).sum(dim=(1, 2, 3)).tolist()
    out["capability"] = torch.backends.cpu.get_cpu_capability()
    out["threads"] = torch.get_num_threads()
print(json.dumps(out), flush=True)
late = sys.argv[1] if len(sys.argv) > 1 else ""
atexit.register(lambda: print("atexit ran", flush=True))
threading.Thread(target=lambda: (time.sleep(0.3), print("thread joined", flush=True))).start()
print("to stderr", file=sys.stderr)
if late in ("signal", "kill"):
    os.kill(os.getpid(), 15 if late == "signal" else 9)
    time.sleep(5)
raise SystemExit(int(late) if late.isdigit() else 0)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warm")
    log = folder / "log.jsonl"
    bin_dir = warm_client.write_shim(str(folder / "bin"), sys.executable)
    sock = str(folder / "sock")
    env = dict(os.environ, **{warm_client.ENV: sock, warm_client.LOG: str(log)})
    env["PATH"] = bin_dir + os.pathsep + env["PATH"]
    proc = subprocess.Popen(
        [sys.executable, warm_server.__file__, sock],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):  # listening (requests queue from then on)
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    yield {"env": env, "log": log, "shim": os.path.join(bin_dir, "python")}
    proc.kill()
    proc.wait()


@pytest.fixture
def work(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "helper_mod.py").write_text("WHERE = 'lib'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__main__.py").write_text(SCRIPT)
    return tmp_path


def gone(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` has ended within ``seconds``."""
    for _ in range(int(seconds / 0.05)):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def decisions(server) -> list[dict]:
    return [json.loads(line) for line in server["log"].read_text().splitlines()] if server["log"].exists() else []


def both(server, args, cwd, env=None, stdin="in", unset=()):
    """(warm, cold) CompletedProcess of ``python ARGS`` through the shim and the real interpreter (environment: the
    server's, ``PYTHONPATH=lib``, ``env``, less the variables in ``unset``)."""
    env = {k: v for k, v in {**server["env"], "PYTHONPATH": "lib", **(env or {})}.items() if k not in unset}
    before = len(decisions(server))
    warm = subprocess.run(
        [server["shim"], *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=120
    )
    went = decisions(server)[before:]
    cold = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=120
    )
    return warm, cold, went


def test_a_script_sees_and_does_what_it_would_in_a_fresh_interpreter(server, work):
    warm, cold, went = both(server, ["script.py", "7", "torch"], work)
    assert [d["warm"] for d in went] == [True], went
    assert warm.returncode == cold.returncode == 7
    assert warm.stdout == cold.stdout  # argv, __main__, cwd, sys.path[0], PYTHONPATH's module, stdin, numerics, conv
    seen = json.loads(warm.stdout.splitlines()[0])
    assert (
        seen["argv"] == ["script.py", "7", "torch"]
        and "conv" in seen
        and seen["name"] == "__main__"
        and seen["helper"] == "lib"
    )
    assert seen["stdin"] == "in" and seen["benchmark_loaded"] is False
    assert warm.stdout.splitlines()[1:] == ["thread joined", "atexit ran"]
    assert warm.stderr.endswith("to stderr\n") and cold.stderr.endswith("to stderr\n")


MP_SCRIPT = r"""
import json, multiprocessing, multiprocessing.process, os, sys


def where():
    return [__file__, os.getcwd()]


if __name__ == "__main__":
    out = {"file": __file__, "original_dir": multiprocessing.process.ORIGINAL_DIR}
    for method in ("spawn", "forkserver"):  # both re-import the script in the child, by the path the parent gives
        with multiprocessing.get_context(method).Pool(1) as pool:
            out[method] = pool.apply(where)
    print(json.dumps(out))
"""


def test_spawned_children_find_the_script_as_from_a_fresh_interpreter(server, work):
    """A stage that starts spawn or forkserver workers (the evaluate stage does) from a folder other than the
    server's: the children re-import the script by its absolute ``__file__`` (``ORIGINAL_DIR`` is the stage's folder),
    not from the server's folder."""
    (work / "mp.py").write_text(MP_SCRIPT)
    assert Path.cwd() != work
    warm, cold, went = both(server, ["mp.py"], work)
    assert [d["warm"] for d in went if d["argv"] == ["mp.py"]] == [True], went
    assert warm.returncode == cold.returncode == 0, warm.stderr[-2000:]
    assert (
        json.loads(warm.stdout)
        == json.loads(cold.stdout)
        == {
            "file": str(work / "mp.py"),
            "original_dir": str(work),
            "spawn": [str(work / "mp.py"), str(work)],
            "forkserver": [str(work / "mp.py"), str(work)],
        }
    )


def test_dash_m_runs_the_module_as_main(server, work):
    warm, cold, went = both(server, ["-m", "pkg", "0"], work)
    assert [d["warm"] for d in went] == [True]
    assert warm.returncode == cold.returncode == 0
    w, c = json.loads(warm.stdout.splitlines()[0]), json.loads(cold.stdout.splitlines()[0])
    assert w == c and w["argv"][0].endswith("__main__.py") and w["path0"] == str(work)


@pytest.mark.parametrize("how", ["-u", "PYTHONUNBUFFERED", "buffered"])
def test_unbuffered_streams_as_the_interpreter_sets_them_up(server, work, how):
    """``-u`` is served (torchrun starts its ranks with it) and, like ``PYTHONUNBUFFERED``, gives raw, written-through
    standard output and error; without either they are buffered, as in a fresh interpreter."""
    args = ["-u", "script.py"] if how == "-u" else ["script.py"]
    env = {"PYTHONUNBUFFERED": "1"} if how == "PYTHONUNBUFFERED" else {}
    warm, cold, went = both(server, args, work, env=env, unset=() if env else ("PYTHONUNBUFFERED",))
    assert [d["warm"] for d in went] == [True], went
    assert warm.returncode == cold.returncode == 0 and warm.stdout == cold.stdout
    streams = json.loads(warm.stdout.splitlines()[0])["streams"]
    assert streams == (
        [["FileIO", True, False]] * 2
        if how != "buffered"
        else [["BufferedWriter", False, False], ["BufferedWriter", False, True]]
    )


def shim_runs(server, cmd, cwd, env, times):
    """``times`` runs of ``cmd`` (``SHIM`` stands for the shim) with the decisions each took, and one run of it through
    the real interpreter (the same conditions every time: one cold reference is enough)."""
    runs = []
    for _ in range(times):
        before = len(decisions(server))
        proc = subprocess.run(
            [server["shim"] if a == "SHIM" else a for a in cmd],
            cwd=cwd,
            env=env,
            input="",
            capture_output=True,
            text=True,
            timeout=120,
        )
        runs.append((proc, decisions(server)[before:]))
    cold = subprocess.run(
        [sys.executable if a == "SHIM" else a for a in cmd],
        cwd=cwd,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    for proc, _ in runs:
        assert proc.returncode == cold.returncode == 0 and proc.stdout == cold.stdout, (
            proc.stderr[-2000:],
            proc.stdout,
        )
    return runs


def test_an_environment_seen_twice_gets_a_server_of_its_own(server, work):
    """A variable read when the libraries are imported (here FOO stands for a numerics pin or a thread count): the
    first request runs cold, the second starts a server of that environment, which serves it and the ones after;
    another value is another environment. What the script sees and does is a fresh interpreter's every time."""
    env = {**server["env"], "PYTHONPATH": "lib", "UQBENCH_WARM_PRELOAD": "json"}  # (the server it starts: json only)
    first, second, third = (
        went for _, went in shim_runs(server, ["SHIM", "script.py"], work, {**env, "FOO": "twice"}, 3)
    )
    ((_, other),) = shim_runs(server, ["SHIM", "script.py"], work, {**env, "FOO": "once"}, 1)
    assert [(d["warm"], "sent" in d) for d in first] == [(False, False)] and "FOO" in first[0]["why"]
    assert [(d["warm"], "sent" in d) for d in second] == [(False, True), (True, False)]
    assert second[1]["server"] == second[0]["sent"] != second[0]["server"]
    assert [(d["warm"], d["server"]) for d in third] == [(False, second[0]["server"]), (True, second[0]["sent"])]
    assert [(d["warm"], "sent" in d) for d in other] == [(False, False)]


@pytest.mark.skipif(not shutil.which("taskset"), reason="taskset not installed")
def test_a_stage_on_fewer_cores_sees_them_and_sizes_its_threads_by_them(server, work):
    """``taskset`` (the simulated CPU runs its stages on one core): the cores a process may use size OpenMP's threads
    when torch is loaded, so such a request runs cold, then in a server started on those cores."""
    core = str(max(os.sched_getaffinity(0)))
    env = {**server["env"], "PYTHONPATH": "lib", "UQBENCH_WARM_PRELOAD": "numpy,torch"}
    runs = shim_runs(server, ["taskset", "-c", core, "SHIM", "script.py", "0", "torch"], work, env, 3)
    for proc, _ in runs:
        seen = json.loads(proc.stdout.splitlines()[0])
        assert seen["cpus"] == [int(core)] and seen["threads"] == 1
    if len(os.sched_getaffinity(0)) > 1:
        went = [w for _, w in runs]
        assert [d["warm"] for d in went[0]] == [False] and "CPU affinity" in went[0][0]["why"]
        assert [d["warm"] for d in went[2]] == [False, True]


def test_timed_runs_and_torchrun_ranks(server, work):
    """``UQ_TIMINGS`` (wall time from the process start, imports included) always runs cold, also when repeated;
    the variables torchrun sets for each rank are read only when a process group is set up: served warm."""
    for _ in range(2):
        warm, cold, went = both(server, ["script.py"], work, env={"UQ_TIMINGS": str(work / "t.jsonl")})
        assert warm.stdout == cold.stdout and [(d["warm"], "sent" in d) for d in went] == [(False, False)]
        assert went[0]["why"].startswith("UQ_TIMINGS set")
    ranks = {k: "1" for k in warm_server.TORCHRUN}
    warm, cold, went = both(server, ["-u", "script.py"], work, env=ranks)
    assert warm.stdout == cold.stdout and [d["warm"] for d in went] == [True]


def test_a_signal_death_and_an_uncaught_error_are_the_shims(server, work):
    warm, cold, _ = both(server, ["script.py", "signal"], work)
    assert warm.returncode == cold.returncode == -signal.SIGTERM
    warm, cold, _ = both(
        server, ["script.py", "kill"], work
    )  # (a rank that kills itself: tests/pipeline/test_distributed.py)
    assert warm.returncode == cold.returncode == -signal.SIGKILL
    (work / "boom.py").write_text("raise KeyError('boom')\n")
    warm, cold, _ = both(server, ["boom.py"], work)
    assert warm.returncode == cold.returncode == 1
    assert "KeyError: 'boom'" in warm.stderr and warm.stderr.splitlines()[-1] == cold.stderr.splitlines()[-1]


@pytest.mark.parametrize("case", ["env", "option", "shadow"])
def test_what_could_differ_runs_in_a_fresh_interpreter(server, work, case):
    args, env = ["script.py"], None
    if case == "env":
        env = {"FOO": "set"}  # any variable not known to be harmless (a thread count, a numerics pin...)
    elif case == "option":
        args = ["-X", "utf8", "script.py"]
    else:
        (work / "lib" / "torch").mkdir()  # a PYTHONPATH folder that shadows a library the server imported
        (work / "lib" / "torch" / "__init__.py").write_text("raise ImportError('shadow torch')\n")
    warm, cold, went = both(server, args, work, env=env)
    assert warm.returncode == cold.returncode and warm.stdout == cold.stdout and warm.stderr == cold.stderr
    if case == "option":
        assert went == []  # the shim did not even ask
    else:
        assert [d["warm"] for d in went] == [False]
        assert ("FOO" if case == "env" else "shadows torch") in went[0]["why"]


def test_when_the_shim_is_killed_its_stage_dies_with_it(server, work):
    (work / "sleeper.py").write_text("import os, sys, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen(
        [server["shim"], "sleeper.py"], cwd=work, env=server["env"], stdout=subprocess.PIPE, text=True
    )
    worker = int(proc.stdout.readline())
    assert worker != proc.pid  # served by a fork of the server
    proc.kill()
    proc.wait()
    if not gone(worker, 5.0):
        pytest.fail(f"the stage {worker} outlived its killed shim")


def test_without_a_server_the_shim_is_the_real_interpreter(server, work):
    env = {k: v for k, v in server["env"].items() if k != warm_client.ENV}
    out = subprocess.run(
        [server["shim"], "-c", "import sys; print(sys.executable)"], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == sys.executable
    gone = dict(server["env"], **{warm_client.ENV: str(Path(work) / "no-such-socket")})
    out = subprocess.run(
        [server["shim"], "script.py", "3"], cwd=work, env={**gone, "PYTHONPATH": "lib"}, capture_output=True, text=True
    )
    assert out.returncode == 3 and json.loads(out.stdout.splitlines()[0])["helper"] == "lib"
    before = len(decisions(server))  # UQBENCH_WARM=0 in a command's environment: that command runs cold, unasked
    out = subprocess.run(
        [server["shim"], "script.py", "3"],
        cwd=work,
        capture_output=True,
        text=True,
        env={**server["env"], "PYTHONPATH": "lib", "UQBENCH_WARM": "0"},
    )
    assert out.returncode == 3 and decisions(server)[before:] == []


def test_dvc_is_python_dash_m_dvc(server, work):
    """The ``dvc`` shim: ``dvc ARGS`` served as ``python -m dvc ARGS``."""
    before = len(decisions(server))
    warm = subprocess.run(
        [os.path.join(os.path.dirname(server["shim"]), "dvc"), "version"],
        cwd=work,
        env=server["env"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    went = decisions(server)[before:]
    cold = subprocess.run(
        [sys.executable, "-m", "dvc", "version"],
        cwd=work,
        env=server["env"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert [d["warm"] for d in went if d["argv"] == ["-m", "dvc", "version"]] == [True]  # (not its analytics daemon)
    assert warm.returncode == cold.returncode == 0 and warm.stdout == cold.stdout


def test_a_child_started_with_sys_executable_goes_through_the_shim(server, work):
    """As in a fresh interpreter started as ``python`` from PATH, sys.executable is the ``python`` found there (the
    shim), so the processes a stage starts with it are served warm too, and numpy's global generator is seeded per
    process, not inherited from the server."""
    (work / "parent.py").write_text(
        "import subprocess, sys, numpy\n"
        "print(sys.executable, numpy.random.randint(1 << 30), flush=True)\n"
        "subprocess.run([sys.executable, 'child.py'], check=True)\n"
    )
    (work / "child.py").write_text("import sys, numpy\nprint(sys.executable, numpy.random.randint(1 << 30))\n")
    before = len(decisions(server))
    out = subprocess.run(
        [server["shim"], "parent.py"],
        cwd=work,
        env=server["env"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    assert [d["argv"] for d in decisions(server)[before:] if d["warm"]] == [["parent.py"], ["child.py"]]
    assert out[0] == out[2] == server["shim"] and out[1] != out[3]


def test_the_server_ends_when_the_process_that_started_it_is_gone(tmp_path):
    """A pytest worker that is killed leaves no server behind (it checks every 2 s that its parent, named on its command
    line, is still its parent): here the shell that started it ends at once, maybe before the server has started."""
    sock = tmp_path / "sock"
    env = dict(os.environ, UQBENCH_WARM_PRELOAD="json")
    starter = subprocess.run(
        ["sh", "-c", f"'{sys.executable}' '{warm_server.__file__}' '{sock}' $$ >/dev/null 2>&1 & echo $!"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    server = int(starter.stdout)
    if not gone(server, 30.0):
        os.kill(server, signal.SIGKILL)
        pytest.fail("the server outlived the shell that started it by 30 s")
