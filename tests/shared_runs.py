"""Runs shared by the whole test run (tests/conftest.py's session fixtures: ``caltech``, ``embedded_run``; the docs
pages of tests/docs/test_tutorials.py): built once, also with pytest-xdist, and copied by a test that changes them.

A module of its own (as tests/file_order.py), so that test modules import it without running conftest.py again.
"""

import os

import pytest


def once_per_run(tmp_path_factory, name: str, build):
    """``build(folder)`` once for the whole test run, also with pytest-xdist (``-n``), where every worker is its own
    session: the first worker that asks builds it under a file lock in the run's shared temporary folder, the others
    wait and reuse it (the pattern of pytest-xdist's docs). ``build`` returns a path; users read it and never write
    into it (a test that changes it works on a copy). A build that failed fails every later ask at once, with its
    error."""
    import traceback
    from pathlib import Path

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent / f"shared-{name}"  # <basetemp>/popen-gwN -> <basetemp>
    done, failed = shared / "done.txt", shared / "failed.txt"
    with FileLock(f"{shared}.lock"):
        if failed.exists():
            pytest.fail(f"the shared fixture {name!r} failed in another worker:\n{failed.read_text()}", pytrace=False)
        if not done.exists():
            (shared / "work").mkdir(parents=True, exist_ok=True)
            try:
                result = build(shared / "work")
            except BaseException:
                failed.write_text(traceback.format_exc())
                raise
            done.write_text(str(result))
    return Path(done.read_text())


def private_copy(src, dst):
    """A test's own copy of a shared run (``src``) to change: the whole tree (a few MB), symlinks kept, without the
    DVC scratch folder ``.dvc/tmp`` (another test may be using the original's at the same time)."""
    import shutil

    shutil.copytree(src, dst, symlinks=True, ignore=lambda d, names: ["tmp"] if os.path.basename(d) == ".dvc" else [])
    return dst
