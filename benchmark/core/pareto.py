"""Pareto frontier of (cost, metric) points."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def pareto_front(cost: ArrayLike, value: ArrayLike, higher_is_better: bool = True) -> np.ndarray:
    """Boolean mask of the non-dominated points.

    Lower cost is always better; ``value`` is better when higher if
    ``higher_is_better`` else when lower. A point ``i`` is dominated when some
    point ``j`` has ``cost[j] <= cost[i]`` and a value at least as good, with one
    of the two strictly better. Exact duplicates are both kept. NaN values are
    never on the frontier and dominate nothing.
    """
    cost = np.asarray(cost, dtype=float)
    value = np.asarray(value, dtype=float)
    if cost.ndim != 1 or value.shape != cost.shape:
        raise ValueError(f"cost and value must be 1-D of equal length, got {cost.shape} and {value.shape}")
    if np.isnan(cost).any():
        raise ValueError("cost contains NaN")
    v = value if higher_is_better else -value
    ok = ~np.isnan(v)
    mask = np.zeros(cost.shape, dtype=bool)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return mask
    # Sort by cost ascending, then value descending. A point is on the front iff
    # its value beats every point before it (all cheaper, or as cheap and better);
    # an exact duplicate of a front point shares its fate.
    order = idx[np.lexsort((-v[idx], cost[idx]))]
    c, vs = cost[order], v[order]
    prev_best = np.concatenate([[-np.inf], np.maximum.accumulate(vs)[:-1]])
    new_run = np.concatenate([[True], (c[1:] != c[:-1]) | (vs[1:] != vs[:-1])])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(order)), 0))
    beats = vs > prev_best
    beats[0] = True  # the cheapest, best point is never dominated (even at -inf)
    mask[order] = beats[run_start]
    return mask
