"""Deep ensembles: the average of the member softmaxes of independently seeded fine-tunes of one zoo model (sizes in
params ``evaluate.deep_ensembles``). Group ``logits``: one evaluation unit per member tuple, evaluated inside the
evaluate stage (:func:`benchmark.evaluation.rows.ensemble_unit`); GFLOPs = the sum over members.
"""
from __future__ import annotations

from benchmark.models.cost import sum_cost
from benchmark.stages.registry import LogitsInput, register_method


@register_method(kind="deep_ensemble", family="deep_ensemble", group="logits", needs=("logits",), section="",
                 title="deep ensemble")
def deep_ensemble_units(x: LogitsInput) -> list:
    return [(("deep_ensemble", *ms), None, dict(sum_cost(x.costs, ms), balance=float("nan"))) for ms in x.ensembles]
