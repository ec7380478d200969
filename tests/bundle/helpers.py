"""Editing bundles in tests: rewrite a file and keep (or not) the manifest's hash of it, as a forger would."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd


def manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def write_manifest(bundle: Path, m: dict) -> None:
    (bundle / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True))


def rehash(bundle: Path, role: str = "rows") -> None:
    """Make the manifest's sha256 and size of a bundle file match the file again (what a forger would do)."""
    m = manifest(bundle)
    data = (bundle / m["files"][role]["path"]).read_bytes()
    m["files"][role] |= {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    write_manifest(bundle, m)


def put_file(bundle: Path, role: str, name: str, data: bytes) -> None:
    """Write ``name`` and list it under ``role`` with its true hash and size (a forger's consistent edit)."""
    (bundle / name).write_bytes(data)
    m = manifest(bundle)
    m["files"][role] = {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    write_manifest(bundle, m)


def read_rows(bundle: Path) -> pd.DataFrame:
    return pd.read_csv(bundle / "rows.csv", dtype=str, keep_default_na=False)


def write_rows(bundle: Path, df: pd.DataFrame, *, keep_hash: bool = False) -> None:
    df.to_csv(bundle / "rows.csv", index=False)
    if not keep_hash:
        rehash(bundle)


def copy_as(src: Path, root: Path, suite: str, name: str) -> Path:
    """A copy of bundle ``src`` at ``root/<suite>/<name>`` (the folder layout publish reads)."""
    import shutil

    dst = root / suite / name
    shutil.copytree(src, dst)
    return dst


def one_line_error(err: str) -> str:
    """The single ``error: ...`` line a CLI printed (fails if there is more, or a traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def stub_page(inputs, out) -> Path:
    """What a test's stand-in for ``benchmark.report.build_report`` writes: the page's data downloads (rows, entries,
    conflicts, as the real page) and a one-line index.html, no charts."""
    from benchmark.report.build import downloads_of
    from benchmark.storage.downloads import write_downloads

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_downloads(out / "data", downloads_of(inputs), prefix="data/")
    (out / "index.html").write_text(f"<title>{len(inputs.results)} rows</title>")
    return out / "index.html"
