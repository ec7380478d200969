"""Kernel fingerprints (benchmark/reproduce/fingerprint.py): the committed records of two CPU kinds, the rules that
judge a machine against them, and this machine's own operations against its kind's record."""
from __future__ import annotations

import json

import pytest
import torch

from benchmark.cli.main import main
from benchmark.reproduce import fingerprint as fp

RECORDS = fp.read_records(fp.RECORDS)
BY_KIND = {r["machine"]["kind"]: r for r in RECORDS}
INTEL, AMD = "GenuineIntel-f6-m167", "AuthenticAMD-f25-m17"
PIPELINE_MODE = fp.tag(2)


def rec(kind: str, hashes: dict, torch_version: str = "2.14.1") -> dict:
    return {"machine": {"kind": kind, "cpu": kind}, "torch": torch_version, "hashes": hashes}


def test_both_vendors_are_recorded_and_agree_on_every_operation_of_the_pipelines_mode_but_mkls():
    assert {INTEL, AMD} <= set(BY_KIND)
    agreed = fp.evidence(RECORDS)
    mode = [k for k in BY_KIND[INTEL]["hashes"] if k.startswith(PIPELINE_MODE + "/") and k in BY_KIND[AMD]["hashes"]]
    assert len(mode) == 40
    parting = sorted(k for k in mode if k not in agreed)
    assert parting == sorted(PIPELINE_MODE + k for k in fp.MKL_ROUTED)  # BLAS small products, VML exp, torch's AdamW
    convs = [k for k in mode if "/conv " in k]
    assert len(convs) == 16 and all(k in agreed for k in convs)  # oneDNN's convolutions hold across the vendors


def test_two_kinds_of_one_vendor_agreeing_is_no_evidence_for_the_other_vendor():
    zen4, zen5 = rec("AuthenticAMD-f25-m17", {"layer": "1", "op": "1"}), rec("AuthenticAMD-f26-m2", {"layer": "1", "op": "1"})
    intel = rec(INTEL, {"op": "1"})
    assert fp.evidence([zen4, zen5]) == set()  # one vendor
    assert fp.evidence([zen4, zen5, intel]) == {"op"}  # "layer": only AMD kinds hold it
    mine = rec("GenuineIntel-f6-m143", {"layer": "2", "op": "1"})
    verdicts = fp.compare(mine, [zen4, zen5, intel])
    assert all(v["failing"] == [] for v in verdicts) and verdicts[0]["differ"] == ["layer"]  # reported, not failed
    assert fp.compare(rec("GenuineIntel-f6-m143", {"op": "2"}), [zen4, intel])[0]["failing"] == ["op"]


def test_a_record_of_this_cpu_kind_must_agree_on_every_operation():
    mine = rec("A", {"x": "1", "y": "2"})
    (v,) = fp.compare(mine, [rec("A", {"x": "1", "y": "3"})])
    assert v["same_kind"] and v["differ"] == ["y"] and v["failing"] == ["y"] and v["equal"] == 1


def test_another_kind_must_agree_where_two_kinds_already_agree_and_is_reported_elsewhere():
    mine = rec("C", {"held": "1", "parted": "9", "new": "5", "mine only": "0"})
    records = [rec("A", {"held": "1", "parted": "2", "new": "6"}), rec("B", {"held": "1", "parted": "3"})]
    va, vb = fp.compare(mine, records)
    assert va["differ"] == ["parted", "new"] and va["failing"] == [] and va["shared"] == 3
    assert vb["differ"] == ["parted"] and vb["failing"] == []
    mine["hashes"]["held"] = "7"  # an operation both recorded kinds agree on parts here: a failure, named
    va, vb = fp.compare(mine, records)
    assert va["failing"] == ["held"] and vb["failing"] == ["held"]


@pytest.mark.parametrize("text,problem", [("{", "not a readable JSON"), ('{"hashes": {}}', "machine.kind"),
                                          ('{"machine": {"kind": "A"}, "hashes": {"x": 1}}', "hashes")])
def test_a_malformed_record_is_refused_with_the_problem_named(tmp_path, text, problem):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=problem) as e:
        fp.read_record(path)
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
    assert main(["reproduce", "fingerprint", "--records", str(tmp_path), "--write"]) == code
    out = capsys.readouterr().out
    assert ("MKL-routed operators in a training step and a logits pass: "
            + ("lite0: aten::addmm -> NOT PORTABLE" if mkl else "none")) in out
    assert "vs A (A; another CPU kind, recorded with torch 2.14.1): 2 shared operations" in out
    assert "  differs: m (reported)" in out
    assert ("  differs: k (must agree)" in out) is (theirs == "2")
    assert json.loads((tmp_path / "C.json").read_text())["hashes"] == mine["hashes"]  # --write: this kind's record


def test_record_names_are_safe_file_names():
    assert fp.record_name(rec("Genuine/Intel f6:m1", {})) == "Genuine-Intel-f6-m1.json"


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
