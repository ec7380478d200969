"""Intake, files and roles: a bundle holds manifest.json and the files its manifest lists under a known role with
that role's fixed name; any other file, role or name is refused (one line naming the file and the rule)."""

from __future__ import annotations

import pytest
from helpers import manifest, one_line_error, put_file, write_manifest

from benchmark.bundle.schema import BundleError
from benchmark.cli.main import main

STRAY = [
    "verification.json",
    "evil.html",
    "index.html",
    ".hidden",
    "rows.csv.bak",
    "README",
    "x y",
    "é.csv",
    "a\nb",
    "rows-001.csv.gz",
]


@pytest.mark.parametrize("name", STRAY)
def test_an_unlisted_file_is_refused(bundle, load, capsys, name):
    (bundle / name).write_bytes(b"<script>alert(1)</script>")
    with pytest.raises(BundleError, match="unknown file") as e:
        load(bundle)
    assert "\n" not in str(e.value)
    assert main(["verify", str(bundle), "--quiet"]) == 2
    assert "unknown file" in one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize(
    "role",
    [
        "verification",
        "evil",
        "html",
        "rows-000",
        "rows-1",
        "rows-1000",
        "paired-01",
        "site",
        "manifest",
        "ROWS",
        "rows.csv",
    ],
)
def test_an_unknown_role_is_refused_even_with_a_true_hash(bundle, load, role):
    put_file(bundle, role, "extra.html", b"<script>alert(1)</script>")
    with pytest.raises(BundleError, match="unknown file role"):
        load(bundle)


@pytest.mark.parametrize(
    "role, name",
    [
        ("rows", "rows.html"),
        ("rows", "../rows.csv"),
        ("rows", "/etc/passwd"),
        ("models", "rows.csv"),
        ("lock", "dvc.yaml"),
        ("models", "sub/models.csv"),
        ("paired", "paired.csv.gz.html"),
        ("models", "models.CSV"),
    ],
)
def test_a_role_has_fixed_names(bundle, load, role, name):
    m = manifest(bundle)
    m["files"][role]["path"] = name
    write_manifest(bundle, m)
    with pytest.raises(BundleError, match=rf"files\.{role}: path .* must be one of"):
        load(bundle)


def test_parts_without_gaps(bundle, load):
    data = (bundle / "rows.csv").read_bytes()
    import gzip

    put_file(bundle, "rows-002", "rows-002.csv.gz", gzip.compress(data[: data.index(b"\n") + 1]))
    with pytest.raises(BundleError, match="parts of rows must be rows, rows-001, rows-002"):
        load(bundle)


def test_a_listed_file_that_is_missing(bundle, load):
    (bundle / "models.csv").unlink()
    with pytest.raises(BundleError, match=r"models\.csv: missing \(listed in the manifest\)"):
        load(bundle)


@pytest.mark.parametrize("what", ["content", "size"])
def test_a_file_edited_after_packing(bundle, load, what):
    m = manifest(bundle)
    if what == "content":  # same size, other bytes
        data = bytearray((bundle / "models.csv").read_bytes())
        data[-2] = ord("7") if data[-2] != ord("7") else ord("8")
        (bundle / "models.csv").write_bytes(bytes(data))
        rule = "content differs from its sha256"
    else:
        m["files"]["models"]["bytes"] += 1
        write_manifest(bundle, m)
        rule = "the manifest says"
    with pytest.raises(BundleError, match=rule):
        load(bundle)
