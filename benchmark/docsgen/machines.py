"""What the generated docs call a machine, and the main job's target on it: a record's CPU named by its model, its
microarchitecture (AMD's family and model ranges) and its kind (``2 CPUs, AMD EPYC (Zen 3, AuthenticAMD-f25-m1)``),
and the target the issues set per CPU family (:func:`target`). Used by :mod:`benchmark.docsgen.facts` and
:mod:`benchmark.docsgen.readme`."""

from __future__ import annotations

import re

TARGET_S = 600  # the main job, clone to leaderboard, on 2 cores: the README's promise on any machine
FAMILY_TARGETS = {("AuthenticAMD", 26): 300, ("AuthenticAMD", 25): 480}
"""(vendor, CPU family) -> the main job's target there, in seconds (issue 56: 5 minutes on a Zen 5, family 26; 8 on
family 25, Zen 3 and Zen 4); other machines: :data:`TARGET_S`."""
ZEN = {
    23: ((0x00, 0x2F, "Zen"), (0x30, 0xFF, "Zen 2")),
    25: ((0x00, 0x0F, "Zen 3"), (0x10, 0x1F, "Zen 4"), (0x20, 0x5F, "Zen 3"), (0x60, 0xAF, "Zen 4")),
    26: ((0x00, 0xFF, "Zen 5"),),
}
"""AMD's model ranges per family and their microarchitecture (AMD's and Linux's CPU tables: family 25 model 1 is
Milan, a Zen 3; model 17 (0x11) Genoa, a Zen 4)."""
KIND = re.compile(r"^(?P<vendor>\w+)-f(?P<family>\d+)-m(?P<model>\d+)$")  # benchmark.config.numerics.cpu()'s kind


def microarchitecture(kind: str | None) -> str:
    """The microarchitecture of a CPU kind (``AuthenticAMD-f25-m1`` -> ``Zen 3``, ``-f25-m17`` -> ``Zen 4``); ``''``
    when the kind is not an AMD family and model this table knows."""
    m = KIND.match(kind or "")
    if not m or m["vendor"] != "AuthenticAMD":
        return ""
    model = int(m["model"])
    return next((name for lo, hi, name in ZEN.get(int(m["family"]), ()) if lo <= model <= hi), "")


def target(machine: dict | None) -> tuple[int, str]:
    """(seconds, the machines the target is for) of the main job's target on ``machine`` (a record's, with its
    ``cpu_kind``): ``(480, 'a family-25 AMD')`` on a Zen 3 or Zen 4, ``(300, 'a family-26 AMD')`` on a Zen 5,
    :data:`TARGET_S` and ``''`` elsewhere."""
    m = KIND.match((machine or {}).get("cpu_kind") or "")
    key = (m["vendor"], int(m["family"])) if m else None
    if key not in FAMILY_TARGETS:
        return TARGET_S, ""
    return FAMILY_TARGETS[key], f"a family-{key[1]} AMD"


def cpu_line(m: dict | None) -> str:
    """``2 CPUs, AMD EPYC``: a record's core count and CPU model, ``?`` for what it does not say."""
    m = m or {}
    return f"{m.get('cpus', '?')} CPUs, {m.get('cpu', '?')}"


def where(m: dict) -> str:
    """The machine of a record (its ``cpu_kind``, or ``kind`` as CI's record names it): ``2 CPUs, AMD EPYC (Zen 3,
    AuthenticAMD-f25-m1)``."""
    kind = m.get("cpu_kind") or m.get("kind")
    arch = microarchitecture(kind)
    return cpu_line(m) + (f" ({arch + ', ' if arch else ''}{kind})" if kind else "")


def cpu_name(cpu: str) -> str:
    """A CPU's model name without trademark signs and a trailing "Processor": ``Intel(R) Xeon(R) Processor`` ->
    ``Intel Xeon``."""
    return re.sub(r"\s+(Processor|CPU)$", "", re.sub(r"\((R|TM)\)", "", cpu)).strip() or cpu
