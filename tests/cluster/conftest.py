"""Fixtures of the ``python -m benchmark cluster`` tests: the toy DVC project (tests/cluster/toy.py) and a one-node
Slurm cluster started on this machine (``slurm``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy import make_toy, run  # noqa: E402


@pytest.fixture
def toy_repo(tmp_path):
    return make_toy(tmp_path / "toy")


@pytest.fixture(scope="session")
def toy_serial(tmp_path_factory) -> Path:
    """The toy pipeline run by a serial ``dvc repro`` (what a cluster run must equal)."""
    root = make_toy(tmp_path_factory.mktemp("toy-serial") / "toy")
    run([sys.executable, "-m", "dvc", "repro", "-q"], root)
    return root


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A one-node Slurm cluster (Debian's slurm-wlm, installed when missing) for one test file: its
    ``SLURM_CONF`` in the environment while it runs. A cluster that cannot start fails the test with the reason."""
    from benchmark.cluster.local import LocalCluster, LocalClusterError

    cluster = LocalCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except LocalClusterError as e:
        pytest.fail(f"the local Slurm cluster did not start: {e}", pytrace=False)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in cluster.env().items():
            mp.setenv(k, v)
        yield cluster
    cluster.stop()
