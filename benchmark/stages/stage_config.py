"""Reading ``params.yaml`` and the zoo, with validation before any work starts."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
import yaml

from benchmark.models.train import Recipe
from benchmark.models.zoo import ZooEntry, ZooError, load_zoo
from benchmark.stages.params_config import Params, parse_params

RESULTS = Path("results")


class ConfigError(ValueError):
    """params.yaml is missing a key or has a bad value."""


class ParamsDict(dict):
    """The data of a params file (a plain mapping) with its parsed :class:`~benchmark.stages.params_config.Params` as
    ``.typed``: stage code reads settings from ``typed(params)``; the mapping stays for the code not yet moved."""

    typed: Params
    parsed_from: dict  # the data ``typed`` was parsed from (the mapping may have been changed since)


yaml.SafeDumper.add_representer(ParamsDict, yaml.SafeDumper.represent_dict)  # yaml.safe_dump(load_params(...))

_PARAMS: dict[Path, tuple[str | None, dict, Params]] = {}
_ZOO: dict[tuple, dict[str, ZooEntry]] = {}


def load_params(path="params.yaml") -> ParamsDict:
    """Read and parse params.yaml (every block typed, :mod:`benchmark.stages.params_config`) before any stage does work;
    once per process: the parse is cached on the resolved path and a hash of the file's bytes. Returns a fresh copy
    of the mapping (callers may change it) whose ``.typed`` is the parsed :class:`Params`."""
    import copy

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
        _PARAMS[key] = hit = (stamp, raw, parsed)
    out = ParamsDict(copy.deepcopy(hit[1]))
    out.typed, out.parsed_from = hit[2], hit[1]
    return out


def typed(params) -> Params:
    """The :class:`Params` of ``params``: the one :func:`load_params` parsed, or ``params`` parsed now (a mapping
    built in code, e.g. by a test); ``ConfigError`` naming the field."""
    if isinstance(params, Params):
        return params
    parsed = getattr(params, "typed", None)
    if parsed is not None and params == params.parsed_from:  # a caller may have changed its copy: parse that
        return parsed
    try:
        return parse_params(params, "params")
    except ValueError as e:
        raise ConfigError(str(e)) from None


def recipes(params) -> dict[str, Recipe]:
    """params ``recipes`` as :class:`Recipe` objects (a mapping built in code: only its recipes are parsed)."""
    parsed = typed(params) if isinstance(params, (Params, ParamsDict)) else None
    if parsed is not None:
        return dict(parsed.recipes)
    raw = params["recipes"]
    if not isinstance(raw, dict):
        raise ConfigError(f"params: recipes must be a mapping of recipe names to recipes, got {raw!r}")
    return {name: Recipe.from_params(name, r, "params: recipes") for name, r in raw.items()}


def zoo(params) -> dict[str, ZooEntry]:
    """The zoo params ``zoo`` names, validated against its recipes; parsed once per process (cached on the file's
    resolved path, a hash of its bytes and the recipe names)."""
    parsed = typed(params) if isinstance(params, (Params, ParamsDict)) else None
    zoo_file = parsed.zoo if parsed is not None else params["zoo"]
    names = tuple(sorted(recipes(params)))
    path = Path(zoo_file)
    try:  # the file's bytes, hashed (as load_params): a rewrite within the file system's time resolution is not missed
        key = (path.resolve(), hashlib.sha256(path.read_bytes()).hexdigest(), names)
    except OSError:
        key = None  # load_zoo names the problem
    if key is None or key not in _ZOO:
        entries = load_zoo(zoo_file, recipes=names)
        if key is None:
            return entries
        _ZOO[key] = entries
    return dict(_ZOO[key])


def entry(params, name: str) -> ZooEntry:
    entries = zoo(params)
    if name not in entries:
        raise ZooError(f"unknown model {name!r}; the zoo {params.zoo if isinstance(params, Params) else params['zoo']} "
                       f"has {sorted(entries)}")
    return entries[name]


def fingerprint(*parts) -> str:
    """Short stable hash of JSON-serialisable parts."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def set_threads(params) -> None:
    n = typed(params).threads or os.cpu_count() or 1
    torch.set_num_threads(n)


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
    }
    if name is not None:
        p["checkpoint"] = RESULTS / "checkpoints" / name
        p["logits"] = RESULTS / "logits" / name
        p["cost"] = RESULTS / "cost" / f"{name}.json"
    return p
