"""The data files of a suite's site pages: the merged rows, the bundles (entries) and the conflicts.

Each table is written by :func:`benchmark.storage.downloads.write_downloads` (through the
suite page's build, into ``<suite>/data/``) as Parquet and gzipped CSV, and described in
``<suite>/data/schema.json``; the columns below are the only place their meaning is written.
"""

from __future__ import annotations

import pandas as pd

from benchmark.bundle.schema import KEY, REPORTED
from benchmark.storage.downloads import DownloadTable
from benchmark.storage.results_schema import COLUMNS

# the merged rows: the results schema, then where each row comes from
ROW_COLUMNS: dict[str, tuple[str, str]] = {
    (f"{c}_reported" if c in REPORTED else c): (
        (t, f"{d} (reported by the bundle's contributor, not verified)") if c in REPORTED else (t, d)
    )
    for c, (t, d) in COLUMNS.items()
} | {
    "bundle": (
        "string",
        "the bundle (folder leaderboard/<suite>/<bundle>/) the row is shown from (merge rule: index page)",
    ),
    "status": ("string", "'verified' (every row recomputed from the logits) or 'self-reported'"),
    "created": ("string", "when the bundle was made (manifest 'created', UTC, ISO 8601)"),
}
ENTRY_COLUMNS: dict[str, tuple[str, str]] = {
    "bundle": ("string", "bundle id (its folder name)"),
    "status": ("string", "'verified' or 'self-reported'"),
    "contributor": ("string", "who ran it (manifest 'contributor', free text)"),
    "created": ("string", "when the bundle was made (UTC, ISO 8601)"),
    "commit": ("string", "git commit of the run ('' if unknown)"),
    "rows": ("int64", "rows in the bundle"),
    "shown": ("int64", "rows of the merged table that come from this bundle"),
    "provenance": ("string", "the bundle's provenance page, relative to the suite page"),
}
CONFLICT_COLUMNS: dict[str, tuple[str, str]] = {k: COLUMNS[k] for k in KEY} | {
    "shown_bundle": ("string", "the bundle whose value is shown"),
    "shown_value": ("float64", "the value shown"),
    "other_bundle": ("string", "another bundle of the same status with a value for the same key"),
    "other_value": ("float64", "its value (differs from the shown one by more than the tolerance)"),
    "status": ("string", "status of both bundles"),
}


def suite_downloads(merged: pd.DataFrame, entries: pd.DataFrame, conflicts: pd.DataFrame) -> dict[str, DownloadTable]:
    """The tables of one suite's ``data/`` folder."""
    return {
        "rows": DownloadTable(
            merged, ROW_COLUMNS, "the merged rows of every bundle of the suite, one per (split, method, metric)"
        ),
        "entries": DownloadTable(entries, ENTRY_COLUMNS, "the suite's bundles"),
        "conflicts": DownloadTable(
            conflicts, CONFLICT_COLUMNS, "keys given different values by bundles of the same status"
        ),
    }
