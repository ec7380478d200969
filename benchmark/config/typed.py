"""Typed configuration: one YAML block (params.yaml and its blocks, a recipe, a method's params entry, a zoo entry,
a suite file) parsed field by field into a frozen dataclass: the one set of helpers every config goes through.

A wrong type, an unknown or a missing key is one ``ValueError`` naming the file, the entry and the field (numbers
given as strings get YAML 1.1's hint). Field bounds and choices are dataclass field metadata (:func:`check`). A field
whose type is itself such a dataclass (or ``dict[str, <dataclass>]``) is parsed the same way, its errors naming the
nested path. Checks across fields (ranges that depend on another field) go in the dataclass's ``validate(self)`` hook,
which :func:`parse_config` calls after the field checks; a ``ValueError`` it raises is prefixed with the file and
entry. Used by the methods (:mod:`benchmark.methods.registry`: their params entries), :mod:`benchmark.models.zoo` (zoo
entries), :mod:`benchmark.models.train` (recipes), :mod:`benchmark.stages.params_config` (params.yaml) and
:mod:`benchmark.data.paper.suites` (suite files).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, TypeVar

from benchmark.config.yaml_input import check_int, check_number, check_text

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")  # the dataclass a params block is parsed into


def check(
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    choices: Collection[str] | None = None,
    min_len: int = 0,
    unique: bool = False,
    inf: bool = False,
) -> dict[str, Any]:
    """Field metadata: bounds of a number (``inf``: infinity allowed), choices of a text, a list's length."""
    return {
        "minimum": minimum,
        "above": above,
        "maximum": maximum,
        "choices": choices,
        "min_len": min_len,
        "unique": unique,
        "inf": inf,
    }


def derived() -> dict[str, Any]:
    """Field metadata: not a key of the block, set by the code that uses the config (``dataclasses.replace``)."""
    return {"derived": True}


def _check_value(where: str, key: str, value: Any, typ: Any, meta: dict) -> Any:
    """``value`` checked against ``typ``; returns the value to store (nested dataclasses parsed, lists as tuples
    where the field is a tuple)."""
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        if value is None:
            return None
        rest = [a for a in args if a is not type(None)]
        typ = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007 (built at run time, not written)
        origin, args = typing.get_origin(typ), typing.get_args(typ)
    if typ is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: {key} must be true or false, got {value!r} ({type(value).__name__})")
    elif typ is int:
        check_int(where, key, value, minimum=meta.get("minimum"))
        if meta.get("maximum") is not None and value > meta["maximum"]:
            raise ValueError(f"{where}: {key} must be an integer <= {meta['maximum']}, got {value!r}")
    elif typ is float:
        if meta.get("inf") and isinstance(value, float) and value == float("inf"):
            return value
        check_number(
            where, key, value, minimum=meta.get("minimum"), above=meta.get("above"), maximum=meta.get("maximum")
        )
    elif typ is str:
        check_text(where, key, value, choices=meta.get("choices"))
    elif origin in (list, tuple) or typ in (list, tuple):
        if not isinstance(value, (list, tuple)) or len(value) < meta.get("min_len", 0):
            at_least = f" of at least {meta['min_len']}" if meta.get("min_len") else ""
            raise ValueError(f"{where}: {key} must be a list{at_least}, got {value!r}")
        if meta.get("unique") and len(set(map(str, value))) != len(value):
            raise ValueError(f"{where}: {key} must list distinct values, got {value!r}")
        elem = args[0] if args else None
        if elem is not None:
            inner = {k: meta.get(k) for k in ("minimum", "above", "maximum", "choices", "inf")}
            value = [_check_value(where, f"{key}[{i}]", v, elem, inner) for i, v in enumerate(value)]
        return tuple(value) if (origin is tuple or typ is tuple) else list(value)
    elif origin is dict or typ is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: {key} must be a mapping, got {value!r} ({type(value).__name__})")
        if len(value) < meta.get("min_len", 0):
            raise ValueError(f"{where}: {key} must have at least {meta['min_len']} entries, got {value!r}")
        elem = args[1] if len(args) == 2 else None
        if elem is None or elem is typing.Any:
            return value
        out = {}
        for name, v in value.items():
            if not isinstance(name, str):
                raise ValueError(f"{where}: {key} has a key {name!r} that is not text")
            out[name] = _check_value(where, f"{key}.{name}", v, elem, {})
        return out
    elif isinstance(typ, type) and dataclasses.is_dataclass(typ):
        return parse_config(typ, value, f"{where}: {key}")
    elif typ is typing.Any:
        return value
    else:
        raise TypeError(f"{where}: field {key} has a type the config parser does not handle: {typ!r}")
    return value


def parse_config(cls: type[T], raw: Any, where: str, **given: Any) -> T:
    """``raw`` (one params block or entry, a zoo entry, a suite file) as the frozen dataclass ``cls``: unknown,
    missing or mistyped keys are one ``ValueError`` naming ``where`` (file and entry) and the field; numbers given
    as strings get YAML's hint. ``given``: fields the caller supplies (a zoo entry's name), not keys of ``raw``.
    Then ``cls.validate(obj)`` (if defined): the checks across fields, its ``ValueError`` prefixed with ``where``."""
    fields = {
        f.name: f for f in dataclasses.fields(cls) if f.name not in given and f.init and not f.metadata.get("derived")
    }
    required = {
        n for n, f in fields.items() if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    if not isinstance(raw, dict):
        raise ValueError(
            f"{where}: must be a mapping with keys {sorted(required)} (+ optional {sorted(set(fields) - required)}), "
            f"got {raw!r}"
        )
    missing, unknown = sorted(required - set(raw)), sorted(set(raw) - set(fields))
    if missing or unknown:
        raise ValueError(f"{where}: missing keys {missing}, unknown keys {unknown}; allowed: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    values = {
        name: _check_value(where, name, value, hints[name], dict(fields[name].metadata)) for name, value in raw.items()
    }
    try:
        obj = cls(**values, **given)
        if hasattr(obj, "validate"):
            obj.validate()
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return obj
