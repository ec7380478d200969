"""Whether a run pinned the CPU numerics (:mod:`benchmark.config.numerics`), read from what the run recorded.

The gate (:mod:`benchmark.reproduce.gate`) holds two pinned runs to identical
logits. What a run recorded, first found first used:

* the fresh run: its ``results/timings.json`` (``machine.pinned``, written by
  ``reproduce timings``; only when it is not the committed file itself), else
  its checkpoints' ``train.json`` (``numerics.pinned``: every model pinned), else
  this process's :func:`~benchmark.config.numerics.state`;
* the committed run: its bundle manifest (``numerics.pinned`` or
  ``device.numerics.pinned``), else the committed ``results/timings.json``;
  nothing recorded counts as not pinned.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from benchmark.config import numerics
from benchmark.dvcutil.lockfile import committed_text


def _timings_pinned(text: str):
    try:
        machine = json.loads(text).get("machine") or {}
    except (json.JSONDecodeError, AttributeError):
        return None
    return bool(machine["pinned"]) if isinstance(machine, dict) and "pinned" in machine else None


def fresh_numerics(results, root=".") -> tuple[bool, str]:
    """``(pinned, where it was read)`` of the run whose outputs are in ``results``."""
    results = Path(results)
    t = results / "timings.json"
    if t.is_file():
        text = t.read_text(encoding="utf-8")
        try:
            committed = committed_text(os.path.relpath(t, root).replace(os.sep, "/"), root)
        except FileNotFoundError:
            committed = None
        pinned = _timings_pinned(text)
        if text != committed and pinned is not None:
            return pinned, str(t)
    records = sorted((results / "checkpoints").glob("*/train.json"))
    if records:
        states = []
        for p in records:
            try:
                states.append((json.loads(p.read_text(encoding="utf-8")).get("numerics") or {}).get("pinned"))
            except (json.JSONDecodeError, AttributeError, OSError):
                states.append(None)
        return all(
            s is True for s in states
        ), f"{results / 'checkpoints'}/*/train.json ({sum(s is True for s in states)} of {len(states)} pinned)"

    return bool(numerics.state()["pinned"]), "this process; the run recorded nothing"


def committed_numerics(manifest: dict, root=".") -> tuple[bool, str]:
    """``(pinned, where it was read)`` of the run that made the committed bundle (``manifest``)."""
    for where, rec in (
        ("bundle manifest 'numerics'", manifest.get("numerics")),
        ("bundle manifest 'device.numerics'", (manifest.get("device") or {}).get("numerics")),
    ):
        if isinstance(rec, dict) and "pinned" in rec:
            return bool(rec["pinned"]), where
    try:
        pinned = _timings_pinned(committed_text("results/timings.json", root))
    except FileNotFoundError:
        pinned = None
    if pinned is not None:
        return pinned, "HEAD:results/timings.json"
    return False, "nothing recorded: treated as not pinned"


def _timings_kind(rec) -> str | None:
    """The ``machine.cpu_kind`` of a timing record (a dict), None when it has none."""
    machine = rec.get("machine") if isinstance(rec, dict) else None
    kind = machine.get("cpu_kind") if isinstance(machine, dict) else None
    return kind if isinstance(kind, str) and kind else None


def cpu_kinds(results, root=".") -> tuple[tuple[str, str], tuple[str, str]]:
    """``((kind, where read), (kind, where read))`` of the fresh run and of the committed one: their CPU kinds
    (:func:`benchmark.config.numerics.cpu`, e.g. ``GenuineIntel-f6-m167``). The fresh run's is its
    ``results/timings.json``'s when that is not the committed file, else this process's CPU; the committed run's is
    ``HEAD:results/timings.json``'s (the bundle manifest does not record one), ``?`` when nothing says."""
    try:
        committed = committed_text("results/timings.json", root)
    except FileNotFoundError:
        committed = None
    fresh = _timings_kind(fresh_timings(results, root))
    try:
        ref = _timings_kind(json.loads(committed or ""))
    except json.JSONDecodeError:
        ref = None
    return (
        (fresh, str(Path(results) / "timings.json")) if fresh else (numerics.cpu()["kind"], "this process"),
        (ref, "HEAD:results/timings.json") if ref else ("?", "nothing recorded"),
    )


def fresh_timings(results, root=".") -> dict | None:
    """The fresh run's own timing record (its ``results/timings.json``, written by ``reproduce timings``), None when
    it has none or it is the committed file (a checkout's, not this run's)."""
    t = Path(results) / "timings.json"
    if not t.is_file():
        return None
    text = t.read_text(encoding="utf-8")
    try:
        if text == committed_text(os.path.relpath(t, root).replace(os.sep, "/"), root):
            return None
    except FileNotFoundError:
        pass
    try:
        rec = json.loads(text)
    except json.JSONDecodeError:
        return None
    return rec if isinstance(rec, dict) else None


def vendor(kind: str) -> str:
    """The vendor part of a CPU kind (``GenuineIntel-f6-m167`` -> ``GenuineIntel``; an emulated ``QEMU-...`` kind is
    not one: see :mod:`benchmark.reproduce.fingerprint_records`)."""
    return kind.split("-", 1)[0]
