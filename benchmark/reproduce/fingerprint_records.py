"""Kernel fingerprint records (``results/fingerprints/<kind>.json``) and the rules that judge a fingerprint by them.

A record is of one CPU kind: a real one (``machine.kind``: vendor, family and model, e.g. ``GenuineIntel-f6-m167``)
or an emulated one (``machine.kind`` ``QEMU-<model>``, ``machine.emulated`` true, ``machine.stands_for`` the kind the
emulated CPU reports, e.g. ``GenuineIntel-f6-m134``; made by :mod:`benchmark.reproduce.emulate`). A record's
*vendor* is that of the kind it is or stands for.

:func:`compare` judges a fingerprint against each record:

* a record of the **same kind** must agree on every shared operation (a torch upgrade or a changed kernel route
  shows here);
* an **emulated record and a real record of one vendor** must agree on every shared operation on which the real
  records of that vendor agree: the emulation earns its trust by giving what the real CPU gives (a QEMU or torch
  change that breaks the stand-in fails, naming the operation);
* a record of **another kind** must agree on every operation that records of two vendors already agree on
  (:func:`evidence`: the bytes are known to hold across vendors there); other differences are reported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

RECORDS = Path("results") / "fingerprints"


def tag(threads: int, onednn: bool = True) -> str:
    """The mode an operation ran in, the prefix of its key: ``threads=T,onednn=on|off``."""
    return f"threads={threads},onednn={'on' if onednn else 'off'}"


def vendor(record: dict) -> str:
    """The CPU vendor a record is of (``GenuineIntel``, ``AuthenticAMD``): its kind's, or for an emulated record the
    kind it stands for."""
    m = record["machine"]
    return (m.get("stands_for") or m["kind"]).split("-")[0]


def emulated(record: dict) -> bool:
    """Whether a record was made under an emulated CPU."""
    return bool(record["machine"].get("emulated"))


def evidence(records: list[dict]) -> set[str]:
    """Operations on which records of two CPU vendors agree (and no record disagrees): the bytes are known to hold
    across vendors there. Two kinds of one vendor agreeing (two AMD EPYC generations) is no evidence for the other
    vendor: an operation only they hold is reported on the other vendor's machine, not failed."""
    seen: dict[str, dict[str, str]] = {}  # key -> {kind: hash}
    vendors = {r["machine"]["kind"]: vendor(r) for r in records}
    for r in records:
        for k, v in r["hashes"].items():
            seen.setdefault(k, {})[r["machine"]["kind"]] = v
    return {k for k, by in seen.items() if len({vendors[kind] for kind in by}) >= 2 and len(set(by.values())) == 1}


def _real_disagreement(records: list[dict], of_vendor: str) -> set[str]:
    """Operations on which two real records of ``of_vendor`` disagree (no stand-in can equal both)."""
    seen: dict[str, set[str]] = {}
    for r in records:
        if not emulated(r) and vendor(r) == of_vendor:
            for k, v in r["hashes"].items():
                seen.setdefault(k, set()).add(v)
    return {k for k, values in seen.items() if len(values) > 1}


def compare(mine: dict, records: list[dict]) -> list[dict]:
    """One verdict per record: ``kind``, ``cpu``, ``same_kind``, ``stand_in`` (one of the two is an emulation of the
    other's vendor), ``torch`` (the record's), ``shared``, ``equal``, ``differ`` (the keys, in this machine's order),
    ``failing`` (those that must agree: see the module docstring)."""
    agreed = evidence(records)
    out = []
    for r in records:
        same = r["machine"]["kind"] == mine["machine"]["kind"]
        stand_in = not same and emulated(r) != emulated(mine) and vendor(r) == vendor(mine)
        shared = [k for k in mine["hashes"] if k in r["hashes"]]
        differ = [k for k in shared if mine["hashes"][k] != r["hashes"][k]]
        if same:
            failing = differ
        elif stand_in:
            parted = _real_disagreement(records, vendor(r))
            failing = [k for k in differ if k not in parted]
        else:
            failing = [k for k in differ if k in agreed]
        out.append(
            {
                "kind": r["machine"]["kind"],
                "cpu": r["machine"].get("cpu", ""),
                "same_kind": same,
                "stand_in": stand_in,
                "torch": r.get("torch"),
                "shared": len(shared),
                "equal": len(shared) - len(differ),
                "differ": differ,
                "failing": failing,
            }
        )
    return out


def settle(first: dict, again: dict) -> tuple[dict, list[str]]:
    """Record ``first`` with the hashes of every operation that ``again`` (a second run of some of its parts) measured
    taken from ``again``, and the keys whose bytes changed between the two runs, in ``first``'s order. A kernel gives
    the same bytes every run, so a key that changed was a transient fault of what ran it (an emulator), not a route;
    one that did not change stands as measured."""
    changed = [k for k in first["hashes"] if k in again["hashes"] and again["hashes"][k] != first["hashes"][k]]
    return {**first, "hashes": {**first["hashes"], **again["hashes"]}}, changed


# the key of one of the pipeline's own operations (benchmark.reproduce.fingerprint.pipeline):
# "<mode>/pipeline <arch> <px>px [<settings hash>]: <what>"
_PIPELINE = re.compile(r"/pipeline (\S+ \d+px \[[0-9a-f]{8}\]: .+)$")


def pipeline_op(key: str) -> str | None:
    """``<architecture> <px>px [<settings>]: <what>`` when ``key`` is one of the pipeline's own per-layer operations
    (not the shared tool's random-weight models), else None."""
    m = _PIPELINE.search(key)
    return m.group(1) if m else None


def first_layer(keys: list[str]) -> str | None:
    """The first pipeline operation among ``keys`` (in the order the pipeline computed them: layer by layer), as
    ``<architecture> <px>px [<settings>]: <what> <layer>``; None when no pipeline operation is among them."""
    return next((op for op in map(pipeline_op, keys) if op), None)


def read_record(path) -> dict:
    """A fingerprint record (JSON: ``machine.kind``, ``torch``, ``hashes``); ``ValueError`` naming the file and what
    is wrong."""
    path = Path(path)
    try:
        r = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a readable JSON fingerprint record ({e})") from None
    ok = (
        isinstance(r, dict)
        and isinstance(r.get("machine"), dict)
        and isinstance(r["machine"].get("kind"), str)
        and isinstance(r.get("hashes"), dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in r["hashes"].items())
    )
    if not ok:
        raise ValueError(
            f"{path}: a fingerprint record needs machine.kind (a string) and hashes (names to hash strings)"
        )
    stands_for = r["machine"].get("stands_for")
    if r["machine"].get("emulated") and not (isinstance(stands_for, str) and stands_for.count("-") >= 2):
        raise ValueError(
            f"{path}: an emulated record needs machine.stands_for, the CPU kind it emulates "
            "(<vendor>-f<family>-m<model>)"
        )
    return r


def read_records(folder=RECORDS) -> list[dict]:
    """Every ``*.json`` record of ``folder`` (sorted by name), each with its ``path``."""
    return [dict(read_record(p), path=str(p)) for p in sorted(Path(folder).glob("*.json"))]


def record_name(record: dict) -> str:
    """The file name of a record: its CPU kind, made safe for a path."""
    kind = "".join(c if c.isalnum() or c in "-_." else "-" for c in record["machine"]["kind"])
    return f"{kind}.json"
