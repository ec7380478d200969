"""``python -m benchmark reproduce check`` (registered in :mod:`benchmark.cli.reproduce_commands`): read the fresh and
the committed files, run the gate, print one line per part (rows, summary, stage outputs) and the failing rows; the
rules are :mod:`benchmark.reproduce.gate`'s."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd

ROW_COLUMNS = ["path", "status", "committed", "fresh", "noise", "k", "ratio", "choice", "detail"]
SUMMARY_COLUMNS = ["key", "committed", "fresh", "diff", "path", "tolerance", "status"]


def main(args) -> int:
    """The ``reproduce check`` command: 0 when the fresh run reproduces, 1 when it does not, 2 on malformed input."""
    try:
        return run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _level(manifest: dict, params) -> float:
    """The bootstrap level the committed intervals were made with (the bundle's params, else ``params``)."""
    ev = (manifest.get("params") or {}).get("evaluate") or {}
    level = ev.get("bootstrap_level", params.evaluate.bootstrap_level)
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        raise ValueError(f"bundle manifest params.evaluate.bootstrap_level: must be a number, got {level!r}")
    return float(level)


def _head_path(path: str, default: str) -> str:
    """The repository path whose HEAD version ``path`` is compared with: ``path`` itself inside the repository
    (the working directory), else ``default`` (a fresh run's files kept elsewhere)."""
    rel = Path(os.path.relpath(Path(path).resolve(), Path.cwd().resolve()))
    return default if rel.parts[:1] == ("..",) else rel.as_posix()


def _show(rep: pd.DataFrame, n: int, cols: list[str]) -> None:
    bad = rep[~rep["ok"]] if "ok" in rep.columns else rep[rep["status"].isin(["outside", "missing", "extra"])]
    if bad.empty or not n:
        return
    rank = bad["ratio"].fillna(float("inf")) if "ratio" in bad.columns else pd.Series(0.0, index=bad.index)
    rank = rank.where(~bad["status"].isin(["missing", "extra"]), -1.0)  # rows beyond their tolerance first
    order = bad.assign(_r=rank).sort_values("_r", ascending=False, kind="stable")
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 80):
        print(order.head(n)[[c for c in cols if c in order.columns]].to_string(index=False))


def _numerics(args, bundle) -> bool:
    """Print where the two runs' numerics come from; True when both runs pinned them."""
    from benchmark.reproduce import provenance

    fresh_pinned, fresh_src = provenance.fresh_numerics(args.results)
    ref_pinned, ref_src = provenance.committed_numerics(bundle.manifest)
    pinned = fresh_pinned and ref_pinned
    print(
        f"numerics: fresh run {'pinned' if fresh_pinned else 'not pinned'} ({fresh_src}), committed run "
        f"{'pinned' if ref_pinned else 'not pinned'} ({ref_src}) -> "
        + (
            "both pinned: other logits and other stage outputs fail"
            + (" (rows: --allow-other-inputs, judged by noise)" if args.allow_other_inputs else "")
            if pinned
            else "rows with other logits are judged by their noise"
        )
    )
    return pinned


def _vendors(args) -> bool:
    """Print the two runs' CPU kinds; True when their vendors differ and other inputs are allowed (rows with the same
    logits are then judged by their noise: :mod:`benchmark.reproduce.gate`, "Another CPU vendor")."""
    from benchmark.reproduce import provenance

    (fresh, fresh_src), (ref, ref_src) = provenance.cpu_kinds(args.results)
    if args.ran_on:
        fresh, fresh_src = args.ran_on, "--ran-on"
    other = "?" not in (fresh, ref) and provenance.vendor(fresh) != provenance.vendor(ref)
    print(
        f"CPU kinds: fresh run {fresh} ({fresh_src}), committed run {ref} ({ref_src}) -> "
        + (
            "one vendor: the same logits must give the same rows"
            if not other
            else "two vendors: the evaluation's MKL kernels part, rows with the same logits are judged by their noise"
            if args.allow_other_inputs
            else "two vendors: the evaluation's MKL kernels part (--allow-other-inputs judges such rows by their noise)"
        )
    )
    return other and bool(args.allow_other_inputs)


def _rows(args, fresh: pd.DataFrame, bundle, params, pinned: bool) -> tuple[pd.DataFrame, dict]:
    """Every row of the fresh ``metrics.csv`` against the committed bundle's: the gate's report and its counts."""
    from benchmark.core import noise
    from benchmark.methods.registry import chosen_rows
    from benchmark.reproduce import gate

    groups = noise.seed_groups(bundle.manifest.get("zoo") or {})
    nz = noise.row_noise(bundle.rows, groups, level=_level(bundle.manifest, params))
    print(f"noise: {noise.describe(nz, groups)}")
    rows = gate.compare(
        bundle.rows,
        fresh,
        nz,
        inputs_must_match=pinned and not args.allow_other_inputs,
        chosen=chosen_rows(),
        evaluation_parts=_vendors(args),
    )
    changed = rows.loc[rows["choice"] != "", ["family", "method", "split", "choice"]].drop_duplicates()
    for r in changed.itertuples(index=False):
        before, after = r.choice.split(" -> ")
        print(f"choice: {r.family} {r.method} on {r.split} chose {after} (committed: {before})")
    if args.report:
        from benchmark.storage.store import write_table

        write_table(args.report, rows)
    s = gate.summarize(rows)
    print(
        f"rows vs {bundle.path}: {s['rows']} rows; same logits: {s['identical']} identical, {s['recomputed']} within "
        f"1e-9, {s['differs']} differ"
        + (f", {s['same-logits-noise']} judged by noise (another CPU vendor)" if s["same-logits-noise"] else "")
        + f"; {'other logits and those' if s['same-logits-noise'] else 'other logits'}: {s['within-noise']} within "
        f"k x noise, {s['beyond-noise']} beyond"
        + (f", {s['inputs-differ']} not allowed (pinned)" if s["inputs-differ"] else "")
        + f"; {s['missing']} missing, {s['extra']} extra -> {'reproduces' if s['reproduces'] else 'DOES NOT REPRODUCE'}"
    )
    _show(rows, args.show, gate.KEY[1:] + ROW_COLUMNS)
    return rows, s


def _summary(args, bundle, params, rows: pd.DataFrame) -> dict:
    """Every value of the fresh ``summary.json`` against its HEAD version, by the tolerance of the row it came from."""
    from benchmark.dvcutil import lockfile
    from benchmark.evaluation.stage import summary
    from benchmark.reproduce import gate_summary

    head = _head_path(args.summary, "results/summary.json")
    committed = gate_summary.read_summary(lockfile.committed_text(head), f"HEAD:{head}")
    sources = gate_summary.summary_sources(bundle.rows, lambda r: summary(r, params.evaluate.main_fit))
    summ = gate_summary.compare_summary(
        committed, gate_summary.read_summary(Path(args.summary).read_text(), args.summary), rows, sources
    )
    t = gate_summary.summarize_summary(summ)
    print(
        f"{args.summary} vs HEAD:{head}: {t['values']} values: {t['identical']} identical, {t['within']} within the "
        f"row's tolerance, {t['outside']} outside, {t['missing']} missing, {t['extra']} extra -> "
        f"{'reproduces' if t['reproduces'] else 'DOES NOT REPRODUCE'}"
    )
    _show(summ, args.show, SUMMARY_COLUMNS)
    return t


def _outputs(args, pinned: bool) -> tuple[dict, bool]:
    """The fresh ``dvc.lock``'s stage outputs against HEAD's: their counts, and whether they pass (they must be
    identical when both runs pinned the numerics, unless ``--allow-other-inputs``)."""
    from benchmark.dvcutil import lockfile

    head = _head_path(args.lock, "dvc.lock")
    outs = lockfile.compare_outputs(
        lockfile.parse(lockfile.committed_text(head), f"HEAD:{head}"),
        lockfile.read(args.lock),
        lockfile.current_stages(".", "dvc.yaml"),
    )
    o = lockfile.summarize(outs)
    ok = not (pinned and o["failing_stages"] and not args.allow_other_inputs)
    if not pinned:
        verdict = " (runs not both pinned: not required)"
    elif not o["failing_stages"]:
        verdict = " -> identical"
    else:
        verdict = (
            " -> DIFFER although both runs pinned the numerics: "
            + ", ".join(o["failing_stages"])
            + (" (reported, not failing: --allow-other-inputs)" if ok else "")
        )
    print(
        f"stage outputs of {args.lock} vs HEAD:{head}: {o['identical']} of {o['compared']} byte-identical"
        f" ({o['measured']} embed a measured time or a run record, not compared; {o['stale']} stale lock entries "
        "ignored"
        + (f"; {o['missing']} missing, {o['extra']} extra" if o["missing"] or o["extra"] else "")
        + ")"
        + verdict
    )
    return o, ok


def run(args) -> int:
    """Judge a fresh run (``args``: the ``reproduce check`` options) against the committed results; 0 when its rows,
    summary and stage outputs reproduce, else 1. With ``--record``, the verdict is added to the cross-CPU record."""
    from benchmark.report.inputs import read_results
    from benchmark.reproduce import gate
    from benchmark.stages.params_config import load_params

    fresh, _ = read_results(Path(args.results) / "metrics.csv")
    params = load_params(args.params)
    bundle = gate.committed_bundle(".", args.bundle)
    pinned = _numerics(args, bundle)
    rows, s = _rows(args, fresh, bundle, params, pinned)
    t = _summary(args, bundle, params, rows)
    o, outs_ok = _outputs(args, pinned)
    ok = s["reproduces"] and t["reproduces"] and outs_ok
    if args.record:
        _record(args, bundle, pinned, s, t, o, int((rows["choice"] != "").sum()), ok)
    return 0 if ok else 1


def _record(args, bundle, pinned: bool, rows: dict, summary: dict, outputs: dict, choices: int, ok: bool) -> None:
    """Add this check to the cross-CPU record (:mod:`benchmark.reproduce.cross_cpu`): the CPU kind that made the fresh
    run (``--ran-on``, else its results/timings.json's, else this machine's), the checkout's commit, the bundle and
    the gate's counts."""
    from benchmark.bundle.pack import git_state
    from benchmark.config.numerics import cpu
    from benchmark.reproduce import cross_cpu, fingerprint_records, provenance

    me = cpu()
    kind = args.ran_on or provenance.cpu_kinds(args.results)[0][0]
    cpu = me["cpu"]
    if kind != me["kind"]:
        records = fingerprint_records.read_records(Path(args.record).parent / "fingerprints")
        known = {r["machine"]["kind"]: r["machine"].get("cpu", "") for r in records}
        cpu = known.get(kind, kind)
    run = cross_cpu.entry(
        kind=kind,
        cpu=cpu,
        commit=git_state(".").get("commit") or "?",
        bundle=str(bundle.path),
        bundle_commit=(bundle.manifest.get("git") or {}).get("commit") or "?",
        pinned=pinned,
        rows=rows,
        summary=summary,
        outputs=outputs,
        choices=choices,
        reproduces=ok,
        timing=provenance.fresh_timings(args.results),
        note=args.note or "",
    )
    cross_cpu.add(args.record, run)
    print(f"recorded in {args.record}: {kind} at {run['commit'][:12]}")
