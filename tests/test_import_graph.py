"""The package's imports point one way (ARCHITECTURE: core <- config <- data/models <- methods <- stages <- ...): no
import cycle between modules, no package importing one above it (nothing under methods/ imports stages/), the method
registry a leaf, no package module importing a test file. Read from the sources (every import, also inside
functions)."""

from __future__ import annotations

import ast
import graphlib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "benchmark"
# a package may import only itself and the packages of a lower rank
RANK = {
    "core": 0,
    "config": 1,
    "warm": 1,
    "storage": 1,
    "dvcutil": 2,
    "models": 3,
    "data": 4,
    "methods": 5,
    "stages": 6,
    "evaluation": 7,
    "dvcgen": 7,
    "cluster": 7,
    "report": 8,
    "bundle": 9,
    "reproduce": 10,
    "gpu": 10,
    "docsgen": 11,
    "cli": 12,
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every import of ``path``: ``from a import b`` is module ``a.b`` where that is a module
    (importing a submodule), else ``a``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = _module(path).split(".")
                pkg = pkg if path.name == "__init__.py" else pkg[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            out += [(node.lineno, m) for m in subs] if len(subs) == len(node.names) else [(node.lineno, base)]
    return out


def _graph() -> dict[str, set[str]]:
    """module -> the package modules it imports."""
    g = defaultdict(set)
    for name, path in MODULES.items():
        g[name] |= {m for _, m in _imports(path) if m in MODULES and m != name}
    return g


def test_no_import_cycles():
    try:
        tuple(graphlib.TopologicalSorter(_graph()).static_order())
    except graphlib.CycleError as e:
        raise AssertionError(f"import cycle: {' -> '.join(e.args[1])}") from None


def test_no_package_imports_a_package_above_it():
    assert set(RANK) == {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}, "rank every package"
    upward = []
    for name, path in MODULES.items():
        here = name.split(".")[1] if name.count(".") else None
        if here not in RANK:
            continue  # benchmark/__init__.py, __main__.py: the package's entry
        for line, m in _imports(path):
            there = m.split(".")[1] if m.startswith("benchmark.") else None
            if there in RANK and there != here and RANK[there] >= RANK[here]:
                upward.append(f"{path.relative_to(ROOT)}:{line} ({here}) imports {m} ({there})")
    assert not upward, "\n".join(upward)


def test_the_method_registry_is_a_leaf_and_methods_never_import_stages():
    registry = PACKAGE / "methods" / "registry.py"
    assert not [m for _, m in _imports(registry) if m.startswith("benchmark")], (
        "the registry imports nothing of the package"
    )
    stages = [
        f"{p.name}: {m}"
        for p in (PACKAGE / "methods").glob("*.py")
        for _, m in _imports(p)
        if m.startswith(("benchmark.stages", "benchmark.evaluation", "benchmark.dvcgen"))
    ]
    assert not stages, stages
    assert not _imports(PACKAGE / "methods" / "__init__.py"), "importing one method must not import the others"


def test_no_package_module_imports_a_test_file():
    test_modules = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"tests", "conftest"}
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {m}"
        for name, path in MODULES.items()
        for line, m in _imports(path)
        if m.split(".")[0] in test_modules
    ]
    assert not bad, bad


def test_the_graph_reads_what_python_imports():
    """The parser sees the edges the checks rely on (a check that finds nothing because it reads nothing passes)."""
    g = _graph()
    assert "benchmark.methods.registry" in g["benchmark.stages.method_stage"]
    assert "benchmark.methods.rows" in g["benchmark.methods.duo"]
    assert "benchmark.data.sources" in g["benchmark.data.embedded"]  # from benchmark.data import sources: the submodule
    assert "benchmark.data" not in g["benchmark.data.embedded"]
    assert sum(map(len, g.values())) > 300
    g["benchmark.core.metrics"].add("benchmark.methods.rows")  # a cycle through the core is found
    try:
        tuple(graphlib.TopologicalSorter(g).static_order())
    except graphlib.CycleError:
        return
    raise AssertionError("a cycle went unnoticed")


MAX_PACKAGES = 6  # the other packages one package may import (the command line excepted: it wires them all)
WIDER = {"bundle": 9, "dvcgen": 7}  # wider today, to be narrowed (issue 55); never wider than this


def test_no_package_but_the_command_line_imports_more_than_six_others():
    uses = defaultdict(set)
    for name, path in MODULES.items():
        here = name.split(".")[1] if name.count(".") else None
        uses[here] |= {m.split(".")[1] for _, m in _imports(path) if m.startswith("benchmark.") and m.count(".")} - {
            here
        }
    over = {p: sorted(u) for p, u in uses.items() if p in RANK and p != "cli" and len(u) > WIDER.get(p, MAX_PACKAGES)}
    assert not over, over
    assert "reproduce" not in uses["cluster"] and len(uses["reproduce"]) <= MAX_PACKAGES
    assert {p for p in WIDER if len(uses[p]) < WIDER[p]} == set(), "narrower now: lower WIDER"
