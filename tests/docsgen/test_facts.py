"""The README's "what holds" lines and the performance page's site table come from the records, by hand-made cases."""

import json

from benchmark.docsgen import facts, machines, record_tables

MACHINE = {"cpus": 2, "cpu": "AMD EPYC 9B45"}


def _write(root, name, rec):
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / name).write_text(json.dumps(rec))


def test_missing_records_name_the_command_that_writes_them(tmp_path):
    for text in (facts.holds_block(tmp_path), facts.holds_details(tmp_path)):
        assert "scripts/measure-main-job.sh" in text and "reproduce check --record" in text
        assert "test_bench_site_scale.py" in text and "scripts/measure-tests.sh" in text
    assert "reproduce pinning-cost" in facts.holds_details(tmp_path)
    assert "test_bench_site_scale.py" in record_tables.site_table(tmp_path)


def test_the_readme_list_is_five_short_lines_and_the_page_has_them_in_full(tmp_path):
    _write(
        tmp_path, "timings.json", {"repro_wall_s": 352.0, "install_s": 60.0, "machine": MACHINE, "date": "2026-12-05"}
    )
    _write(
        tmp_path,
        "test_command.json",
        {"wall_s": 353.7, "passed": 1819, "skipped": 4, "target_s": 360, "pytest_cache": "empty", "machine": MACHINE},
    )
    (tmp_path / "results" / "cross_cpu.json").write_text(
        json.dumps(
            [
                _run("AuthenticAMD-f26-m2", "0f7cbf4", identical=1, compared=21, rows=10, within=10),
                _run("GenuineIntel-f6-m167", "0ba6191", identical=1, compared=21, rows=10, within=10)
                | {"cpu": "Intel(R) Xeon(R) Processor"},
            ]
        )
    )
    short = facts.holds_block(tmp_path).splitlines()
    assert short == [
        "- Main job, fresh clone to leaderboard: **6.9 min** (target 10 min; 2 CPUs, AMD EPYC 9B45).",
        "- Across real CPU kinds: 2 checked from scratch (Zen 5, Intel Xeon): every row within "
        "its noise, not byte-identical.",
        "- Emulated CPU kinds: none recorded (`reproduce fingerprint --emulate MODEL --write`).",
        facts.site_item(None),
        "- Tests: 1,819 in **354 s** (target 6 min; 2 CPUs, AMD EPYC 9B45).",
    ]
    assert all(len(line) <= 130 for line in short), short
    full = facts.holds_details(tmp_path)
    assert (
        "install 60 s + `dvc repro` 352 s" in full
        and "Intel(R) Xeon(R) Processor (`GenuineIntel-f6-m167`) at `0ba6191`" in full
    )
    assert "1,819 tests (4 skipped) in **354 s** with an empty `.pytest_cache`" in full


def test_the_cross_cpu_item_says_same_bytes_within_noise_or_failing():
    same = _run("A", "1", identical=21, compared=21, rows=10, within=0)
    noisy = _run("B", "1", identical=1, compared=21, rows=10, within=10)
    bad = _run("C", "1", identical=1, compared=21, rows=10, within=7, ok=False)
    assert facts.cross_cpu_item([same, same | {"kind": "A2"}]).endswith("(A): the same bytes on each.")
    assert facts.cross_cpu_item([same, noisy]).endswith("every row within its noise, the same bytes on 1 (A).")
    zen = [
        _run(kind, "1", identical=i, compared=21, rows=10, within=10 - 10 * (i == 21)) | {"cpu": cpu}
        for kind, cpu, i in (
            ("AuthenticAMD-f26-m2", "AMD EPYC", 1),
            ("GenuineIntel-f6-m167", "Intel(R) Xeon(R) Processor", 20),
            ("AuthenticAMD-f25-m17", "AMD EPYC", 21),
            ("AuthenticAMD-f25-m1", "AMD EPYC", 21),
        )
    ]
    assert facts.cross_cpu_item(zen) == (
        "- Across real CPU kinds: 4 checked from scratch (Zen 5, Intel Xeon, Zen 4, Zen 3): every row within its "
        "noise, the same bytes on 2 (Zen 4, Zen 3)."
    )
    assert facts.cross_cpu_item([noisy, same, bad]).endswith("**1 failing the gate**.")
    assert facts.cross_cpu_item([noisy, noisy]).startswith("- Across real CPU kinds: 1 checked")  # the newest of a kind
    emulated = {"scope": "stages", "kind": "QEMU-X", "emulated": True, "byte_identical": True}  # not a gate run
    assert facts.cross_cpu_item([noisy, emulated]) == facts.cross_cpu_item([noisy])
    assert (
        machines.cpu_name("Intel(R) Xeon(R) Processor") == "Intel Xeon"
        and machines.cpu_name("AMD EPYC 9B45") == "AMD EPYC 9B45"
    )


def test_test_command_line_judges_the_six_minutes_and_says_what_was_cached(tmp_path):
    rec = {
        "wall_s": 330.2,
        "setup_s": 16.4,
        "pytest_cache": "empty",
        "passed": 1813,
        "skipped": 4,
        "target_s": 360,
        "machine": MACHINE,
        "date": "2026-12-05",
    }
    within = facts.test_command_line(rec)
    assert "ran 1,813 tests (4 skipped) in **330 s** with an empty `.pytest_cache`" in within
    assert "install 16 s before it, within the 6-minute target (2 CPUs, AMD EPYC 9B45; 2026-12-05)" in within
    over = facts.test_command_line(dict(rec, wall_s=360.4, pytest_cache="present", setup_s=None))
    assert "in **360 s** with the paper-scale bundles cached" in over and "**over** the 6-minute target" in over
    assert "install" not in over and "uncommitted" not in over
    dirty = facts.test_command_line(dict(rec, git={"commit": "abc", "dirty": True}))
    assert dirty.endswith("(2 CPUs, AMD EPYC 9B45; 2026-12-05; a checkout with uncommitted changes).")
    base = {"wall_s": 301.6, "passed": 1700, "git": {"commit": "a4c4558fb226", "dirty": False}}
    beside = facts.test_command_line(dict(rec, baseline=base))
    assert beside == within[:-1] + (
        "; the same command at `a4c4558` (1,700 tests), run right after it on the same machine: 302 s."
    )
    subset = facts.test_command_line(dict(rec, command="python -m pytest tests/core"))
    assert "only `python -m pytest tests/core` measured (1,813 tests in 330 s), not the README's test command" in subset
    assert "within" not in subset
    _write(tmp_path, "test_command.json", rec)
    assert facts.holds_details(tmp_path).splitlines()[4] == within
    assert (
        facts.holds_block(tmp_path).splitlines()[4]
        == "- Tests: 1,813 in **330 s** (target 6 min; 2 CPUs, AMD EPYC 9B45)."
    )
    assert "**over** the 6-minute target" in facts.tests_item(dict(rec, wall_s=360.4))
    assert "not measured" in facts.tests_item(dict(rec, command="python -m pytest tests/core"))
    assert facts.tests_item(dict(rec, baseline=base)) == (  # 330.2 / 301.6 = 1.0948...
        "- Tests: 1,813 in **330 s** (target 6 min; 2 CPUs, AMD EPYC 9B45; 1.09x the wall of the 1,700 tests of "
        "`a4c4558` run beside it)."
    )


def test_main_job_line_adds_install_and_judges_the_target():
    within = facts.main_job_line({"repro_wall_s": 400.0, "install_s": 150.0, "machine": MACHINE, "date": "2026-12-02"})
    assert "install 150 s + `dvc repro` 400 s = **9.2 min**, within the 10-minute target" in within
    assert "2 CPUs, AMD EPYC 9B45" in within
    over = facts.main_job_line({"repro_wall_s": 500.0, "install_s": 150.0})
    assert "**10.8 min**, **over** the 10-minute target" in over
    no_install = facts.main_job_line({"repro_wall_s": 590.0})
    assert "install" not in no_install and "= **9.8 min**, within" in no_install
    assert "**10.8 min** (**over** the 10-minute target" in facts.main_job_item(
        {"repro_wall_s": 500.0, "install_s": 150.0}
    )
    assert facts.main_job_item({"repro_wall_s": 590.0}).startswith("- Main job, `dvc repro` from scratch: **9.8 min**")


def test_main_job_line_states_the_machine_s_target_and_the_compute_floor_ratio():
    """Issue 56: 8 minutes on AMD's family 25 (Zen 3 and Zen 4), 5 on a Zen 5 (26); `dvc repro` at most 1.2x its
    stages' compute floor ((CPU - start-up) / cores)."""
    zen4 = dict(MACHINE, cpu_kind="AuthenticAMD-f25-m17")
    rec = {
        "repro_wall_s": 400.0,
        "install_s": 70.0,
        "machine": zen4,
        "date": "2026-12-06",
        "floor_ratio": 1.18,
        "compute_floor_s": 339.0,
        "load": {"mean": 3.5, "max": 6.0},
    }
    line = facts.main_job_line(rec)
    assert "= **7.8 min**, within the 8-minute target of a family-25 AMD" in line
    assert "(2 CPUs, AMD EPYC 9B45 (Zen 4, AuthenticAMD-f25-m17), load average 3.5; 2026-12-06)" in line
    zen3 = facts.main_job_line(dict(rec, machine=dict(MACHINE, cpu_kind="AuthenticAMD-f25-m1"), install_s=90.0))
    assert "= **8.2 min**, **over** the 8-minute target of a family-25 AMD (2 CPUs, AMD EPYC 9B45 (Zen 3, " in zen3
    assert "took **1.18x** its compute floor ((CPU - start-up) / cores = 339 s), within the 1.2x target" in line
    zen5 = facts.main_job_line(dict(rec, machine=dict(MACHINE, cpu_kind="AuthenticAMD-f26-m2"), floor_ratio=1.43))
    assert (
        "**over** the 5-minute target of a family-26 AMD (2 CPUs, AMD EPYC 9B45 (Zen 5, " in zen5
        and "**1.43x**" in zen5
        and "**over** the 1.2x" in zen5
    )
    other = facts.main_job_line(dict(rec, machine=dict(MACHINE, cpu_kind="GenuineIntel-f6-m167")))
    assert "within the 10-minute target (" in other
    item = facts.main_job_item(rec)  # the README's short item: the same targets, the machine named
    assert item == (
        "- Main job, fresh clone to leaderboard: **7.8 min** (target 8 min of a family-25 AMD; `dvc repro` 1.18x its "
        "compute floor, target 1.2x; 2 CPUs, AMD EPYC 9B45 (Zen 4, AuthenticAMD-f25-m17))."
    )
    assert "(**over** the 5-minute target of a family-26 AMD; `dvc repro` 1.43x its compute floor, **over** the " in (
        facts.main_job_item(dict(rec, machine=dict(MACHINE, cpu_kind="AuthenticAMD-f26-m2"), floor_ratio=1.43))
    )
    par = facts.main_job_line(
        dict(rec, parallel={"command": "python -m benchmark run --jobs 2", "repro_wall_s": 350.0, "floor_ratio": 1.1})
    )
    assert par.endswith("; two stages at a time (`python -m benchmark run`, the same outputs) 350 s = 7.0 min, 1.10x.")
    # the README's command two stages at a time, compared with dvc repro in a clean copy (scripts/measure-main-job.sh)
    main = dict(rec, command="python -m benchmark run --jobs 2", floor_ratio=1.19)
    both = facts.main_job_line(dict(main, serial={"command": "dvc repro", "repro_wall_s": 480.0, "floor_ratio": 1.4}))
    assert "`python -m benchmark run` 400 s = **7.8 min**" in both and "took **1.19x** its compute floor" in both
    assert both.endswith("; one stage at a time (`dvc repro`, the same outputs) 480 s = 9.2 min, 1.40x.")
    assert "; `python -m benchmark run` 1.19x its compute floor, target 1.2x;" in facts.main_job_item(main)


def test_pinning_line_shows_the_measured_ratio():
    line = facts.pinning_line({"ratio": {"wall_s": 1.234, "cpu_s": 1.1}, "stage": "train@lite0-s0", "machine": MACHINE})
    assert "**1.23x**" in line and "`train@lite0-s0`" in line


def test_site_table_and_line_from_a_record(tmp_path):
    lim = {"publish_s": 300, "site_bytes": 250e6, "file_bytes": 25e6, "embedded_bytes": 20e6, "render_ms": 1000}
    half = {
        "rows": 300_000,
        "wall": 30.0,
        "cpu": 28.0,
        "bytes": 22e6,
        "files": 90,
        "largest": ["a/rows.parquet", 4e6],
        "embedded_bytes": 7e6,
    }
    full = {
        "rows": 600_000,
        "wall": 61.0,
        "cpu": 55.0,
        "bytes": 45.9e6,
        "files": 90,
        "largest": ["a/rows.parquet", 9.2e6],
        "embedded_bytes": 7e6,
    }
    ten = {"rows": 6_000_000, "wall": 619.0, "cpu": 559.0, "bytes": 476e6}
    _write(
        tmp_path,
        "site_scale.json",
        {
            "publish": {"0.5x": half, "1x": full, "10x estimate": ten},
            "limits": lim,
            "machine": MACHINE,
            "date": "2026-12-02",
            "first_render_ms": {"embedded": 310, "cifar100": 640},
        },
    )
    line = facts.site_line(json.loads((tmp_path / "results" / "site_scale.json").read_text()))
    assert "(600,000 rows" in line and "**61 s** (target 300 s)" in line and "**46 MB** (target 250 MB)" in line
    assert "about 619 s and 476 MB (2 CPUs, AMD EPYC 9B45, 2026-12-02)." in line
    assert "largest file 9.2 MB (target 25), embedded part 7.0 MB (target 20)" in line
    assert "slowest first render 640 ms (target 1000)" in line
    assert facts.site_item(json.loads((tmp_path / "results" / "site_scale.json").read_text())) == (
        "- Site at the papers' scale (600,000 rows): published in **61 s**, **46 MB** (targets 300 s, 250 MB; "
        "2 CPUs, AMD EPYC 9B45)."
    )
    table = record_tables.site_table(tmp_path)
    assert "| 1x: 600,000 | 61 | 55 | 45.9 | 90 | 9.2 (`a/rows.parquet`) | 7.0 |" in table
    assert "| 10x estimate: 6,000,000 | 619 | 559 | 476.0 |  |  |  |" in table
    assert "cifar100 640, embedded 310" in table


def _run(kind, commit, *, identical, compared, rows, within, choices=0, ok=True):
    from benchmark.reproduce import cross_cpu

    counts = {
        "rows": rows,
        "identical": rows - within,
        "recomputed": 0,
        "differs": 0,
        "within-noise": within,
        "beyond-noise": 0 if ok else 3,
        "inputs-differ": 0,
        "missing": 0,
        "extra": 0,
    }
    return cross_cpu.entry(
        kind=kind,
        cpu=f"{kind} CPU",
        commit=commit,
        bundle="leaderboard/embedded/b",
        bundle_commit="c0ffee1",
        pinned=True,
        rows=counts,
        summary={"values": 4, "identical": 4, "reproduces": True},
        outputs={"identical": identical, "compared": compared},
        choices=choices,
        reproduces=ok,
    )


def test_the_cross_cpu_line_names_each_kind_its_commit_and_what_held(tmp_path):
    from benchmark.reproduce import cross_cpu

    assert "reproduce check --record results/cross_cpu.json" in cross_cpu.holds_line([], [])
    path = tmp_path / "cross_cpu.json"
    cross_cpu.add(path, _run("I", "1111111aaaa", identical=1, compared=21, rows=100, within=100, choices=15))
    cross_cpu.add(path, _run("A", "2222222bbbb", identical=21, compared=21, rows=100, within=0))
    runs = cross_cpu.add(
        path, _run("A", "2222222bbbb", identical=21, compared=21, rows=100, within=0)
    )  # replaced, not added
    assert [r["kind"] for r in runs] == ["A", "I"] and cross_cpu.load(path) == runs
    line = cross_cpu.holds_line(runs, [])
    assert (
        "A CPU (`A`) at `2222222` (vs the bundle of `c0ffee1`): 21 of 21 stage outputs byte-identical, every row the "
        "same"
    ) in line
    assert (
        "I CPU (`I`) at `1111111` (vs the bundle of `c0ffee1`): 1 of 21 stage outputs byte-identical; 100 of 100 "
        "rows on the noise path, within it (15 greedy-soup rows chose other ingredients)"
    ) in line
    table = cross_cpu.runs_table(runs)
    assert "| `I` | I CPU | `1111111`" in table and "| 1 of 21 | 0 / 100 / 0 | passes | – |" in table
    assert "| 3 of 21 | 90 / 7 / 3 | FAILS |" in cross_cpu.runs_table(
        [
            _run("X", "3", identical=3, compared=21, rows=100, within=7, ok=False)
            | {
                "rows": {
                    "rows": 100,
                    "identical": 90,
                    "recomputed": 0,
                    "differs": 0,
                    "within-noise": 7,
                    "beyond-noise": 3,
                    "inputs-differ": 0,
                    "missing": 0,
                    "extra": 0,
                }
            }
        ]
    )


def test_the_fingerprint_lines_count_what_two_kinds_share_and_agree_on():
    from benchmark.reproduce import cross_cpu

    mode = "threads=2,onednn=on"
    a = {
        "machine": {"kind": "A", "cpu": "a"},
        "torch": "t",
        "hashes": {
            f"{mode}/conv fwd x": "1",
            f"{mode}/mm 7x33x5": "2",
            f"{mode}/sum": "3",
            "threads=1,onednn=on/sum": "4",
        },
    }
    b = {
        "machine": {"kind": "B", "cpu": "b"},
        "torch": "t",
        "hashes": {
            f"{mode}/conv fwd x": "1",
            f"{mode}/mm 7x33x5": "9",
            f"{mode}/sum": "3",
            "threads=1,onednn=on/sum": "5",
        },
    }
    summary = cross_cpu.fingerprint_summary([a, b])
    assert "Kernel fingerprints of 2 CPU kinds (`results/fingerprints/`: 2 real, 0 emulated;" in summary
    assert (
        "of the tool's operations in the pipeline's mode that all 2 hold, 2 of 3 agree, the 1 that part are MKL's"
        in summary
    )
    table = cross_cpu.fingerprint_table([a, b])
    assert "| convolution | – | 1 of 1 |" in table and "| matrix product (MKL) | – | 0 of 1 **part** |" in table
    assert "| other ATen operations | 0 of 1 **part** | 1 of 1 |" in table
    assert "2 of 4 operations equal. In the pipeline's mode (threads=2,onednn=on) these differ: `mm 7x33x5`." in table
    assert "pipeline" not in table.split("\n\n")[0]  # no row for a group neither record holds
    layer = f"{mode}/pipeline net 48px [0123abcd]: forward conv_stem"
    a["hashes"][layer] = b["hashes"][layer] = "7"
    b["hashes"][f"{mode}/pipeline net 48px [0123abcd]: forward head"] = "8"  # one record's only: not shared
    table = cross_cpu.fingerprint_table([a, b])
    assert "| the pipeline's layers: a training step and a logits pass | – | 1 of 1 |" in table
    assert "| other ATen operations | 0 of 1 **part** | 1 of 1 |" in table and "3 of 5 operations equal" in table


def test_other_cpu_kinds_timings_come_from_their_checks_and_skip_the_readmes_own_machine():
    timed = _run("GenuineIntel-f6-m167", "d461a5f0", identical=20, compared=21, rows=10, within=10) | {
        "cpu": "Intel(R) Xeon(R) Processor",
        "timing": {"command": "python -m benchmark run --jobs 2", "repro_wall_s": 427.7, "install_s": 108.9}
        | {"floor_ratio": 1.116, "compute_floor_s": 383.2},
    }
    untimed = _run("AuthenticAMD-f26-m2", "0f7cbf4", identical=1, compared=21, rows=10, within=10)
    rec = {"machine": {"cpu_kind": "AuthenticAMD-f25-m17"}}
    line = facts.other_cpus_line(rec, [untimed, timed])
    assert line == (
        "- The same main job on other CPU kinds (their from-scratch checks): Intel Xeon (`GenuineIntel-f6-m167`, at "
        "`d461a5f`): 8.9 min (install 109 s + `python -m benchmark run --jobs 2` 428 s, 1.12x its compute floor)."
    )  # 108.9 + 427.7 = 536.6 s = 8.94 min; the AMD Zen 5's check has no timing: left out
    zen4 = _run("AuthenticAMD-f25-m17", "8a0ca30", identical=21, compared=21, rows=10, within=0) | {
        "cpu": "AMD EPYC",
        "timing": {"command": "python -m benchmark run --jobs 2", "repro_wall_s": 314.1, "install_s": 84.4},
    }
    zen3 = {"repro_wall_s": 507.4, "install_s": 119.0, "machine": dict(MACHINE, cpu_kind="AuthenticAMD-f25-m1")}
    assert "): AMD EPYC (Zen 4, `AuthenticAMD-f25-m17`, at `8a0ca30`): 6.6 min (install 84 s" in facts.other_cpus_line(
        zen3, [zen4, timed]
    )
    item = facts.main_job_item(zen3, [untimed, zen4, timed])  # the README's item names the other kinds' newest
    assert item == (
        "- Main job, fresh clone to leaderboard: **10.4 min** (**over** the 8-minute target of a family-25 AMD; 2 "
        "CPUs, AMD EPYC 9B45 (Zen 3, AuthenticAMD-f25-m1)); elsewhere 6.6 min on a Zen 4 (`8a0ca30`), 8.9 min on an "
        "Intel Xeon (`d461a5f`)."
    )  # (119.0 + 507.4) / 60 = 10.44; (84.4 + 314.1) / 60 = 6.64
    zen3_runs = [  # two timed checks of the README's own kind: the run-to-run range beside its figure
        _run("AuthenticAMD-f25-m1", c, identical=21, compared=21, rows=10, within=0)
        | {"cpu": "AMD EPYC", "timing": {"repro_wall_s": w, "install_s": i}}
        for c, w, i in (("d0ce45d", 507.4, 119.0), ("d5f6acf", 576.0, 122.8))
    ]
    item = facts.main_job_item(dict(zen3, repro_wall_s=576.0, install_s=122.8), [zen4, *zen3_runs])
    assert "(Zen 3, AuthenticAMD-f25-m1); 10.4-11.6 min over this kind's 2 timed checks); elsewhere 6.6 min" in item
    assert "over this kind's" not in facts.main_job_item(zen3, [zen4, zen3_runs[0]])  # one check: no range
    assert facts.other_cpus_line({"machine": {"cpu_kind": "GenuineIntel-f6-m167"}}, [timed]) == ""  # the README's own
    assert facts.other_cpus_line(None, []) == ""
