"""Reading the YAML inputs (zoo, suite, params files) and checking typed fields: one place for both.

Every problem is one line that names the file (and, for YAML syntax, the line):
a file that is missing, not UTF-8, empty, not a mapping, not valid YAML, has a
duplicate key or a tag that would build a Python object (YAML is read as data
only: :class:`yaml.SafeLoader`). Loaders pass their own error class (a
``ValueError``), so each command reports its own kind of error.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import yaml


class YAMLInputError(ValueError):
    """A YAML input file cannot be read as data."""


class _DuplicateKey(yaml.YAMLError):
    pass


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (YAML would silently keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping, refusing a key given twice (a :class:`yaml.constructor.ConstructorError` naming it)."""
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(
                    f"duplicate key {key!r} at line {key_node.start_mark.line + 1}: names must be unique"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def yaml_problem(e: yaml.YAMLError) -> str:
    """One line describing a YAML error (PyYAML's messages span several lines with a code excerpt)."""
    if isinstance(e, _DuplicateKey):
        return str(e)
    mark = getattr(e, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = " ".join(str(getattr(e, "problem", None) or e).split())
    tag = re.search(r"tag:yaml\.org,2002:(python/\S+?)'", problem)
    if tag:
        return f"{where}tag !!{tag.group(1)} is not allowed (YAML is read as data only, no Python objects)"
    if "could not determine a constructor for the tag" in problem:
        return f"{where}unknown tag ({problem.split('tag', 1)[-1].strip()}); YAML is read as data only"
    context = " ".join(str(getattr(e, "context", None) or "").split())
    return f"{where}not valid YAML ({context + ': ' if context else ''}{problem})"


def read_yaml(
    path: str | os.PathLike[str],
    *,
    what: str = "YAML file",
    error: type[ValueError] = YAMLInputError,
    mapping: bool = True,
    allow_empty: bool = False,
) -> Any:
    """The data of YAML file ``path``; ``error`` (one line naming the file) when it cannot be read as such.

    ``mapping``: the top level must be a mapping. ``allow_empty``: an empty file is ``{}``
    (with ``mapping``) or ``None``, not an error.
    """
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: {what} not found")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: {what} is not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") from None
    except OSError as e:
        raise error(f"{path}: cannot read the {what} ({e.strerror or e})") from None
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        raise error(f"{path}: {yaml_problem(e)}") from None
    except RecursionError:
        raise error(f"{path}: not valid YAML (nested too deeply)") from None
    if data is None:
        if allow_empty:
            return {} if mapping else None
        raise error(f"{path}: the {what} is empty")
    if mapping and not isinstance(data, dict):
        raise error(
            f"{path}: the {what} must be a mapping (key: value lines) at the top level, got {type(data).__name__}"
        )
    return data


_FLOAT_TEXT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def check_int(where: str, key: str, value: Any, *, minimum: int | None = None, optional: bool = False) -> None:
    """``value`` must be an integer (not a bool, not a float such as 16.5), at least ``minimum``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"{where}: {key} must be an integer{f' >= {minimum}' if minimum is not None else ''}, "
            f"got {value!r} ({type(value).__name__})"
        )
    if minimum is not None and value < minimum:
        raise ValueError(f"{where}: {key} must be an integer >= {minimum}, got {value!r}")


def check_number(
    where: str,
    key: str,
    value: Any,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    optional: bool = False,
) -> None:
    """``value`` must be a finite number (int or float, not a bool or a string) within the bounds given.

    A string that reads as a number gets a hint: YAML 1.1 (PyYAML) reads ``1e-3``
    (no dot) as a string; ``1.0e-3`` is a number.
    """
    if value is None and optional:
        return
    if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
        raise ValueError(
            f"{where}: {key} must be a number, got the string {value!r}: YAML 1.1 reads a number in "
            f"exponent notation without a dot as a string; write it with a dot, e.g. 1.0e-3 for 1e-3"
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where}: {key} must be a finite number, got {value!r} ({type(value).__name__})")
    bounds = [
        (minimum, value >= minimum if minimum is not None else True, ">="),
        (above, value > above if above is not None else True, ">"),
        (maximum, value <= maximum if maximum is not None else True, "<="),
    ]
    for bound, ok, op in bounds:
        if not ok:
            raise ValueError(f"{where}: {key} must be {op} {bound}, got {value!r}")


def check_text(where: str, key: str, value: Any, *, choices: Collection[str] | None = None) -> None:
    """``value`` must be text, one of ``choices`` when given."""
    if not isinstance(value, str) or (choices is not None and value not in choices):
        extra = f" (one of {list(choices)})" if choices is not None else ""
        raise ValueError(f"{where}: {key} must be text{extra}, got {value!r}")


def cli_int(minimum: int = 0) -> Callable[[str], int]:
    """An argparse ``type`` for integers >= ``minimum`` (e.g. ``--seed``): argparse then reports a
    bad value as one usage error, exit code 2, instead of a traceback later on."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse
