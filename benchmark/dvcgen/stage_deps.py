"""The code a DVC stage depends on: the package files its script imports, transitively, computed from the code.

File by file, never whole folders and never a hand-kept list (:func:`benchmark.storage.imports.closure`): a
stage script's ``import``/``from ... import`` of the ``benchmark`` package are followed through the package's
sources, package ``__init__`` files included. A method's stage also depends on the method's own module and what it
imports (the generic ``pipelines/method.py`` imports it by its kind at run time); so adding or editing a method
re-runs that method's stages (and evaluate, report), never ``data``, ``train@`` or ``logits@``, which import no method.

The package data beside those modules counts too (the report's ``templates/``, ``static/`` and ``published.yaml``):
a file or folder in a package folder the stage imports from that is neither Python source nor a subpackage. Editing
a page template re-runs ``report``, nothing else.
"""

from __future__ import annotations

from pathlib import Path

from benchmark.storage.imports import closure

NOT_DATA = ("__pycache__", "py.typed")  # beside the modules, read by no stage


def package_data(root, files) -> list[str]:
    """The non-Python files and folders (``__pycache__``, subpackages and the type checkers' ``py.typed`` marker left
    out: no stage reads them) beside ``files``, paths relative to ``root``, sorted."""
    root = Path(root)
    out = set()
    for folder in {(root / f).parent for f in files}:
        for p in folder.iterdir():
            if p.name in NOT_DATA or p.name.startswith(".") or p.suffix == ".py" or (p / "__init__.py").exists():
                continue
            out.add(p.relative_to(root).as_posix())
    return sorted(out)


def script_deps(script: str, root=".", modules=()) -> list[str]:
    """The package files (sorted) stage script ``script`` (a path relative to ``root``) runs, with those of the
    dotted ``modules`` it imports at run time (a method's module), then the package data beside them."""
    code = closure(root, script, *modules)
    return code + package_data(root, code)


def dependency_counts(stages: dict) -> dict[str, dict[str, int]]:
    """stage kind -> ``{"files": n, "code": m}``: its dependencies in a ``dvc.yaml``'s ``stages`` mapping (a
    ``foreach`` stage counted once, by its ``do``) and how many of them are code (its script and the package's files
    and data). What the tests state for each kind of stage (tests/reproduce/test_stage_deps.py)."""
    out = {}
    for name, stage in stages.items():
        deps = [d if isinstance(d, str) else next(iter(d)) for d in stage.get("do", stage).get("deps", [])]
        code = [d for d in deps if d.removeprefix("../../").startswith(("benchmark/", "pipelines/"))]
        out[name] = {"files": len(deps), "code": len(code)}
    return out
