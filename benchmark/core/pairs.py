"""Candidate Asymmetric Duo pairs from a table of models."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import isfinite
from numbers import Integral, Real

from benchmark.core.validation import InputError


@dataclass(frozen=True)
class Pair:
    base: str
    sidekick: str
    balance: float  # GFLOPs(sidekick) / GFLOPs(base), in (0, 1)
    gflops: float  # the duo's cost: GFLOPs(base) + GFLOPs(sidekick)
    params: int  # params(base) + params(sidekick)


def _check_model(i: int, m: Mapping) -> tuple[str, float, int]:
    where = f"models[{i}]"
    if not isinstance(m, Mapping):
        raise InputError(f"{where}: must be a mapping with keys name, gflops, params, got {type(m).__name__}")
    missing = [k for k in ("name", "gflops", "params") if k not in m]
    if missing:
        raise InputError(f"{where}: missing keys {missing}")
    name, gflops, params = m["name"], m["gflops"], m["params"]
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: name must be a non-empty string, got {name!r}")
    where = f"models[{i}] ({name})"
    if isinstance(gflops, bool) or not isinstance(gflops, Real) or not isfinite(gflops) or gflops <= 0:
        raise InputError(f"{where}: gflops must be a finite number > 0, got {gflops!r}")
    if isinstance(params, bool) or not isinstance(params, Integral) or params < 0:
        raise InputError(f"{where}: params must be an integer >= 0, got {params!r}")
    return name, float(gflops), int(params)


def enumerate_pairs(models: Iterable[Mapping], balance_range: tuple[float, float] | None = None) -> list[Pair]:
    """Every ordered (base, sidekick) with ``GFLOPs(base) > GFLOPs(sidekick)``.

    ``models``: mappings with ``name`` (unique str), ``gflops`` (> 0) and
    ``params`` (int). ``balance = GFLOPs(sidekick) / GFLOPs(base)``; with
    ``balance_range = (lo, hi)`` only pairs with ``lo <= balance <= hi`` are kept.
    Models of equal GFLOPs never pair. Sorted by (base, sidekick) name.
    """
    table = [_check_model(i, m) for i, m in enumerate(models)]
    names = [t[0] for t in table]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"models: duplicate names {dupes}")
    if balance_range is not None:
        if (
            len(balance_range) != 2
            or not all(isinstance(x, Real) and isfinite(x) for x in balance_range)
            or balance_range[0] > balance_range[1]
        ):
            raise InputError(f"balance_range: must be (lo, hi) with finite lo <= hi, got {balance_range!r}")
    out = []
    for base, g_b, p_b in table:
        for side, g_s, p_s in table:
            if g_b <= g_s:
                continue
            balance = g_s / g_b
            if balance_range is not None and not (balance_range[0] <= balance <= balance_range[1]):
                continue
            out.append(Pair(base=base, sidekick=side, balance=balance, gflops=g_b + g_s, params=p_b + p_s))
    return sorted(out, key=lambda p: (p.base, p.sidekick))
