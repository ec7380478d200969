"""Single models, temperature-scaled: one evaluation unit per zoo entry, evaluated inside the evaluate stage from the
model's logits (group ``evaluate``): its rows for every fit mode of params ``evaluate.fits`` and every split."""

from __future__ import annotations

from benchmark.config.evaluate import EvalConfig
from benchmark.core.costs import sum_cost
from benchmark.methods.registry import LogitsInput, register_method
from benchmark.methods.rows import ModelMemo, Variant, inverse, mixture_rows


def single_unit(cfg: EvalConfig, name: str, logits: dict, *, memo: ModelMemo | None = None, release=None) -> list[dict]:
    """Rows of one temperature-scaled model, for every fit mode and split (``release``: see
    :func:`benchmark.methods.duo.duo_unit`)."""
    memo = memo or ModelMemo()
    rows = []
    for fit in cfg.fits:
        t = memo.temperature(name, logits, fit)
        ident = dict(
            family="single",
            method="ts",
            base=name,
            sidekick="",
            members=name,
            fit=fit,
            confidence="max",
            temperature_base=t,
            temperature_side=float("nan"),
            weight_base=1.0 / t,
            weight_side=0.0,
        )
        rows += mixture_rows(
            cfg, [logits], [[inverse(t, "temperature")]], [Variant(ident, 0, "max", "top")], release=release
        )[0][0]
    return rows


def single_rows(
    cfg: EvalConfig, names: tuple, logits: list, *, info=None, memo=None, release=None
) -> tuple[list, list]:
    """The rows of one single-model unit (its logits temperature-scaled); no paired differences."""
    return single_unit(cfg, names[0], logits[0], memo=memo, release=release), []


@register_method(
    kind="single",
    family="single",
    group="evaluate",
    needs=("logits",),
    section="",
    title="single model",
    rows=single_rows,
)
def single_units(x: LogitsInput) -> list:
    """One unit per zoo model, with its cost."""
    return [(("single", n), None, sum_cost(x.costs, [n])) for n in x.zoo]
