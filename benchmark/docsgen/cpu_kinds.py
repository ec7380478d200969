"""The CPU kinds this project was checked on, real and emulated: the reproducibility page's table and the README's
line on the emulated kinds, generated from the records (never typed).

Sources: the kernel fingerprint records (``results/fingerprints/``, :mod:`benchmark.reproduce.fingerprint_records`),
the from-scratch runs judged by the gate and the reruns of single stages (``results/cross_cpu.json``,
:mod:`benchmark.reproduce.cross_cpu`).
"""

from __future__ import annotations

import re

from benchmark.reproduce import cross_cpu
from benchmark.reproduce import fingerprint_records as fr


def _short(commit: str | None) -> str:
    return (commit or "?")[:7]


def _what(record: dict) -> str:
    """Real or emulated, and what: ``real: AMD EPYC`` or ``emulated: Intel Xeon Processor (Icelake), CPUID
    GenuineIntel-f6-m134, QEMU 7.2.22 on AuthenticAMD-f25-m17``."""
    m = record.get("machine", record)
    if m.get("emulated"):
        host = (m.get("host") or {}).get("kind", "?")
        return (
            f"emulated: {m.get('cpu', '')} (CPUID `{m.get('stands_for', '?')}`; QEMU {m.get('qemu', '?')} on `{host}`)"
        )
    return f"real: {m.get('cpu', '')}"


def pipeline_agreement(record: dict, records: list[dict]) -> tuple[int, int]:
    """``(equal, shared)``: of ``record``'s pipeline operations that another record holds too, how many equal every
    other record that holds them."""
    ops = [k for k in record["hashes"] if fr.pipeline_op(k)]
    others = [r for r in records if r["machine"]["kind"] != record["machine"]["kind"]]
    shared = [k for k in ops if any(k in r["hashes"] for r in others)]
    equal = [k for k in shared if all(r["hashes"].get(k, record["hashes"][k]) == record["hashes"][k] for r in others)]
    return len(equal), len(shared)


def _tool_agreement(record: dict, records: list[dict]) -> str:
    """How the tool's operations of ``record`` compare with the real records of each vendor: ``equal to real Intel
    160 of 160, to real AMD 119 of 160``."""
    parts = []
    tool = [k for k in record["hashes"] if not fr.pipeline_op(k)]
    for vendor, name in (("GenuineIntel", "Intel"), ("AuthenticAMD", "AMD")):
        real = [
            r
            for r in records
            if not fr.emulated(r) and fr.vendor(r) == vendor and r["machine"]["kind"] != record["machine"]["kind"]
        ]
        shared = {k for r in real for k in tool if k in r["hashes"]}
        if shared:
            equal = sum(
                all(r["hashes"].get(k, record["hashes"][k]) == record["hashes"][k] for r in real) for k in shared
            )
            parts.append(f"real {name} {equal} of {len(shared)}")
    return "tool operations equal to " + ", ".join(parts) if parts else "no real record to compare with"


def _fingerprint_row(record: dict, records: list[dict]) -> str:
    tool = sum(not fr.pipeline_op(k) for k in record["hashes"])
    pipe = len(record["hashes"]) - tool
    modes = sorted({k.split("/", 1)[0] for k in record["hashes"] if not fr.pipeline_op(k)})
    what = f"kernel fingerprint: {tool:,} tool operations ({len(modes)} mode{'s' * (len(modes) != 1)})"
    what += f", {pipe:,} pipeline operations" if pipe else ""
    result = _tool_agreement(record, records)
    equal, shared = pipeline_agreement(record, records)
    if shared:
        result += f"; pipeline operations equal to every other kind's on {equal:,} of {shared:,}"
    code = "not recorded"
    if record.get("commit"):
        code = f"`{_short(record['commit'])}`" + (" + uncommitted changes" if record.get("dirty") else "")
        code += f" ({record['date']})" if record.get("date") else ""
    return f"| `{record['machine']['kind']}` | {_what(record)} | {code} | {what} | {result} |"


def _run_row(run: dict) -> str:
    o = run["stage_outputs"]
    code = f"`{_short(run['commit'])}` ({run.get('date', '?')})"
    if run.get("scope") == "stages":
        what = f"{', '.join(f'`{s}`' for s in run['stages'])} rerun whole, against the committed `dvc.lock`"
        result = f"{o['identical']} of {o['compared']} outputs byte-identical" + (
            f" ({run['seconds'] / 60:.0f} min)" if run.get("seconds") else ""
        )
    else:
        n = run["rows"]
        what = (
            f"main job from scratch, judged by the gate against `{run['bundle']}` (made at "
            f"`{_short(run['bundle_commit'])}`)"
        )
        failing = n["differs"] + n["beyond-noise"] + n["inputs-differ"] + n["missing"] + n["extra"]
        result = (
            f"{o['identical']} of {o['compared']} stage outputs byte-identical; rows identical / within noise / "
            f"failing: {n['identical'] + n['recomputed']:,} / {n['within-noise']:,} / {failing:,}; "
            f"{'passes' if run['reproduces'] else 'FAILS'}"
        )
    return f"| `{run['kind']}` | {_what(run)} | {code} | {what} | {result} |"


def table(records: list[dict], runs: list[dict]) -> str:
    """One row per check of a CPU kind: each kernel fingerprint record, each from-scratch run the gate judged and each
    rerun of whole stages; real kinds first, then the emulated ones."""
    if not records and not runs:
        return "No CPU kind recorded yet (`reproduce fingerprint --write`, `reproduce check --record`).\n"
    lines = ["| CPU kind | real or emulated | code | what was compared | result |", "|---|---|---|---|---|"]
    rows = [(fr.emulated(r), r["machine"]["kind"], 0, _fingerprint_row(r, records)) for r in records]
    rows += [(bool(r.get("emulated")), r["kind"], 1, _run_row(r)) for r in runs]
    lines += [row for *_, row in sorted(rows, key=lambda x: x[:3])]
    return "\n".join(lines) + "\n"


def emulated_item(runs: list[dict], records: list[dict]) -> str:
    """The README's line on the emulated CPU kinds: which whole stages gave the committed bytes there, and how many
    of the pipeline's per-layer operations every recorded kind agrees on."""
    emulated = [r for r in records if fr.emulated(r)]
    stages = [r for r in cross_cpu.stage_runs(runs) if r.get("emulated")]
    if not emulated and not stages:
        return "- Emulated CPU kinds: none recorded (`reproduce fingerprint --emulate MODEL --write`)."
    parts = []
    by_cpu: dict[str, list[dict]] = {}
    for r in stages:
        by_cpu.setdefault(short_name(r["cpu"] or r["kind"]), []).append(r)
    for name, rs in by_cpu.items():
        names = [f"`{s}`" for r in rs for s in r["stages"]]
        listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        same, compared = (
            sum(r["stage_outputs"]["identical"] for r in rs),
            sum(r["stage_outputs"]["compared"] for r in rs),
        )
        verdict = (
            "gave the committed bytes" if all(r["byte_identical"] for r in rs) else f"gave {same} of {compared} outputs"
        )
        parts.append(f"{name} {verdict} for {listed}")
    holders = [r for r in records if any(fr.pipeline_op(k) for k in r["hashes"])]
    if holders:
        equal = sum(
            pipeline_agreement(r, records)[0] == sum(map(bool, map(fr.pipeline_op, r["hashes"]))) for r in holders
        )
        n_emu = sum(fr.emulated(r) for r in holders)
        parts.append(
            f"the pipeline's per-layer operations equal on {equal} of {len(holders)} kinds "
            f"({len(holders) - n_emu} real, {n_emu} emulated)"
        )
    return f"- Emulated CPU kinds ({len(emulated)} in CI on every commit, QEMU): " + "; ".join(parts) + "."


def short_name(cpu: str) -> str:
    """A CPU's name as a reader says it: ``Intel Xeon (Icelake)`` for ``Intel Xeon Processor (Icelake)``."""
    return re.sub(r"\s+", " ", re.sub(r"\((R|TM)\)|\b(Processor|CPU)\b", "", cpu)).strip() or cpu
