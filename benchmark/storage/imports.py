"""The package files a script or module runs: its imports of ``benchmark``, followed transitively through the sources.

Read from the code, never hand-kept: every ``import``/``from ... import`` of the package (module level and inside
functions: a superset of what a run imports) is followed through the package's sources, including the package
``__init__`` files that importing a submodule runs, except those that run nothing (a package ``__init__.py`` that
holds only its docstring: :func:`inert`; one that gains a statement is listed again, and the tests that keep
``dvc.yaml`` in sync with the generator catch it). What a DVC stage depends on
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
def _parsed(file: Path, mtime_ns: int, size: int) -> tuple[ast.Module, bool]:
    """``file``'s syntax tree and whether it holds at most a docstring (:func:`inert`), once per version of it."""
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    body = tree.body
    doc_only = len(body) == 0 or (
        len(body) == 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    return tree, doc_only


@cache
def _imported_names(root: Path, file: Path, mtime_ns: int, size: int) -> frozenset[str]:
    tree = _parsed(file, mtime_ns, size)[0]
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


def inert(path: Path) -> bool:
    """Whether ``path`` is a package marker that runs nothing: an ``__init__.py`` whose only statement is its
    docstring (or that is empty). Its bytes cannot change what a stage computes, so it is no dependency. Read from
    the same parse as :func:`imported_names` (once per version of the file)."""
    path = Path(path)
    if path.name != "__init__.py":
        return False
    st = path.stat()
    return _parsed(path, st.st_mtime_ns, st.st_size)[1]


def closure(root: str | Path, *starts: str) -> list[str]:
    """The package files (paths relative to ``root``, sorted) that the scripts or modules ``starts`` import,
    transitively; ``starts`` are paths relative to ``root`` (``pipelines/train.py``) or dotted module names
    (``benchmark.methods.duo``: its package ``__init__`` files and itself included; :func:`inert` ones left out). A
    script itself is not listed."""
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
    return sorted(p.relative_to(root).as_posix() for p in reached if not inert(p))


def code_hash(root: str | Path, files: Iterable[str]) -> str:
    """A short hash of ``files`` (paths relative to ``root``): their names and bytes."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + (Path(root) / rel).read_bytes())
    return h.hexdigest()[:16]
