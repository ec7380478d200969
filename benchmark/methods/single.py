"""Single models, temperature-scaled: one evaluation unit per zoo entry (group ``logits``: evaluated inside the
evaluate stage from the model's logits, :func:`benchmark.evaluation.rows.single_unit`)."""
from __future__ import annotations

from benchmark.models.cost import sum_cost
from benchmark.stages.registry import LogitsInput, register_method


@register_method(kind="single", family="single", group="logits", needs=("logits",), section="", title="single model")
def single_units(x: LogitsInput) -> list:
    return [(("single", n), None, sum_cost(x.costs, [n])) for n in x.zoo]
