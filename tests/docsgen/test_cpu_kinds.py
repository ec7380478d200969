"""The CPU kinds table and the README's emulated line (benchmark/docsgen/cpu_kinds.py), from hand-made records."""

from benchmark.docsgen import cpu_kinds

MODE = "threads=2,onednn=on"
PIPE = f"{MODE}/pipeline mnv3 48px [0a1b2c3d]: forward classifier"


def _rec(kind, hashes, **machine):
    return {"machine": {"kind": kind, "cpu": kind.split("-")[0], **machine}, "torch": "t", "hashes": hashes}


AMD = _rec("AuthenticAMD-f25-m17", {f"{MODE}/mm": "a", f"{MODE}/conv": "1", PIPE: "p"}) | {
    "commit": "abcdef0123",
    "date": "2026-12-06",
}
INTEL = _rec("GenuineIntel-f6-m167", {f"{MODE}/mm": "i", f"{MODE}/conv": "1"})
QEMU = _rec(
    "QEMU-Icelake-Server",
    {f"{MODE}/mm": "i", f"{MODE}/conv": "1", PIPE: "p"},
    emulated=True,
    stands_for="GenuineIntel-f6-m134",
    cpu_name="x",
    host={"kind": "AuthenticAMD-f25-m17"},
    qemu="7.2.22",
) | {"commit": "1234567890", "dirty": True, "date": "2026-12-06"}
QEMU["machine"]["cpu"] = "Intel Xeon Processor (Icelake)"
STAGES = {
    "scope": "stages",
    "kind": "QEMU-Icelake-Server",
    "cpu": "Intel Xeon Processor (Icelake)",
    "emulated": True,
    "stands_for": "GenuineIntel-f6-m134",
    "host": {"kind": "AuthenticAMD-f25-m17"},
    "qemu": "7.2.22",
    "commit": "fedcba9876",
    "date": "2026-12-06",
    "stages": ["train@m", "logits@m"],
    "stage_outputs": {"identical": 2, "compared": 2},
    "byte_identical": True,
    "seconds": 1620.0,
}


def test_the_table_has_a_row_per_check_real_kinds_first_with_what_agreed():
    lines = cpu_kinds.table([AMD, INTEL, QEMU], [STAGES]).splitlines()
    assert lines[0] == "| CPU kind | real or emulated | code | what was compared | result |"
    kinds = [line.split(" | ")[0] for line in lines[2:]]
    assert kinds == [
        "| `AuthenticAMD-f25-m17`",
        "| `GenuineIntel-f6-m167`",
        "| `QEMU-Icelake-Server`",
        "| `QEMU-Icelake-Server`",
    ]
    amd, intel, qemu, stages = lines[2:]
    assert (
        "| real: AuthenticAMD | `abcdef0` (2026-12-06) | kernel fingerprint: 2 tool operations (1 mode), 1 pipeline"
        in amd
    )
    assert (
        "tool operations equal to real Intel 1 of 2; pipeline operations equal to every other kind's on 1 of 1 |" in amd
    )
    assert "| not recorded |" in intel and "tool operations equal to real AMD 1 of 2 |" in intel
    assert (
        "emulated: Intel Xeon Processor (Icelake) (CPUID `GenuineIntel-f6-m134`; QEMU 7.2.22 on "
        "`AuthenticAMD-f25-m17`) | `1234567` + uncommitted changes (2026-12-06)"
    ) in qemu
    assert "tool operations equal to real Intel 2 of 2, real AMD 1 of 2; pipeline operations" in qemu
    assert stages.endswith(
        "| `train@m`, `logits@m` rerun whole, against the committed `dvc.lock` | 2 of 2 outputs "
        "byte-identical (27 min) |"
    )


def test_a_pipeline_operation_that_parts_is_counted_and_the_readme_line_says_so():
    parted = QEMU | {"hashes": {**QEMU["hashes"], PIPE: "other"}}
    assert cpu_kinds.pipeline_agreement(parted, [AMD, INTEL, parted]) == (0, 1)
    line = cpu_kinds.emulated_item([STAGES], [AMD, INTEL, parted])
    assert line == (
        "- Emulated CPU kinds (1 in CI on every commit, QEMU): Intel Xeon (Icelake) gave the committed bytes "
        "for `train@m` and `logits@m`; the pipeline's per-layer operations equal on 0 of 2 kinds (1 real, "
        "1 emulated)."
    )
    assert "equal on 2 of 2 kinds" in cpu_kinds.emulated_item([STAGES], [AMD, INTEL, QEMU])
    other = STAGES | {"stages": ["train@n"], "byte_identical": False, "stage_outputs": {"identical": 0, "compared": 1}}
    assert (
        "Intel Xeon (Icelake) gave 2 of 3 outputs for `train@m`, `logits@m` and `train@n`;"
        in cpu_kinds.emulated_item([STAGES, other], [AMD, INTEL, QEMU])
    )
    assert cpu_kinds.emulated_item([], []).startswith("- Emulated CPU kinds: none recorded")
    assert cpu_kinds.short_name("Intel(R) Xeon(R) Processor") == "Intel Xeon"
