"""Reading ``params.yaml`` and the zoo, with validation before any work starts."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch

from benchmark.train import Recipe
from benchmark.zoo import ZooEntry, ZooError, load_zoo

RESULTS = Path("results")


class ConfigError(ValueError):
    """params.yaml is missing a key or has a bad value."""


def load_params(path="params.yaml") -> dict:
    """Read params.yaml; its recipes are type-checked here, before any stage does work."""
    from benchmark.yaml_input import read_yaml

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: not found; run the stages from the repository root")
    params = read_yaml(path, what="params file", error=ConfigError)
    for key in ("zoo", "data", "recipes", "logits", "cost", "evaluate"):
        if key not in params:
            raise ConfigError(f"{path}: missing section {key!r}")
    if not isinstance(params["recipes"], dict):
        raise ConfigError(f"{path}: 'recipes' must be a mapping of recipe names to recipes")
    try:
        recipes(params)
        from benchmark.pipeline.registry import check_baselines

        check_baselines(params.get("baselines"))
    except ValueError as e:
        raise ConfigError(f"{path}: {e}") from None
    return params


def recipes(params) -> dict[str, Recipe]:
    return {name: Recipe.from_params(name, raw) for name, raw in params["recipes"].items()}


def zoo(params) -> dict[str, ZooEntry]:
    return load_zoo(params["zoo"], recipes=params["recipes"])


def entry(params, name: str) -> ZooEntry:
    entries = zoo(params)
    if name not in entries:
        raise ZooError(f"unknown model {name!r}; the zoo {params['zoo']} has {sorted(entries)}")
    return entries[name]


def fingerprint(*parts) -> str:
    """Short stable hash of JSON-serialisable parts."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def set_threads(params) -> None:
    n = int(params.get("threads") or os.cpu_count() or 1)
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
