import os
import sys

# Tests never touch the network: no model hub, no dataset download.
os.environ["HF_HUB_OFFLINE"] = "1"
# DVC stage commands call `python`: make it the interpreter (virtual environment) running the tests,
# also when the environment is not activated (CI runs `.venv/bin/python -m pytest`).
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("TQDM_DISABLE", "1")

import benchmark  # noqa: E402,F401  (first: pins the CPU numerics before torch runs a kernel, as in the stages)
import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(autouse=True)
def _restore_cwd():
    """A test that changes directory and fails (or forgets) must not move the tests after it."""
    cwd = os.getcwd()
    yield
    os.chdir(cwd)


@pytest.fixture(scope="session")
def caltech(tmp_path_factory):
    """Root of a repository copy whose suites/caltech256 pipeline has run through DVC (results/, dvc.lock): one run
    per session, shared by the bundle tests and tests/pipeline/test_incremental.py (which work on copies of it).

    ``UQBENCH_BUNDLE_FIXTURE=DIR`` reuses a run made by ``python tests/bundle/fixture_run.py DIR`` (development)."""
    from pathlib import Path

    if os.environ.get("UQBENCH_BUNDLE_FIXTURE"):
        return Path(os.environ["UQBENCH_BUNDLE_FIXTURE"]) / "repo"
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "bundle"))
    from fixture_run import caltech_run

    return caltech_run(tmp_path_factory.mktemp("caltech"))
