"""The manifest of a result bundle: every field with its type and range (:func:`check_manifest`).

The manifest is parsed by :func:`benchmark.bundle.strict.strict_json` (plain values only); here
each field is checked: no key that is not in :data:`MANIFEST_KEYS`, names matching
:data:`NAME` (they become file and folder names), free text of bounded length without
control characters, counts of zoo entries, units, logits files and stages capped, and
``created`` a real UTC time that is not in the future. A problem is one
:class:`~benchmark.bundle.intake.BundleError` naming the field.
"""

from __future__ import annotations

import datetime as dt
import re

from benchmark.bundle.intake import MANIFEST, BundleError, q, role_names, show
from benchmark.models.zoo import NAME_RE as NAME  # zoo entry names: also logits and method folder names

FORMAT = "uq-bundle/1"
BUNDLE_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")  # the bundle's folder name
SHA256 = re.compile(r"^[0-9a-f]{64}$")
SHORT_HASH = re.compile(r"^[0-9a-f]{16}$")
GIT_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
STAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")  # dvc.yaml stage names (foreach: name@key)
OUT_PATH = re.compile(r"^results(/[A-Za-z0-9_.@-]{1,128}){1,4}$")
MD5 = re.compile(r"^[0-9a-f]{32}(\.dir)?$")
LOGITS_FILE = re.compile(
    r"^(logits|methods)/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\.safetensors$"
)
CREATED = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
UNIT_KINDS = ("single", "duo", "deep_ensemble", "method")
CLOCK_SKEW = dt.timedelta(minutes=10)  # how far in the future a 'created' may be (clocks differ)
MAX_TEXT = 200  # contributor, device and version values
MAX_STRING = 2_000  # any other text in the manifest (params, unit info)
MAX_ZOO, MAX_UNITS, MAX_LOGITS, MAX_STAGES, MAX_MEMBERS, MAX_SMALL = 2_000, 50_000, 200_000, 10_000, 64, 32
# a method output's cost record: the fields verify recomputes (claimed values never fill a gap) and the training budget
COST_FIELDS = (
    "gflops",
    "params",
    "throughput",
    "overhead_percent",
    "extra_params_percent",
    "gflops_one_forward",
    "trainable_params",
    "own_train_images",
    "own_train_params",
)
MAX_TRAIN_SIZE = 10**9  # images of a train split (ImageNet: 1.28 M)
# manifest key -> (type, meaning)
MANIFEST_KEYS: dict[str, tuple[type | tuple, str]] = {
    "format": (str, f"always {FORMAT!r}"),
    "suite": (str, "suite name ('embedded' or a suites/<name>.yaml); the bundle's parent folder has this name"),
    "contributor": (str, f"free text: who ran it (at most {MAX_TEXT} characters)"),
    "created": (str, "UTC time of submit, YYYY-MM-DDTHH:MM:SSZ, not in the future"),
    "git": (dict, "commit (40 hex digits or null) and whether the working tree had changes"),
    "versions": (dict, "python, torch, timm, this package"),
    "device": (dict, "platform, processor, CUDA device if any"),
    "remote": ((str, type(None)), "name of the DVC remote holding the logits, or null"),
    "params": (dict, "the suite's params.yaml (the evaluate block is what verify recomputes with)"),
    "zoo": (dict, "zoo entries of the models behind the rows"),
    "files": (dict, "bundle file role -> {path, sha256, bytes}"),
    "stages": (dict, "dvc.lock stage -> {outs: {path: md5}} of the stages behind the rows"),
    "logits": (dict, "logits file (relative to the results folder) -> {sha256, bytes}"),
    "units": (list, "evaluation units: kind, members, logits folders, rows' inputs_hash"),
    "train_size": (
        int,
        f"images of the run's train split (1 to {MAX_TRAIN_SIZE:,}): verify recomputes the rows' "
        "training budgets with it; optional (bundles made before budgets lack it)",
    ),
}
OPTIONAL_KEYS = {"train_size"}


def _type(value, typ, where: str):
    if not isinstance(value, typ) or isinstance(value, bool) and typ not in (bool, (bool, type(None))):
        name = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise BundleError(f"{where}: must be {name}, got {type(value).__name__}")
    return value


def _keys(obj: dict, required: set, optional: set, where: str) -> None:
    missing = sorted(required - set(obj))
    if missing:
        raise BundleError(f"{where}: missing key {missing[0]!r}")
    extra = sorted(set(obj) - required - optional)
    if extra:
        raise BundleError(f"{where}: unknown key {q(extra[0])}")


def _count(obj, limit: int, where: str) -> None:
    if len(obj) > limit:
        raise BundleError(f"{where}: {len(obj)} entries, at most {limit}")


def _name(value, where: str, pattern: re.Pattern = NAME) -> str:
    _type(value, str, where)
    if not pattern.fullmatch(value):
        raise BundleError(f"{where}: {q(value)} does not match {pattern.pattern}")
    return value


def _text(value, where: str, limit: int = MAX_TEXT) -> str:
    _type(value, str, where)
    if len(value) > limit:
        raise BundleError(f"{where}: {len(value)} characters, at most {limit}")
    if not value.isprintable():
        raise BundleError(f"{where}: must be printable text on one line")
    return value


def _strings(obj, where: str, limit: int = MAX_STRING) -> None:
    """Every text (keys and values) inside ``obj`` at most ``limit`` characters."""
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str) and len(o) > limit:
            raise BundleError(f"{where}: text of {len(o)} characters, at most {limit}")
        if isinstance(o, dict):
            stack += list(o.keys()) + list(o.values())
        elif isinstance(o, list):
            stack += o


def check_created(value, where: str, now: dt.datetime | None = None) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ``, a real date and time, not after ``now`` (+ :data:`CLOCK_SKEW`)."""
    _type(value, str, where)
    if not CREATED.fullmatch(value):
        raise BundleError(f"{where}: {q(value)[:40]} is not a UTC time YYYY-MM-DDTHH:MM:SSZ")
    try:
        t = dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        raise BundleError(f"{where}: {value} is not a real date and time") from None
    now = now or dt.datetime.now(dt.timezone.utc)
    if t > now + CLOCK_SKEW:
        raise BundleError(f"{where}: {value} is in the future (now {now:%Y-%m-%dT%H:%M:%SZ})")
    if t.year < 2020:
        raise BundleError(f"{where}: {value} is before 2020")
    return value


def check_suite(name, where: str) -> str:
    """A known suite: 'embedded' or a suites/<name>.yaml of this checkout (cwd) or of the package's repository."""
    from pathlib import Path

    import benchmark

    _name(name, where)
    folders = (Path("suites"), Path(benchmark.__file__).parents[1] / "suites")
    known = sorted({"embedded", *(p.stem for d in folders for p in d.glob("*.yaml"))})
    if name not in known:
        raise BundleError(f"{where}: unknown suite {name!r}; known: {known}")
    return name


def _small_map(obj, where: str, values: tuple) -> None:
    _count(obj, MAX_SMALL, where)
    for k, v in obj.items():
        _name(k, f"{where}: key")
        if isinstance(v, str):
            _text(v, f"{where}.{k}")
        elif not (v is None or isinstance(v, values)):
            raise BundleError(f"{where}.{k}: must be text{', a number' if int in values else ''} or null")


def _files(files: dict, where: str) -> None:
    _count(files, 2 * 99 + 4, where)
    for role, f in files.items():
        w = f"{where}.{show(role)}"
        names = role_names(role)
        _type(f, dict, w)
        _keys(f, {"path", "sha256", "bytes"}, set(), w)
        if f["path"] not in names:
            raise BundleError(f"{w}: path {q(f['path'])} must be one of {list(names)}")
        if not SHA256.fullmatch(_type(f["sha256"], str, f"{w}.sha256")):
            raise BundleError(f"{w}: sha256 {q(f['sha256'])[:70]} is not 64 hex digits")
        if _type(f["bytes"], int, f"{w}.bytes") < 0:
            raise BundleError(f"{w}.bytes: must be >= 0")
    if "rows" not in files:
        raise BundleError(f"{where}: has no 'rows' entry")
    for stem in ("rows", "paired"):
        parts = sorted(r for r in files if r.startswith(f"{stem}-"))
        if parts and (stem not in files or parts != [f"{stem}-{i:03d}" for i in range(1, len(parts) + 1)]):
            raise BundleError(f"{where}: the parts of {stem} must be {stem}, {stem}-001, {stem}-002, ... without gaps")


def _logits(logits: dict, where: str) -> None:
    _count(logits, MAX_LOGITS, where)
    for rel, f in logits.items():
        w = f"{where}[{q(rel)}]"
        if not LOGITS_FILE.fullmatch(rel):
            raise BundleError(f"{w}: must be <logits|methods>/<name>/<split>.safetensors inside the results folder")
        _type(f, dict, w)
        _keys(f, {"sha256"}, {"bytes"}, w)
        if not isinstance(f["sha256"], str) or not SHA256.fullmatch(f["sha256"]):
            raise BundleError(f"{w}: needs a sha256 of 64 hex digits")
        if "bytes" in f and _type(f["bytes"], int, f"{w}.bytes") < 0:
            raise BundleError(f"{w}.bytes: must be >= 0")


def _stages(stages: dict, where: str) -> None:
    _count(stages, MAX_STAGES, where)
    for name, s in stages.items():
        w = f"{where}[{q(name)}]"
        _name(name, f"{where}: stage name", STAGE)
        _type(s, dict, w)
        _keys(s, {"outs"}, set(), w)
        _count(_type(s["outs"], dict, f"{w}.outs"), 1_000, f"{w}.outs")
        for path, md5 in s["outs"].items():
            if not OUT_PATH.fullmatch(path) or ".." in path.split("/"):
                raise BundleError(f"{w}.outs: path {q(path)[:80]} is not a results/... path")
            if md5 is not None and not (isinstance(md5, str) and MD5.fullmatch(md5)):
                raise BundleError(f"{w}.outs[{path}]: {q(md5)[:80]} is not an md5")


def _unit(u, logit_folders: set, where: str) -> None:
    _type(u, dict, where)
    kind = _type(u.get("kind"), str, f"{where}.kind")
    if kind not in UNIT_KINDS:
        raise BundleError(f"{where}: kind {q(kind)} unknown; one of {list(UNIT_KINDS)}")
    _keys(u, {"kind", "members", "folders", "inputs_hash"} | ({"info"} if kind == "method" else set()), set(), where)
    members, folders = _type(u["members"], list, f"{where}.members"), _type(u["folders"], list, f"{where}.folders")
    if not 1 <= len(members) <= MAX_MEMBERS or len(members) != len(folders):
        raise BundleError(f"{where}: members and folders must be equal-length lists of 1 to {MAX_MEMBERS} names")
    prefix = "methods" if kind == "method" else "logits"
    for m, f in zip(members, folders):
        _name(m, f"{where}.members")
        if f != f"{prefix}/{m}":
            raise BundleError(f"{where}: folder {q(f)} of member {m} must be {prefix}/{m}")
        if f not in logit_folders:
            raise BundleError(f"{where}: folder {f} has no file in the manifest's logits")
    if not SHORT_HASH.fullmatch(_type(u["inputs_hash"], str, f"{where}.inputs_hash")):
        raise BundleError(f"{where}: inputs_hash {q(u['inputs_hash'])[:40]} is not 16 hex digits")
    want = {"single": 1, "duo": 2, "method": 1}.get(kind)
    if (want is not None and len(members) != want) or (kind == "deep_ensemble" and len(members) < 2):
        raise BundleError(f"{where}: a {kind} unit has {want or 'at least 2'} member(s), got {len(members)}")
    if kind == "duo" and members[0] == members[1]:
        raise BundleError(f"{where}: a duo of one model with itself")
    if kind == "method":
        info = _type(u["info"], dict, f"{where}.info")
        _count(info, 200, f"{where}.info")
        for k in ("family", "method", "base"):
            _name(info.get(k), f"{where}.info.{k}")
        for k in COST_FIELDS:
            if k in info and (isinstance(info[k], bool) or not isinstance(info[k], (int, float)) or info[k] < 0):
                raise BundleError(f"{where}.info.{k}: must be a number >= 0")
        for key in ("ingredients", "builds_on"):
            if key in info:
                for n in _type(info[key], list, f"{where}.info.{key}")[: MAX_MEMBERS + 1]:
                    _name(n, f"{where}.info.{key}")
                _count(info[key], MAX_MEMBERS, f"{where}.info.{key}")


def check_manifest(m, where: str, *, now: dt.datetime | None = None) -> dict:
    """The parsed manifest ``m`` (from :func:`~benchmark.bundle.strict.strict_json`), every field checked."""
    _type(m, dict, where)
    _keys(m, set(MANIFEST_KEYS) - OPTIONAL_KEYS, OPTIONAL_KEYS, where)
    for key, (typ, _) in MANIFEST_KEYS.items():
        if key in m:
            _type(m[key], typ, f"{where}: {key}")
    if "train_size" in m and not 1 <= m["train_size"] <= MAX_TRAIN_SIZE:
        raise BundleError(f"{where}: train_size: must be an integer from 1 to {MAX_TRAIN_SIZE}, got {m['train_size']}")
    if m["format"] != FORMAT:
        raise BundleError(f"{where}: format {q(m['format'])[:40]} not supported (expected {FORMAT!r})")
    check_suite(m["suite"], f"{where}: suite")
    _text(m["contributor"], f"{where}: contributor")
    check_created(m["created"], f"{where}: created", now)
    _keys(m["git"], {"commit", "dirty"}, set(), f"{where}: git")
    if m["git"]["commit"] is not None and not (
        isinstance(m["git"]["commit"], str) and GIT_COMMIT.fullmatch(m["git"]["commit"])
    ):
        raise BundleError(f"{where}: git.commit must be 40 hex digits or null")
    if m["git"]["dirty"] is not None and not isinstance(m["git"]["dirty"], bool):
        raise BundleError(f"{where}: git.dirty must be true, false or null")
    _small_map(m["versions"], f"{where}: versions", ())
    _small_map(m["device"], f"{where}: device", (bool, int, float))
    if m["remote"] is not None:
        _name(m["remote"], f"{where}: remote")
    _strings(m["params"], f"{where}: params")
    if "suite" in m["params"] and m["params"]["suite"] != m["suite"]:
        raise BundleError(f"{where}: params.suite {q(m['params']['suite'])[:70]} differs from suite {m['suite']!r}")
    _count(m["zoo"], MAX_ZOO, f"{where}: zoo")
    for name in m["zoo"]:
        _name(name, f"{where}: zoo: entry name")
    _strings(m["zoo"], f"{where}: zoo")
    _files(m["files"], f"{where}: files")
    _stages(m["stages"], f"{where}: stages")
    _logits(m["logits"], f"{where}: logits")
    _count(m["units"], MAX_UNITS, f"{where}: units")
    _strings(m["units"], f"{where}: units")
    folders = {rel.rsplit("/", 1)[0] for rel in m["logits"]}
    hashes = set()
    for i, u in enumerate(m["units"]):
        _unit(u, folders, f"{where}: units[{i}]")
        if u["inputs_hash"] in hashes:
            raise BundleError(f"{where}: units[{i}]: inputs_hash {u['inputs_hash']} repeated")
        hashes.add(u["inputs_hash"])
    return m


def evaluate_params(m: dict, where: str, suite: str = "embedded"):
    """The run's ``evaluate`` block, typed (:class:`benchmark.config.evaluate.EvalConfig`, for suite ``suite``)."""
    from benchmark.config.evaluate import EvalConfig

    block = m["params"].get("evaluate") or {}
    try:
        return EvalConfig.from_params(
            suite, _type(block, dict, f"{where}: params.evaluate"), f"{where}: params.evaluate"
        )
    except ValueError as e:
        raise BundleError(str(e)) from None


__all__ = [
    "FORMAT",
    "MANIFEST",
    "MANIFEST_KEYS",
    "NAME",
    "BUNDLE_ID",
    "check_manifest",
    "check_created",
    "check_suite",
    "evaluate_params",
]
