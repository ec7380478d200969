"""Read what the report needs: results, model table, zoo, params, dvc.lock.

Missing *optional* inputs do not stop the report: they become notices that the
page shows ("what is missing"). Unreadable or malformed files raise
:class:`benchmark.storage.store.StoreError` naming the file and the problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from benchmark.config.report_config import ReportConfig
from benchmark.storage.results_schema import (
    COLUMNS,
    OPTIONAL_COLUMNS,
    PAIRED_KEYS,
    PAIRED_REQUIRED,
    empty_results,
    validate_results,
)
from benchmark.storage.store import StoreError

# Without these a results row means nothing; the other columns can be left empty.
REQUIRED_COLUMNS = ("suite", "split", "family", "method", "base", "metric", "value")


@dataclass
class Origin:
    """Where the rows of a page that merges several sources come from (the site: the result bundles of a suite)."""

    # benchmark.report.tables.KEY (one leaderboard row), "source" (the ids its values come from, space-separated) and
    # "conflict" (ids of other sources of the same standing that give other values for it, space-separated; "" none)
    rows: pd.DataFrame
    sources: dict[str, dict] = field(default_factory=dict)  # id -> {"contributor", "status", "link" (from the page)}


@dataclass
class ReportInputs:
    """Everything the report is rendered from (no paths needed after loading)."""

    results: pd.DataFrame
    models: pd.DataFrame | None = None
    zoo: dict[str, dict] = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    lock: dict | None = None
    config: ReportConfig = field(default_factory=ReportConfig)
    notices: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    paired: pd.DataFrame | None = None  # results/paired.csv: paired-bootstrap differences duo - base
    logits_dir: str | None = None  # results/logits: risk-coverage and reliability curves of the headline rows
    methods_dir: str | None = (
        None  # results/methods: the same for method outputs (SVE, soups, ...); None = beside logits
    )
    # tables written to data/ for download (Parquet, gzipped CSV, schema.json); None = the results table as "rows"
    downloads: dict | None = None  # name -> benchmark.storage.downloads.DownloadTable
    origin: Origin | None = None  # several sources merged: the source of every row, shown beside it


def results_from_frame(df: pd.DataFrame, *, source: str = "results table") -> tuple[pd.DataFrame, list[str]]:
    """Validate a results table, tolerating a partial one.

    Returns the table with canonical dtypes and the notices about what is missing.
    Missing required columns give an empty table; other missing columns are
    filled with empty values (with a notice, except the optional ones).
    """
    if len(df.columns) == 0:
        return empty_results(), [f"{source}: no result rows yet (run the pipeline: `dvc repro`)."]
    notices = []
    missing_req = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing_req:
        notices.append(f"{source}: missing required columns {missing_req}; no results can be shown.")
        return empty_results(), notices
    missing = [c for c in COLUMNS if c not in df.columns and c not in OPTIONAL_COLUMNS]
    if missing:
        notices.append(f"{source}: missing columns {missing}; shown as empty.")
        df = df.copy()
        for c in missing:
            df[c] = "" if COLUMNS[c][0] == "string" else float("nan")
    out = validate_results(df, source=source)[list(COLUMNS)]
    if out.empty:
        notices.append(f"{source}: no result rows yet (run the pipeline: `dvc repro`).")
    return out.reset_index(drop=True), notices


def read_results(path) -> tuple[pd.DataFrame, list[str]]:
    """Read ``results/metrics.csv``. An empty file is an empty table, not an error."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: results file not found")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        df = pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise StoreError(f"{path}: cannot parse results CSV ({e})") from e
    return results_from_frame(df, source=str(path))


def read_models(path) -> tuple[pd.DataFrame | None, list[str]]:
    """Read ``results/models.csv`` (needs a ``name`` column); missing file = None + notice."""
    path = Path(path)
    if not path.exists():
        return None, [f"{path}: model table not found; model details are not shown."]
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return None, [f"{path}: model table is empty."]
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise StoreError(f"{path}: cannot parse model table ({e})") from e
    if "name" not in df.columns:
        raise StoreError(f"{path}: model table has no 'name' column (columns: {list(df.columns)})")
    dup = df["name"][df["name"].duplicated()].tolist()
    if dup:
        raise StoreError(f"{path}: duplicate model names {dup}")
    return df, []


def read_paired(path) -> tuple[pd.DataFrame | None, list[str]]:
    """Read ``results/paired.csv``; a missing file = None + notice (the headline then shows no intervals)."""
    path = Path(path)
    if not path.exists():
        return None, [
            f"{path}: paired differences not found; the headline shows differences to the base without intervals."
        ]
    try:
        df = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={c: str for c in PAIRED_KEYS})
    except pd.errors.EmptyDataError:
        return None, []
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise StoreError(f"{path}: cannot parse paired differences CSV ({e})") from e
    missing = [c for c in PAIRED_REQUIRED if c not in df.columns]
    if missing:
        raise StoreError(f"{path}: missing columns {missing}")
    for c in PAIRED_REQUIRED[len(PAIRED_KEYS) :]:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df, []


def read_yaml(path):
    """Parse a YAML file with ``yaml.safe_load``; StoreError names the file on failure."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise StoreError(f"{path}: invalid YAML ({e})") from e


def read_zoo(paths) -> tuple[dict[str, dict], list[str]]:
    """Merge zoo YAML files. Missing files become notices.

    A zoo maps name -> entry, either at the top level or under a ``models`` key.
    """
    zoo: dict[str, dict] = {}
    notices = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            notices.append(f"{p}: zoo file not found; provenance shows no zoo entries from it.")
            continue
        data = read_yaml(p)
        if data is None:
            notices.append(f"{p}: zoo file is empty.")
            continue
        if isinstance(data, dict) and isinstance(data.get("models"), dict):
            data = data["models"]
        if not isinstance(data, dict):
            raise StoreError(f"{p}: zoo must be a mapping name -> entry, got {type(data).__name__}")
        for name, entry in data.items():
            if not isinstance(entry, dict):
                raise StoreError(f"{p}: zoo entry {name!r} must be a mapping, got {type(entry).__name__}")
            name = str(name)
            if name in zoo and zoo[name] != entry:
                raise StoreError(f"{p}: zoo entry {name!r} differs from the one in an earlier zoo file")
            zoo[name] = entry
    return zoo, notices


def read_mapping(path, if_missing: str) -> tuple[dict | None, list[str]]:
    """Read an optional YAML mapping (params.yaml, dvc.lock); missing = None + notice."""
    path = Path(path)
    if not path.exists():
        return None, [f"{path}: not found; {if_missing}."]
    data = read_yaml(path)
    if data is None:
        return {}, []
    if not isinstance(data, dict):
        raise StoreError(f"{path}: must be a YAML mapping, got {type(data).__name__}")
    return data, []


def load_inputs(
    results, models=None, zoo=(), params=None, lock=None, paired=None, logits=None, methods=None
) -> ReportInputs:
    """Read every input file; the ``report`` block of ``params`` configures the report."""
    res, notes = read_results(results)
    sources = {"results": str(results)}
    mdf = None
    if models is not None:
        mdf, n = read_models(models)
        notes += n
        sources["models"] = str(models)
    z, n = read_zoo(zoo)
    notes += n
    sources["zoo"] = ", ".join(str(p) for p in zoo)
    prm: dict = {}
    if params is not None:
        p, n = read_mapping(params, "the report uses its default settings")
        prm = p or {}
        notes += n
        sources["params"] = str(params)
    lk = None
    if lock is not None:
        lk, n = read_mapping(lock, "the hashes of the models' logits are not shown")
        notes += n
        sources["lock"] = str(lock)
    pdf = None
    if paired is not None:
        pdf, n = read_paired(paired)
        notes += n
        sources["paired"] = str(paired)
    cfg = ReportConfig.from_params(prm, source=str(params or "params"))
    if logits is not None and not Path(logits).is_dir():
        notes.append(f"{logits}: logits folder not found; no risk-coverage curves or reliability diagrams.")
    return ReportInputs(
        results=res,
        models=mdf,
        zoo=z,
        params=prm,
        lock=lk,
        config=cfg,
        notices=notes,
        sources=sources,
        paired=pdf,
        logits_dir=None if logits is None else str(logits),
        methods_dir=None if methods is None else str(methods),
    )
