"""A bundle is its folder leaderboard/<suite>/<id>/: the suite folder must be the manifest's suite, the id a safe name,
'created' a real UTC time not in the future; bundles elsewhere are left out, and none can take another's place."""

from __future__ import annotations

import datetime as dt
import shutil

import pandas as pd
import pytest
from helpers import manifest, read_rows, write_manifest, write_rows

from benchmark.bundle.schema import BundleError
from benchmark.bundle.site_merge import merge
from benchmark.bundle.verify import SELF_REPORTED, VERIFIED, recorded_status
from benchmark.cli.main import main


def _now(delta: dt.timedelta = dt.timedelta()) -> str:
    return (dt.datetime.now(dt.timezone.utc) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("name", ["B1", "b 1", "b1\n", "é", "-b1", "_b1", "x" * 65, "b1;rm", "b1%2F"])
def test_bad_ids(pristine, tmp_path, load, name):
    dst = tmp_path / "caltech256" / name
    shutil.copytree(pristine, dst)
    with pytest.raises(BundleError, match="bundle id .* must match"):
        load(dst)


def test_the_suite_folder_is_the_manifests_suite(pristine, tmp_path, load):
    dst = tmp_path / "embedded" / "b1"
    shutil.copytree(pristine, dst)
    with pytest.raises(BundleError, match="a bundle of suite 'caltech256' must be in a folder named 'caltech256'"):
        load(dst)


@pytest.mark.parametrize(
    "created, rule",
    [
        pytest.param(_now(dt.timedelta(days=1)), "is in the future", id="tomorrow"),  # an id that does not change with
        ("2999-01-01T00:00:00Z", "is in the future"),  # the clock (xdist compares them)
        ("yesterday", "is not a UTC time"),
        ("2026-02-30T00:00:00Z", "is not a real date"),
        ("2026-01-01T24:00:00Z", "is not a real date"),
        ("2026-01-01T00:00:00+01:00", "is not a UTC time"),
        ("2026-01-01t00:00:00z", "is not a UTC time"),
        ("2026-01-01T00:00:00.5Z", "is not a UTC time"),
        ("2019-12-31T23:59:59Z", "is before 2020"),
        ("", "is not a UTC time"),
    ],
)
def test_created_is_a_real_past_utc_time(bundle, load, created, rule):
    write_manifest(bundle, manifest(bundle) | {"created": created})
    with pytest.raises(BundleError, match=f"created: .*{rule}"):
        load(bundle)


def test_created_within_the_clock_skew_is_accepted(bundle, load):
    write_manifest(bundle, manifest(bundle) | {"created": _now(dt.timedelta(minutes=5))})
    load(bundle)


def test_a_newer_self_reported_bundle_never_displaces_a_verified_one(bundle, records, load):
    other = bundle.parent / "b2"
    shutil.copytree(bundle, other)
    rows = read_rows(other)
    rows["value"] = rows["value"].where(rows["metric"] != "accuracy", "0.01")
    write_rows(other, rows)
    write_manifest(other, manifest(other) | {"created": _now()})  # as new as it can be
    b1, b2 = load(bundle), load(other)
    b1.status, b2.status = recorded_status(records, b1), recorded_status(records, b2)
    assert (b1.status, b2.status) == (VERIFIED, SELF_REPORTED)
    merged, _ = merge([b2, b1])
    assert set(merged["bundle"]) == {"b1"}


def test_no_bundle_takes_another_ones_place(bundle, pristine, tmp_path, capsys, fast_report):
    """An impostor in another suite's folder, or at another depth, is left out; the real bundle's pages are intact."""
    board = bundle.parent.parent
    impostor = board / "embedded" / "b1"
    shutil.copytree(pristine, impostor)
    write_manifest(impostor, manifest(impostor) | {"contributor": "impostor"})
    shutil.copytree(pristine, board / "caltech256" / "b1" / ".." / ".." / "b0")  # depth 1: leaderboard/b0/
    deep = board / "caltech256" / "x" / "y"
    shutil.copytree(pristine, deep)
    rc = main(["publish", "--bundles", str(board), "--out", str(tmp_path / "site"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 3 and "Traceback" not in err
    assert f"left out {impostor}: " in err and "must be in a folder named 'caltech256'" in err
    assert f"{board / 'b0' / 'manifest.json'}: a bundle must be at" in err
    assert f"left out {deep.parent}: " in err  # leaderboard/caltech256/x holds a folder, not a bundle's files
    site = tmp_path / "site"
    assert sorted(p.name for p in (site / "bundles").iterdir()) == ["caltech256"]
    assert sorted(p.name for p in (site / "bundles" / "caltech256").iterdir()) == ["b1"]
    assert "impostor" not in (site / "bundles" / "caltech256" / "b1" / "index.html").read_text()
    entries = pd.read_csv(site / "caltech256" / "data" / "entries.csv.gz")
    assert list(entries["bundle"]) == ["b1"]


def test_submit_writes_only_a_well_named_bundle(caltech, tmp_path, monkeypatch):
    from benchmark.bundle.pack import submit

    monkeypatch.chdir(caltech)
    for out in (tmp_path / "b1", tmp_path / "embedded" / "b1", tmp_path / "caltech256" / "Bad Id"):
        with pytest.raises(BundleError, match="a bundle's folder is leaderboard/caltech256/<id>"):
            submit("caltech256", out)
    with pytest.raises(BundleError, match="--contributor: printable text on one line"):
        submit("caltech256", tmp_path / "caltech256" / "b1", contributor="a\nb")
