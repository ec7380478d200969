"""A result bundle on disk: its files, the manifest's schema and the invariants of its rows.

A bundle is a small folder (``leaderboard/<suite>/<id>/``)::

    manifest.json       provenance (see :data:`MANIFEST_KEYS`) and the list of the bundle's files with their sha256
    rows.csv[.gz]       the tidy result rows (benchmark.storage.results_schema), gzip when larger than ~900 kB; when even
                        that is 1 MB or more, in parts rows.csv.gz, rows-001.csv.gz, ... (manifest roles rows, rows-001, ...)
    paired.csv[.gz]     the paired-bootstrap differences duo - base of the run (optional; parts as the rows)
    models.csv          the model table of the run (optional)
    dvc.lock            the run's dvc.lock (optional)
    verification.json   written by ``verify --record`` (or ``submit``): the status and what it was checked on

:func:`load_bundle` reads and checks all of it; any problem is one
:class:`BundleError` naming the file and the field.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pandas as pd

from benchmark.core.metric_info import METRICS
from benchmark.storage.results_schema import COLUMNS, OPTIONAL_COLUMNS, validate_results
from benchmark.storage.store import StoreError

FORMAT = "uq-bundle/1"
MANIFEST = "manifest.json"
VERIFICATION = "verification.json"
MAX_FILE_BYTES = 1_000_000  # every file of a bundle stays under 1 MB
GZIP_ABOVE = 900_000  # rows.csv is gzipped above this size
KEY = ["suite", "split", "family", "method", "base", "sidekick", "members", "fit", "confidence", "metric"]
RECOMPUTED = ["value", "ci_low", "ci_high", "n", "temperature_base", "temperature_side", "weight_base", "weight_side"]
SHA256 = re.compile(r"^[0-9a-f]{64}$")
SHORT_HASH = re.compile(r"^[0-9a-f]{16}$")
UNIT_KINDS = ("single", "duo", "deep_ensemble", "method")
# manifest key -> (type, meaning)
MANIFEST_KEYS: dict[str, tuple[type | tuple, str]] = {
    "format": (str, f"always {FORMAT!r}"),
    "suite": (str, "suite name ('embedded' or a suites/<name>.yaml)"),
    "contributor": (str, "free text: who ran it"),
    "created": (str, "UTC time of submit, ISO 8601"),
    "git": (dict, "commit and whether the working tree had changes"),
    "versions": (dict, "python, torch, timm, this package"),
    "device": (dict, "platform, processor, CUDA device if any"),
    "remote": ((str, type(None)), "DVC remote holding the logits, or null"),
    "params": (dict, "the suite's params.yaml"),
    "zoo": (dict, "zoo entries of the models behind the rows"),
    "files": (dict, "bundle file role -> {path, sha256, bytes}"),
    "stages": (dict, "dvc.lock stage -> {outs: {path: md5}} of the stages behind the rows"),
    "logits": (dict, "logits file (relative to the results folder) -> {sha256, bytes}"),
    "units": (list, "evaluation units: kind, members, logits folders, rows' inputs_hash"),
}
# metric -> (low, high) plausible range; the rest are fractions in [0, 1]
RANGES = {"nll": (0.0, math.inf), "brier": (0.0, 2.0), "aurc_trapezoid": (0.0, 2.0)}


class BundleError(StoreError):
    """A malformed bundle; the message names the file and the problem."""


@dataclass
class Bundle:
    path: Path
    manifest: dict
    rows: pd.DataFrame  # canonical dtypes (results schema)
    models: pd.DataFrame | None = None
    lock: dict | None = None
    paired: pd.DataFrame | None = None  # paired-bootstrap differences duo - base (results/paired.csv)
    status: str = "self-reported"  # set by publish from verification.json

    @property
    def suite(self) -> str:
        return self.manifest["suite"]

    @property
    def name(self) -> str:
        return self.path.name


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def row_label(r) -> str:
    """A row named by its key, for messages."""
    return ", ".join(f"{k}={r[k]}" for k in KEY if str(r[k]) != "")


def inner_path(bundle: Path, rel, where: str) -> Path:
    """``bundle / rel`` for a relative path that stays inside the bundle (no '..', no absolute path, no link out)."""
    if not isinstance(rel, str) or not rel:
        raise BundleError(f"{where}: must be a relative path, got {rel!r}")
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or "\\" in rel or ":" in rel:
        raise BundleError(f"{where}: path {rel!r} escapes the bundle; only relative paths inside it are allowed")
    full = bundle / p
    if not full.resolve().is_relative_to(bundle.resolve()):
        raise BundleError(f"{where}: path {rel!r} leads outside the bundle")
    return full


def _need(obj: dict, key: str, typ, where: str):
    if key not in obj:
        raise BundleError(f"{where}: missing key {key!r}")
    if not isinstance(obj[key], typ) or isinstance(obj[key], bool) and typ is not bool:
        name = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise BundleError(f"{where}: {key!r} must be {name}, got {type(obj[key]).__name__}")
    return obj[key]


def read_manifest(bundle: Path) -> dict:
    where = bundle / MANIFEST
    if not bundle.is_dir():
        raise BundleError(f"{bundle}: not a bundle folder")
    if not where.is_file():
        raise BundleError(f"{where}: missing manifest (is {bundle} a bundle made by `python -m benchmark submit`?)")
    try:
        m = json.loads(where.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BundleError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(m, dict):
        raise BundleError(f"{where}: must be a JSON object")
    for key, (typ, _) in MANIFEST_KEYS.items():
        _need(m, key, typ, str(where))
    if m["format"] != FORMAT:
        raise BundleError(f"{where}: format {m['format']!r} not supported (expected {FORMAT!r})")
    check_suite(m["suite"], f"{where}: suite")
    for role, f in m["files"].items():
        w = f"{where}: files.{role}"
        if not isinstance(f, dict):
            raise BundleError(f"{w}: must be an object with path and sha256")
        _need(f, "path", str, w)
        if not SHA256.match(str(_need(f, "sha256", str, w))):
            raise BundleError(f"{w}: sha256 {f['sha256']!r} is not 64 hex digits")
        inner_path(bundle, f["path"], w)
    if "rows" not in m["files"]:
        raise BundleError(f"{where}: files has no 'rows' entry")
    for rel, f in m["logits"].items():
        w = f"{where}: logits[{rel!r}]"
        if not isinstance(f, dict) or not isinstance(f.get("sha256"), str) or not SHA256.match(f["sha256"]):
            raise BundleError(f"{w}: needs a sha256 of 64 hex digits")
        p = PurePosixPath(rel)
        if p.is_absolute() or ".." in p.parts or p.suffix != ".safetensors" or len(p.parts) != 3:
            raise BundleError(f"{w}: must be <logits|methods>/<name>/<split>.safetensors inside the results folder")
    for i, u in enumerate(m["units"]):
        _check_unit(u, m, f"{where}: units[{i}]")
    for stage, s in m["stages"].items():
        if not isinstance(s, dict) or not isinstance(s.get("outs", {}), dict):
            raise BundleError(f"{where}: stages[{stage!r}] must be an object with 'outs'")
    return m


def check_suite(name, where: str) -> None:
    import benchmark

    # the suite files (suites/<name>.yaml, as benchmark.data.paper.list_suites, whose import pulls the dataset
    # loaders) of this checkout (cwd) and of the repository the package lives in
    folders = (Path("suites"), Path(benchmark.__file__).parents[1] / "suites")
    known = sorted({"embedded", *(p.stem for d in folders for p in d.glob("*.yaml"))})
    if name not in known:
        raise BundleError(f"{where}: unknown suite {name!r}; known: {known}")


def _check_unit(u, m: dict, where: str) -> None:
    if not isinstance(u, dict):
        raise BundleError(f"{where}: must be an object")
    kind = _need(u, "kind", str, where)
    if kind not in UNIT_KINDS:
        raise BundleError(f"{where}: kind {kind!r} unknown; one of {list(UNIT_KINDS)}")
    members = _need(u, "members", list, where)
    folders = _need(u, "folders", list, where)
    if not members or len(members) != len(folders) or not all(isinstance(x, str) for x in members + folders):
        raise BundleError(f"{where}: members and folders must be equal-length lists of names")
    for f in folders:
        p = PurePosixPath(f)
        if len(p.parts) != 2 or p.parts[0] not in ("logits", "methods") or ".." in p.parts:
            raise BundleError(f"{where}: folder {f!r} must be logits/<name> or methods/<name>")
        if not any(k.startswith(f + "/") for k in m["logits"]):
            raise BundleError(f"{where}: folder {f!r} has no file in the manifest's logits")
    if not SHORT_HASH.match(str(_need(u, "inputs_hash", str, where))):
        raise BundleError(f"{where}: inputs_hash {u['inputs_hash']!r} is not 16 hex digits")
    want = {"single": 1, "duo": 2, "method": 1}.get(kind)
    if (want is not None and len(members) != want) or (kind == "deep_ensemble" and len(members) < 2):
        raise BundleError(f"{where}: a {kind} unit has {want or 'at least 2'} member(s), got {len(members)}")
    if kind == "method":
        info = u.get("info")
        if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in ("family", "method", "base")):
            raise BundleError(f"{where}: a method unit needs its cost.json as 'info' (with text family, method, base)")


def part_roles(m: dict, stem: str) -> list[str]:
    """The manifest roles of a table stored in parts: ``stem``, ``stem-001``, ``stem-002``, ..."""
    return sorted(r for r in m["files"] if r == stem or re.fullmatch(rf"{stem}-\d{{3}}", r))


def rows_digest(m: dict) -> str:
    """One hash of all the rows' parts (what verification.json is bound to)."""
    return hashlib.sha256("\n".join(m["files"][r]["sha256"] for r in part_roles(m, "rows")).encode()).hexdigest()


def _read_csv(path: Path, where: str) -> pd.DataFrame:
    try:
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, na_values=[""])
    except (OSError, EOFError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise BundleError(f"{where}: cannot read CSV ({e})") from None


def check_rows(df: pd.DataFrame, suite: str, where: str) -> pd.DataFrame:
    """The rows with canonical dtypes, or BundleError naming the first bad row and field."""
    missing = [c for c in COLUMNS if c not in df.columns and c not in OPTIONAL_COLUMNS]
    if missing:
        raise BundleError(f"{where}: missing columns {missing}")
    if df.empty:
        raise BundleError(f"{where}: no rows")
    for c, (t, _) in COLUMNS.items():
        if t == "string" or c not in df.columns:
            continue
        num = pd.to_numeric(df[c], errors="coerce")
        bad = num.isna() & df[c].notna() & ~df[c].isin(["nan", "NaN"])
        if bad.any():
            i = int(bad.idxmax())
            raise BundleError(f"{where}: row {i + 2}: column {c!r} must be a number, got {df.at[i, c]!r}")
    rows = validate_results(df, source=where)[list(COLUMNS)]
    checks = [
        (~rows["metric"].isin(list(METRICS)), lambda r: f"unknown metric {r['metric']!r} (known: see benchmark/core/metric_info.py)"),
        (rows["suite"] != suite, lambda r: f"suite {r['suite']!r} differs from the manifest's {suite!r}"),
        (rows["split"] == "", lambda r: "empty split"),
        (rows["n"] < 0, lambda r: f"n must be >= 0, got {r['n']}"),
        (~rows["inputs_hash"].str.fullmatch(SHORT_HASH.pattern), lambda r: f"inputs_hash {r['inputs_hash']!r} is not 16 hex digits"),
    ]
    lo = rows["metric"].map(lambda m: RANGES.get(m, (0.0, 1.0))[0])
    hi = rows["metric"].map(lambda m: RANGES.get(m, (0.0, 1.0))[1])
    for col in ("value", "ci_low", "ci_high"):
        v = rows[col]
        checks.append((v.notna() & ((v < lo - 1e-9) | (v > hi + 1e-9)),
                       lambda r, col=col: f"{col} {float(r[col])!r} out of range for {r['metric']}"))
    for bad, msg in checks:
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            r = rows.iloc[i]
            raise BundleError(f"{where}: row {i + 2} ({row_label(r)}): {msg(r)}")
    dup = rows.duplicated(KEY)
    if dup.any():
        raise BundleError(f"{where}: row {int(dup.to_numpy().nonzero()[0][0]) + 2}: repeated row key ({row_label(rows[dup].iloc[0])})")
    return rows


def _bundle_file(bundle: Path, m: dict, role: str) -> Path | None:
    f = m["files"].get(role)
    if f is None:
        return None
    path = inner_path(bundle, f["path"], f"{bundle / MANIFEST}: files.{role}")
    if not path.is_file():
        raise BundleError(f"{path}: missing (listed in the manifest as files.{role})")
    if path.stat().st_size >= MAX_FILE_BYTES:
        raise BundleError(f"{path}: {path.stat().st_size} bytes; every bundle file must stay under {MAX_FILE_BYTES}")
    if sha256_file(path) != f["sha256"]:
        raise BundleError(f"{path}: content differs from its sha256 in the manifest (files.{role}); the file was edited")
    return path


def load_bundle(bundle, *, check_arch: bool = True) -> Bundle:
    """Read and check a bundle folder (schema, file hashes, row invariants, zoo entries, units).

    ``check_arch=False`` skips looking the zoo entries' architectures and tags up in timm (publish: fast)."""
    bundle = Path(bundle)
    m = read_manifest(bundle)
    paths = [_bundle_file(bundle, m, r) for r in part_roles(m, "rows")]
    where = str(paths[0]) + (f" (+{len(paths) - 1} parts)" if len(paths) > 1 else "")
    rows = check_rows(pd.concat([_read_csv(p, str(p)) for p in paths], ignore_index=True), m["suite"], where)
    models = None
    if (p := _bundle_file(bundle, m, "models")) is not None:
        models = _read_csv(p, str(p))
    lock = None
    if (p := _bundle_file(bundle, m, "lock")) is not None:
        import yaml

        try:
            lock = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise BundleError(f"{p}: invalid YAML ({e})") from None
    paired = None
    if part_roles(m, "paired"):
        from benchmark.report.inputs import read_paired

        frames = [read_paired(_bundle_file(bundle, m, r))[0] for r in part_roles(m, "paired")]
        paired = pd.concat([f for f in frames if f is not None], ignore_index=True) if any(f is not None for f in frames) else None
    _check_zoo(m, bundle / MANIFEST, check_arch)
    _check_coverage(m, rows, bundle / MANIFEST)
    return Bundle(bundle, m, rows, models, lock if isinstance(lock, dict) else None, paired)


def _check_zoo(m: dict, where: Path, check_arch: bool = True) -> None:
    from benchmark.models.zoo import ZooError, parse_entry

    recipes = m["params"].get("recipes")
    for name, raw in m["zoo"].items():
        try:
            parse_entry(name, raw, recipes=recipes if isinstance(recipes, dict) else None, check_arch=check_arch)
        except (ZooError, ValueError) as e:
            raise BundleError(f"{where}: zoo: {e}") from None


def _check_coverage(m: dict, rows: pd.DataFrame, where: Path) -> None:
    """Every row belongs to a unit of the manifest, whose members are zoo entries or method outputs, and
    whose logits files include the row's split."""
    by_hash = {u["inputs_hash"]: u for u in m["units"]}
    for i, r in enumerate(rows.to_dict("records")):
        u = by_hash.get(r["inputs_hash"])
        if u is None:
            raise BundleError(f"{where}: row {i + 2} ({row_label(r)}): inputs_hash {r['inputs_hash']} is no unit of the manifest")
        for name, folder in zip(u["members"], u["folders"]):
            if folder.startswith("logits/") and name not in m["zoo"]:
                raise BundleError(f"{where}: unit {u['kind']} {'+'.join(u['members'])}: model {name!r} has no zoo entry")
            if f"{folder}/{r['split']}.safetensors" not in m["logits"]:
                raise BundleError(f"{where}: row {i + 2} ({row_label(r)}): no logits file {folder}/{split}.safetensors in the manifest")
