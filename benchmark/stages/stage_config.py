"""Reading a params file and the zoo, with validation before any work starts; where each stage writes.

A stage's entry reads its params file once (:func:`read_params`) into the typed objects of the blocks it reads
(:mod:`benchmark.stages.model_params`, :mod:`benchmark.stages.params_config`) and its zoo entries (:func:`zoo`)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import torch

from benchmark.models.zoo import ZooEntry, ZooError, load_zoo

RESULTS = Path("results")


class ConfigError(ValueError):
    """params.yaml is missing a key or has a bad value."""


_RAW: dict[Path, tuple[str | None, dict]] = {}
_PARSED: dict[tuple[Path, Callable], tuple[str | None, object]] = {}
_ZOO: dict[tuple, dict[str, ZooEntry]] = {}


def _stamp(path: Path) -> str | None:
    try:  # the file's bytes, hashed: a rewrite within the file system's time resolution is not missed
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None  # read_yaml names the problem


def params_data(path="params.yaml") -> dict:
    """The data of params file ``path`` (a mapping), read once per process and version of the file (a hash of its
    bytes); ``ConfigError`` naming the file. For a stage's entry only: what it parses into typed objects."""
    return _read(Path(path))[1]


def _read(path: Path) -> tuple[str | None, dict]:
    from benchmark.config.yaml_input import read_yaml

    if not path.exists():
        raise ConfigError(f"{path}: not found; run the stages from the repository root")
    key, stamp = path.resolve(), _stamp(path)
    hit = _RAW.get(key)
    if hit is None or hit[0] != stamp or stamp is None:
        _RAW[key] = hit = (stamp, read_yaml(path, what="params file", error=ConfigError))
    return hit


def read_params(path, parse: Callable[[dict, str], object]):
    """Params file ``path`` parsed by ``parse(raw, where)`` into typed objects before any stage does work; once per
    process: cached on the resolved path, ``parse`` and a hash of the file's bytes. ``ConfigError`` naming the file
    and the field. What a stage's entry calls (:func:`benchmark.stages.model_params.load_model_params`: the model
    stages' blocks; :func:`benchmark.stages.params_config.load_params`: the whole file)."""
    path = Path(path)
    stamp, raw = _read(path)
    key = (path.resolve(), parse)
    hit = _PARSED.get(key)
    if hit is None or hit[0] != stamp or stamp is None:
        try:
            parsed = parse(raw, str(path))
        except ValueError as e:
            raise ConfigError(str(e)) from None
        _PARSED[key] = hit = (stamp, parsed)
    return hit[1]


def zoo(params, *, check_arch: bool = True) -> dict[str, ZooEntry]:
    """The zoo params ``zoo`` names, validated against its recipes; parsed once per process (cached on the file's
    resolved path, a hash of its bytes, the recipe names and ``check_arch``). ``check_arch=False`` leaves out the
    look-up of each architecture in timm, and so timm's import (~2 s): for a stage that builds no model and reads
    what the ``train@``/``logits@`` stages, which check it, made."""
    names = tuple(sorted(params.recipes))
    path = Path(params.zoo)
    stamp = _stamp(path)  # (as read_params)
    key = (path.resolve(), stamp, names, check_arch) if stamp is not None else None  # None: load_zoo names the problem
    if key is None or key not in _ZOO:
        entries = load_zoo(params.zoo, recipes=names, check_arch=check_arch)
        if key is None:
            return entries
        _ZOO[key] = entries
    return dict(_ZOO[key])


def entry(params, name: str) -> ZooEntry:
    """Zoo entry ``name`` of ``params``' zoo; :class:`ZooError` naming the zoo's entries when it has none of that
    name."""
    entries = zoo(params)
    if name not in entries:
        raise ZooError(f"unknown model {name!r}; the zoo {params.zoo} has {sorted(entries)}")
    return entries[name]


def fingerprint(*parts) -> str:
    """Short stable hash of JSON-serialisable parts."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def threads(params) -> int:
    """The torch threads of a stage process: params ``threads`` (null: every core). The one reading of the key (the
    per-model and method stages set it through :func:`set_threads`; the kernel fingerprint profiles in that mode). The
    evaluate stage's units run on one thread per process instead (:data:`benchmark.evaluation.runner.THREADS`)."""
    return params.threads or os.cpu_count() or 1


def set_threads(params) -> None:
    """Torch threads as params ``threads`` says (:func:`threads`)."""
    torch.set_num_threads(threads(params))


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
