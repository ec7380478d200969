"""The emulated fingerprint's time budget for the pipeline's operations (`reproduce fingerprint --emulate MODEL
--pipeline-budget SECONDS`, benchmark/reproduce/emulate.py): TCG ran the pipeline's architectures about 8x slower on an
AMD Zen 3 host than on a Zen 4 (one EfficientNet-Lite0 at 48 px: 9 minutes), so CI gives them a budget. By fakes and
a fake clock: no emulator runs here."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmark.reproduce import emulate
from benchmark.reproduce import fingerprint as fp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def embedded():
    from benchmark.models.zoo import load_zoo
    from benchmark.stages.params_config import load_params

    params = load_params(ROOT / "params.yaml")
    return params, load_zoo(params.zoo, recipes=params.recipes, check_arch=False)


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"all_modes": True, "no_ops": False, "no_pipeline": False, "models": None, **kw})


def _fakes(monkeypatch, seconds: dict[str, float]):
    """fingerprint.measure_as_asked (the tool's operations) and fingerprint.measure (one architecture) replaced; each
    architecture's part advances the fake clock by ``seconds[name]``; returns the clock and the calls."""
    now, calls = [0.0], []

    def as_asked(params, zoo, args, progress=None):
        calls.append(("ops", args.no_pipeline))
        return {"machine": {"kind": "X"}, "hashes": {"threads=2,onednn=on/op": "1"}}

    def measure(params, zoo, *, with_ops, names, progress=None, **kw):
        assert not with_ops and len(names) == 1
        calls.append(("pipeline", names[0]))
        now[0] += seconds[names[0]]
        return {"hashes": {f"pipeline {names[0]}: forward": names[0]}}

    monkeypatch.setattr(fp, "measure_as_asked", as_asked)
    monkeypatch.setattr(fp, "measure", measure)
    return (lambda: now[0]), calls


def test_the_architectures_run_smallest_input_first_and_none_starts_after_the_budget(monkeypatch, embedded):
    params, zoo = embedded
    distinct = [n for n, _, _ in fp._distinct(params, zoo)]  # lite0-s0 (48 px), lite1, lite2, lite0-px24, mnv3s050
    assert distinct == ["lite0-s0", "lite1", "lite2", "lite0-px24", "mnv3s050"]
    seconds = {"lite0-px24": 180.0, "mnv3s050": 120.0, "lite0-s0": 540.0, "lite1": 700.0, "lite2": 800.0}
    clock, calls = _fakes(monkeypatch, seconds)
    record = emulate.measure_within(params, zoo, _args(budget=600.0), clock=clock)
    # 24 px first, then 48 px (mobilenetv3_small_050 before tf_efficientnet_lite0), then 52 and 56 px; lite0-s0 starts
    # at 300 s (< 600) and runs to its end; lite1 would start at 840 s: left out, and lite2 with it
    assert calls == [("ops", True), ("pipeline", "lite0-px24"), ("pipeline", "mnv3s050"), ("pipeline", "lite0-s0")]
    assert record["not_measured"] == ["lite1", "lite2"]
    assert set(record["hashes"]) == {"threads=2,onednn=on/op"} | {
        f"pipeline {n}: forward" for n in ("lite0-px24", "mnv3s050", "lite0-s0")
    }


def test_a_spent_budget_still_measures_one_architecture_and_no_budget_measures_all_as_before(monkeypatch, embedded):
    params, zoo = embedded
    clock, calls = _fakes(monkeypatch, dict.fromkeys(["lite0-px24", "mnv3s050", "lite0-s0", "lite1", "lite2"], 1.0))
    record = emulate.measure_within(params, zoo, _args(budget=0.0), clock=clock)
    assert calls[1:] == [("pipeline", "lite0-px24")] and len(record["not_measured"]) == 4
    calls.clear()
    unbounded = emulate.measure_within(params, zoo, _args(budget=None), clock=clock)
    assert calls == [("ops", False)] and "not_measured" not in unbounded  # measure_as_asked as it was


def test_the_budget_reaches_the_child_and_the_reader_sees_what_was_left_out(monkeypatch, capsys):
    from benchmark.cli.main import main

    monkeypatch.setattr(emulate, "qemu", lambda: "/usr/bin/qemu-x86_64")
    cmd = emulate.child_command(
        "Icelake-Server", params="p.yaml", out="o.json", all_modes=True, with_ops=True, with_pipeline=True, budget=600
    )
    assert cmd[cmd.index("--budget") + 1] == "600"
    assert "--budget" not in emulate.child_command(
        "Icelake-Server", params="p.yaml", out="o.json", all_modes=True, with_ops=True, with_pipeline=True
    )
    monkeypatch.chdir(ROOT)
    committed = json.loads((ROOT / "results/fingerprints/QEMU-Skylake-Client.json").read_text())
    asked = []

    def fake(model, **kw):
        asked.append(kw)
        return {**committed, "seconds": 30.0, "not_measured": ["lite1", "lite2"]}

    monkeypatch.setattr(emulate, "fingerprint", fake)
    code = main(["reproduce", "fingerprint", "--emulate", "Skylake-Client", "--pipeline-budget", "600"])
    out = capsys.readouterr().out
    assert code == 0 and asked[0]["budget"] == 600.0
    assert (
        "the pipeline's operations of lite1, lite2 not measured under the emulator: the 600 s of --pipeline-budget "
        "were spent on the smaller architectures" in out
    )


@pytest.mark.parametrize("extra", [["--emulate", "Skylake-Client", "--write"], []])
def test_a_budget_with_write_or_without_emulation_is_refused_in_one_line(monkeypatch, capsys, extra):
    from benchmark.cli.main import main

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(emulate, "fingerprint", lambda *a, **k: pytest.fail("nothing may be measured"))
    assert main(["reproduce", "fingerprint", "--pipeline-budget", "60", *extra]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "error: --pipeline-budget: only with --emulate, and not with --write (a record holds every part)"
    )
