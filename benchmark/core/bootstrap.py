"""Percentile bootstrap of every metric, single and paired.

A resample draws N sample indices uniformly with replacement (numpy PCG64,
seeded). It is represented by its vector of multinomial counts over the
samples sorted by confidence, so all metrics of many resamples are computed
at once by :func:`benchmark.core.metrics.metrics_from_counts`, in chunks of
``chunk`` resamples to bound memory (a few tens of bytes per resample and
sample: about 200 MB for ``chunk = 64`` at N = 47,500).
Resamples depend only on ``(N, n_bootstrap, seed)``, so two predictions on the
same samples see the same resamples (a paired bootstrap).

Counts are float32 (exact integers; float64 from N = 2^24 on); sums of real-valued
per-sample terms and everything on ranks are accumulated in float64.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from numbers import Integral, Real

import numpy as np
import torch

from benchmark.core.metrics import metrics_from_counts
from benchmark.core.samples import SampleStats
from benchmark.core.validation import InputError

DEFAULT_CHUNK = 64


def check_bootstrap_args(n_bootstrap: int, level: float) -> None:
    """``n_bootstrap`` a non-negative integer and ``level`` in (0, 1); :class:`InputError` otherwise."""
    if not isinstance(n_bootstrap, Integral) or isinstance(n_bootstrap, bool) or n_bootstrap < 0:
        raise InputError(f"n_bootstrap: must be a non-negative integer, got {n_bootstrap!r}")
    if not (isinstance(level, Real) and 0 < level < 1):
        raise InputError(f"level: must be in (0, 1), got {level!r}")


KEEP_DRAWS = 1 << 23  # resamples of at most this many indices in all (64 MB) are drawn once per process


def _draw(n: int, n_bootstrap: int, seed: int, chunk: int) -> Iterator[torch.Tensor]:
    rng = np.random.default_rng(seed)
    for start in range(0, n_bootstrap, chunk):
        b = min(chunk, n_bootstrap - start)
        yield torch.from_numpy(rng.integers(0, n, size=(b, n), dtype=np.int64))


@functools.lru_cache(maxsize=2)
def _kept(n: int, n_bootstrap: int, seed: int, chunk: int) -> tuple[torch.Tensor, ...]:
    return tuple(_draw(n, n_bootstrap, seed, chunk))


def resample_indices(n: int, n_bootstrap: int, seed: int, chunk: int = DEFAULT_CHUNK) -> Iterator[torch.Tensor]:
    """Yield (b, n) int64 tensors of indices drawn with replacement, ``b <= chunk``.

    The draws depend only on the arguments; up to :data:`KEEP_DRAWS` indices in all they
    are kept (read-only) for the next call with the same arguments (every prediction
    on the same samples is resampled alike)."""
    return (
        iter(_kept(n, n_bootstrap, seed, chunk))
        if n * n_bootstrap <= KEEP_DRAWS
        else _draw(n, n_bootstrap, seed, chunk)
    )


def counts_in_sorted_order(stats: SampleStats, idx: torch.Tensor) -> torch.Tensor:
    """Multinomial counts (b, N + 1) of the drawn indices at ``stats``' sorted
    positions (column 0 is the empty pad)."""
    dtype = torch.float32 if idx.shape[1] < 2**24 else torch.float64
    counts = torch.zeros(idx.shape[0], idx.shape[1] + 1, dtype=dtype)
    return counts.scatter_add_(1, stats.rank[idx], torch.ones(1, 1, dtype=dtype).expand(idx.shape))


def bootstrap_samples(
    stats: Sequence[SampleStats],
    n_bootstrap: int,
    seed: int,
    *,
    sac_threshold: float = 0.98,
    chunk: int = DEFAULT_CHUNK,
) -> list[dict[str, torch.Tensor]]:
    """Every metric on ``n_bootstrap`` shared resamples, for each of ``stats``.

    All ``stats`` must describe the same N samples (in the same input order).
    Returns one dict per entry: metric -> (n_bootstrap,) float64.
    """
    n = stats[0].n
    if any(s.n != n for s in stats):
        raise InputError(f"bootstrap: predictions have different N {[s.n for s in stats]}")
    parts: list[dict[str, list[torch.Tensor]]] = [{} for _ in stats]
    for idx in resample_indices(n, n_bootstrap, seed, chunk):
        for st, acc in zip(stats, parts):
            for k, v in metrics_from_counts(st, counts_in_sorted_order(st, idx), sac_threshold=sac_threshold).items():
                acc.setdefault(k, []).append(v)
    return [{k: torch.cat(v) for k, v in acc.items()} for acc in parts]


def percentile_interval(samples: torch.Tensor, level: float) -> tuple[float, float]:
    """Percentile interval ``(q_{(1-level)/2}, q_{(1+level)/2})`` of the finite samples
    (linear interpolation, as ``numpy.percentile``); NaN if none is finite."""
    s = samples[torch.isfinite(samples)].numpy()
    if s.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(s, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def two_sided_p_value(diffs: torch.Tensor) -> float:
    """Bootstrap p-value of ``diff == 0``: ``min(1, 2 min(#{d <= 0} + 1, #{d >= 0} + 1) / (B + 1))``
    over the finite resampled differences ``d``; NaN if none is finite."""
    d = diffs[torch.isfinite(diffs)]
    if d.numel() == 0:
        return float("nan")
    below, above = int((d <= 0).sum()) + 1, int((d >= 0).sum()) + 1
    return min(1.0, 2 * min(below, above) / (d.numel() + 1))
