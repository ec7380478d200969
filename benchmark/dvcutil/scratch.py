"""Scratch copies of a checkout: rerun DVC stages in a copy without touching the checkout's outputs.

:func:`make_copy` copies every file git tracks or would track (not ignored) into a scratch folder, the pipeline
files of the chosen stages (:class:`Target`) and hard links to the upstream outputs those stages read
(:func:`checked_inputs`: the deps of the chosen stages that other stages of their ``dvc.lock`` produce, e.g.
``results/data`` or the checkpoint a ``logits@`` stage reads, checked to be present first). A stage then runs there
with ``dvc repro -s -f`` under other settings: another learning rate (:mod:`benchmark.models.tune`), other
numerics (:mod:`benchmark.reproduce.pinning_cost`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from benchmark.dvcutil import lockfile


class ScratchError(ValueError):
    """A scratch run cannot start; the message names the file and the fix."""


@dataclass(frozen=True)
class Target:
    """A stage of a DVC file: ``dvcfile`` relative to the root (``dvc.yaml`` or ``suites/<s>/dvc.yaml``)."""

    dvcfile: str
    stage: str

    @classmethod
    def parse(cls, text: str) -> Target:
        """``[DVCFILE:]STAGE`` as a target (``dvc.yaml`` when no file is named)."""
        path, sep, stage = text.rpartition(":")
        return cls(path if sep else "dvc.yaml", stage)

    @property
    def folder(self) -> PurePosixPath:
        """The folder of the target's DVC file."""
        return PurePosixPath(self.dvcfile).parent

    @property
    def lock(self) -> str:
        """The target's ``dvc.lock``, relative to the root."""
        return str(self.folder / "dvc.lock")

    def __str__(self) -> str:
        return self.stage if self.dvcfile == "dvc.yaml" else f"{self.dvcfile}:{self.stage}"


def _listed(root: Path) -> list[str]:
    proc = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ScratchError(f"{root}: not a git checkout ({proc.stderr.strip()})")
    return [p for p in proc.stdout.split("\0") if p]


def _link_tree(src: Path, dst: Path) -> None:
    """Hard-link ``src`` (a file or a folder tree) to ``dst``; copy where a link is impossible (another file system)."""
    files = [src] if src.is_file() else [p for p in src.rglob("*") if p.is_file()]
    for f in files:
        to = dst if f == src else dst / f.relative_to(src)
        if to.exists():  # linked already (a dep inside an output folder that is a dep too)
            continue
        to.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(f, to)
        except OSError:
            shutil.copy2(f, to)


def upstream(locks: dict[str, dict], targets: list[Target]) -> list[str]:
    """Deps of ``targets`` (paths relative to the root) that other stages of their locks produce: an output, or a
    file inside an output folder (``results/data/train.npz`` of ``results/data``)."""
    chosen = {(t.lock, t.stage) for t in targets}
    out = []
    for t in targets:
        lock = locks[t.lock]
        made = [p for s, rec in lock.items() if (t.lock, s) not in chosen for p in rec["outs"]]
        for dep in lock[t.stage]["deps"]:
            if any(dep == p or dep.startswith(p.rstrip("/") + "/") for p in made):
                out.append(str(t.folder / dep))
    return list(dict.fromkeys(out))


def checked_inputs(root: Path, targets: list[Target]) -> tuple[dict[str, dict], list[str]]:
    """The locks of ``targets`` and the upstream outputs they read (:func:`upstream`), after checking that each lock
    exists, names its stage, and that those outputs are present (one :class:`ScratchError` naming what is not)."""
    locks = {}
    for t in targets:
        if t.lock not in locks:
            try:
                locks[t.lock] = lockfile.read(root / t.lock)
            except FileNotFoundError:
                raise ScratchError(f"{root / t.lock}: not found; run the pipeline first (dvc repro)") from None
        if t.stage not in locks[t.lock]:
            raise ScratchError(
                f"{root / t.lock}: no stage {t.stage!r} (stages: {', '.join(sorted(locks[t.lock])[:12])}, ...)"
            )
    links = upstream(locks, targets)
    missing = [p for p in links if not (root / p).exists()]
    if missing:
        raise ScratchError(
            f"{root}: inputs {missing} of {', '.join(map(str, targets))} are missing; run `dvc repro` first"
        )
    return locks, links


def make_copy(root: Path, dest: Path, targets: list[Target], links: list[str]) -> None:
    """Copy into ``dest`` every file git tracks or would track under ``root``, the pipeline files of ``targets`` and
    hard links to the upstream outputs ``links`` (:func:`checked_inputs`); then make ``dest`` a git repository of its
    own."""
    for rel in _listed(root):
        src = root / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for t in targets:  # a suite's materialised pipeline files, whatever git thinks of them
        for rel in (t.dvcfile, t.lock, str(t.folder / "params.yaml")):
            if (root / rel).is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, dest / rel)
    for rel in links:
        _link_tree(root / rel, dest / rel)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)


def copy_checkout(root: Path, dvcfile: str, dest: Path) -> None:
    """``root``'s files (:func:`make_copy`) and the pipeline's own files, its ``dvc.lock``
    included: no output and no DVC cache come along, so every stage runs, and the lock's entries keep the order the
    serial run kept them in (``dvc repro`` leaves an existing entry where it is)."""
    make_copy(root, dest, [], [])
    folder = Path(dvcfile).parent
    for name in ("dvc.yaml", "params.yaml", "dvc.lock"):  # a suite's materialised pipeline, whatever git thinks of it
        if (root / folder / name).is_file():
            (dest / folder).mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / folder / name, dest / folder / name)
