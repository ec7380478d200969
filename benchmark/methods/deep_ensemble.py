"""Deep ensembles: the average of the member softmaxes of independently seeded fine-tunes of one zoo model (sizes in
params ``evaluate.deep_ensembles``). Group ``evaluate``: one evaluation unit per member tuple, evaluated inside the
evaluate stage from the members' logits; GFLOPs = the sum over members.
"""

from __future__ import annotations

from benchmark.config.evaluate import EvalConfig
from benchmark.core.combine import ensemble_prediction
from benchmark.core.costs import sum_cost
from benchmark.core.noise import seed_groups
from benchmark.methods.registry import LogitsInput, register_method
from benchmark.methods.rows import method_rows, split_labels


def deep_ensemble_groups(zoo: dict, sizes) -> list[list[str]]:
    """Member lists of the deep ensembles: for each group of zoo entries that differ only
    in their seed (at least 2 seeds), the first ``m`` seeds for every ``m`` in ``sizes``.

    Raises ``ValueError`` naming the method and model when a group has fewer seeds than asked.
    """
    out = []
    for names in (list(g.names) for g in seed_groups(zoo)):  # by seed: the first m seeds
        for m in sizes:
            if isinstance(m, bool) or not isinstance(m, int) or m < 2:
                raise ValueError(f"evaluate.deep_ensembles: sizes must be integers >= 2, got {m!r}")
            if m > len(names):
                raise ValueError(
                    f"deep_ensemble m={m} of model {zoo[names[0]].arch!r} ({names[0]}, ...): only {len(names)} seeds "
                    f"in the zoo ({names}); add seeds to the zoo or lower evaluate.deep_ensembles"
                )
            out.append(names[:m])
    return out


def ensemble_unit(cfg: EvalConfig, members: list[str], member_logits: list[dict]) -> list[dict]:
    """Rows of an ensemble of cached models: mean of softmaxes and (``_logit``) softmax of mean logits.

    No temperature is fitted (``fit = "none"``), as for the published deep-ensemble baselines.
    """
    nan = float("nan")
    name = f"m{len(members)}"
    rows = []
    for mode, suffix in (("probs", ""), ("logits", "_logit")):
        ident = dict(
            family="deep_ensemble",
            method=name + suffix,
            base=members[0],
            sidekick="",
            members="+".join(members),
            fit="none",
            confidence="max",
            temperature_base=nan,
            temperature_side=nan,
            weight_base=nan,
            weight_side=nan,
        )
        rows += method_rows(
            cfg,
            ident,
            split_labels(member_logits[0]),
            lambda s, mode=mode: ensemble_prediction([m[s][0] for m in member_logits], mode=mode),
        )
    return rows


def ensemble_rows(
    cfg: EvalConfig, names: tuple, logits: list, *, info=None, memo=None, release=None
) -> tuple[list, list]:
    """The rows of one deep-ensemble unit (its members' logits averaged in probability); no paired differences."""
    return ensemble_unit(cfg, list(names), logits), []


@register_method(
    kind="deep_ensemble",
    family="deep_ensemble",
    group="evaluate",
    needs=("logits",),
    section="",
    title="deep ensemble",
    rows=ensemble_rows,
)
def deep_ensemble_units(x: LogitsInput) -> list:
    """One unit per deep ensemble of params ``evaluate.deep_ensembles`` over the zoo's seed groups, with the members'
    summed costs."""
    return [
        (("deep_ensemble", *ms), None, dict(sum_cost(x.costs, ms), balance=float("nan")))
        for ms in deep_ensemble_groups(x.zoo, list(x.cfg.deep_ensembles))
    ]
