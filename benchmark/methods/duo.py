"""Asymmetric Duos (Zhou et al., NeurIPS 2025): a base model and a smaller sidekick, logits combined with two
temperatures fit on validation NLL. One evaluation unit per base-sidekick pair (group ``evaluate``: evaluated inside
the evaluate stage from the two models' logits); every unit reports the variants of :data:`VARIANTS` and the paired
differences duo - base. The combination itself is :mod:`benchmark.core.combine`.
"""

from __future__ import annotations

from benchmark.config.evaluate import EvalConfig
from benchmark.core.combine import duo_predicts_base, duo_weights
from benchmark.core.costs import sum_cost
from benchmark.core.evaluate import paired_difference_stats
from benchmark.core.pairs import enumerate_pairs
from benchmark.core.streaming import mixture_terms, terms_stats
from benchmark.core.temperature import fit_duo
from benchmark.methods.registry import LogitsInput, register_method
from benchmark.methods.rows import VAL, ModelMemo, Variant, eval_splits, inverse, mixture_rows

# (method, confidence) of the duo variants reported for every pair (benchmark.core.combine.DUO_VARIANTS x confidence
# scores); the first is the headline duo
VARIANTS = (("weighted", "max"), ("weighted", "published"), ("unweighted", "max"), ("uq_only", "published"))


def _variants(base: str, side: str, fit: str, duo, singles: tuple) -> list[Variant]:
    """The :data:`VARIANTS` of the (base, side) duo under temperature fit ``fit``: the duo's own temperatures
    (``duo``), the members' own (``singles``) for the unweighted one."""
    variants = []
    for method, conf in VARIANTS:
        tb, ts = (duo.t_base, duo.t_side) if method != "unweighted" else singles
        ident = dict(
            family="duo",
            method=method,
            base=base,
            sidekick=side,
            members=f"{base}+{side}",
            fit=fit,
            confidence=conf,
            temperature_base=tb,
            temperature_side=ts,
            weight_base=1.0 / (2 * tb),
            weight_side=1.0 / (2 * ts),
        )
        variants.append(
            Variant(ident, int(method == "unweighted"), conf, "base" if duo_predicts_base(method) else "top")
        )
    return variants


def duo_unit(
    cfg: EvalConfig,
    base: str,
    side: str,
    logits_b: dict,
    logits_s: dict,
    *,
    memo: ModelMemo | None = None,
    release=None,
) -> tuple[list[dict], list[dict]]:
    """Rows of every duo variant of (base, side), and paired differences duo - base.

    The paired differences (weighted duo, same fit and ``max`` confidence, minus
    the temperature-scaled base) are computed on the bootstrap splits. ``memo``
    holds each member's own temperature (the unweighted variant); the evaluate
    stage shares one across all units of a worker. ``release(block)`` is called
    with each block of logits rows once used (see
    :func:`~benchmark.core.streaming.mixture_terms`).
    """
    for s in logits_b:
        if s not in logits_s:
            raise ValueError(f"split {s!r} has logits for {base!r} but not for {side!r}")
    memo = memo or ModelMemo()
    rows, paired = [], []
    (zb, yv), (zs, _) = logits_b[VAL], logits_s[VAL]
    weighted = VARIANTS.index(("weighted", "max"))
    boot = [s for s in eval_splits(logits_b) if cfg.n_boot(s)]
    for fit in cfg.fits:
        duo = fit_duo(zb, zs, yv, mode=fit)
        singles = (memo.temperature(base, logits_b, fit), memo.temperature(side, logits_s, fit))
        variants = _variants(base, side, fit, duo, singles)
        weights = [duo_weights("weighted", fit=duo), duo_weights("unweighted", single_temperatures=singles)]
        unit_rows, kept = mixture_rows(
            cfg, [logits_b, logits_s], weights, variants, keep=(weighted,) if boot else (), release=release
        )
        rows += [r for variant_rows in unit_rows for r in variant_rows]
        for s in boot:  # paired bootstrap: weighted duo vs the temperature-scaled base, same resamples
            z, y = logits_b[s]
            (terms,), _ = mixture_terms([z], [[inverse(singles[0], "temperature")]], y, release=release)
            diff = paired_difference_stats(
                kept[weighted, s],
                terms_stats(terms, y, num_classes=z.shape[1], ece_bins=cfg.ece_bins),
                n_bootstrap=cfg.n_boot(s),
                seed=cfg.seed,
                level=cfg.bootstrap_level,
                sac_threshold=cfg.sac_threshold,
            )
            paired += [
                dict(suite=cfg.suite, split=s, base=base, sidekick=side, fit=fit, method="weighted", metric=m, **d)
                for m, d in diff.items()
            ]
    return rows, paired


def duo_rows(cfg: EvalConfig, names: tuple, logits: list, *, info=None, memo=None, release=None) -> tuple[list, list]:
    """The rows of one duo unit (base ``names[0]``, sidekick ``names[1]``) and its paired differences to the base."""
    return duo_unit(cfg, names[0], names[1], logits[0], logits[1], memo=memo, release=release)


def pairs(costs: dict, cfg: EvalConfig) -> list:
    """The candidate duos: every ordered pair with GFLOPs(base) > GFLOPs(sidekick), in params ``balance_range``."""
    return enumerate_pairs(
        [{"name": n, "gflops": c["gflops"], "params": c["params"]} for n, c in costs.items()],
        balance_range=cfg.balance_range or None,
    )


@register_method(
    kind="duo", family="duo", group="evaluate", needs=("logits",), section="", title="Asymmetric Duo", rows=duo_rows
)
def duo_units(x: LogitsInput) -> list:
    """One unit per base and sidekick pair the evaluate block admits, with the pair's summed costs."""
    return [(("duo", p.base, p.sidekick), None, sum_cost(x.costs, [p.base, p.sidekick])) for p in pairs(x.costs, x.cfg)]
