"""Reading a result bundle's files, trusting nothing: the one module that opens them.

A bundle comes from a pull request, so every byte of it may be hostile. Rules, each one
general (a class of attack, not an example):

* **Only regular files directly inside a real folder.** The bundle folder must not be a
  symbolic link; each entry is examined with ``lstat`` (links are never followed), must be a
  regular file with one hard link, and is opened relative to the folder's descriptor with
  ``O_NOFOLLOW | O_NONBLOCK`` and checked again with ``fstat`` on the open descriptor (no
  symlink, FIFO, device, socket or folder can be read, even if swapped in meanwhile).
* **Known roles only, with fixed names.** A bundle holds ``manifest.json`` and the files its
  manifest lists under a known role (:func:`role_names`); any other file is refused.
* **Sizes capped before and while reading.** At most :data:`MAX_FILE_BYTES` on disk; gzip is
  inflated as a stream with a hard cap (:data:`MAX_UNPACKED_BYTES`), never all at once.
* **Hash before parse.** A listed file's size and sha256 must be the manifest's before it is parsed.
* **Strict parsers.** JSON: no duplicate keys, no NaN/Infinity (or numbers overflowing to them),
  nesting depth checked on the raw text before the parser sees it; YAML: size cap, safe loader, no
  aliases/anchors/tags, no duplicate keys, depth checked on the event stream first; both: only plain
  values (mapping, list, text, number, boolean, null) and text without control characters or
  unpaired surrogates.

Every problem is one :class:`BundleError` line naming the bundle's file and the rule.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import stat
import zlib
from pathlib import Path

from benchmark.storage.store import StoreError

MANIFEST = "manifest.json"
MAX_FILE_BYTES = 1_000_000  # every file of a bundle, as stored (compressed)
MAX_UNPACKED_BYTES = 20_000_000  # a gzipped file, inflated
MAX_TOTAL_UNPACKED = 256_000_000  # all tables of a bundle, inflated
MAX_DEPTH = 32  # nesting of JSON/YAML containers
MAX_PARTS = 99  # parts of one table: <stem>.csv[.gz], <stem>-001.csv.gz ... <stem>-099.csv.gz
TABLES = ("rows", "paired")
_PART = re.compile(r"^(rows|paired)-(\d{3})$")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FD = os.open in os.supports_dir_fd and bool(_NOFOLLOW)


class BundleError(StoreError):
    """A malformed or hostile bundle; the message (one line) names the file and the rule."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))  # one line, whatever the parsers said


def show(text) -> str:
    """``text`` (e.g. a path) for a one-line message: as is when printable, else escaped (newlines, control
    characters)."""
    text = str(text)
    return text if text.isprintable() else ascii(text)


def q(value) -> str:
    """A value for a one-line message, quoted: ``repr`` (``ascii`` when it holds characters that are not printable)."""
    return repr(value) if not isinstance(value, str) or value.isprintable() else ascii(value)


def role_names(role: str) -> tuple[str, ...]:
    """The file names a manifest role may have; :class:`BundleError` for an unknown role."""
    if role in TABLES:
        return f"{role}.csv", f"{role}.csv.gz"
    m = _PART.fullmatch(role) if isinstance(role, str) else None
    if m and 1 <= int(m[2]) <= MAX_PARTS:
        return (f"{role}.csv.gz",)
    if role == "models":
        return ("models.csv",)
    if role == "lock":
        return ("dvc.lock",)
    raise BundleError(
        f"unknown file role {q(role)}; known: rows, rows-001..rows-{MAX_PARTS:03d}, paired, paired-001.., models, lock"
    )


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


class Folder:
    """A bundle folder opened for reading (a context manager): a real folder, listed once, whose files are
    read through :meth:`read` only."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            st = os.lstat(self.path)
        except OSError as e:
            raise BundleError(f"{show(self.path)}: not a bundle folder ({e.strerror})") from None
        if not stat.S_ISDIR(st.st_mode):
            raise BundleError(f"{show(self.path)}: is {_kind(st.st_mode)}; a bundle must be a real folder")
        self._fd = None
        if _DIR_FD:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
            except OSError as e:
                raise BundleError(f"{show(self.path)}: cannot open the bundle folder ({e.strerror})") from None
            fst = os.fstat(self._fd)
            if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                self.close()
                raise BundleError(f"{show(self.path)}: the folder changed while it was opened")
        with os.scandir(self._fd if self._fd is not None else self.path) as it:
            self.entries = {e.name: e.stat(follow_symlinks=False) for e in it}

    def close(self) -> None:
        """Close the folder's descriptor (once; later calls do nothing)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def where(self, name: str) -> str:
        """File ``name`` of the folder, as a message shows it."""
        return show(self.path / name)

    def check_entries(self, allowed: set[str]) -> None:
        """Every entry is a regular file among ``allowed`` (manifest.json and the manifest's files), and every
        allowed name is there."""
        for name in sorted(self.entries):
            if name not in allowed:
                hint = (
                    " (a verification record never travels in a bundle: the badge comes from a verification "
                    "this project runs, `verify --record-to`)"
                    if name == "verification.json"
                    else ""
                )
                raise BundleError(
                    f"{self.where(name)}: unknown file; a bundle holds only {MANIFEST} and the files its "
                    f"manifest lists under a known role{hint}"
                )
            self._regular(name, self.entries[name])
        for name in sorted(allowed - set(self.entries)):
            raise BundleError(f"{self.where(name)}: missing (listed in the manifest)")

    def _regular(self, name: str, st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            raise BundleError(f"{self.where(name)}: is {_kind(st.st_mode)}; a bundle holds regular files only")
        if st.st_nlink != 1:
            raise BundleError(f"{self.where(name)}: has {st.st_nlink} hard links; a bundle file must have exactly one")
        if st.st_size > MAX_FILE_BYTES:
            raise BundleError(f"{self.where(name)}: {st.st_size} bytes; every bundle file stays under {MAX_FILE_BYTES}")

    def read(self, name: str, *, cap: int = MAX_FILE_BYTES) -> bytes:
        """The bytes of the regular file ``name`` directly inside the folder (at most ``cap``)."""
        if name not in self.entries or "/" in name or name in (".", ".."):
            raise BundleError(f"{self.where(name)}: missing")
        self._regular(name, self.entries[name])  # as listed (lstat), then again on the open descriptor
        flags = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(name, flags, dir_fd=self._fd) if self._fd is not None else os.open(self.path / name, flags)
        except OSError as e:
            raise BundleError(f"{self.where(name)}: cannot be opened as a regular file ({e.strerror})") from None
        try:
            st = os.fstat(fd)
            self._regular(name, st)
            if st.st_size > cap:
                raise BundleError(f"{self.where(name)}: {st.st_size} bytes, over the limit of {cap}")
            chunks, total = [], 0
            while total <= cap and (chunk := os.read(fd, min(1 << 20, cap + 1 - total))):
                chunks.append(chunk)
                total += len(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        if len(data) != st.st_size:
            raise BundleError(f"{self.where(name)}: changed while it was read")
        return data

    def read_listed(self, name: str, sha256: str, size: int) -> bytes:
        """A file the manifest lists: its size and sha256 are checked before anything parses it."""
        data = self.read(name)
        if len(data) != size:
            raise BundleError(f"{self.where(name)}: {len(data)} bytes, the manifest says {size}; the file was edited")
        if hashlib.sha256(data).hexdigest() != sha256:
            raise BundleError(
                f"{self.where(name)}: content differs from its sha256 in the manifest; the file was edited"
            )
        return data


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
