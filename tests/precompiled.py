"""Compiled bytecode of the project's own code for the test run, checked against each source's hash.

The suite starts about a thousand Python processes (DVC stages, the warm python's forks, torchrun ranks, fresh
interpreters on purpose) and most import the ``benchmark`` package. Where ``PYTHONDONTWRITEBYTECODE`` is set (as in
many container images) none of them may write ``__pycache__``, so each compiles from source every module it imports
(the whole package: ~0.16 CPU s), and each xdist worker rewrites every test module's assertions again.

:func:`precompile` (tests/conftest.py, once per run in the process pytest was started as) writes ``__pycache__`` of
``benchmark/``, ``pipelines/``, ``scripts/`` and ``tests/`` as **checked hash-based** ``.pyc`` files (PEP 552):
an import reads one only when the SipHash of the source it was compiled from equals the source's hash now; a
source that a test edits (or git changes) is compiled from source again, whatever its modification time or size.
So no process can run stale bytecode, and an import sees what a fresh interpreter would. Nothing else changes:
``PYTHONDONTWRITEBYTECODE`` stays as it is for every process (none writes bytecode of its own).
:func:`rewrite_cache` lets pytest keep its assertion-rewritten test modules in ``__pycache__`` during collection
only (its own cache, keyed by the test file's modification time and size; no test edits a test module).
``__pycache__`` is ignored by git and by DVC (.gitignore, .dvcignore).
"""

from __future__ import annotations

import compileall
import contextlib
import py_compile
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("benchmark", "pipelines", "scripts", "tests")


def precompile(root: Path = ROOT) -> bool:
    """Write checked hash-based ``.pyc`` files of every module under :data:`FOLDERS` of ``root``; True when all
    compiled (a syntax error is left to the import that meets it)."""
    ok = True
    for folder in FOLDERS:
        if (root / folder).is_dir():
            ok &= bool(
                compileall.compile_dir(
                    root / folder, quiet=2, workers=1, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
                )
            )
    return ok


@contextlib.contextmanager
def rewrite_cache():
    """pytest may write its assertion-rewritten test modules to ``__pycache__`` while this is open."""
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        yield
    finally:
        sys.dont_write_bytecode = before
