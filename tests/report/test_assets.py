"""The charting library the pages ship: stored gzipped (no repository file over 1 MB), served decompressed and
pinned by its SHA-256; and no file git tracks is over 1 MB."""

import gzip
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmark.report import assets
from benchmark.storage.store import StoreError

ROOT = Path(__file__).resolve().parents[2]


def test_written_plotly_is_the_pinned_npm_file(tmp_path):
    paths = assets.write_assets(tmp_path)
    js = (tmp_path / assets.PLOTLY).read_bytes()
    assert [p.name for p in paths] == list(assets.FILES)
    assert hashlib.sha256(js).hexdigest() == assets.PLOTLY_SHA256
    assert js.startswith(b"/**") and b"plotly.js" in js[:400] and len(js) > 1_000_000
    assert "MIT" in (tmp_path / "plotly-LICENSE").read_text()


def test_a_tampered_copy_is_refused(tmp_path, monkeypatch):
    shutil.copy(assets.VENDOR / "plotly-LICENSE", tmp_path / "plotly-LICENSE")
    data = gzip.decompress((assets.VENDOR / assets.SHIPPED).read_bytes())
    (tmp_path / assets.SHIPPED).write_bytes(gzip.compress(data + b"\nalert(1)"))
    monkeypatch.setattr(assets, "VENDOR", tmp_path)
    with pytest.raises(StoreError, match="content differs from PLOTLY_SHA256"):
        assets.write_assets(tmp_path / "out")
    assert not (tmp_path / "out" / assets.PLOTLY).exists()


def test_no_tracked_file_is_over_1_mb():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    big = {
        f.decode(): (ROOT / f.decode()).stat().st_size
        for f in files
        if f and (ROOT / f.decode()).is_file() and (ROOT / f.decode()).stat().st_size > 1_000_000
    }
    assert big == {}


def test_vendored_axe_is_the_pinned_npm_file_and_no_page_ships_it(tmp_path):
    js = assets.axe_js()
    assert hashlib.sha256(js.encode()).hexdigest() == assets.AXE_SHA256
    assert f"axe v{assets.AXE_VERSION}" in js[:400] and len(js) > 300_000
    assert "Mozilla Public License" in (assets.VENDOR / "axe-LICENSE").read_text()
    assert not any("axe" in p.name for p in assets.write_assets(tmp_path))  # for the tests only
