"""Intake, links and special files: a bundle is regular files directly inside a real folder, whatever replaces one
of them (a link out or in, a FIFO, a device, a hard link, a folder), for every file of the bundle."""

from __future__ import annotations

import os
import shutil

import pytest
from helpers import one_line_error

from benchmark.bundle.schema import BundleError
from benchmark.cli.main import main

SECRET = "uq-test-secret-7d1f"
FILES = ["manifest.json", "rows.csv", "models.csv", "paired.csv", "dvc.lock"]


def _secret(tmp_path):
    p = tmp_path / "outside" / "secret.txt"
    p.parent.mkdir()
    p.write_text(f"TOKEN={SECRET}\n")
    return p


def _replace(bundle, name, how, tmp_path):
    target = bundle / name
    original = target.read_bytes()
    target.unlink()
    if how == "link-out":
        target.symlink_to(_secret(tmp_path))
    elif how == "link-in":  # to a sibling inside the bundle
        target.symlink_to("manifest.json" if name != "manifest.json" else "rows.csv")
    elif how == "link-device":
        target.symlink_to("/dev/zero")
    elif how == "link-proc":
        target.symlink_to("/proc/self/environ")
    elif how == "fifo":
        os.mkfifo(target)
    elif how == "hard-link":  # same bytes, but shared with a file outside the bundle
        outside = tmp_path / "outside-copy"
        outside.write_bytes(original)
        os.link(outside, target)
    elif how == "folder":
        target.mkdir()
        (target / "x").write_bytes(original)
    return {
        "link-out": "symbolic link",
        "link-in": "symbolic link",
        "link-device": "symbolic link",
        "link-proc": "symbolic link",
        "fifo": "FIFO",
        "hard-link": "hard link",
        "folder": "a folder",
    }[how]


@pytest.mark.parametrize("how", ["link-out", "link-in", "link-device", "link-proc", "fifo", "hard-link", "folder"])
@pytest.mark.parametrize("name", FILES)
def test_every_file_must_be_a_plain_file(bundle, tmp_path, load, capsys, name, how):
    rule = _replace(bundle, name, how, tmp_path)
    with pytest.raises(BundleError) as e:
        load(bundle)
    msg = str(e.value)
    assert f"{bundle / name}:" in msg and rule in msg and "\n" not in msg
    assert main(["verify", str(bundle), "--quiet"]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert name in line and rule in line


def test_a_linked_bundle_folder_is_refused(pristine, tmp_path, load):
    real = tmp_path / "real" / "caltech256" / "b1"
    shutil.copytree(pristine, real)
    (tmp_path / "caltech256").mkdir()
    (tmp_path / "caltech256" / "b1").symlink_to(real)
    load(real)  # the real folder is a valid bundle
    with pytest.raises(BundleError, match="is a symbolic link; a bundle must be a real folder"):
        load(tmp_path / "caltech256" / "b1")


@pytest.mark.parametrize("how", ["link-out", "link-proc", "fifo"])
def test_publish_never_reads_or_copies_what_a_link_points_to(bundle, pristine, tmp_path, capsys, fast_report, how):
    """The other bundle is published; the hostile one is left out (one line, exit 3) and the secret is nowhere in the
    site."""
    board = bundle.parent.parent
    good = board / "caltech256" / "good"
    shutil.copytree(pristine, good)
    _replace(bundle, "models.csv", how, tmp_path)
    os.environ[SECRET] = SECRET  # /proc/self/environ would hold it
    try:
        rc = main(["publish", "--bundles", str(board), "--out", str(tmp_path / "site"), "--quiet"])
    finally:
        del os.environ[SECRET]
    err = capsys.readouterr().err
    assert rc == 3 and f"left out {bundle}" in err and "Traceback" not in err
    site = tmp_path / "site"
    assert (site / "bundles" / "caltech256" / "good" / "index.html").is_file()
    assert not (site / "bundles" / "caltech256" / bundle.name).exists()
    for f in site.rglob("*"):
        assert not f.is_symlink()
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f
