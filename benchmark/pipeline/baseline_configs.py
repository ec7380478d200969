"""Typed params entries of the weight-based baselines (``params.yaml`` ``baselines.<kind>.<key>``).

Parsed by :func:`benchmark.pipeline.registry.parse_config`: a wrong type, an unknown or a
missing key is one error naming the entry and the field. The method modules check the
method-specific ranges (with their own messages) when the stage validates an entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from benchmark.methods.lora_ensemble import DEFAULT_VARIANT
from benchmark.pipeline.registry import check

def _splits():
    return field(default=None, metadata=check(min_len=1))  # names or shell patterns; None: baselines.splits


def _seed():
    return field(default=0, metadata=check(minimum=0))


@dataclass(frozen=True)
class SoupConfig:
    models: list[str]  # at least 2 distinct fine-tunes of one architecture (checked with the zoo)
    splits: list[str] | None = _splits()


@dataclass(frozen=True)
class MCDropoutConfig:
    model: str
    samples: int
    p: float | None = field(default=None, metadata=check(minimum=0))
    variant: str = "trained"
    seed: int = _seed()
    splits: list[str] | None = _splits()


@dataclass(frozen=True)
class LaplaceConfig:
    model: str
    prior_precisions: list[float] = field(metadata=check(min_len=1, above=0, inf=True))
    hessian: str = "kron"
    predictive: str = "probit"
    samples: int = 0
    seed: int = _seed()
    splits: list[str] | None = _splits()


@dataclass(frozen=True)
class ShallowConfig:
    model: str
    members: int
    recipe: str
    backbone: str = "joint"
    seed: int = _seed()
    splits: list[str] | None = _splits()


@dataclass(frozen=True)
class LoRAConfig:
    model: str
    members: int
    rank: int
    recipe: str
    alpha: float | None = field(default=None, metadata=check(above=0))
    variant: str = DEFAULT_VARIANT
    seed: int = _seed()
    splits: list[str] | None = _splits()

