"""Atomic writes of files and folders, and the rules for what a kill can leave behind.

Every write goes to a hidden temporary name next to its target and is renamed
into place, so a reader sees the old complete file (or folder) or the new one.
A kill in the middle leaves hidden leftovers (``.name.xxxxxxxx``, ``.name.old-<pid>``):
readers that list folders skip hidden names (:func:`listing`), and the next write
of the same target removes them (:func:`clean_leftovers`). Re-exported by
:mod:`benchmark.storage.store`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TypeAlias

PathLike: TypeAlias = "str | os.PathLike[str]"  # a path as the storage functions take it


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_KILL_COUNT = 0


def write_boundary(what: str) -> None:
    """A point where a kill must leave the outputs resumable (after a write, inside a folder swap).

    Test hook only: with ``UQBENCH_TEST_KILL_AT=N`` in the environment, the process
    SIGKILLs itself at its N-th boundary (nothing runs after it: no ``finally``,
    no clean-up); ``UQBENCH_TEST_BOUNDARY_LOG=<file>`` appends one line per boundary.
    """
    global _KILL_COUNT
    log, at = os.environ.get("UQBENCH_TEST_BOUNDARY_LOG"), os.environ.get("UQBENCH_TEST_KILL_AT")
    if log is None and at is None:
        return
    _KILL_COUNT += 1
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{_KILL_COUNT} {what}\n")
    if at is not None and _KILL_COUNT == int(at):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def is_leftover(name: str) -> bool:
    """Hidden names (``.x``): temporary files and folders of an atomic write, or what a kill left of one.

    Every reader that lists a folder for results skips them (see :func:`listing`).
    """
    return name.startswith(".")


def listing(folder: PathLike, pattern: str = "*") -> list[Path]:
    """``sorted(folder.glob(pattern))`` without hidden names in any part below ``folder``
    (pathlib's glob matches dot files and folders, e.g. the leftovers of a killed atomic write)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(pattern) if not any(is_leftover(part) for part in p.relative_to(folder).parts))


_RANDOM = "[a-z0-9_]{8}"  # the random part of tempfile's names


def clean_leftovers(path: PathLike) -> list[Path]:
    """Remove what interrupted atomic writes of ``path`` left next to it (``.name.xxxxxxxx<suffix>``
    temporary files or folders, ``.name.old-<pid>`` folders); the paths removed.

    Called when a new write of ``path`` starts: a target has one writer at a time
    (DVC locks the pipeline; of several ranks only rank 0 writes).
    """
    import re
    import shutil

    path = Path(path)
    if not path.parent.is_dir():
        return []
    prefix = f".{path.name}."
    pattern = re.compile(rf"^{re.escape(prefix)}({_RANDOM}.*|old-\d+)$")
    removed = []
    names = [n for n in os.listdir(path.parent) if n.startswith(prefix)]  # cheap: a folder may hold thousands of files
    for p in (path.parent / n for n in names):
        if pattern.match(p.name):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            removed.append(p)
    return removed


@contextlib.contextmanager
def atomic_path(path: PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    On any exception the temporary file is removed and ``path`` is untouched;
    leftovers of an earlier, killed write of ``path`` are removed first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(path)
    tmp = None  # made inside the try: a Ctrl-C right after mkstemp still removes the file
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or path.suffix or ".tmp", dir=path.parent)
        os.close(fd)
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 (and writers may recreate the file): the usual modes
        write_boundary(f"written {tmp}")
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    write_boundary(f"replaced {path}")


def write_text(path: PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def atomic_dir(path: PathLike) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; on success it replaces ``path`` whole.

    A reader therefore sees either the old complete folder or the new complete
    one, never a mix; on any exception the temporary folder is removed. A kill
    can leave hidden leftovers (the temporary folder, or ``.name.old-<pid>``
    between the two renames): readers skip them (:func:`listing`) and the next
    write of ``path`` removes them.
    """
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(path)
    tmp = None  # made inside the try: a Ctrl-C right after mkdtemp (or in the chmod) still removes the folder
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        write_boundary(f"written {tmp}")
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, old)
            write_boundary(f"moved away {path}")
        os.replace(tmp, path)
        write_boundary(f"replaced {path}")
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
