"""Registry entries of the methods that are not weight-based baselines (:mod:`benchmark.pipeline.registry`).

* ``single``, ``duo``, ``deep_ensemble`` (group ``logits``): evaluated inside the evaluate
  stage from the zoo's logits; each entry's ``run`` lists its evaluation units
  ``(identity, method info, cost)`` (:func:`benchmark.pipeline.evaluate.run` takes them in
  registration order, then the method outputs of ``results/methods/``).
* ``sve`` (group ``sve``): a thin entry over :mod:`benchmark.pipeline.sve` (its own params
  section ``sve``, stage script ``pipelines/sve.py`` and stages ``sve-train`` + ``sve@<M>`` in the template).
"""
from __future__ import annotations

from dataclasses import dataclass

from benchmark.pipeline.registry import register_method


@dataclass(frozen=True)
class UnitsInput:
    """What the logit-only methods build their units from."""

    zoo: dict
    costs: dict
    pairs: list
    ensembles: list


def sum_cost(costs: dict, members) -> dict:
    """Cost of running ``members`` one after the other; balance = sidekick/base GFLOPs for pairs."""
    return {"gflops": sum(costs[m]["gflops"] for m in members), "params": sum(costs[m]["params"] for m in members),
            "throughput": 1.0 / sum(1.0 / costs[m]["throughput"] for m in members),
            "balance": costs[members[1]]["gflops"] / costs[members[0]]["gflops"] if len(members) == 2 else float("nan")}


@register_method(kind="single", family="single", group="logits", needs=("logits",), section="", title="single model")
def single_units(x: UnitsInput) -> list:
    return [(("single", n), None, sum_cost(x.costs, [n])) for n in x.zoo]


@register_method(kind="duo", family="duo", group="logits", needs=("logits",), section="", title="Asymmetric Duo")
def duo_units(x: UnitsInput) -> list:
    return [(("duo", p.base, p.sidekick), None, sum_cost(x.costs, [p.base, p.sidekick])) for p in x.pairs]


@register_method(kind="deep_ensemble", family="deep_ensemble", group="logits", needs=("logits",), section="",
                 title="deep ensemble")
def deep_ensemble_units(x: UnitsInput) -> list:
    return [(("deep_ensemble", *ms), None, dict(sum_cost(x.costs, ms), balance=float("nan"))) for ms in x.ensembles]


def _sve_outputs(members) -> list[str]:
    from benchmark.pipeline import sve

    return [sve.output_name(int(members))]


@register_method(kind="sve", family="sve", group="sve", section="sve", script="sve", needs=("base-model",), persist=True,
                 outputs=_sve_outputs, title="Singular Value Ensemble",
                 comment="Singular Value Ensembles (params.yaml sve): stages sve-train and sve@<M>")
def sve(params: dict, members, *, progress: bool = True) -> dict:
    """Stage ``sve@<M>``'s work, unchanged: :func:`benchmark.pipeline.sve.nested_output` (the first ``M`` members of
    the ensemble stage ``sve-train`` trained, :func:`benchmark.pipeline.sve.train_nested`)."""
    from benchmark.pipeline import sve as stage

    return stage.nested_output(params, int(members), progress=progress)
