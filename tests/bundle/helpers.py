"""Editing bundles in tests: rewrite a file and keep (or not) the manifest's hash of it."""
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
    """Make the manifest's sha256 of a bundle file match the file again (what a forger would do)."""
    m = manifest(bundle)
    m["files"][role]["sha256"] = hashlib.sha256((bundle / m["files"][role]["path"]).read_bytes()).hexdigest()
    write_manifest(bundle, m)


def read_rows(bundle: Path) -> pd.DataFrame:
    return pd.read_csv(bundle / "rows.csv", dtype=str, keep_default_na=False)


def write_rows(bundle: Path, df: pd.DataFrame, *, keep_hash: bool = False) -> None:
    df.to_csv(bundle / "rows.csv", index=False)
    if not keep_hash:
        rehash(bundle)
