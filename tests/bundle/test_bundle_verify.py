"""submit and verify on a bundle made from the Caltech-256 fixture pipeline (DVC run, session-scoped)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil

import pandas as pd
import pytest
import yaml
from helpers import manifest, read_rows, write_manifest, write_rows

from benchmark.bundle.schema import MAX_FILE_BYTES, load_bundle
from benchmark.bundle.verify import VERIFIED, recorded_status
from benchmark.cli.main import main

pytestmark = pytest.mark.slow


def verify(capsys, *args, quiet=True):
    rc = main(["verify", *map(str, args), *(["--quiet"] if quiet else [])])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_submit_writes_a_small_plain_bundle(pristine, results):
    files = sorted(p.name for p in pristine.iterdir())
    assert files == ["dvc.lock", "manifest.json", "models.csv", "paired.csv", "rows.csv"]  # never a verification
    assert all(p.stat().st_size < MAX_FILE_BYTES for p in pristine.iterdir())
    rows = pd.read_csv(pristine / "rows.csv")
    ours = pd.read_csv(results / "metrics.csv")
    pd.testing.assert_frame_equal(rows, ours[rows.columns], check_exact=True)  # every number round-trips exactly
    m = manifest(pristine)
    assert m["suite"] == "caltech256" and m["contributor"] == "tests <b>&" and m["params"]["suite"] == "caltech256"
    assert set(m["zoo"]) == {"res", "eff"} and m["zoo"]["res"]["arch"] == "test_resnet"
    assert {"python", "torch", "timm", "benchmark"} <= set(m["versions"])
    # the content hash of every logits file behind the rows, against hashlib
    expected = {
        f"{d}/{n}/{f.name}": hashlib.sha256(f.read_bytes()).hexdigest()
        for d in ("logits", "methods")
        for n in ("res", "eff", "la-res")
        for f in (results / d / n).glob("*.safetensors")
    }
    assert {k: v["sha256"] for k, v in m["logits"].items()} == expected
    assert {u["kind"] for u in m["units"]} == {"single", "duo", "method"}
    assert any(s.startswith("logits@") for s in m["stages"]) and any(s.startswith("laplace@") for s in m["stages"])
    lock = __import__("yaml").safe_load((results.parent / "dvc.lock").read_text())
    assert m["stages"]["logits@res"]["outs"] == {o["path"]: o["md5"] for o in lock["stages"]["logits@res"]["outs"]}
    assert {"python", "torch", "timm", "benchmark"} <= set(m["versions"]) and m["created"].endswith("Z")


def test_fixture_bundle_verifies_from_its_logits(bundle, results, capsys, tmp_path):
    rc, out, err = verify(capsys, bundle, "--logits", results, "--report", tmp_path / "report.csv")
    assert rc == 0, err
    n = len(read_rows(bundle))
    assert f"{bundle}: verified ({n}/{n} rows recomputed, costs of {n}, 0 mismatch(es)" in out
    report = pd.read_csv(tmp_path / "report.csv", keep_default_na=False)
    assert len(report) == n and set(report["check"]) == {"ok"}


def test_without_logits_it_is_self_reported(bundle, capsys):
    rc, out, _ = verify(capsys, bundle)
    assert rc == 0 and f"self-reported (0/{len(read_rows(bundle))} rows recomputed" in out
    rc, _, err = verify(capsys, bundle, "--strict")  # strict: the bundle must end verified
    assert rc == 1 and "not verified (--strict)" in err


def test_one_edited_number_fails_naming_the_row(bundle, results, capsys):
    rows = read_rows(bundle)
    i = rows.index[
        (rows.family == "duo") & (rows.metric == "nll") & (rows.split == "test") & (rows.method == "weighted")
    ][0]
    rows.loc[i, "value"] = repr(float(rows.loc[i, "value"]) - 1e-4)
    write_rows(bundle, rows)  # with the manifest's hash updated, as a forger would
    rc, _, err = verify(capsys, bundle, "--logits", results)
    assert rc == 1
    r = rows.loc[i]
    bad = [line for line in err.splitlines() if line.startswith("mismatch:")]
    assert len(bad) == 1, err
    assert f"split=test, family=duo, method=weighted, base={r.base}, sidekick={r.sidekick}" in bad[0]
    assert f"fit={r.fit}" in bad[0] and "metric=nll" in bad[0] and "value: bundle" in bad[0]


def test_edited_rows_without_new_hash_are_malformed(bundle, capsys):
    rows = read_rows(bundle)
    rows.loc[0, "value"] = "0.5"
    write_rows(bundle, rows, keep_hash=True)
    rc, _, err = verify(capsys, bundle)
    assert rc == 2 and err.count("\n") == 1 and "rows.csv: " in err and "the file was edited" in err


def test_edited_logits_file_is_caught(bundle, results, tmp_path, capsys):
    copy = tmp_path / "results"
    shutil.copytree(results, copy, ignore=shutil.ignore_patterns("checkpoints", "method_checkpoints", "units"))
    f = copy / "logits" / "eff" / "test.safetensors"
    data = bytearray(f.read_bytes())
    data[-3] ^= 0x01  # one bit of one logit
    f.write_bytes(bytes(data))
    rc, out, err = verify(capsys, bundle, "--logits", copy, quiet=False)  # the per-unit lines (--quiet: none)
    assert rc == 1 and f"{f}: sha256 differs from the manifest's" in err
    rows = read_rows(bundle)
    n = {
        fam: int(((rows.family == fam) & (rows.base == base)).sum())
        for fam, base in (("duo", "res"), ("single", "res"))
    }
    assert (
        f"duo res+eff: {n['duo']} rows not recomputed" in out
        and f"single res: {n['single']} rows recomputed, no mismatch" in out
    )
    assert f"single eff: {int(((rows.family == 'single') & (rows.base == 'eff')).sum())} rows not recomputed" in out


def test_manifest_hash_not_matching_the_logits_is_caught(bundle, results, capsys):
    m = manifest(bundle)
    m["logits"]["methods/la-res/val.safetensors"]["sha256"] = "0" * 64
    write_manifest(bundle, m)
    rc, _, err = verify(capsys, bundle, "--logits", results)
    assert rc == 1 and "methods/la-res/val.safetensors: sha256 differs from the manifest's" in err


def _edit_rows(bundle, col, value):
    rows = read_rows(bundle)
    rows.loc[3, col] = value
    write_rows(bundle, rows)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda b: (b / "manifest.json").unlink(), "manifest.json: missing manifest"),
        (lambda b: _edit_rows(b, "metric", "accuracy_at_5"), "row 5 (suite=caltech256"),
        (lambda b: _edit_rows(b, "value", "high"), "row 5: column 'value' must be a number, got 'high'"),
        (lambda b: _edit_rows(b, "value", "-0.5"), "value -0.5 out of range for"),
        (
            lambda b: write_manifest(
                b,
                manifest(b)
                | {
                    "files": manifest(b)["files"]
                    | {"rows": {"path": "../../x/rows.csv", "sha256": "a" * 64, "bytes": 10}}
                },
            ),
            "files.rows: path '../../x/rows.csv' must be one of ['rows.csv', 'rows.csv.gz']",
        ),
        (lambda b: write_manifest(b, manifest(b) | {"suite": "mnist-c"}), "suite: unknown suite 'mnist-c'"),
        (lambda b: write_manifest(b, manifest(b) | {"units": "all"}), "units: must be list, got str"),
        (
            lambda b: write_manifest(
                b,
                manifest(b)
                | {
                    "zoo": {
                        "res": {
                            "arch": "no_such_net",
                            "init": "scratch",
                            "img_size": 32,
                            "seed": 0,
                            "recipe": "finetune",
                        }
                    }
                },
            ),
            "unknown timm architecture",
        ),
        (lambda b: (b / "manifest.json").write_text("{"), "manifest.json: not valid JSON"),
        (
            lambda b: write_manifest(
                b,
                manifest(b)
                | {
                    "units": [
                        u | {"members": u["members"][:1], "folders": u["folders"][:1]} for u in manifest(b)["units"]
                    ]
                },
            ),
            "a duo unit has 2 member(s), got 1",
        ),
    ],
)
def test_bad_bundles_get_one_clear_line(bundle, capsys, edit, message):
    edit(bundle)
    rc, out, err = verify(capsys, bundle)
    assert rc == 2, out + err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err


def test_unknown_metric_message(bundle, capsys):
    _edit_rows(bundle, "metric", "accuracy_at_5")
    _, _, err = verify(capsys, bundle)
    assert "unknown metric 'accuracy_at_5'" in err


def test_large_rows_are_gzipped(monkeypatch, caltech, tmp_path):
    import os

    from benchmark.bundle import csv_files, pack

    monkeypatch.setattr(csv_files, "GZIP_ABOVE", 1000)
    os.chdir(caltech)
    out = tmp_path / "caltech256" / "gz"
    try:
        pack.submit("caltech256", out)
    finally:
        os.chdir(tmp_path)
    assert (out / "rows.csv.gz").exists() and not (out / "rows.csv").exists()
    with gzip.open(out / "rows.csv.gz") as f:
        n = len(pd.read_csv(f))
    assert n == len(pd.read_csv(caltech / "suites" / "caltech256" / "results" / "metrics.csv"))
    assert len(pd.read_csv(out / "rows.csv.gz")) == n  # pandas reads it as it is
    assert len(load_bundle(out).rows) == n


def test_unknown_remote_is_one_clear_line(bundle, caltech, monkeypatch, capsys):
    monkeypatch.chdir(caltech)  # a DVC project without that remote
    rc, _, err = verify(capsys, bundle, "--remote", "nowhere")
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: --remote nowhere: ") and "nowhere" in err


def test_pull_without_a_remote_in_the_manifest_says_so(bundle, pristine, caltech, monkeypatch, capsys):
    """Issue 50 item 2: a bundle made before any DVC remote was configured names none; submit said so, and
    `verify --pull --strict` names that as the reason it is not verified (not only "no logits")."""
    assert json.loads((pristine / "manifest.json").read_text())["remote"] is None  # the fixture run has no remote
    monkeypatch.chdir(caltech)
    rc, out, err = verify(capsys, bundle, "--pull", "--strict")
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 2, err
    assert (
        lines[0] == f"{bundle}: nothing pulled: its manifest names no DVC remote (the bundle was made before one was "
        "configured): give --remote NAME or --logits DIR, or submit again after `dvc remote add -d NAME URL`"
    )
    assert (
        lines[1].startswith(f"{bundle}: not verified (--strict): ")
        and "rows not recomputed (no logits: its manifest names no DVC remote" in lines[1]
    )
    assert out.count("\n") == 1 and "self-reported" in out  # --quiet: the status line only


def test_edited_paired_difference_is_caught(bundle, results, capsys):
    from helpers import rehash

    paired = pd.read_csv(bundle / "paired.csv", dtype=str, keep_default_na=False)
    assert len(paired) == len(pd.read_csv(results / "paired.csv")) > 0
    paired.loc[0, "diff"] = repr(float(paired.loc[0, "diff"]) + 0.01)
    paired.to_csv(bundle / "paired.csv", index=False)
    rehash(bundle, "paired")
    rc, _, err = verify(capsys, bundle, "--logits", results)
    r = paired.loc[0]
    assert (
        rc == 1
        and f"paired (split={r.split}, base={r.base}, sidekick={r.sidekick}, fit={r.fit}, method={r.method}" in err
    )
    assert err.count("mismatch:") == 1


def test_submit_reads_the_embedded_layout(caltech, tmp_path, monkeypatch, capsys):
    """The embedded default's layout: results/, dvc.lock and params.yaml at the root, the zoo path relative to it (the
    fixture run moved there and renamed; the submit-results tutorial does it on a tiny embedded run:
    tests/docs/test_tutorials.py)."""
    suite, root = caltech / "suites" / "caltech256", tmp_path / "clone"
    shutil.copytree(suite / "results", root / "results", ignore=shutil.ignore_patterns("*checkpoints", "units"))
    for name in ("metrics.csv", "paired.csv"):
        t = pd.read_csv(root / "results" / name, dtype=str, keep_default_na=False)
        t.assign(suite="embedded").to_csv(root / "results" / name, index=False)
    params = yaml.safe_load((suite / "params.yaml").read_text()) | {"suite": "embedded", "zoo": "zoo/embedded.yaml"}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    (root / "zoo").mkdir()
    shutil.copy(caltech / "zoo" / "caltech256.yaml", root / "zoo" / "embedded.yaml")
    shutil.copy(suite / "dvc.lock", root / "dvc.lock")
    monkeypatch.chdir(root)
    assert main(["submit", "--suite", "embedded", "--out", "leaderboard/embedded/t1"]) == 0
    out = root / "leaderboard" / "embedded" / "t1"
    m = manifest(out)
    assert m["suite"] == "embedded" and set(m["zoo"]) == {"res", "eff"} and "logits@res" in m["stages"]
    assert "evaluate" in m["stages"] and not (out / "verification.json").exists()
    capsys.readouterr()
    rc, out_text, _ = verify(capsys, out, "--logits", root / "results")
    assert rc == 0 and "t1: verified" in out_text


def test_rows_over_the_file_limit_are_split_in_parts(monkeypatch, caltech, results, tmp_path, tmp_path_factory, capsys):
    from benchmark.bundle import csv_files, pack

    monkeypatch.setattr(csv_files, "GZIP_ABOVE", 1000)
    monkeypatch.setattr(csv_files, "PART_BYTES", 1200)  # the rows gzip to more than this
    monkeypatch.chdir(caltech)
    out = tmp_path / "caltech256" / "parts"
    pack.submit("caltech256", out)
    m = manifest(out)
    parts = sorted(r for r in m["files"] if r.startswith("rows"))
    assert len(parts) >= 2 and parts[0] == "rows" and parts[1] == "rows-001"
    assert all((out / m["files"][r]["path"]).stat().st_size < 1200 for r in parts)
    text = {"dtype": str, "keep_default_na": False}  # compare the cells as written
    whole = pd.concat([pd.read_csv(out / m["files"][r]["path"], **text) for r in parts], ignore_index=True)
    pd.testing.assert_frame_equal(whole, pd.read_csv(results / "metrics.csv", **text)[whole.columns])
    assert len(load_bundle(out).rows) == len(whole)
    records = tmp_path_factory.mktemp("records")  # outside the bundles folder
    rc, text, err = verify(capsys, out, "--logits", results, "--record-to", records)
    assert rc == 0 and "verified" in text, err
    assert recorded_status(records, load_bundle(out)) == VERIFIED


def test_leftovers_of_killed_writes_are_never_packed_or_verified(caltech_copy, tmp_path, monkeypatch, capsys):
    """Hidden ``.name.xxxxxxxx`` folders/files (an interrupted atomic write) are not results: submit and verify skip
    them. (On a private copy of the run: other tests read the shared one meanwhile.)"""
    import shutil

    from benchmark.bundle import pack

    caltech = caltech_copy
    results = caltech / "suites" / "caltech256" / "results"
    leftovers = [results / "methods" / ".la-res.abcd1234", results / "logits" / "res" / ".test.wxyz9876.safetensors"]
    shutil.copytree(results / "methods" / "la-res", leftovers[0])
    (leftovers[0] / "cost.json").write_text('{"gflops": "garbage"}')
    shutil.copy(results / "logits" / "res" / "test.safetensors", leftovers[1])
    monkeypatch.chdir(caltech)
    try:
        out = tmp_path / "caltech256" / "b"
        pack.submit("caltech256", out)
        m = manifest(out)
        assert m["logits"] and not any("/." in k for k in m["logits"])
        rc, _, err = verify(capsys, out, "--logits", results)
        assert rc == 0, err
    finally:
        shutil.rmtree(leftovers[0])
        leftovers[1].unlink()


def test_suite_logits_come_back_through_the_root_remote(bundle, caltech_copy, tmp_path, monkeypatch, capsys):
    """Issue 16 item 6: a suite's outputs live in the root DVC project, so its remote serves them; verify --remote
    pulls them into a checkout that lacks them (and whose suite was not asked for yet: no dvc.yaml)."""
    import subprocess

    repo = caltech_copy  # a clone of the run
    env = dict(__import__("os").environ, HF_HUB_OFFLINE="1")
    for cmd in (["dvc", "remote", "add", "-d", "team", str(tmp_path / "remote")], ["dvc", "push", "-q"]):
        subprocess.run(["python", "-m", *cmd], cwd=repo, env=env, check=True, capture_output=True, timeout=600)
    folder = repo / "suites" / "caltech256"
    for gone in (folder / "results" / "logits", folder / "results" / "methods", repo / ".dvc" / "cache"):
        shutil.rmtree(gone)
    (folder / "dvc.yaml").unlink()
    monkeypatch.chdir(repo)
    rc, out, err = verify(capsys, bundle, "--remote", "team")
    assert rc == 0 and "verified" in out and not err, err
    assert (folder / "dvc.yaml").is_file()  # asked for again: the same generator, the committed params.yaml
    assert sorted(p.name for p in (folder / "results" / "logits").iterdir()) == ["eff", "res"]
