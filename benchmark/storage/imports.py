"""The package files a script or module runs: its imports of ``benchmark``, followed transitively through the sources.

Read from the code, never hand-kept: every ``import``/``from ... import`` of the package (module level and inside
functions: a superset of what a run imports) is followed through the package's sources, including the package
``__init__`` files that importing a submodule runs. What a DVC stage depends on
(:mod:`benchmark.dvcgen.stage_deps`) and what the evaluate stage's unit cache is keyed on
(:func:`benchmark.evaluation.stage.code_hash`).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from functools import cache
from pathlib import Path

PACKAGE = "benchmark"


def module_file(root: Path, dotted: str) -> Path | None:
    """The source file of module ``dotted`` under ``root`` (a module or a package's ``__init__.py``)."""
    base = Path(root) / Path(*dotted.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def imported_names(root: Path, file: Path) -> set[str]:
    """Dotted ``benchmark...`` names ``file`` imports (``from benchmark.x import y``: both ``benchmark.x`` and
    ``benchmark.x.y``, which is a module or a name defined in ``benchmark.x``). Each file is parsed once per process
    and version of it (its modification time and size)."""
    file = Path(file)
    st = file.stat()
    return set(_imported_names(Path(root), file, st.st_mtime_ns, st.st_size))


@cache
def _imported_names(root: Path, file: Path, mtime_ns: int, size: int) -> frozenset[str]:
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    try:
        here = list(
            file.resolve().relative_to(Path(root).resolve()).parts[:-1]
        )  # the package a relative import starts from
    except ValueError:
        here = []
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = here[: len(here) - (node.level - 1)]
                mod = ".".join(parent + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return frozenset(m for m in out if m == PACKAGE or m.startswith(PACKAGE + "."))


def _modules_run(root: Path, dotted: str, found: dict[str, Path | None] | None = None) -> list[Path]:
    """The files importing ``dotted`` runs: each enclosing package's ``__init__.py``, then the module itself.
    ``found``: a dict that keeps :func:`module_file`'s answers across calls."""
    found = {} if found is None else found
    parts = dotted.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name not in found:
            found[name] = module_file(root, name)
    return [f for f in (found[".".join(parts[:i])] for i in range(1, len(parts) + 1)) if f is not None]


@cache
def _closure(root: Path, start: tuple[Path, ...], stamp: tuple) -> frozenset[Path]:
    seen: set[Path] = set()
    found: dict[str, Path | None] = {}  # dotted name -> its file: many files import the same packages and names
    todo = list(start)
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for dotted in imported_names(root, f):
            todo += [m for m in _modules_run(root, dotted, found) if m not in seen]
    return frozenset(seen)


def closure(root: str | Path, *starts: str) -> list[str]:
    """The package files (paths relative to ``root``, sorted) that the scripts or modules ``starts`` import,
    transitively; ``starts`` are paths relative to ``root`` (``pipelines/train.py``) or dotted module names
    (``benchmark.methods.duo``: its package ``__init__`` files and itself included). A script itself is not listed."""
    root = Path(root).resolve()
    files, scripts = [], set()
    for s in starts:
        if s.endswith(".py"):
            files.append(root / s)
            scripts.add(root / s)
        else:
            if module_file(root, s) is None:
                raise ValueError(f"no module {s!r} under {root}")
            files += _modules_run(root, s)
    sources = sorted((root / PACKAGE).rglob("*.py")) + sorted(scripts)
    stamp = tuple((p, p.stat().st_mtime_ns, p.stat().st_size) for p in sources)  # a changed source: computed again
    reached = _closure(root, tuple(files), stamp) - scripts
    return sorted(p.relative_to(root).as_posix() for p in reached)


def code_hash(root: str | Path, files: Iterable[str]) -> str:
    """A short hash of ``files`` (paths relative to ``root``): their names and bytes."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + (Path(root) / rel).read_bytes())
    return h.hexdigest()[:16]
