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
