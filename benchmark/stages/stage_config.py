"""Reading ``params.yaml`` and the zoo, with validation before any work starts; where each stage writes."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch

from benchmark.models.zoo import ZooEntry, ZooError, load_zoo
from benchmark.stages.params_config import Params, parse_params

RESULTS = Path("results")


class ConfigError(ValueError):
    """params.yaml is missing a key or has a bad value."""


_PARAMS: dict[Path, tuple[str | None, Params]] = {}
_ZOO: dict[tuple, dict[str, ZooEntry]] = {}


def load_params(path="params.yaml") -> Params:
    """Read and parse params.yaml (every block typed, :mod:`benchmark.stages.params_config`) before any stage does work;
    once per process: the parse is cached on the resolved path and a hash of the file's bytes. ``ConfigError`` naming
    the file and the field."""
    from benchmark.config.yaml_input import read_yaml

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: not found; run the stages from the repository root")
    key = path.resolve()
    try:  # the file's bytes, hashed: a rewrite within the file system's time resolution is not missed
        stamp = hashlib.sha256(key.read_bytes()).hexdigest()
    except OSError:
        stamp = None  # read_yaml names the problem
    hit = _PARAMS.get(key)
    if hit is None or hit[0] != stamp:
        raw = read_yaml(path, what="params file", error=ConfigError)
        try:
            parsed = parse_params(raw, str(path))
        except ValueError as e:
            raise ConfigError(str(e)) from None
        _PARAMS[key] = hit = (stamp, parsed)
    return hit[1]


def zoo(params: Params, *, check_arch: bool = True) -> dict[str, ZooEntry]:
    """The zoo params ``zoo`` names, validated against its recipes; parsed once per process (cached on the file's
    resolved path, a hash of its bytes, the recipe names and ``check_arch``). ``check_arch=False`` leaves out the
    look-up of each architecture in timm, and so timm's import (~2 s): for a stage that builds no model and reads
    what the ``train@``/``logits@`` stages, which check it, made."""
    names = tuple(sorted(params.recipes))
    path = Path(params.zoo)
    try:  # the file's bytes, hashed (as load_params): a rewrite within the file system's time resolution is not missed
        key = (path.resolve(), hashlib.sha256(path.read_bytes()).hexdigest(), names, check_arch)
    except OSError:
        key = None  # load_zoo names the problem
    if key is None or key not in _ZOO:
        entries = load_zoo(params.zoo, recipes=names, check_arch=check_arch)
        if key is None:
            return entries
        _ZOO[key] = entries
    return dict(_ZOO[key])


def entry(params: Params, name: str) -> ZooEntry:
    entries = zoo(params)
    if name not in entries:
        raise ZooError(f"unknown model {name!r}; the zoo {params.zoo} has {sorted(entries)}")
    return entries[name]


def fingerprint(*parts) -> str:
    """Short stable hash of JSON-serialisable parts."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def set_threads(params: Params) -> None:
    torch.set_num_threads(params.threads or os.cpu_count() or 1)


def paths(name: str | None = None) -> dict[str, Path]:
    """Where each stage writes (one place for the layout of ``results/``)."""
    p = {
        "data": RESULTS / "data",
        "metrics": RESULTS / "metrics.csv",
        "paired": RESULTS / "paired.csv",
        "models": RESULTS / "models.csv",
        "summary": RESULTS / "summary.json",
        "units": RESULTS / "units",
        "methods": RESULTS / "methods",
        "method_checkpoints": RESULTS / "method_checkpoints",
    }
    if name is not None:
        p["checkpoint"] = RESULTS / "checkpoints" / name
        p["logits"] = RESULTS / "logits" / name
        p["cost"] = RESULTS / "cost" / f"{name}.json"
    return p
