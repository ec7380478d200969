"""A result bundle on disk: its files, its identity and the invariants of its rows.

A bundle is a small folder ``leaderboard/<suite>/<id>/`` (its identity: the parent folder is
named after the manifest's suite, ``id`` matches :data:`~benchmark.bundle.manifest.BUNDLE_ID`)
holding exactly these regular files::

    manifest.json       provenance (see benchmark.bundle.manifest) and the list of the bundle's files with their sha256
    rows.csv[.gz]       the tidy result rows (benchmark.storage.results_schema), gzip when larger than ~900 kB;
                        when even that is 1 MB or more, in parts rows.csv.gz, rows-001.csv.gz, ... (manifest
                        roles rows, rows-001, ...)
    paired.csv[.gz]     the paired-bootstrap differences duo - base of the run (optional; parts as the rows)
    models.csv          the model table of the run (optional)
    dvc.lock            the run's dvc.lock (optional)

Nothing else: a bundle never carries its own verification (``verify --record-to`` writes it
outside, where only this project's CI can). :func:`load_bundle` reads everything through
:mod:`benchmark.bundle.intake` and checks it; any problem is one :class:`BundleError` naming
the file and the rule.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchmark.bundle import intake, strict
from benchmark.bundle.intake import MANIFEST, MAX_FILE_BYTES, BundleError, q, show  # noqa: F401 (re-exported)
from benchmark.bundle.manifest import BUNDLE_ID, FORMAT, MANIFEST_KEYS, NAME, SHORT_HASH, check_manifest, check_suite  # noqa: F401
from benchmark.core.metric_info import METRICS
from benchmark.storage.results_schema import (
    COLUMNS,
    OPTIONAL_COLUMNS,
    PAIRED_COLUMNS,
    PAIRED_REQUIRED,
    validate_results,
)

GZIP_ABOVE = 900_000  # rows.csv is gzipped above this size
KEY = ["suite", "split", "family", "method", "base", "sidekick", "members", "fit", "confidence", "metric"]
RECOMPUTED = ["value", "ci_low", "ci_high", "n", "temperature_base", "temperature_side", "weight_base", "weight_side"]
COSTS = [
    "gflops",
    "params",
    "balance",
    "overhead_percent",
    "extra_params_percent",
    "train_images",
    "train_params",
]  # recomputed by verify too (the last two: the training budget)
REPORTED = ["throughput"]  # a measurement of the contributor's machine: shown as reported, never verified
MODEL_COLUMNS = ["name", "arch", "init", "img_size", "seed", "role", "gflops", "params", "throughput"]
# metric -> (low, high) plausible range; the rest are fractions in [0, 1]
RANGES = {"nll": (0.0, math.inf), "brier": (0.0, 2.0), "aurc_trapezoid": (0.0, 2.0)}
MEMBERS_MAX = 64 * 65
_NAME = NAME.pattern[1:-1]  # the name pattern without its anchors


@dataclass
class Bundle:
    path: Path
    manifest: dict
    rows: pd.DataFrame  # canonical dtypes (results schema)
    models: pd.DataFrame | None = None
    lock: dict | None = None
    paired: pd.DataFrame | None = None  # paired-bootstrap differences duo - base (results/paired.csv)
    status: str = "self-reported"  # set by publish from a verification record (benchmark.bundle.verify)
    verification: dict | None = None  # that record (when, on which CPU, against which logits), when there is one
    files: dict[str, bytes] = field(default_factory=dict, repr=False)  # name -> the validated bytes (manifest included)

    @property
    def suite(self) -> str:
        """The suite the bundle's rows are of (its manifest's)."""
        return self.manifest["suite"]

    @property
    def name(self) -> str:
        """The bundle's id: its folder's name."""
        return self.path.name


def sha256_file(path) -> str:
    """The sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def row_label(r) -> str:
    """A row named by its key, for messages."""
    return ", ".join(f"{k}={show(r[k])}" for k in KEY if str(r[k]) != "")


def part_roles(m: dict, stem: str) -> list[str]:
    """The manifest roles of a table stored in parts: ``stem``, ``stem-001``, ``stem-002``, ..."""
    return sorted(r for r in m["files"] if r == stem or (r.startswith(f"{stem}-") and r[len(stem) + 1 :].isdigit()))


def rows_digest(m: dict) -> str:
    """One hash of all the rows' parts (what a verification record is bound to, with the manifest's sha256)."""
    return hashlib.sha256("\n".join(m["files"][r]["sha256"] for r in part_roles(m, "rows")).encode()).hexdigest()


def identity(path, m: dict) -> tuple[str, str]:
    """(suite, id) of the bundle folder ``path``: ``.../<suite>/<id>`` with ``<suite>`` the manifest's suite."""
    path = Path(os.path.abspath(path))
    if not BUNDLE_ID.fullmatch(path.name):
        raise BundleError(
            f"{show(path)}: bundle id {q(path.name)} must match {BUNDLE_ID.pattern} "
            "(the folder leaderboard/<suite>/<id>)"
        )
    if path.parent.name != m["suite"]:
        raise BundleError(
            f"{show(path)}: a bundle of suite {m['suite']!r} must be in a folder named {m['suite']!r} "
            f"(leaderboard/{m['suite']}/{path.name}), not {q(path.parent.name)}"
        )
    return m["suite"], path.name


def to_float(col: pd.Series) -> pd.Series:
    """``pd.to_numeric(col, errors="coerce")`` as float64: pyarrow's parser when it reads every cell, else pandas'.

    pyarrow's text-to-float cast is strict (no spaces, no thousands separators, no ``1_0``): where it reads a cell,
    pandas reads the same number; a table with any other cell goes to pandas, which turns it into NaN. About ten
    times faster on the paper-scale tables (465,000 rows of CIFAR-100-C).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        values = pc.cast(pa.array(col, from_pandas=True), pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return pd.to_numeric(col, errors="coerce").astype("float64")
    return pd.Series(values, index=col.index, name=col.name)


def _numbers(df: pd.DataFrame, columns, where: str) -> None:
    for c in columns:
        if c not in df.columns:
            continue
        num = to_float(df[c])
        bad = num.isna() & df[c].notna() & ~df[c].isin(["nan", "NaN"])
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise BundleError(f"{where}: row {i + 2}: column {c!r} must be a number, got {q(df[c].iloc[i])[:40]}")
        if (num.abs() == math.inf).any():
            i = int((num.abs() == math.inf).to_numpy().nonzero()[0][0])
            raise BundleError(f"{where}: row {i + 2}: column {c!r} must be finite, got {df[c].iloc[i]}")
        if COLUMNS.get(c, ("",))[0] == "int64" or c in ("img_size", "seed"):
            big = num.abs() > 2**53  # beyond exact integers (and int64's range)
            if big.any():
                i = int(big.to_numpy().nonzero()[0][0])
                raise BundleError(f"{where}: row {i + 2}: column {c!r}: {q(df[c].iloc[i])[:40]} is out of range")


def _names(df: pd.DataFrame, columns, where: str, *, empty=(), joined=()) -> None:
    """Text columns hold names (:data:`~benchmark.bundle.manifest.NAME`); ``empty`` may be '', ``joined`` are
    '+'-joined."""
    for c in columns:
        col = df[c].fillna("")
        ok = col.str.fullmatch(_NAME)
        if c in joined:
            ok = col.str.len().le(MEMBERS_MAX) & col.str.fullmatch(rf"{_NAME}(\+{_NAME})*")
        if c in empty:
            ok = ok | (col == "")
        if not ok.all():
            i = int((~ok).to_numpy().nonzero()[0][0])
            raise BundleError(
                f"{where}: row {i + 2}: column {c!r}: {q(col.iloc[i])[:70]} does not match {NAME.pattern}"
            )


def check_rows(df: pd.DataFrame, suite: str, where: str) -> pd.DataFrame:
    """The rows with canonical dtypes, or BundleError naming the first bad row and field."""
    missing = [c for c in COLUMNS if c not in df.columns and c not in OPTIONAL_COLUMNS]
    if missing:
        raise BundleError(f"{where}: missing columns {missing}")
    if df.empty:
        raise BundleError(f"{where}: no rows")
    _numbers(df, [c for c, (t, _) in COLUMNS.items() if t != "string"], where)
    _names(
        df,
        ["split", "family", "method", "base", "sidekick", "members", "fit", "confidence"],
        where,
        empty=("sidekick",),
        joined=("members",),
    )
    rows = validate_results(df, source=where)[list(COLUMNS)]
    checks = [
        (
            ~rows["metric"].isin(list(METRICS)),
            lambda r: f"unknown metric {q(r['metric'])[:40]} (known: see benchmark/core/metric_info.py)",
        ),
        (rows["suite"] != suite, lambda r: f"suite {q(r['suite'])[:40]} differs from the manifest's {suite!r}"),
        (rows["n"] < 0, lambda r: f"n must be >= 0, got {r['n']}"),
        (
            ~rows["inputs_hash"].str.fullmatch(SHORT_HASH.pattern.strip("^$")),
            lambda r: f"inputs_hash {q(r['inputs_hash'])[:40]} is not 16 hex digits",
        ),
    ]
    for col in (
        "gflops",
        "params",
        "throughput",
        "balance",
        "overhead_percent",
        "extra_params_percent",
        "train_images",
        "train_params",
    ):
        checks.append((rows[col] < 0, lambda r, col=col: f"{col} must be >= 0, got {r[col]}"))
    lo = rows["metric"].map(lambda m: RANGES.get(m, (0.0, 1.0))[0])
    hi = rows["metric"].map(lambda m: RANGES.get(m, (0.0, 1.0))[1])
    for col in ("value", "ci_low", "ci_high"):
        v = rows[col]
        checks.append(
            (
                v.notna() & ((v < lo - 1e-9) | (v > hi + 1e-9)),
                lambda r, col=col: f"{col} {float(r[col])!r} out of range for {r['metric']}",
            )
        )
    for bad, msg in checks:
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            r = rows.iloc[i]
            raise BundleError(f"{where}: row {i + 2} ({row_label(r)}): {msg(r)}")
    dup = rows.duplicated(KEY)
    if dup.any():
        raise BundleError(
            f"{where}: row {int(dup.to_numpy().nonzero()[0][0]) + 2}: repeated row key ({row_label(rows[dup].iloc[0])})"
        )
    return rows


class _Tables:
    """Inflating the bundle's tables under one total cap (:data:`~benchmark.bundle.intake.MAX_TOTAL_UNPACKED`)."""

    def __init__(self, folder: intake.Folder, m: dict, raw: dict):
        self.folder, self.m, self.raw, self.total = folder, m, raw, 0

    def frame(self, role: str, columns, required=()) -> tuple[pd.DataFrame, str]:
        name = self.m["files"][role]["path"]
        where = self.folder.where(name)
        data = self.raw[name]
        if name.endswith(".gz"):
            data = strict.gunzip(data, where)
        self.total += len(data)
        if self.total > intake.MAX_TOTAL_UNPACKED:
            raise BundleError(f"{where}: the bundle's tables inflate to more than {intake.MAX_TOTAL_UNPACKED} bytes")
        return strict.read_csv(data, where, columns, required=required), where

    def table(self, stem: str, columns, required=()) -> tuple[pd.DataFrame | None, str]:
        roles = part_roles(self.m, stem)
        if not roles:
            return None, ""
        frames = [self.frame(r, columns, required) for r in roles]
        where = frames[0][1] + (f" (+{len(frames) - 1} parts)" if len(frames) > 1 else "")
        return pd.concat([f for f, _ in frames], ignore_index=True), where


def _models(df: pd.DataFrame, where: str) -> pd.DataFrame:
    _numbers(df, ["img_size", "seed", "gflops", "params", "throughput"], where)
    _names(df, ["name", "arch", "role"], where, empty=("role",))
    if df["name"].duplicated().any():
        raise BundleError(f"{where}: model {q(df['name'][df['name'].duplicated()].iloc[0])} listed twice")
    if (df["init"].fillna("").str.len() > 200).any() or not df["init"].fillna("").map(str.isprintable).all():
        raise BundleError(f"{where}: column 'init' must be printable text of at most 200 characters")
    out = df.copy()
    for c in ("img_size", "seed", "gflops", "params", "throughput"):
        out[c] = pd.to_numeric(out[c], errors="coerce")
    return out


def _paired(df: pd.DataFrame, suite: str, where: str) -> pd.DataFrame:
    _numbers(df, PAIRED_COLUMNS[7:], where)
    _names(df, ["split", "base", "sidekick", "fit", "method", "metric"], where)
    if (df["suite"] != suite).any():
        raise BundleError(f"{where}: suite differs from the manifest's {suite!r}")
    out = df.copy()
    for c in PAIRED_COLUMNS[7:]:
        if c in out.columns:
            out[c] = pd.to_numeric(out[c], errors="coerce")
    return out


def _lock(obj, where: str) -> dict:
    if not isinstance(obj, dict) or not isinstance(obj.get("stages", {}), dict):
        raise BundleError(f"{where}: not a dvc.lock mapping with 'stages'")
    for name, s in obj.get("stages", {}).items():
        if not isinstance(s, dict):
            raise BundleError(f"{where}: stages.{q(name)[:70]} must be a mapping")
    return obj


def load_bundle(bundle, *, check_arch: bool = True) -> Bundle:
    """Read and check a bundle folder (files, manifest, identity, hashes, rows, zoo entries, units).

    ``check_arch=False`` skips looking the zoo entries' architectures and tags up in timm (publish: fast)."""
    bundle = Path(bundle)
    with intake.Folder(bundle) as folder:
        where = folder.where(MANIFEST)
        if MANIFEST not in folder.entries:
            raise BundleError(
                f"{where}: missing manifest (is {show(bundle)} a bundle made by `python -m benchmark submit`?)"
            )
        raw = {MANIFEST: folder.read(MANIFEST)}
        m = check_manifest(strict.strict_json(raw[MANIFEST], where), where)
        identity(bundle, m)
        names = {f["path"]: f for f in m["files"].values()}
        folder.check_entries({MANIFEST, *names})
        for name, f in sorted(names.items()):
            raw[name] = folder.read_listed(name, f["sha256"], f["bytes"])
        tables = _Tables(folder, m, raw)
        df, rows_where = tables.table("rows", list(COLUMNS), [c for c in COLUMNS if c not in OPTIONAL_COLUMNS])
        rows = check_rows(df, m["suite"], rows_where)
        models = paired = lock = None
        if "models" in m["files"]:
            models = _models(*tables.frame("models", MODEL_COLUMNS, MODEL_COLUMNS))
        if part_roles(m, "paired"):
            df, w = tables.table("paired", list(PAIRED_COLUMNS), PAIRED_REQUIRED)
            paired = _paired(df, m["suite"], w)
        if "lock" in m["files"]:
            w = folder.where("dvc.lock")
            lock = _lock(strict.strict_yaml(raw["dvc.lock"], w), w)
    _check_zoo(m, where, check_arch)
    _check_coverage(m, rows, where)
    return Bundle(bundle, m, rows, models, lock, paired, files=raw)


def _check_zoo(m: dict, where: str, check_arch: bool = True) -> None:
    from benchmark.models.zoo import ZooError, parse_entry

    recipes = m["params"].get("recipes")
    for name, raw in m["zoo"].items():
        try:
            parse_entry(name, raw, recipes=recipes if isinstance(recipes, dict) else None, check_arch=check_arch)
        except (ZooError, ValueError, TypeError) as e:
            raise BundleError(f"{where}: zoo: {e}") from None


def _check_coverage(m: dict, rows: pd.DataFrame, where: str) -> None:
    """Every row belongs to a unit of the manifest, whose members are zoo entries or method outputs, and
    whose logits files include the row's split."""
    by_hash = {u["inputs_hash"]: u for u in m["units"]}
    for u in m["units"]:
        for name, folder in zip(u["members"], u["folders"]):
            if folder.startswith("logits/") and name not in m["zoo"]:
                raise BundleError(
                    f"{where}: unit {u['kind']} {'+'.join(u['members'])}: model {name!r} has no zoo entry"
                )
    pairs = rows[["inputs_hash", "split"]].drop_duplicates()
    for ih, split in pairs.itertuples(index=False):
        u = by_hash.get(ih)
        if u is None:
            raise BundleError(f"{where}: rows with inputs_hash {ih} belong to no unit of the manifest")
        for folder in u["folders"]:
            if f"{folder}/{split}.safetensors" not in m["logits"]:
                raise BundleError(
                    f"{where}: rows of unit {u['kind']} {'+'.join(u['members'])} on split {split}: "
                    f"no logits file {folder}/{split}.safetensors in the manifest"
                )
