"""The code a DVC stage depends on: the package files its script imports, transitively, computed from the code.

File by file, never whole folders and never a hand-kept list (:func:`benchmark.storage.imports.closure`): a
stage script's ``import``/``from ... import`` of the ``benchmark`` package are followed through the package's
sources, package ``__init__`` files included. A method's stage also depends on the method's own module and what it
imports (the generic ``pipelines/method.py`` imports it by its kind at run time); so adding or editing a method
re-runs that method's stages (and evaluate, report), never ``data``, ``train@`` or ``logits@``, which import no method.
"""
from __future__ import annotations

from benchmark.storage.imports import closure


def script_deps(script: str, root=".", modules=()) -> list[str]:
    """The package files (sorted) stage script ``script`` (a path relative to ``root``) runs, with those of the
    dotted ``modules`` it imports at run time (a method's module)."""
    return closure(root, script, *modules)
