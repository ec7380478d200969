"""Out-of-distribution detection by confidence: AUROC, AUPR and FPR@95TPR.

In-distribution (ID) samples should get *high* confidence and OOD samples *low*
confidence. Tied confidences are handled as in scikit-learn: AUROC counts a
tied ID/OOD pair as 1/2, and the curves are evaluated at distinct confidence
thresholds, so the input order never matters.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

import numpy as np
import torch

from benchmark.core import ranking
from benchmark.core.bootstrap import DEFAULT_CHUNK, KEEP_DRAWS, check_bootstrap_args, percentile_interval
from benchmark.core.validation import TensorLike, as_scores

OOD_METRICS = ("ood_auroc", "ood_aupr", "ood_fpr95")


def _setup(
    conf_id: TensorLike, conf_ood: TensorLike
) -> tuple[int, int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    a = as_scores(conf_id, "conf_id")
    b = as_scores(conf_ood, "conf_ood")
    order, group = ranking.tie_groups(torch.cat([a, b]))
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.shape[0])
    is_id = (order < a.shape[0]).to(torch.float64)
    return a.shape[0], b.shape[0], rank, is_id, ranking.group_ends(group), group[rank]


def _from_weights(w: torch.Tensor, is_id: torch.Tensor, ends: torch.Tensor) -> dict[str, torch.Tensor]:
    """The three metrics for weightings ``w`` (B, N) of the sorted samples.

    * ``ood_auroc = P(s_id > s_ood) + P(s_id = s_ood) / 2``
    * ``ood_aupr``: average precision of detecting OOD (positive class) by low
      confidence, ``sum_t (R_t - R_{t-1}) P_t`` over thresholds from the lowest
      confidence up (scikit-learn ``average_precision_score(is_ood, -s)``)
    * ``ood_fpr95``: fraction of OOD samples accepted (``s >= t``) at the highest
      threshold ``t`` that accepts at least 95% of ID samples
    """
    pos = ranking.cumulative_at_ends(w * is_id, ends)
    neg = ranking.cumulative_at_ends(w * (1 - is_id), ends)
    ood_up = torch.cumsum(torch.flip(ranking.increments(neg), [1]), 1)
    all_up = torch.cumsum(torch.flip(ranking.increments(pos + neg), [1]), 1)
    return {
        "ood_auroc": ranking.auroc(pos, neg),
        "ood_aupr": ranking.average_precision(ood_up, all_up),
        "ood_fpr95": ranking.fpr_at_tpr(pos, neg, 0.95),
    }


def _from_group_counts(pos_g: torch.Tensor, neg_g: torch.Tensor) -> dict[str, torch.Tensor]:
    """:func:`_from_weights` of integer weightings given by their ID and OOD weight per tie group
    (B, G): the same tensors reach the same formulas (cumulative sums and differences of exact
    integers are exact), without the (B, N) weights and their cumulative sums over all samples."""
    pos, neg = torch.cumsum(pos_g, 1), torch.cumsum(neg_g, 1)
    neg_up = torch.flip(neg_g, [1])
    ood_up = torch.cumsum(neg_up, 1)
    all_up = torch.cumsum(torch.flip(pos_g + neg_g, [1]), 1)
    return {
        "ood_auroc": ranking.auroc(pos, neg, pos_g, neg_g),
        "ood_aupr": ranking.average_precision(ood_up, all_up, neg_up),
        "ood_fpr95": ranking.fpr_at_tpr(pos, neg, 0.95),
    }


def ood_metrics(conf_id: TensorLike, conf_ood: TensorLike) -> dict[str, float]:
    """OOD detection metrics of confidences on ID samples ``conf_id`` (N1,) and OOD
    samples ``conf_ood`` (N2,); see :func:`_from_weights` for the formulas."""
    _, _, _, is_id, ends, _ = _setup(conf_id, conf_ood)
    ones = torch.ones(1, is_id.shape[0], dtype=torch.float64)
    return {k: float(v[0]) for k, v in _from_weights(ones, is_id, ends).items()}


def ood_evaluate(
    conf_id: TensorLike, conf_ood: TensorLike, *, n_bootstrap: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, tuple[float, float, float]]:
    """``metric -> (value, ci_low, ci_high)``: percentile-bootstrap intervals with the
    ID and the OOD set resampled separately (stratified), NaN bounds for 0 resamples."""
    check_bootstrap_args(n_bootstrap, level)
    n1, n2, rank, is_id, ends, group_of = _setup(conf_id, conf_ood)
    ones = torch.ones(1, n1 + n2, dtype=torch.float64)
    values = {k: float(v[0]) for k, v in _from_weights(ones, is_id, ends).items()}
    if n_bootstrap == 0:
        return {k: (v, float("nan"), float("nan")) for k, v in values.items()}
    g = ends.shape[0]
    group_id, group_ood = group_of[:n1].contiguous(), group_of[n1:].contiguous()
    one = torch.ones(1, 1, dtype=torch.float64)
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in values}
    for idx_id, idx_ood in _stratified_indices(n1, n2, n_bootstrap, seed):
        b = idx_id.shape[0]
        gi = group_id.index_select(0, idx_id.flatten()).view(idx_id.shape)
        go = group_ood.index_select(0, idx_ood.flatten()).view(idx_ood.shape)
        pos_g = torch.zeros(b, g, dtype=torch.float64).scatter_add_(1, gi, one.expand(gi.shape))
        neg_g = torch.zeros(b, g, dtype=torch.float64).scatter_add_(1, go, one.expand(go.shape))
        for k, v in _from_group_counts(pos_g, neg_g).items():
            parts[k].append(v)
    return {k: (v, *percentile_interval(torch.cat(parts[k]), level)) for k, v in values.items()}


def _draws(n1: int, n2: int, n_bootstrap: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    rng = np.random.default_rng(seed)
    for start in range(0, n_bootstrap, DEFAULT_CHUNK):
        b = min(DEFAULT_CHUNK, n_bootstrap - start)
        yield torch.from_numpy(rng.integers(0, n1, size=(b, n1))), torch.from_numpy(rng.integers(0, n2, size=(b, n2)))


@functools.lru_cache(maxsize=2)
def _kept_draws(n1: int, n2: int, n_bootstrap: int, seed: int) -> tuple:
    return tuple(_draws(n1, n2, n_bootstrap, seed))


def _stratified_indices(n1: int, n2: int, n_bootstrap: int, seed: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """The resamples of :func:`ood_evaluate`: ID and OOD indices per chunk. They depend only on the
    sizes and the seed, so while they fit in :data:`~benchmark.core.bootstrap.KEEP_DRAWS` integers
    they are drawn once and reused by every confidence scored on the same samples."""
    if n_bootstrap * (n1 + n2) <= KEEP_DRAWS:
        return _kept_draws(n1, n2, n_bootstrap, seed)
    return _draws(n1, n2, n_bootstrap, seed)
