"""Reading a result bundle's files, trusting nothing: the one module that opens them (its parsers:
:mod:`benchmark.bundle.strict`).

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

import hashlib
import os
import re
import stat
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
