"""The code a DVC stage depends on, computed from its script's imports (no hand-kept file lists).

Every ``import``/``from ... import`` of the ``benchmark`` package reachable from the stage
script (module level and inside functions: a superset of what a run imports) is followed
through the package's sources. A module inside a subpackage makes the whole subpackage
folder a dependency (``benchmark/core``), a top-level module its file; a script that
reaches the method registry also depends on the folders :func:`benchmark.stages.registry.discover`
imports from (``benchmark/methods``) and on what the modules there import.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

PACKAGE = "benchmark"
REGISTRY = "benchmark/stages/registry.py"
DISCOVERED = ("benchmark/methods",)


def _module_file(root: Path, dotted: str) -> Path | None:
    base = root / Path(*dotted.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports(root: Path, file: Path) -> set[str]:
    """Dotted ``benchmark...`` names ``file`` imports (``from benchmark.x import y``: both ``benchmark.x`` and ``benchmark.x.y``)."""
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    rel = file.relative_to(root).with_suffix("")
    here = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                mod = ".".join(parent + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return {m for m in out if m == PACKAGE or m.startswith(PACKAGE + ".")}


@lru_cache(maxsize=None)
def _closure(root: Path, script: str) -> frozenset[str]:
    seen: set[Path] = set()
    todo = [root / script]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for dotted in _imports(root, f):
            parts = dotted.split(".")
            for i in range(1, len(parts) + 1):  # importing benchmark.a.b runs benchmark/__init__, benchmark/a/__init__
                mf = _module_file(root, ".".join(parts[:i]))
                if mf is not None and mf not in seen:
                    todo.append(mf)
    return frozenset(p.relative_to(root).as_posix() for p in seen if p != root / script)


def script_deps(script: str, root=".") -> list[str]:
    """The package paths (folders and files, sorted: folders first) stage script ``script`` depends on."""
    root = Path(root).resolve()
    modules = set(_closure(root, script))
    if REGISTRY in modules:  # discover() imports every module of these folders at run time
        from benchmark.stages.registry import BUILTIN_MODULES

        found = [f.relative_to(root).as_posix() for f in sorted((root / "benchmark" / "methods").glob("*.py"))]
        found += [_module_file(root, m).relative_to(root).as_posix() for m in BUILTIN_MODULES]
        for f in found:
            modules |= {f} | _closure(root, f)
    modules -= {f"{PACKAGE}/__init__.py"}
    folders, files = set(), set()
    for m in modules:
        parts = m.split("/")
        (folders.add("/".join(parts[:2])) if len(parts) > 2 else files.add(m))
    if REGISTRY in modules:
        folders |= set(DISCOVERED)
    return sorted(folders) + sorted(files)
