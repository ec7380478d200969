"""Typed configuration: one YAML entry (a method's params entry, a zoo entry) parsed field by field into a frozen dataclass.

A wrong type, an unknown or a missing key is one ``ValueError`` naming the file, the entry and the
field (numbers given as strings get YAML 1.1's hint). Field bounds and choices are dataclass field
metadata (:func:`check`). Used by :mod:`benchmark.pipeline.registry` (method configs) and
:mod:`benchmark.zoo` (zoo entries).
"""
from __future__ import annotations

import dataclasses
import types
import typing

from benchmark.yaml_input import check_int, check_number, check_text


def check(*, minimum=None, above=None, choices=None, min_len: int = 0, unique: bool = False, inf: bool = False):
    """Field metadata: bounds of a number (``inf``: infinity allowed), choices of a text, a list's length."""
    return {"minimum": minimum, "above": above, "choices": choices, "min_len": min_len, "unique": unique, "inf": inf}


def _check_value(where: str, key: str, value, typ, meta: dict) -> None:
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        if value is None:
            return
        rest = [a for a in args if a is not type(None)]
        typ = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
        origin, args = typing.get_origin(typ), typing.get_args(typ)
    if typ is int:
        check_int(where, key, value, minimum=meta.get("minimum"))
    elif typ is float:
        if meta.get("inf") and isinstance(value, float) and value == float("inf"):
            return
        check_number(where, key, value, minimum=meta.get("minimum"), above=meta.get("above"))
    elif typ is str:
        check_text(where, key, value, choices=meta.get("choices"))
    elif origin in (list, tuple) or typ in (list, tuple):
        if not isinstance(value, list) or len(value) < meta.get("min_len", 0):
            at_least = f" of at least {meta['min_len']}" if meta.get("min_len") else ""
            raise ValueError(f"{where}: {key} must be a list{at_least}, got {value!r}")
        if meta.get("unique") and len(set(map(str, value))) != len(value):
            raise ValueError(f"{where}: {key} must list distinct values, got {value!r}")
        elem = args[0] if args else None
        for i, v in enumerate(value):
            if elem is not None:
                _check_value(where, f"{key}[{i}]", v, elem, {k: meta.get(k) for k in ("minimum", "above", "choices", "inf")})
    elif typ is typing.Any:
        return
    else:
        raise TypeError(f"{where}: field {key} has a type the config parser does not handle: {typ!r}")


def parse_config(cls, raw, where: str, **given):
    """``raw`` (one params or zoo entry) as the frozen dataclass ``cls``: unknown, missing or mistyped keys are one
    ``ValueError`` naming ``where`` (file and entry) and the field; numbers given as strings get YAML's hint.
    ``given``: fields the caller supplies (a zoo entry's name), not keys of ``raw``."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in given}
    required = {n for n, f in fields.items() if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be a mapping with keys {sorted(required)} (+ optional {sorted(set(fields) - required)})")
    missing, unknown = sorted(required - set(raw)), sorted(set(raw) - set(fields))
    if missing or unknown:
        raise ValueError(f"{where}: missing keys {missing}, unknown keys {unknown}; allowed: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    for name, value in raw.items():
        _check_value(where, name, value, hints[name], dict(fields[name].metadata))
    return cls(**raw, **given)
