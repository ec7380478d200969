"""Kernel fingerprints (benchmark/reproduce/fingerprint.py): the committed records of two CPU kinds, the rules that
judge a machine against them, and this machine's own operations against its kind's record."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from benchmark.cli import reproduce_cpu
from benchmark.cli.main import main
from benchmark.reproduce import fingerprint as fp
from benchmark.reproduce import fingerprint_records as fr

ROOT = Path(__file__).resolve().parents[2]
RECORDS = fr.read_records(fr.RECORDS)
BY_KIND = {r["machine"]["kind"]: r for r in RECORDS}
INTEL, AMD = "GenuineIntel-f6-m167", "AuthenticAMD-f25-m17"
PIPELINE_MODE = fr.tag(2)


def rec(kind: str, hashes: dict, torch_version: str = "2.14.1") -> dict:
    return {"machine": {"kind": kind, "cpu": kind}, "torch": torch_version, "hashes": hashes}


def test_both_vendors_are_recorded_and_agree_on_every_operation_of_the_pipelines_mode_but_mkls():
    assert {INTEL, AMD} <= set(BY_KIND)
    agreed = fr.evidence(RECORDS)
    shared = [k for k in BY_KIND[INTEL]["hashes"] if k.startswith(PIPELINE_MODE + "/") and k in BY_KIND[AMD]["hashes"]]
    mode = [k for k in shared if not fr.pipeline_op(k)]  # the tool's operations
    assert len(mode) == 40
    parting = sorted(k for k in mode if k not in agreed)
    assert parting == sorted(PIPELINE_MODE + k for k in fp.MKL_ROUTED)  # BLAS small products, VML exp, torch's AdamW
    convs = [k for k in mode if "/conv " in k]
    assert len(convs) == 16 and all(k in agreed for k in convs)  # oneDNN's convolutions hold across the vendors
    layers = [k for k in shared if fr.pipeline_op(k)]  # a real Intel Xeon's pipeline layers: the AMD EPYCs' bytes
    assert len(layers) > 1000 and all(k in agreed for k in layers)


def test_two_kinds_of_one_vendor_agreeing_is_no_evidence_for_the_other_vendor():
    zen4, zen5 = (
        rec("AuthenticAMD-f25-m17", {"layer": "1", "op": "1"}),
        rec("AuthenticAMD-f26-m2", {"layer": "1", "op": "1"}),
    )
    intel = rec(INTEL, {"op": "1"})
    assert fr.evidence([zen4, zen5]) == set()  # one vendor
    assert fr.evidence([zen4, zen5, intel]) == {"op"}  # "layer": only AMD kinds hold it
    mine = rec("GenuineIntel-f6-m143", {"layer": "2", "op": "1"})
    verdicts = fr.compare(mine, [zen4, zen5, intel])
    assert all(v["failing"] == [] for v in verdicts) and verdicts[0]["differ"] == ["layer"]  # reported, not failed
    assert fr.compare(rec("GenuineIntel-f6-m143", {"op": "2"}), [zen4, intel])[0]["failing"] == ["op"]


def test_a_record_of_this_cpu_kind_must_agree_on_every_operation():
    mine = rec("A", {"x": "1", "y": "2"})
    (v,) = fr.compare(mine, [rec("A", {"x": "1", "y": "3"})])
    assert v["same_kind"] and v["differ"] == ["y"] and v["failing"] == ["y"] and v["equal"] == 1


def test_another_kind_must_agree_where_two_kinds_already_agree_and_is_reported_elsewhere():
    mine = rec("C", {"held": "1", "parted": "9", "new": "5", "mine only": "0"})
    records = [rec("A", {"held": "1", "parted": "2", "new": "6"}), rec("B", {"held": "1", "parted": "3"})]
    va, vb = fr.compare(mine, records)
    assert va["differ"] == ["parted", "new"] and va["failing"] == [] and va["shared"] == 3
    assert vb["differ"] == ["parted"] and vb["failing"] == []
    mine["hashes"]["held"] = "7"  # an operation both recorded kinds agree on parts here: a failure, named
    va, vb = fr.compare(mine, records)
    assert va["failing"] == ["held"] and vb["failing"] == ["held"]


@pytest.mark.parametrize(
    "text,problem",
    [
        ("{", "not a readable JSON"),
        ('{"hashes": {}}', "machine.kind"),
        ('{"machine": {"kind": "A"}, "hashes": {"x": 1}}', "hashes"),
    ],
)
def test_a_malformed_record_is_refused_with_the_problem_named(tmp_path, text, problem):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=problem) as e:
        fr.read_record(path)
    assert str(path) in str(e.value)


def test_the_command_refuses_a_malformed_record_before_measuring(tmp_path, monkeypatch, capsys):
    (tmp_path / "bad.json").write_text("{")
    monkeypatch.setattr(fp, "measure", lambda *a, **k: pytest.fail("measured despite a malformed record"))
    assert main(["reproduce", "fingerprint", "--records", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'bad.json'}: not a readable JSON fingerprint record")


@pytest.mark.parametrize("mkl,theirs,code", [([], "1", 0), (["aten::addmm"], "1", 1), ([], "2", 1)])
def test_the_command_prints_each_record_and_fails_on_what_must_agree(tmp_path, monkeypatch, capsys, mkl, theirs, code):
    for kind, h in (("A", "1"), ("B", "1")):  # two kinds that agree on "k": evidence
        (tmp_path / f"{kind}.json").write_text(json.dumps(rec(kind, {"k": h, "m": kind})))
    mine = dict(rec("C", {"k": theirs, "m": "C"}, torch.__version__), cpu_capability="AVX2", pinned=True)
    monkeypatch.setattr(fp, "measure", lambda *a, **k: mine)
    monkeypatch.setattr(fp, "mkl_ops_in", lambda *a: {"lite0": mkl, "mnv3": []})
    monkeypatch.setattr(reproduce_cpu, "mkl_ops_in_evaluation", lambda: ["aten::dot", "aten::log"])
    assert main(["reproduce", "fingerprint", "--records", str(tmp_path), "--write"]) == code
    out = capsys.readouterr().out
    assert "MKL-routed operators in the evaluation (" in out and "its noise): aten::dot, aten::log\n" in out
    assert (
        "MKL-routed operators in a training step and a logits pass: "
        + ("lite0: aten::addmm -> NOT PORTABLE" if mkl else "none")
    ) in out
    assert "vs A (A; another CPU kind, recorded with torch 2.14.1): 2 shared operations" in out
    assert "  differs: m (reported)" in out
    assert ("  differs: k (must agree)" in out) is (theirs == "2")
    assert json.loads((tmp_path / "C.json").read_text())["hashes"] == mine["hashes"]  # --write: this kind's record


def test_the_evaluation_calls_mkl_and_the_fingerprint_says_which():
    """What a real Intel Xeon's evaluate stage parted on (same logits, values 1e-9..1e-5 off the AMD EPYCs'): the fits'
    and the bootstrap's float64 BLAS, MKL's log and LAPACK's eigh. Listed, so a change that makes the evaluation
    portable (or adds a route) shows in every fingerprint run."""
    ops = reproduce_cpu.mkl_ops_in_evaluation(n=300)
    assert set(ops) <= fp.MKL_OPS and ops == sorted(ops)
    assert "aten::log" in ops and "aten::_linalg_eigh" in ops and {"aten::dot", "aten::mv", "aten::mm"} & set(ops)


def test_the_profiler_leaves_no_log_lines_of_its_own_on_standard_error(tmp_path):
    """kineto (torch's profiler library) writes from C++ to the process's standard error: ``profiler_start`` and
    ``profiler_stop`` marks, and in a CUDA build without a GPU ``ERROR: ... gpuGetDeviceCount failed``. The
    fingerprint's profiler (:func:`benchmark.reproduce.fingerprint.cpu_profile`) keeps them out of what the reader
    sees; a fresh process, since kineto reads its level when a profiler first starts in it."""
    script = tmp_path / "profiled.py"
    script.write_text(
        "from benchmark.cli.reproduce_cpu import mkl_ops_in_evaluation\nprint(mkl_ops_in_evaluation(n=60))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    out = subprocess.run(["python", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "aten::log" in out.stdout  # it did profile
    assert "profiler_start" not in out.stderr and "gpuGetDeviceCount" not in out.stderr, out.stderr[-3000:]


def test_record_names_are_safe_file_names():
    assert fr.record_name(rec("Genuine/Intel f6:m1", {})) == "Genuine-Intel-f6-m1.json"


@pytest.mark.skipif(fp.machine()["kind"] not in BY_KIND, reason="no committed record of this CPU kind")
def test_this_machines_operations_equal_its_kinds_record():
    """The operations of the tool's set in the pipeline's mode, computed now, equal this CPU kind's committed record
    (a torch upgrade or a changed kernel route fails here first; `reproduce fingerprint --write` records anew)."""
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        mine = fp.ops(PIPELINE_MODE)
    finally:
        torch.set_num_threads(threads)
    record = BY_KIND[fp.machine()["kind"]]["hashes"]
    assert len(mine) == 40 and {k: v for k, v in mine.items() if record.get(k) != v} == {}


def test_the_amd_record_holds_the_pipelines_own_operations_layer_by_layer():
    keys = [k for k in BY_KIND[AMD]["hashes"] if k.startswith(f"{PIPELINE_MODE}/pipeline ")]
    archs = {k.split(":")[0] for k in keys}
    assert len(archs) == 5  # lite0 at 48 and 24 px, lite1, lite2, mobilenetv3_small_050
    for a in archs:
        mine = [k for k in keys if k.startswith(a + ":")]
        assert any(": forward " in k for k in mine) and any(": gradient " in k for k in mine)
        assert f"{a}: weights after 2 steps" in mine and f"{a}: logits of 256, 5 and 1 images" in mine
    assert json.loads(json.dumps(BY_KIND[AMD]))["pinned"] is True


def emu(model: str, stands_for: str, hashes: dict) -> dict:
    return {
        "machine": {"kind": f"QEMU-{model}", "cpu": model, "emulated": True, "stands_for": stands_for},
        "torch": "2.14.1",
        "hashes": hashes,
    }


def test_an_emulated_record_counts_as_the_vendor_it_stands_for():
    amd, qemu_intel = (
        rec(AMD, {"layer": "1", "mkl": "a"}),
        emu("Icelake-Server", "GenuineIntel-f6-m134", {"layer": "1", "mkl": "i"}),
    )
    assert fr.vendor(qemu_intel) == "GenuineIntel" and fr.emulated(qemu_intel) and not fr.emulated(amd)
    assert fr.evidence([amd, qemu_intel]) == {"layer"}  # two vendors agree: a third kind must agree there
    (v,) = fr.compare(rec("AuthenticAMD-f26-m2", {"layer": "2"}), [qemu_intel])
    assert v["failing"] == [] and v["differ"] == ["layer"]  # one record alone is no evidence
    v_amd, v_qemu = fr.compare(rec("AuthenticAMD-f26-m2", {"layer": "2", "mkl": "a"}), [amd, qemu_intel])
    assert v_amd["failing"] == ["layer"] and v_qemu["failing"] == ["layer"]


def test_an_emulation_must_equal_the_real_cpus_of_its_vendor_on_every_shared_operation():
    """What makes the stand-in trustworthy: an emulated Intel that parts from a real Intel on any operation fails
    (naming it), even on MKL's operations that part the vendors; where two real Intel records disagree, it cannot."""
    real = rec(INTEL, {"mkl": "i", "conv": "1", "moody": "x"})
    real2 = rec("GenuineIntel-f6-m143", {"moody": "y"})
    amd = rec(AMD, {"mkl": "a", "conv": "1"})
    fresh = emu("Icelake-Server", "GenuineIntel-f6-m134", {"mkl": "a", "conv": "1", "moody": "z"})
    v_real, v_real2, v_amd = fr.compare(fresh, [real, real2, amd])
    assert v_real["stand_in"] and v_real["failing"] == ["mkl"]  # the emulation took AMD's route: broken stand-in
    assert v_real2["stand_in"] and v_real2["failing"] == []  # "moody": the real Intel records disagree themselves
    assert not v_amd["stand_in"] and v_amd["failing"] == []
    # the other way round: a real Intel CI machine is held to the committed emulation of its vendor
    (v,) = fr.compare(
        rec("GenuineIntel-f6-m143", {"mkl": "i2"}), [emu("Icelake-Server", "GenuineIntel-f6-m134", {"mkl": "i"})]
    )
    assert v["stand_in"] and v["failing"] == ["mkl"]
    # two emulations of one vendor are two kinds: judged by the evidence only
    (v,) = fr.compare(emu("Skylake-Client", "GenuineIntel-f6-m94", {"mkl": "s"}), [fresh])
    assert not v["stand_in"] and v["failing"] == []


def test_an_emulated_record_must_say_what_it_stands_for(tmp_path):
    path = tmp_path / "QEMU-X.json"
    path.write_text(json.dumps({"machine": {"kind": "QEMU-X", "emulated": True}, "hashes": {}}))
    with pytest.raises(ValueError, match="stands_for"):
        fr.read_record(path)


def test_the_first_differing_layer_is_named_in_the_pipelines_order():
    keys = [
        "threads=2,onednn=on/mm 7x33x5",
        "threads=2,onednn=on/pipeline mnv3 48px batch 64, 2 AdamW steps",
        "threads=2,onednn=on/pipeline mnv3 48px [0a1b2c3d]: forward classifier",
        "threads=2,onednn=on/pipeline mnv3 48px [0a1b2c3d]: gradient classifier.weight",
    ]
    assert fr.first_layer(keys) == "mnv3 48px [0a1b2c3d]: forward classifier"  # not the tool's random-weight model
    assert fr.first_layer(keys[:2]) is None


EMULATED = {r["machine"]["kind"]: r for r in RECORDS if fr.emulated(r)}


def test_the_committed_emulations_stand_for_both_vendors_and_intels_records_its_real_cpus():
    """The committed emulated records (made by `reproduce fingerprint --emulate MODEL --write`): an Intel with
    AVX-512 (whose pipeline's operations CI checks on every commit), an Intel and an AMD with AVX2 only; each equal,
    on every shared operation, to each real record of its vendor (the stand-in's trust, as CI checks it fresh)."""
    assert {"QEMU-Icelake-Server", "QEMU-Skylake-Client", "QEMU-EPYC-Milan"} <= set(EMULATED)
    assert {fr.vendor(r) for r in EMULATED.values()} == {"GenuineIntel", "AuthenticAMD"}
    ice = EMULATED["QEMU-Icelake-Server"]
    assert sum(map(bool, map(fr.pipeline_op, ice["hashes"]))) == 1888 and ice["pinned"] is True
    for r in EMULATED.values():
        real = [x for x in RECORDS if not fr.emulated(x) and fr.vendor(x) == fr.vendor(r)]
        assert real, r["machine"]["kind"]
        for x in real:
            shared = [k for k in r["hashes"] if k in x["hashes"]]
            assert len(shared) >= 40, (r["machine"]["kind"], x["machine"]["kind"])
            assert [k for k in shared if r["hashes"][k] != x["hashes"][k]] == [], (
                r["machine"]["kind"],
                x["machine"]["kind"],
            )


def test_every_pipeline_operation_agrees_across_every_recorded_kind_real_and_emulated():
    pipeline = {k for r in RECORDS for k in r["hashes"] if fr.pipeline_op(k)}
    holders = {k: [r for r in RECORDS if k in r["hashes"]] for k in pipeline}
    assert {fr.vendor(r) for k in pipeline for r in holders[k]} == {"GenuineIntel", "AuthenticAMD"}
    assert [k for k in pipeline if len({r["hashes"][k] for r in holders[k]}) > 1] == []
    assert pipeline <= fr.evidence(RECORDS)


def test_the_fingerprint_runs_the_stages_own_training_step_model_optimizer_and_logits(monkeypatch, tmp_path):
    """fingerprint.pipeline goes through the functions train@ and logits@ call; if it computed a step of its own, the
    spies would not see it (and fine_tune itself steps through train_step: the two cannot part)."""
    from benchmark.models import distributed, train
    from benchmark.models.train import Recipe
    from benchmark.models.zoo import parse_entry

    calls = []
    for mod, name in [
        (train, "training_model"),
        (train, "make_optimizer"),
        (train, "train_step"),
        (distributed, "predict_logits"),
    ]:
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))

    class P:
        recipes = {"r": Recipe(epochs=1, batch_size=64, lr=0.01, drop_rate=0.2)}
        threads = 2
        logits = type("Logits", (), {"batch_size": 256})

    zoo = {
        "m": parse_entry(
            "m",
            {"arch": "mobilenetv3_small_050", "init": "scratch", "img_size": 16, "seed": 0, "recipe": "r"},
            check_arch=False,
        )
    }
    out = fp.pipeline(P, zoo, fp.tag(2))
    assert calls == ["training_model", "make_optimizer", "train_step", "train_step"] + ["predict_logits"] * 3
    assert any(": forward " in k for k in out) and any(": gradient " in k for k in out)
    calls.clear()
    x, y = torch.randn(8, 3, 16, 16), torch.arange(8) % 10
    model = train.training_model(zoo["m"], 10, P.recipes["r"])
    calls.clear()
    train.fine_tune(
        model,
        (x, y),
        (x, y),
        Recipe(epochs=1, batch_size=4, lr=0.01),
        seed=0,
        folder=tmp_path,
        fingerprint="f",
        progress=False,
    )
    assert calls.count("train_step") == 2 and "make_optimizer" in calls
