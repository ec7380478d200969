import os
import signal
import sys

# Tests never touch the network: no model hub, no dataset download.
os.environ["HF_HUB_OFFLINE"] = "1"
# DVC stage commands call `python`: make it the interpreter (virtual environment) running the tests,
# also when the environment is not activated (CI runs `.venv/bin/python -m pytest`). Once: never again in front of
# the warm python's shim (pytest_configure puts it first).
if os.path.dirname(sys.executable) not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ["DVC_NO_ANALYTICS"] = "1"  # no analytics daemon process after each dvc command (nor a network attempt)
# OpenMP threads that finish a parallel region sleep instead of spinning (libgomp spins ~0.3 ms by default): with a
# worker per core, a spinning thread of one stage takes the core another worker's stage needs (about 7 % of the CPU
# time of the stage-running tests). It changes no result: only how idle threads wait. Set before torch is imported
# here and before the warm python server starts, so that stages see it as their server did.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The tests of Ctrl-C (a SIGINT to a run, a publish, a stage) need what a terminal gives a program: SIGINT handled. A
# run started in the background by a shell without job control (`(python -m pytest &)`, `nohup`-like wrappers) inherits
# SIGINT ignored, and an ignored signal stays ignored in every process it starts: those tests then saw exit 0 or 1, not
# 130. Python's own handler here; the processes the tests start get the default action (handlers reset at exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, os.path.dirname(__file__))  # (tests/: precompiled, file_order, chromium and shared_runs here)
if not os.environ.get("PYTEST_XDIST_WORKER"):  # once per run, before anything imports the project's code
    from precompiled import precompile

    precompile()  # hash-checked .pyc of the project's code (tests/precompiled.py)

# DVC binds its log handlers to the sys.stdout/sys.stderr it sees when first imported: imported here, they write to
# pytest's capture for the whole run, not to one test's capsys streams, which are closed after that test (a later
# DVC log line in the same worker then raised "I/O operation on closed file": tests/docs/test_tutorials.py failed
# after tests/reproduce/test_reproduce_cli.py in one worker)
import dvc  # noqa: E402,F401
import pytest  # noqa: E402
import torch  # noqa: E402
from chromium import browser, tab  # noqa: E402,F401  (fixtures of the page tests: tests/chromium.py)
from file_order import schedule, uses_caltech  # noqa: E402
from shared_runs import once_per_run, private_copy  # noqa: E402,F401  (private_copy: for the fixtures below)

import benchmark  # noqa: E402,F401  (first: pins the CPU numerics before torch runs a kernel, as in the stages)

torch.set_num_threads(min(2, os.cpu_count() or 1))


def pytest_configure(config):
    """Start the run's warm ``python`` (benchmark/warm) for the DVC stages the tests run, in the process pytest was
    started as (pytest-xdist's controller, or the one process): the xdist workers it starts inherit the shim on
    ``PATH`` and the socket, so the libraries are loaded once per run, and an environment that both workers' tests
    use gets one server of its own. ``UQBENCH_WARM=0`` runs every stage in a fresh interpreter instead; a run under a
    server that already serves its environment (a test or a tutorial that runs ``python -m pytest``) uses that one."""
    from benchmark import warm

    top = not os.environ.get("PYTEST_XDIST_WORKER")
    if (
        top
        and os.environ.get("UQBENCH_WARM", "1") != "0"
        and not hasattr(config, "_warm_python")
        and warm.serving_python(os.environ) is None
    ):
        server = warm.start(parent=os.getpid())
        os.environ.update(server.environ(os.environ))
        config._warm_python = server


def pytest_unconfigure(config):
    server = getattr(config, "_warm_python", None)
    if server:
        server.stop()


def pytest_xdist_auto_num_workers(config):
    """Workers for ``-n auto`` (pyproject's addopts): one per core, at most 4 (each holds torch and the test modules),
    and no more than the test files the command line names (``--dist loadfile`` runs a file in one worker: a run of
    one file, ``pytest tests/x/test_y.py``, is one process, not a controller and idle workers that import torch for
    nothing); none, i.e. one process, with ``--benchmark-enable`` (pytest-benchmark does not measure under xdist)."""
    from file_order import named_files

    if config.getoption("benchmark_enable", False):
        return 0
    cores = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    files = named_files(config.args, config.invocation_params.dir)
    workers = cores if files is None else min(cores, files)
    return 0 if workers <= 1 else workers


@pytest.fixture(autouse=True)
def _restore_cwd():
    """A test that changes directory and fails (or forgets) must not move the tests after it; nor may one leave
    ``PATH`` changed (the warm python's shim must stay first: a test that ran conftest.py's set-up a second time put
    the real interpreter in front of it, and every later stage of that worker started cold)."""
    cwd, path = os.getcwd(), os.environ.get("PATH")
    yield
    os.chdir(cwd)
    if os.environ.get("PATH") != path:
        os.environ["PATH"] = path
        pytest.fail(f"the test left PATH changed (now restored): {path[:120]}...", pytrace=False)


def _caltech_run(tmp_path_factory):
    from pathlib import Path

    if os.environ.get("UQBENCH_BUNDLE_FIXTURE"):
        return Path(os.environ["UQBENCH_BUNDLE_FIXTURE"]) / "repo"
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "bundle"))
    from fixture_run import caltech_run

    return once_per_run(tmp_path_factory, "caltech", caltech_run)


@pytest.fixture(scope="session")
def caltech(tmp_path_factory):
    """Root of a repository copy whose suites/caltech256 pipeline has run through DVC (results/, dvc.lock): one run
    per test run (shared by the pytest-xdist workers: ``once_per_run``), read by the bundle tests; tests that change
    it (tests/pipeline/test_incremental.py, tune, simulate, leftovers) work on a ``private_copy``.

    ``UQBENCH_BUNDLE_FIXTURE=DIR`` reuses a run made by ``python tests/bundle/fixture_run.py DIR`` (development)."""
    return _caltech_run(tmp_path_factory)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    """pytest keeps the test modules it rewrote in ``__pycache__`` while it collects (tests/precompiled.py)."""
    from precompiled import rewrite_cache

    with rewrite_cache():
        yield


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """The collector's settings for the run's tests (tests/gc_settings.py)."""
    from gc_settings import settle

    settle()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Files in :func:`schedule` order. With pytest-xdist, the first worker also starts the shared ``caltech`` run in
    a background thread (its work is a ``dvc repro`` subprocess) as soon as the selected tests are known to need it:
    it overlaps with the tests that do not, instead of keeping the workers waiting on its lock."""
    items[:] = schedule(items)
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw0" and any(uses_caltech(i) for i in items):
        import threading

        factory = config._tmp_path_factory
        factory.getbasetemp()  # made (and cached) here: the thread and the first test must not both create it
        threading.Thread(target=_caltech_run, args=(factory,), name="caltech-run", daemon=True).start()


@pytest.fixture(scope="session")
def embedded_run(tmp_path_factory):
    """Root of a fresh clone where the embedded default's main job ran on a tiny profile, committed
    (tests/checkouts.py): one run per test run, shared by the pytest-xdist workers (``once_per_run``); read by
    tests/pipeline/test_dvc_e2e.py and the docs pages that start after the main job (tests/docs/test_tutorials.py).
    A test that changes it or runs DVC in it works on a ``private_copy``."""
    from checkouts import embedded_run as build

    return once_per_run(tmp_path_factory, "embedded-run", build)


@pytest.fixture(scope="session")
def measured(request) -> bool:
    """Whether the run measures benchmarks (``--benchmark-enable``, or ``--benchmark-disable`` not given), as
    pytest-benchmark decides: a module fixture can then make only what the measurement needs (the test command,
    benchmarks disabled, checks what holds on any machine; times and scaling are measured, never asserted there)."""
    opt = request.config.getoption
    return bool(opt("benchmark_enable") or not opt("benchmark_disable"))


@pytest.fixture
def caltech_copy(caltech, tmp_path):
    """A private copy of the ``caltech`` run (``private_copy``), for a test that writes into it."""
    return private_copy(caltech, tmp_path / "caltech")
