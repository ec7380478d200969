"""What the generated docs call a machine and the main job's target on it (benchmark/docsgen/machines.py), by
hand-made CPU kinds."""

from benchmark.docsgen import machines


def test_the_microarchitecture_of_an_amd_kind_comes_from_its_family_and_model():
    """AMD's family 25 holds both Zen 3 (Milan: model 1; Vermeer 0x21; Cezanne 0x50) and Zen 4 (Genoa: model 17 =
    0x11; Raphael 0x61; Phoenix 0x74); family 26 is Zen 5, 23 Zen (Naples 1) and Zen 2 (Rome 0x31)."""
    cases = {
        "AuthenticAMD-f25-m1": "Zen 3",
        "AuthenticAMD-f25-m33": "Zen 3",
        "AuthenticAMD-f25-m80": "Zen 3",
        "AuthenticAMD-f25-m17": "Zen 4",
        "AuthenticAMD-f25-m97": "Zen 4",
        "AuthenticAMD-f25-m116": "Zen 4",
        "AuthenticAMD-f26-m2": "Zen 5",
        "AuthenticAMD-f23-m1": "Zen",
        "AuthenticAMD-f23-m49": "Zen 2",
        "GenuineIntel-f6-m167": "",
        "QEMU-EPYC-Milan": "",
        "": "",
    }
    assert {k: machines.microarchitecture(k) for k in cases} == cases
    assert machines.target({"cpu_kind": "AuthenticAMD-f25-m1"}) == (480, "a family-25 AMD")
    assert machines.target({"cpu_kind": "AuthenticAMD-f26-m2"}) == (300, "a family-26 AMD")
    assert machines.target({"cpu_kind": "AuthenticAMD-f23-m49"}) == (machines.TARGET_S, "")
    assert machines.target({"cpu_kind": "GenuineIntel-f6-m167"}) == (machines.TARGET_S, "") == machines.target(None)


def test_a_records_machine_is_named_by_model_microarchitecture_and_kind():
    assert machines.where({"cpus": 2, "cpu": "AMD EPYC", "cpu_kind": "AuthenticAMD-f25-m1"}) == (
        "2 CPUs, AMD EPYC (Zen 3, AuthenticAMD-f25-m1)"
    )
    assert machines.where({"cpus": 2, "cpu": "AMD EPYC", "kind": "AuthenticAMD-f26-m2"}).endswith(
        "(Zen 5, AuthenticAMD-f26-m2)"
    )
    assert machines.where({"cpus": 2, "cpu": "Intel Xeon", "cpu_kind": "GenuineIntel-f6-m167"}) == (
        "2 CPUs, Intel Xeon (GenuineIntel-f6-m167)"
    )
    assert machines.where({}) == "? CPUs, ?"
