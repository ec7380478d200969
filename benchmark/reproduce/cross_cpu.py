"""What was checked on which CPU kind: ``results/cross_cpu.json``, one entry per (CPU kind, commit) of a from-scratch
run that ``python -m benchmark reproduce check --record results/cross_cpu.json`` judged against the committed
results; and the kernel fingerprint records (``results/fingerprints/``, :mod:`benchmark.reproduce.fingerprint_records`).

The README's "what holds" and the reproducibility page are generated from these (:func:`holds_line`,
:func:`runs_table`, :func:`fingerprint_table`; :mod:`benchmark.docsgen.facts`), never typed.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

from benchmark.reproduce import fingerprint_records
from benchmark.storage.atomic import write_text

RECORD = Path("results") / "cross_cpu.json"
ROW_COUNTS = (
    "rows",
    "identical",
    "recomputed",
    "differs",
    "within-noise",
    "beyond-noise",
    "inputs-differ",
    "missing",
    "extra",
    "same-logits-noise",
)
TIMING = ("command", "repro_wall_s", "install_s", "floor_ratio", "compute_floor_s")


def entry(
    *,
    kind: str,
    cpu: str,
    commit: str,
    bundle: str,
    bundle_commit: str,
    pinned: bool,
    rows: dict,
    summary: dict,
    outputs: dict,
    choices: int,
    reproduces: bool,
    note: str = "",
    timing: dict | None = None,
) -> dict:
    """One checked run: who ran it (``kind``, ``cpu``), the code (``commit``), what it was judged against (``bundle``
    and the commit that made it), the gate's counts and verdict; ``byte_identical`` when every compared stage output
    and every row was the same bytes (rows: the same logits, values within 1e-9); ``timing``: the run's own timing
    record (``results/timings.json``), of which the command, its wall seconds, the install's and the compute floor's
    ratio are kept."""
    same_rows = rows["identical"] + rows["recomputed"] == rows["rows"]
    return {
        "kind": kind,
        "cpu": cpu,
        "commit": commit,
        "date": datetime.date.today().isoformat(),
        "bundle": bundle,
        "bundle_commit": bundle_commit,
        "pinned": bool(pinned),
        "rows": {k: int(rows.get(k, 0)) for k in ROW_COUNTS},
        "summary": {k: int(v) for k, v in summary.items() if k != "reproduces"},
        "stage_outputs": {"identical": int(outputs["identical"]), "compared": int(outputs["compared"])},
        "choices": int(choices),
        "reproduces": bool(reproduces),
        "byte_identical": bool(same_rows and outputs["identical"] == outputs["compared"]),
        "note": note,
        **({"timing": {k: timing.get(k) for k in TIMING}} if timing else {}),
    }


def stage_entry(result: dict, *, note: str = "") -> dict:
    """One rerun of whole stages (:func:`benchmark.reproduce.rerun.run`) against the committed ``dvc.lock``: the CPU
    kind they ran on (``emulated``, with the kind it ``stands_for`` and its ``host``, when it was an emulation), the
    code (``commit``, ``dirty``: uncommitted changes), the stages and how many of their compared outputs were
    byte-identical."""
    m, c = result["machine"], result["counts"]
    return {
        "scope": "stages",
        "kind": m["kind"],
        "cpu": m.get("cpu", ""),
        "emulated": bool(m.get("emulated")),
        "stands_for": m.get("stands_for"),
        "host": m.get("host"),
        "qemu": m.get("qemu"),
        "commit": result.get("commit") or "?",
        "dirty": bool(result.get("dirty")),
        "date": datetime.date.today().isoformat(),
        "stages": list(result["stages"]),
        "stage_outputs": {"identical": int(c["identical"]), "compared": int(c["compared"])},
        "byte_identical": bool(
            c["compared"] and c["identical"] == c["compared"] and not c["missing"] and not c["extra"]
        ),
        "seconds": result["seconds"],
        "note": note,
    }


def gate_runs(runs: list[dict]) -> list[dict]:
    """The from-scratch runs judged by the gate (not the reruns of single stages)."""
    return [r for r in runs if r.get("scope", "gate") == "gate"]


def stage_runs(runs: list[dict]) -> list[dict]:
    """The reruns of single stages (:func:`stage_entry`)."""
    return [r for r in runs if r.get("scope") == "stages"]


def load(path=RECORD) -> list[dict]:
    """The checked runs of the record at ``path`` (none when it does not exist); ``ValueError`` naming the file when it
    is not a list of runs."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        runs = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and {"kind", "commit"} <= set(r) for r in runs):
        raise ValueError(f"{path}: must be a list of runs, each with kind and commit")
    return runs


def add(path, run: dict) -> list[dict]:
    """``run`` added to the record at ``path`` (replacing an entry of the same kind, commit and scope); written
    atomically."""
    key = (run["kind"], run["commit"], run.get("scope", "gate"))
    runs = [r for r in load(path) if (r["kind"], r["commit"], r.get("scope", "gate")) != key] + [run]
    runs.sort(key=lambda r: (r.get("date", ""), r["kind"]))
    write_text(path, json.dumps(runs, indent=1, sort_keys=True) + "\n")
    return runs


def main_job(t: dict | None) -> str:
    """A checked run's own timing (:func:`entry`'s ``timing``): install plus command in minutes and the ratio to its
    compute floor; ``–`` when it has none."""
    if not t or not t.get("repro_wall_s"):
        return "–"
    install = f"install {t['install_s']:.0f} s + " if t.get("install_s") is not None else ""
    ratio = f", {t['floor_ratio']:.2f}x its compute floor" if t.get("floor_ratio") else ""
    total = t["repro_wall_s"] + (t.get("install_s") or 0)
    return f"{total / 60:.1f} min ({install}`{t.get('command') or '?'}` {t['repro_wall_s']:.0f} s{ratio})"


def _short(commit: str) -> str:
    return (commit or "?")[:7]


def _verdict(r: dict) -> str:
    o, n = r["stage_outputs"], r["rows"]
    same = f"{o['identical']} of {o['compared']} stage outputs byte-identical"
    if r["byte_identical"]:
        return f"{same}, every row the same"
    vendor = n.get("same-logits-noise", 0)
    rows = (
        f"{n['within-noise']:,} of {n['rows']:,} rows on the noise path, within it"
        + (
            f" ({vendor:,} of them with the same logits: the evaluation's MKL kernels of another vendor)"
            if vendor
            else ""
        )
        if r["reproduces"]
        else f"{n['beyond-noise'] + n['missing'] + n['extra'] + n['differs'] + n['inputs-differ']:,} rows failing"
    )
    return f"{same}; {rows}" + (
        f" ({r['choices']} greedy-soup rows chose other ingredients)" if r.get("choices") else ""
    )


def holds_line(runs: list[dict], records: list[dict]) -> str:
    """The CPU kinds a from-scratch run was checked on, the commit and the result; the whole stages rerun on emulated
    kinds; and the kernel fingerprints' agreement, in full (the reproducibility page's "what holds")."""
    latest = {}
    for r in gate_runs(runs):
        latest[r["kind"]] = r
    parts = [
        f"{r['cpu']} (`{r['kind']}`) at `{_short(r['commit'])}` (vs the bundle of "
        f"`{_short(r['bundle_commit'])}`): {_verdict(r)}"
        for r in latest.values()
    ]
    line = (
        "- Across CPU kinds, from scratch (`results/cross_cpu.json`): " + "; ".join(parts) + "."
        if parts
        else "- Across CPU kinds: no from-scratch run recorded (`python -m benchmark reproduce check --record "
        "results/cross_cpu.json` after one)."
    )
    stages = [
        f"{', '.join(f'`{s}`' for s in r['stages'])} on {r['cpu']} (`{r['kind']}`"
        + (f", emulated on `{(r.get('host') or {}).get('kind', '?')}`" if r.get("emulated") else "")
        + f") at `{_short(r['commit'])}`: {r['stage_outputs']['identical']} of {r['stage_outputs']['compared']} "
        "outputs byte-identical to the committed `dvc.lock`"
        for r in stage_runs(runs)
    ]
    if stages:
        line += " Whole stages rerun (`reproduce stage`): " + "; ".join(stages) + "."
    return line + fingerprint_summary(records)


def fingerprint_summary(records: list[dict]) -> str:
    """One sentence on the kernel fingerprint records: how many kinds (real, emulated), the pipeline's per-layer
    operations equal on every kind that holds them, and the tool's operations in the pipeline's mode that all records
    hold: how many agree, and that those that part are MKL's ('' with fewer than two records)."""
    if len(records) < 2:
        return ""
    agreed = fingerprint_records.evidence(records)
    mode = fingerprint_records.tag(2) + "/"
    keys = sorted(
        set.intersection(
            *[
                {k for k in r["hashes"] if k.startswith(mode) and not fingerprint_records.pipeline_op(k)}
                for r in records
            ]
        )
    )
    same = sum(k in agreed for k in keys)
    pipeline = {k for r in records for k in r["hashes"] if fingerprint_records.pipeline_op(k)}
    holders = [r for r in records if pipeline & set(r["hashes"])]
    parted = [k for k in pipeline if len({r["hashes"][k] for r in holders if k in r["hashes"]}) > 1]
    emulated = sum(fingerprint_records.emulated(r) for r in records)
    return (
        f" Kernel fingerprints of {len(records)} CPU kinds (`results/fingerprints/`: {len(records) - emulated} "
        f"real, {emulated} emulated; [CPU kinds](#cpu-kinds-real-and-emulated)): the pipeline's {len(pipeline):,} "
        f"per-layer operations {'equal' if not parted else f'part on {len(parted)}'} on every kind that holds them "
        f"({len(holders)}); of the tool's operations in the pipeline's mode that all {len(records)} hold, {same} "
        f"of {len(keys)} agree, the {len(keys) - same} that part are MKL's, which training and logits no longer "
        "call."
    )


def runs_table(runs: list[dict]) -> str:
    """The reproducibility page's table of the checked runs: CPU kind, code, bundle, identical stage outputs, rows and
    the gate's verdict."""
    if not runs:
        return (
            "No from-scratch run recorded yet (`python -m benchmark reproduce check --record "
            "results/cross_cpu.json`).\n"
        )
    lines = [
        "| CPU kind | CPU | code | checked against | stage outputs identical | rows identical / within noise / "
        "failing | gate | main job |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in gate_runs(runs):
        n, o = r["rows"], r["stage_outputs"]
        failing = n["differs"] + n["beyond-noise"] + n["inputs-differ"] + n["missing"] + n["extra"]
        lines.append(
            f"| `{r['kind']}` | {r['cpu']} | `{_short(r['commit'])}` ({r['date']}) | `{r['bundle']}` (made at "
            f"`{_short(r['bundle_commit'])}`) | {o['identical']} of {o['compared']} | "
            f"{n['identical'] + n['recomputed']:,} / {n['within-noise']:,} / {failing:,} | "
            f"{'passes' if r['reproduces'] else 'FAILS'}{(': ' + r['note']) if r.get('note') else ''} | "
            f"{main_job(r.get('timing'))} |"
        )
    return "\n".join(lines) + "\n"


_GROUPS = (
    ("convolution", r"/conv "),
    ("matrix product (MKL)", r"/(mm |linear |pointwise via matmul)"),
    ("AdamW of torch.optim (MKL sqrt)", r"/adamw "),
    ("exp (MKL)", r"/elementwise exp$"),
    ("the pipeline's layers: a training step and a logits pass", r"/pipeline "),
    ("other ATen operations", r"."),
)


def fingerprint_table(records: list[dict]) -> str:
    """Per operation group and mode: how many operations the two vendors' real records share and agree on (the tool's,
    and the pipeline's per-layer ones where both records hold them); a group neither holds in a mode is left out."""
    if len(records) < 2:
        return "Fewer than two CPU kinds recorded in `results/fingerprints/`.\n"
    real = [r for r in records if not fingerprint_records.emulated(r)]
    a = next((r for r in real if fingerprint_records.vendor(r) == "AuthenticAMD"), records[0])
    b = next((r for r in real if fingerprint_records.vendor(r) != fingerprint_records.vendor(a)), records[1])
    shared = [k for k in a["hashes"] if k in b["hashes"]]
    modes = sorted(
        {k.split("/", 1)[0] for k in shared}, key=lambda m: (m.split(",")[0], m.split(",")[1] != "onednn=on")
    )
    lines = [f"| operations | {' | '.join(modes)} |", "|---|" + "---|" * len(modes)]
    for name, _ in _GROUPS:
        cells = []
        if not any(_group(k) == name for k in shared):
            continue
        for m in modes:
            keys = [k for k in shared if k.startswith(m + "/") and _group(k) == name]
            same = sum(a["hashes"][k] == b["hashes"][k] for k in keys)
            cells.append(f"{same:,} of {len(keys):,}" + (" **part**" if same < len(keys) else "") if keys else "–")
        lines.append(f"| {name} | {' | '.join(cells)} |")

    diff = [k for k in shared if a["hashes"][k] != b["hashes"][k]]
    mode = [k.split("/", 1)[1] for k in diff if k.startswith(fingerprint_records.tag(2) + "/")]
    lines.append("")
    lines.append(
        f"`{a['machine']['kind']}` ({a['machine'].get('cpu', '')}) against `{b['machine']['kind']}` "
        f"({b['machine'].get('cpu', '')}), torch {a.get('torch')}: {len(shared) - len(diff)} of {len(shared)} "
        f"operations equal. In the pipeline's mode ({fingerprint_records.tag(2)}) these differ: "
        + ", ".join(f"`{k}`" for k in mode)
        + "."
    )
    return "\n".join(lines) + "\n"


def _group(key: str) -> str:
    return next(name for name, pattern in _GROUPS if re.search(pattern, key))
