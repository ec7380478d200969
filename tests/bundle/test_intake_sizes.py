"""Intake, sizes: every file is capped on disk before it is read, and a gzipped table is inflated as a stream with a
hard cap (a decompression bomb costs at most the cap, never its full size)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest
from helpers import manifest, put_file, write_manifest

from benchmark.bundle import intake
from benchmark.bundle.schema import BundleError


def _bomb(inflated: int) -> bytes:
    """A gzip stream of ``inflated`` bytes (a CSV header, then zeros) built chunk by chunk."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [c.compress(b"suite,split\n")]
    chunk = b"0" * (1 << 20)
    for _ in range(inflated >> 20):
        out.append(c.compress(chunk))
    return b"".join(out) + c.flush()


def _use_gz(bundle, data: bytes, role="rows"):
    (bundle / f"{role}.csv").unlink()
    put_file(bundle, role, f"{role}.csv.gz", data)


@pytest.mark.parametrize(
    "name, role", [("rows.csv", "rows"), ("models.csv", "models"), ("dvc.lock", "lock"), ("paired.csv", "paired")]
)
def test_a_file_over_the_cap_is_refused_before_it_is_read(bundle, load, monkeypatch, name, role):
    put_file(bundle, role, name, b"x" * (intake.MAX_FILE_BYTES + 1))
    reads = []
    real_read = intake.os.read

    def read(fd, n):
        reads.append(len(data := real_read(fd, n)))
        return data

    monkeypatch.setattr(intake.os, "read", read)
    with pytest.raises(BundleError, match=rf"{name}: {intake.MAX_FILE_BYTES + 1} bytes; every bundle file stays under"):
        load(bundle)
    assert sum(reads) == (bundle / "manifest.json").stat().st_size  # the manifest only: the big file is never read


def test_a_manifest_over_the_cap(bundle, load):
    m = manifest(bundle)
    m["contributor"] = "x" * (intake.MAX_FILE_BYTES + 10)
    write_manifest(bundle, m)
    with pytest.raises(BundleError, match="manifest.json: .* bytes; every bundle file stays under"):
        load(bundle)


def test_a_decompression_bomb_costs_only_the_cap(bundle, load, monkeypatch):
    data = _bomb(200 << 20)  # 200 MB inflated: ten times the cap
    assert len(data) < intake.MAX_FILE_BYTES
    _use_gz(bundle, data)
    monkeypatch.setattr(gzip, "decompress", lambda *a, **k: pytest.fail("gzip.decompress of an untrusted blob"))
    monkeypatch.setattr(zlib, "decompress", lambda *a, **k: pytest.fail("zlib.decompress of an untrusted blob"))
    tracemalloc.start()
    try:
        with pytest.raises(BundleError, match=f"rows.csv.gz: inflates to more than {intake.MAX_UNPACKED_BYTES} bytes"):
            load(bundle)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * intake.MAX_UNPACKED_BYTES


@pytest.mark.parametrize(
    "data, rule",
    [
        (b"not gzip at all", "not valid gzip"),
        (gzip.compress(b"suite,split\n" * 100, mtime=0)[:-12], "truncated gzip stream"),  # mtime=0: the same bytes (and
        (
            gzip.compress(b"suite,split\n", mtime=0) + gzip.compress(b"x,y\n", mtime=0),  # test ids) whatever the clock
            "data after the end of the gzip stream",
        ),
        (gzip.compress(b"suite,split\n", mtime=0) + b"\0" * 64, "data after the end of the gzip stream"),
    ],
)
def test_malformed_gzip(bundle, load, data, rule):
    _use_gz(bundle, data)
    with pytest.raises(BundleError, match=rule):
        load(bundle)


def test_all_tables_together_are_capped(bundle, load, monkeypatch):
    monkeypatch.setattr(intake, "MAX_TOTAL_UNPACKED", (bundle / "rows.csv").stat().st_size + 100)
    with pytest.raises(BundleError, match="tables inflate to more than"):
        load(bundle)


def test_submit_splits_parts_that_would_inflate_past_the_cap(caltech, tmp_path, monkeypatch):
    """What submit writes, the intake reads: a part never inflates past the cap, whatever it compresses to."""
    import pandas as pd

    from benchmark.bundle import csv_files

    rows = pd.read_csv(caltech / "suites" / "caltech256" / "results" / "metrics.csv", dtype=str, keep_default_na=False)
    size = len(rows.to_csv(index=False).encode())
    monkeypatch.setattr(csv_files, "GZIP_ABOVE", 1000)
    monkeypatch.setattr(csv_files, "MAX_UNPACKED_BYTES", size // 3)
    parts = csv_files.csv_parts("rows", rows)
    assert len(parts) >= 3 and all(len(gzip.decompress(p)) <= size // 3 for _, _, p in parts)
    assert pd.concat(
        [
            pd.read_csv(__import__("io").BytesIO(gzip.decompress(p)), dtype=str, keep_default_na=False)
            for _, _, p in parts
        ],
        ignore_index=True,
    ).equals(rows)
