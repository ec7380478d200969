"""The house rules a reader relies on, read from the sources (AST): every public function of the package says what it
does (a docstring), and no function runs over :data:`MAX_LINES` lines of code (its lines less its docstring, as
``ruff format`` lays them out; split it where it does two things)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "benchmark"
MAX_LINES = 60
# Longer on purpose, each with why; the test fails when one of them is short again (then strike it here)
LONG: dict[str, str] = {}


def _functions(path: Path):
    """(qualified name, node, public) of every function of ``path``: public = not ``_``-named, in a public class, not
    nested in a function."""
    out = []

    def walk(node, prefix: str, public: bool, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child, public and not in_function and not child.name.startswith("_")))
                walk(child, f"{prefix}{child.name}.", public, True)
            elif isinstance(child, ast.ClassDef):
                walk(
                    child,
                    f"{prefix}{child.name}.",
                    public and not in_function and not child.name.startswith("_"),
                    in_function,
                )
            else:
                walk(child, prefix, public, in_function)

    walk(ast.parse(path.read_text(encoding="utf-8")), "", True, False)
    return out


def length(node) -> int:
    """Lines of a function less its docstring's: what the reader reads as code (a long docstring is no reason to
    split)."""
    first = node.body[0]
    doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    return node.end_lineno - node.lineno + 1 - ((first.end_lineno - first.lineno + 1) if doc else 0)


@functools.cache
def functions() -> dict:
    """``path::qualified name`` -> (node, public) for every function of the package: parsed when a test of this file
    first asks (not at collection, where every pytest-xdist worker would parse the whole package)."""
    return {
        f"{p.relative_to(ROOT).as_posix()}::{name}": (node, public)
        for p in sorted(PACKAGE.rglob("*.py"))
        for name, node, public in _functions(p)
    }


def test_the_rules_read_the_package():
    """A check that finds nothing because it reads nothing passes: the reader sees the package's functions."""
    assert len(functions()) > 1000
    assert functions()["benchmark/reproduce/gate.py::compare"][1]
    assert not functions()["benchmark/reproduce/gate.py::_matched"][1]  # private
    assert not functions()["benchmark/reproduce/gate.py::_matched.side"][1]  # nested
    assert functions()["benchmark/storage/store.py::LogitsFile.alignment_key"][1]  # a method of a public class


def test_every_public_function_has_a_docstring():
    missing = [name for name, (node, public) in functions().items() if public and ast.get_docstring(node) is None]
    assert not missing, f"{len(missing)} public functions without a docstring:\n" + "\n".join(missing)


def test_no_function_is_longer_than_the_limit():
    long = {name: length(node) for name, (node, _) in functions().items() if length(node) > MAX_LINES}
    over = [f"{name}: {n} lines" for name, n in long.items() if name not in LONG]
    assert not over, f"functions over {MAX_LINES} lines (split them):\n" + "\n".join(over)
    assert set(LONG) <= set(long), (
        f"no longer over {MAX_LINES} lines, strike from LONG: {sorted(set(LONG) - set(long))}"
    )


def test_length_leaves_out_the_docstring_only():
    """Hand-worked: five lines, two of them the docstring."""
    with_doc = ast.parse('def f(a):\n    """What f does,\n    on two lines."""\n    b = a + 1\n    return b\n').body[0]
    without = ast.parse("def f(a):\n    b = a + 1\n    return b\n").body[0]
    assert (length(with_doc), length(without)) == (3, 3)
