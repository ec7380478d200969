"""The strict parsers of a bundle's bytes: gzip, text, JSON, YAML and CSV, each refusing what is not plain data.

:mod:`benchmark.bundle.intake` opens the files (and sets the limits); these parse what it read, trusting nothing
(the rules of its docstring): gzip is inflated as a stream with a hard cap, never all at once; text is UTF-8 without
control characters; JSON has no duplicate keys, no NaN/Infinity (or numbers overflowing to them), and its nesting
depth is checked on the raw text before the parser sees it; YAML goes through a safe loader with no
aliases/anchors/tags and no duplicate keys, its depth checked on the event stream first; both yield only plain values
(mapping, list, text, number, boolean, null) and text without control characters or unpaired surrogates. Every
problem is one :class:`~benchmark.bundle.intake.BundleError` line naming the file and the rule.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import zlib

from benchmark.bundle.intake import MAX_DEPTH, MAX_UNPACKED_BYTES, BundleError, q

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def gunzip(data: bytes, where: str, cap: int = MAX_UNPACKED_BYTES) -> bytes:
    """Inflate one gzip member as a stream, refusing more than ``cap`` bytes, a truncated stream or trailing data."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = bytearray()
    try:
        out += d.decompress(data, cap + 1)
        while d.unconsumed_tail and len(out) <= cap:
            out += d.decompress(d.unconsumed_tail, cap + 1 - len(out))
    except zlib.error as e:
        raise BundleError(f"{where}: not valid gzip ({e})") from None
    if len(out) > cap:
        raise BundleError(f"{where}: inflates to more than {cap} bytes (limit of a bundle file, uncompressed)")
    if not d.eof:
        raise BundleError(f"{where}: truncated gzip stream")
    if d.unused_data:
        raise BundleError(f"{where}: data after the end of the gzip stream")
    return bytes(out)


def text(data: bytes, where: str) -> str:
    """UTF-8 text without NUL or other control characters (tab, newline and carriage return allowed)."""
    try:
        out = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BundleError(f"{where}: not UTF-8 text (byte {e.start})") from None
    if (m := _CONTROL.search(out)) is not None:
        raise BundleError(f"{where}: control character {ascii(m[0])} at position {m.start()}")
    return out


class _Reject(ValueError):
    pass


def _pairs(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Reject(f"duplicate key {q(k)}")
        out[k] = v
    return out


def _constant(name):
    raise _Reject(f"{name} is not a JSON number")


def _float(s: str) -> float:
    f = float(s)
    if not math.isfinite(f):
        raise _Reject(f"number {s[:40]} overflows to infinity")
    return f


def _int(s: str) -> int:
    if len(s.lstrip("-")) > 20:
        raise _Reject(f"integer of {len(s)} digits")
    return int(s)


_JSON_SPECIAL = re.compile(r'[\[\]{}"\\]')


def json_depth(raw: str, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of JSON text (strings skipped), read in one linear pass; stops once over ``limit``."""
    depth = deepest = 0
    in_string, skip = False, -1
    for m in _JSON_SPECIAL.finditer(raw):
        i, c = m.start(), m[0]
        if i == skip:
            continue
        if in_string:
            if c == "\\":
                skip = i + 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
        elif c in "]}":
            depth -= 1
    return deepest


def plain(obj, where: str, depth: int = 0):
    """Check that ``obj`` holds only plain values (see the module docstring); returns it."""
    if depth > MAX_DEPTH:
        raise BundleError(f"{where}: nested deeper than {MAX_DEPTH}")
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):
                raise BundleError(f"{where}: key {q(k)} is not text")
            _check_text(k, where)
            plain(v, where, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            plain(v, where, depth + 1)
    elif isinstance(obj, str):
        _check_text(obj, where)
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise BundleError(f"{where}: non-finite number {obj}")
    elif obj is not None and not isinstance(obj, (bool, int)):
        raise BundleError(f"{where}: value of type {type(obj).__name__} is not plain data")
    return obj


def _check_text(s: str, where: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise BundleError(f"{where}: text with an unpaired surrogate") from None
    if (m := _CONTROL.search(s)) is not None:
        raise BundleError(f"{where}: text with control character {ascii(m[0])}")


def strict_json(data: bytes, where: str):
    """Parse JSON bytes strictly (see the module docstring)."""
    raw = text(data, where)
    if json_depth(raw) > MAX_DEPTH:
        raise BundleError(f"{where}: JSON nested deeper than {MAX_DEPTH}")
    try:
        obj = json.loads(raw, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except _Reject as e:
        raise BundleError(f"{where}: {e}") from None
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        raise BundleError(f"{where}: not valid JSON ({e})") from None
    return plain(obj, where)


def strict_yaml(data: bytes, where: str):
    """Parse YAML bytes strictly: safe loader, no aliases/anchors/explicit tags, no duplicate keys, bounded depth."""
    import yaml

    raw = text(data, where)
    loader = _strict_loader()
    depth = 0
    try:
        for ev in yaml.parse(raw, Loader=loader):
            if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None) is not None:
                raise BundleError(f"{where}: YAML anchors and aliases are not allowed")
            if getattr(ev, "tag", None) not in (None, "!"):
                raise BundleError(f"{where}: explicit YAML tag {q(ev.tag)} is not allowed")
            if isinstance(ev, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise BundleError(f"{where}: YAML nested deeper than {MAX_DEPTH}")
            elif isinstance(ev, yaml.CollectionEndEvent):
                depth -= 1
        obj = yaml.load(raw, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except _Reject as e:
        raise BundleError(f"{where}: {e}") from None
    except (yaml.YAMLError, RecursionError, ValueError) as e:
        raise BundleError(f"{where}: invalid YAML ({e})") from None
    return plain(obj, where)


_LOADER = None


def _strict_loader():
    global _LOADER
    if _LOADER is None:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        class StrictLoader(base):  # type: ignore[misc, valid-type]
            def construct_mapping(self, node, deep=False):
                seen = set()
                for key_node, _ in node.value:
                    key = self.construct_object(key_node, deep=True)
                    if not isinstance(key, str):
                        raise _Reject(f"mapping key {q(key)} is not text")
                    if key in seen:
                        raise _Reject(f"duplicate key {q(key)}")
                    seen.add(key)
                return super().construct_mapping(node, deep=deep)

        # timestamps stay text (plain data): YAML 1.1's implicit dates would become datetime objects
        StrictLoader.yaml_implicit_resolvers = {
            k: [(tag, regexp) for tag, regexp in v if tag != "tag:yaml.org,2002:timestamp"]
            for k, v in base.yaml_implicit_resolvers.items()
        }
        _LOADER = StrictLoader
    return _LOADER


def read_csv(data: bytes, where: str, columns, *, required=()) -> pd.DataFrame:  # noqa: F821
    """A CSV table of text cells: header of distinct names, all in ``columns``, with every ``required`` one."""
    import pandas as pd

    raw = text(data, where)
    try:
        header = next(csv.reader(io.StringIO(raw[: raw.find("\n") + 1 if "\n" in raw else len(raw)])), [])
    except csv.Error as e:
        raise BundleError(f"{where}: cannot read the CSV header ({e})") from None
    if not header:
        raise BundleError(f"{where}: empty table (no header)")
    if len(header) != len(set(header)):
        dup = sorted({c for c in header if header.count(c) > 1})
        raise BundleError(f"{where}: repeated columns {', '.join(q(c) for c in dup)}")
    unknown = [c for c in header if c not in columns]
    if unknown:
        raise BundleError(f"{where}: unknown columns [{', '.join(q(c) for c in unknown[:5])}]; known: {list(columns)}")
    missing = [c for c in required if c not in header]
    if missing:
        raise BundleError(f"{where}: missing columns {missing}")
    try:
        # parsed from the bytes (checked UTF-8 above): the same table as from the text, without re-encoding it
        df = pd.read_csv(
            io.BytesIO(data), dtype=str, keep_default_na=False, na_values=[""], engine="c", encoding="utf-8"
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise BundleError(f"{where}: cannot read CSV ({e})") from None
    if list(df.columns) != header:
        raise BundleError(f"{where}: the CSV header does not parse to its own columns")
    return df
