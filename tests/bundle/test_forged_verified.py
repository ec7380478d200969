"""'Verified' means recomputed by this project: the badge comes only from a verification record written outside the
bundle (verify --record-to) for exactly this bundle; nothing a bundle carries, and no record of another bundle or of
an earlier version of it, makes it verified."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from helpers import manifest, one_line_error, read_rows, write_manifest, write_rows

from benchmark.bundle.schema import BundleError
from benchmark.bundle.verify import SELF_REPORTED, VERIFIED, recorded_status
from benchmark.cli.main import main


def _record(records, name="b1"):
    return records / "caltech256" / f"{name}.json"


def _records_copy(records, tmp_path):
    dst = tmp_path / "records"
    shutil.copytree(records, dst)
    return dst


def test_the_verified_bundle_and_only_with_its_record(bundle, records, load):
    b = load(bundle)
    assert recorded_status(records, b) == VERIFIED
    assert recorded_status(None, b) == SELF_REPORTED
    assert recorded_status(bundle.parent, b) == SELF_REPORTED  # no record there


def test_a_verification_file_inside_the_bundle_is_refused(bundle, records, load):
    shutil.copy(_record(records), bundle / "verification.json")
    with pytest.raises(BundleError, match="verification.json: unknown file.*never travels in a bundle"):
        load(bundle)


def test_edited_values_lose_the_badge(bundle, records, load):
    rows = read_rows(bundle)
    rows.loc[0, "value"] = "0.999"
    write_rows(bundle, rows)  # consistent: the manifest's hash updated, as a forger would
    assert recorded_status(records, load(bundle)) == SELF_REPORTED


def test_an_edited_manifest_loses_the_badge(bundle, records, load):
    write_manifest(bundle, manifest(bundle) | {"contributor": "someone else"})
    assert recorded_status(records, load(bundle)) == SELF_REPORTED


@pytest.mark.parametrize("forge", ["renamed", "renamed-and-edited", "counts", "status", "format", "symlink", "garbage"])
def test_a_record_that_is_not_this_bundles_is_ignored(bundle, records, tmp_path, load, forge):
    recs = _records_copy(records, tmp_path)
    other = bundle.parent / "b2"
    shutil.copytree(bundle, other)
    write_manifest(other, manifest(other) | {"created": "2026-01-01T00:00:00Z"})
    data = json.loads(_record(recs).read_text())
    target, path = other, _record(recs, "b2")
    if forge == "renamed":  # b1's record copied under b2's name
        path.write_text(json.dumps(data))
    elif forge == "renamed-and-edited":  # ... with the bundle field rewritten
        path.write_text(json.dumps(data | {"bundle": "caltech256/b2"}))
    else:
        target, path = bundle, _record(recs)
        if forge == "counts":
            path.write_text(json.dumps(data | {"recomputed": data["rows"] - 1}))
        elif forge == "status":
            path.write_text(json.dumps(data | {"status": "self-reported"}))
        elif forge == "format":
            path.write_text(json.dumps(data | {"format": "uq-verification/0"}))
        elif forge == "symlink":
            (tmp_path / "elsewhere.json").write_text(json.dumps(data))
            path.unlink()
            path.symlink_to(tmp_path / "elsewhere.json")
        elif forge == "garbage":
            path.write_text('{"status": "verified", "status": "verified"}')
    assert recorded_status(recs, load(target)) == SELF_REPORTED


def test_publish_badges_come_from_the_records_only(bundle, records, tmp_path, capsys, fast_report):
    board = bundle.parent.parent
    shutil.copytree(bundle, board / "caltech256" / "b2")
    write_manifest(board / "caltech256" / "b2", manifest(bundle) | {"contributor": "other"})
    for verified, want in (
        (None, {"b1": SELF_REPORTED, "b2": SELF_REPORTED}),
        (records, {"b1": VERIFIED, "b2": SELF_REPORTED}),
    ):
        out = tmp_path / f"site-{verified is not None}"
        args = ["publish", "--bundles", str(board), "--out", str(out), "--quiet"] + (
            ["--verified", str(verified)] if verified else []
        )
        assert main(args) == 0, capsys.readouterr().err
        entries = pd.read_csv(out / "caltech256" / "data" / "entries.csv.gz")
        assert dict(zip(entries["bundle"], entries["status"])) == want
        rows = pd.read_csv(out / "caltech256" / "data" / "rows.csv.gz")
        assert "throughput" not in rows.columns and "throughput_reported" in rows.columns  # labelled as reported


def test_record_to_writes_outside_and_removes_a_stale_record(bundle, records, results, tmp_path, capsys):
    recs = _records_copy(records, tmp_path)
    assert main(["verify", str(bundle), "--record-to", str(bundle.parent.parent / "records"), "--quiet"]) == 2
    assert "inside the bundles folder" in one_line_error(capsys.readouterr().err)
    # without logits the bundle is not verified now: the earlier record of it is removed
    assert main(["verify", str(bundle), "--record-to", str(recs), "--quiet"]) == 0
    assert "nothing recorded (not verified)" in capsys.readouterr().out and not _record(recs).exists()


def test_strict_means_verified(bundle, results, capsys):
    assert main(["verify", str(bundle), "--strict", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "not verified (--strict)" in err and "rows not recomputed (no logits" in err
    assert main(["verify", str(bundle), "--strict", "--quiet", "--logits", str(results)]) == 0


def test_throughput_is_reported_never_verified(bundle, results, tmp_path, capsys):
    """Throughput is the contributor's measurement: editing it changes nothing verify checks, and the record says so."""
    rows = read_rows(bundle)
    rows["throughput"] = "999999"
    write_rows(bundle, rows)
    assert main(["verify", str(bundle), "--logits", str(results), "--record-to", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "verified" in out and "throughput: reported, not verified" in out
    assert json.loads(_record(tmp_path / "r").read_text())["reported_not_verified"] == ["throughput"]
