"""Asymmetric Duos (Zhou et al., NeurIPS 2025): a base model and a smaller sidekick, logits combined with two
temperatures fit on validation NLL. One evaluation unit per base-sidekick pair (group ``logits``: evaluated inside the
evaluate stage, :func:`benchmark.evaluation.rows.duo_unit`); every unit reports the variants of :data:`VARIANTS`.
The combination itself is :mod:`benchmark.core.combine`.
"""
from __future__ import annotations

from benchmark.models.cost import sum_cost
from benchmark.stages.registry import LogitsInput, register_method

# (method, confidence) of the duo variants reported for every pair (benchmark.core.combine.DUO_VARIANTS x confidence
# scores); the first is the headline duo
VARIANTS = (("weighted", "max"), ("weighted", "published"), ("unweighted", "max"), ("uq_only", "published"))


@register_method(kind="duo", family="duo", group="logits", needs=("logits",), section="", title="Asymmetric Duo")
def duo_units(x: LogitsInput) -> list:
    return [(("duo", p.base, p.sidekick), None, sum_cost(x.costs, [p.base, p.sidekick])) for p in x.pairs]
