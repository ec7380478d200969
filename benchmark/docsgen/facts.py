"""What holds, generated from the committed records (never typed): the README's short list (:func:`holds_block`: one
short line each for the main job, the CPU kinds checked, the site at the papers' scale and the tests), the same facts in
full on the reproducibility page (:func:`holds_details`); the performance page's tables of the same records are
:mod:`benchmark.docsgen.record_tables`. Records:

* ``results/timings.json`` -- the main job from a fresh clone (``bash scripts/measure-main-job.sh``);
* ``results/numerics.json`` -- what pinning the CPU kernels costs (``python -m benchmark reproduce pinning-cost``);
* ``results/site_scale.json`` -- ``publish`` of a synthetic bundle for every paper suite plus the embedded bundle
  (``pytest --benchmark-enable tests/benchmarks/test_bench_site_scale.py``).
* ``results/test_command.json`` -- the README's test command, timed (``bash scripts/measure-tests.sh``).
* ``results/cross_cpu.json`` and ``results/fingerprints/`` -- the from-scratch runs checked on each CPU kind and the
  kernel fingerprints of each kind (:mod:`benchmark.reproduce.cross_cpu`).
* ``results/cluster.json`` -- the embedded default through Slurm against a serial ``dvc repro``
  (``pytest --benchmark-enable tests/benchmarks/test_bench_cluster.py``).

A record that is missing gives a line saying which command writes it.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmark.docsgen import cpu_kinds
from benchmark.docsgen.machines import cpu_name, microarchitecture, target, where
from benchmark.reproduce import cross_cpu, fingerprint_records

MB = 1_000_000
FLOOR_RATIO_TARGET = 1.2  # `dvc repro`'s wall time / its stages' compute floor ((CPU - start-up) / cores)


def load(path: Path) -> dict | None:
    """The JSON record at ``path``, or None where there is none."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def main_job_item(rec: dict | None, runs: list[dict] | None = None) -> str:
    """The README's main-job item: clone to leaderboard in minutes, against the target of the machine that measured it
    (:func:`benchmark.docsgen.machines.target`: 5 minutes on a Zen 5, 8 on a Zen 3 or Zen 4 (AMD's family 25), else
    10), and the command's wall time over its compute floor against :data:`FLOOR_RATIO_TARGET` where the record has
    it; then the newest timed from-scratch check of each other CPU kind in ``runs`` (``results/cross_cpu.json``)."""
    if rec is None:
        return "- Main job: not measured on this commit (`bash scripts/measure-main-job.sh`)."
    total = rec["repro_wall_s"] + (rec.get("install_s") or 0)
    limit, who = target(rec.get("machine"))
    verdict = f"target {limit / 60:g} min" if total <= limit else f"**over** the {limit / 60:g}-minute target"
    if who:
        verdict += f" of {who}"
    start = "fresh clone to leaderboard" if rec.get("install_s") is not None else "`dvc repro` from scratch"
    ratio = ""
    if rec.get("floor_ratio"):
        ok = "target" if rec["floor_ratio"] <= FLOOR_RATIO_TARGET else "**over** the target of"
        ratio = f"; `{_command(rec)}` {rec['floor_ratio']:.2f}x its compute floor, {ok} {FLOOR_RATIO_TARGET:g}x"
    kind = (rec.get("machine") or {}).get("cpu_kind")
    mine = [t / 60 for r in cross_cpu.gate_runs(runs or []) if r["kind"] == kind and (t := _total(r))]
    spread = f"; {min(mine):.1f}-{max(mine):.1f} min over this kind's {len(mine)} timed checks" if len(mine) > 1 else ""
    others = [
        f"{r['total_s'] / 60:.1f} min on {r['name']} (`{r['commit'][:7]}`)" for r in _other_kinds(rec, runs or [])
    ]
    elsewhere = f"; elsewhere {', '.join(others)}" if others else ""
    return (
        f"- Main job, {start}: **{total / 60:.1f} min** ({verdict}{ratio}; {where(rec.get('machine') or {})}"
        f"{spread}){elsewhere}."
    )


def _total(r: dict) -> float:
    """A timing's seconds from a fresh clone (install + run), given the timing or a check holding one; 0 if none."""
    t = r.get("timing", r) or {}
    return t["repro_wall_s"] + (t.get("install_s") or 0) if t.get("repro_wall_s") else 0.0


def _other_kinds(rec: dict | None, runs: list[dict]) -> list[dict]:
    """The newest timed from-scratch check of each real CPU kind other than ``rec``'s: its entry with the minutes
    (``total_s``), the microarchitecture where known (``arch``) and a short name (``a Zen 4``, ``an Intel Xeon``)."""
    mine = ((rec or {}).get("machine") or {}).get("cpu_kind")
    timed = {r["kind"]: r for r in cross_cpu.gate_runs(runs) if (r.get("timing") or {}).get("repro_wall_s")}
    out = []
    for kind, r in timed.items():
        if kind == mine or r.get("emulated"):
            continue
        arch, name = microarchitecture(kind), _kind_name(r)
        out.append({**r, "total_s": _total(r), "arch": arch, "name": ("an " if name[0] in "AEIOU" else "a ") + name})
    return out


def _command(rec: dict) -> str:
    """The command a timing record ran, as the README writes it (``python -m benchmark run`` for two stages at a time,
    its default; ``dvc repro``), without ``-f``."""
    return rec.get("command", "dvc repro").replace(" -f", "").replace(" --force", "").replace(" --jobs 2", "")


def cross_cpu_item(runs: list[dict]) -> str:
    """The README's CPU-kinds item: on how many CPU kinds a from-scratch run was checked (the newest run of each kind in
    ``results/cross_cpu.json``), and whether they gave the same bytes or stayed within the noise. The details (each
    kind's counts, the kernel fingerprints) are :func:`benchmark.reproduce.cross_cpu.holds_line`'s, on the
    reproducibility page."""
    latest = list({r["kind"]: r for r in cross_cpu.gate_runs(runs or []) if not r.get("emulated")}.values())
    if not latest:
        return (
            "- Across CPU kinds: no from-scratch run recorded (`python -m benchmark reproduce check --record "
            "results/cross_cpu.json`)."
        )
    n, same, ok = len(latest), sum(r["byte_identical"] for r in latest), sum(r["reproduces"] for r in latest)
    names = ", ".join(dict.fromkeys(_kind_name(r) for r in latest))
    if same == n:
        verdict = "the same bytes on each"
    elif ok == n:
        alike = ", ".join(dict.fromkeys(_kind_name(r) for r in latest if r["byte_identical"]))
        verdict = "every row within its noise, " + (
            f"the same bytes on {same} ({alike})" if same else "not byte-identical"
        )
    else:
        verdict = f"**{n - ok} failing the gate**"
    return f"- Across real CPU kinds: {n} checked from scratch ({names}): {verdict}."


def _kind_name(run: dict) -> str:
    """A checked run's CPU in a word: its microarchitecture where known (``Zen 3``: :func:`microarchitecture`), else its
    model name (``Intel Xeon``), else its kind."""
    return microarchitecture(run["kind"]) or cpu_name(run.get("cpu") or run["kind"])


def site_item(rec: dict | None) -> str:
    """The README's site item: ``publish`` of every suite at the papers' scale, time and size against the targets."""
    if rec is None or "publish" not in rec:
        return "- Site at the papers' scale: not measured on this commit (`tests/benchmarks/test_bench_site_scale.py`)."
    full, lim = rec["publish"]["1x"], rec["limits"]
    return (
        f"- Site at the papers' scale ({full['rows']:,.0f} rows): published in **{full['wall']:.0f} s**, "
        f"**{full['bytes'] / MB:.0f} MB** (targets {lim['publish_s']} s, {lim['site_bytes'] / MB:.0f} MB; "
        f"{where(rec.get('machine') or {})})."
    )


def tests_item(rec: dict | None) -> str:
    """The README's tests item: the README's test command, tests run and wall seconds against the target, and, where
    the record has a baseline run beside it (``reproduce test-time --beside``), the ratio to that commit's wall."""
    if rec is None or rec.get("command", "python -m pytest") != "python -m pytest":
        return "- Tests: the README's test command not measured on this commit (`bash scripts/measure-tests.sh`)."
    target = rec.get("target_s", 360)
    verdict = (
        f"target {target / 60:g} min" if rec["wall_s"] <= target else f"**over** the {target / 60:g}-minute target"
    )
    base = rec.get("baseline") or {}
    beside = ""
    if isinstance(base.get("wall_s"), (int, float)) and base["wall_s"] > 0:
        commit = short_commit(base)
        ratio = rec["wall_s"] / base["wall_s"]
        beside = f"; {ratio:.2f}x the wall of the {base['passed']:,} tests of `{commit}` run beside it"
    return (
        f"- Tests: {rec['passed']:,} in **{rec['wall_s']:,.0f} s** ({verdict}; {where(rec.get('machine') or {})}"
        f"{beside})."
    )


def main_job_line(rec: dict | None) -> str:
    """The main job in full: install and ``dvc repro`` seconds, the target, the machine and the date."""
    if rec is None:
        return (
            "- Main job: not measured on this commit (`bash scripts/measure-main-job.sh` writes "
            "`results/timings.json`)."
        )
    total = rec["repro_wall_s"] + (rec.get("install_s") or 0)
    limit, who = target(rec.get("machine"))
    verdict = "within" if total <= limit else "**over**"
    install = f"install {rec['install_s']:.0f} s + " if rec.get("install_s") is not None else ""
    machine = where(rec.get("machine") or {})
    load = rec.get("load") or {}
    if load.get("mean") is not None and load["mean"] == load["mean"]:
        machine += f", load average {load['mean']:.1f}"
    command = _command(rec)
    ratio = ""
    if rec.get("floor_ratio"):
        ok = "within" if rec["floor_ratio"] <= FLOOR_RATIO_TARGET else "**over**"
        ratio = (
            f"; `{command}` took **{rec['floor_ratio']:.2f}x** its compute floor ((CPU - start-up) / cores = "
            f"{rec['compute_floor_s']:.0f} s), {ok} the {FLOOR_RATIO_TARGET:g}x target"
        )
    for key, how in (("serial", "one stage at a time"), ("parallel", "two stages at a time")):
        other = rec.get(key) or {}
        if other.get("repro_wall_s"):
            total_other = other["repro_wall_s"] + (rec.get("install_s") or 0)
            ratio += (
                f"; {how} (`{_command(other)}`, the same outputs) {other['repro_wall_s']:.0f} s = "
                f"{total_other / 60:.1f} min, {other['floor_ratio']:.2f}x"
            )
    return (
        f"- Main job from a fresh clone: {install}`{command}` {rec['repro_wall_s']:.0f} s = **{total / 60:.1f} min**, "
        f"{verdict} the {limit / 60:g}-minute target{' of ' + who if who else ''} ({machine}; "
        f"{rec.get('date', '?')}){ratio}."
    )


def other_cpus_line(rec: dict | None, runs: list[dict]) -> str:
    """The main job as the from-scratch checks on other CPU kinds than ``rec``'s (the README's timing record) timed it
    (``results/cross_cpu.json``, the newest timed check of each kind): minutes and the ratio to the compute floor;
    ``''`` when there is none."""
    parts = [
        f"{cpu_name(r.get('cpu') or r['kind'])} ({r['arch'] + ', ' if r['arch'] else ''}`{r['kind']}`, at "
        f"`{r['commit'][:7]}`): {cross_cpu.main_job(r['timing'])}"
        for r in _other_kinds(rec, runs)
    ]
    if not parts:
        return ""
    return "- The same main job on other CPU kinds (their from-scratch checks): " + "; ".join(parts) + "."


def pinning_line(rec: dict | None) -> str:
    """The pinned CPU kernels and what they cost against native ones (``results/numerics.json``)."""
    if rec is None:
        return "- Pinned kernels: cost not measured on this commit (`python -m benchmark reproduce pinning-cost`)."
    return (
        f"- Every stage pins the CPU kernels to AVX2 and trains and infers without MKL (portable kernels: fused AdamW, "
        f"BLAS-free linear layers); it costs **{rec['ratio']['wall_s']:.2f}x** the wall time of native kernels on "
        f"`{rec['stage']}` ({where(rec.get('machine') or {})})."
    )


def site_line(rec: dict | None) -> str:
    """The site at the papers' scale in full: rows, time, size, largest file, embedded part, first render, 10x."""
    if rec is None or "publish" not in rec:
        return (
            "- Site at the papers' scale: not measured on this commit "
            "(`pytest --benchmark-enable tests/benchmarks/test_bench_site_scale.py`)."
        )
    full, ten, lim = rec["publish"]["1x"], rec["publish"]["10x estimate"], rec["limits"]
    extra = ""
    if "largest" in full and "embedded_bytes" in full:
        extra += (
            f", largest file {full['largest'][1] / MB:.1f} MB (target {lim['file_bytes'] / MB:.0f}), embedded part "
            f"{full['embedded_bytes'] / MB:.1f} MB (target {lim['embedded_bytes'] / MB:.0f})"
        )
    if rec.get("first_render_ms"):
        extra += f", slowest first render {max(rec['first_render_ms'].values())} ms (target {lim['render_ms']})"
    return (
        f"- Site at the papers' scale ({full['rows']:,.0f} rows, every suite): publish **{full['wall']:.0f} s** "
        f"(target {lim['publish_s']} s), **{full['bytes'] / MB:.0f} MB** (target {lim['site_bytes'] / MB:.0f} MB)"
        f"{extra}; at 10x the rows about {ten['wall']:.0f} s and {ten['bytes'] / MB:.0f} MB "
        f"({where(rec.get('machine') or {})}, {rec.get('date', 'undated')})."
    )


def test_command_line(rec: dict | None) -> str:
    """The README's test command in full: tests, wall seconds, what was cached, the install, the target, the machine."""
    if rec is None:
        return (
            "- Tests: the README's test command not measured on this commit (`bash scripts/measure-tests.sh` writes "
            "`results/test_command.json`)."
        )
    target = rec.get("target_s", 360)
    verdict = "within" if rec["wall_s"] <= target else "**over**"
    cache = (
        "an empty `.pytest_cache`, so the paper-scale bundles were made too"
        if rec.get("pytest_cache") == "empty"
        else "the paper-scale bundles cached in `.pytest_cache`"
    )
    setup = f"; install {rec['setup_s']:.0f} s before it" if rec.get("setup_s") is not None else ""
    if rec.get("command", "python -m pytest") != "python -m pytest":  # a subset, not the README's command
        return (
            f"- Tests: only `{rec['command']}` measured ({rec['passed']:,} tests in {rec['wall_s']:,.0f} s), not the "
            f"README's test command (`bash scripts/measure-tests.sh` without arguments measures it)."
        )
    return (
        f"- Tests: the README's test command ran {rec['passed']:,} tests ({rec.get('skipped', 0)} skipped) in "
        f"**{rec['wall_s']:,.0f} s** with {cache}{setup}, {verdict} the {target / 60:g}-minute target "
        f"({where(rec.get('machine') or {})}; {rec.get('date', '?')}"
        f"{'; a checkout with uncommitted changes' if (rec.get('git') or {}).get('dirty') else ''}){_beside(rec)}."
    )


def short_commit(run: dict) -> str:
    """The short commit of a record's run (its ``git`` block), ``?`` where it has none."""
    return ((run.get("git") or {}).get("commit") or "?")[:7]


def _beside(rec: dict) -> str:
    """The baseline run beside the record (``reproduce test-time --beside``), if any: its commit, tests and wall."""
    base = rec.get("baseline")
    if not base or not isinstance(base.get("wall_s"), (int, float)):
        return ""
    commit = short_commit(base)
    walls = base.get("walls_s") or []
    if len(walls) > 1:  # reproduce test-time --rounds: alternating runs, each side's mean
        return (
            f"; the same command at `{commit}` ({base['passed']:,} tests), {len(walls)} runs a side alternating with "
            f"these on the same machine (means): {base['wall_s']:,.0f} s against {rec['wall_s']:,.0f} s"
        )
    return (
        f"; the same command at `{commit}` ({base['passed']:,} tests), run right after it on the same machine: "
        f"{base['wall_s']:,.0f} s"
    )


def holds_block(root=".") -> str:
    """The README's "what holds": five short lines (:func:`main_job_item`, :func:`cross_cpu_item`,
    :func:`benchmark.docsgen.cpu_kinds.emulated_item`, :func:`site_item`, :func:`tests_item`); in full on the
    reproducibility page (:func:`holds_details`)."""
    res = Path(root) / "results"
    runs, records = cross_cpu.load(res / "cross_cpu.json"), fingerprint_records.read_records(res / "fingerprints")
    return (
        "\n".join(
            [
                main_job_item(load(res / "timings.json"), runs),
                cross_cpu_item(runs),
                cpu_kinds.emulated_item(runs, records),
                site_item(load(res / "site_scale.json")),
                tests_item(load(res / "test_command.json")),
            ]
        )
        + "\n"
    )


def holds_details(root=".") -> str:
    """What holds in full (the reproducibility page): the main job, the pinned kernels and their cost, each CPU kind's
    check and the kernel fingerprints, the site at the papers' scale, the tests."""
    res = Path(root) / "results"
    runs = cross_cpu.load(res / "cross_cpu.json")
    cross = cross_cpu.holds_line(runs, fingerprint_records.read_records(res / "fingerprints"))
    timings = load(res / "timings.json")
    return (
        "\n".join(
            [
                main_job_line(timings),
                *filter(None, [other_cpus_line(timings, runs)]),
                pinning_line(load(res / "numerics.json")),
                cross,
                site_line(load(res / "site_scale.json")),
                test_command_line(load(res / "test_command.json")),
            ]
        )
        + "\n"
    )
