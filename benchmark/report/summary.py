"""The answer first: one generated sentence per split that says what a cheap sidekick buys (pure, no I/O).

For one split's default view, on its ranked metric (``headline_metric``, else the first of the headline and plot metrics
the split has, e.g. ``ood_auroc`` on an OOD split: :func:`ranked_metric`): the best duo with a FLOPs balance of at most
``headline_balance`` over every base (:func:`benchmark.report.headline.headline`'s "best duo, balance ≤" rows), against
its base alone (the difference, with its paired-bootstrap interval where the evaluate stage computed one) and against
the best row of the other methods built on a base (deep ensembles, SVE, soups, ...), with that row's cost relative to
the duo; then the duo's training-seed verdict (a finding, within the seed noise, or unmeasured) and whether the split's
ranking as a whole is noise-dominated. Numbers first, few words: the page shows one sentence per split beside its Pareto
chart, all of them in the first screen of a laptop, under one line that says what they compare
(``templates/glance.html.j2``).
"""

from __future__ import annotations

import math

import numpy as np

from benchmark.core.metric_info import METRICS
from benchmark.report.headline import _better, headline
from benchmark.report.tables import fmt_metric

CHEAP_ROLE = "best duo, balance ≤"  # the role :func:`headline` gives the cheap duo of a base
NOISY = "Typical differences on this split: within the seed noise."  # a noise-dominated split's last words


def ranked_metric(view, config) -> str | None:
    """The metric a split's sentence is about: the first of ``headline_metric``, ``headline_metrics``,
    ``plot_metrics`` and then every metric of :data:`~benchmark.core.metric_info.METRICS` with a finite value on a row
    of the reference family and on another row; None without one."""
    ref = (view["family"] == config.reference_family).to_numpy()
    for m in dict.fromkeys(
        [config.headline_metric, *config.headline_metrics, *getattr(config, "plot_metrics", ()), *METRICS]
    ):
        if m in view.columns:
            finite = np.isfinite(view[m].to_numpy(dtype=float))
            if (finite & ref).any() and (finite & ~ref).any():
                return m
    return None


def _signed(v: float) -> str:
    return ("−" if v < 0 else "+") + fmt_metric(abs(v))


def _verdict(x: dict, hib: bool) -> str:
    """The seed-noise verdict of the duo's difference to its base, in a few words."""
    if x["finding"]:
        word = "improvement" if (x["diff"] > 0) == hib else "loss"
        return f"a finding: a {word} outside the seed noise, its interval excludes 0"
    if x["within_seed"]:
        return "its interval excludes 0 but it is within the seed noise" if x["sig"] else "within the seed noise"
    if x["within_seed"] is None:
        return "seed noise not measured" + ("; its interval excludes 0" if x["sig"] else "")
    has_ci = math.isfinite(x["lo"]) and math.isfinite(x["hi"])
    return "outside the seed noise" + (", but its interval includes 0" if has_ci and not x["sig"] else "")


def split_summary(view, config, *, paired: dict | None = None, noise_=None, head: dict | None = None) -> dict | None:
    """The sentence of one split (``view``: its rows, one variant per method) and the values it quotes:
    ``{"metric", "lead" (its label and arrow: "AURC ↓"), "better" ("lower is better"), "text", "core" (the text
    without the noise-dominated split's :data:`NOISY`, which a page says once when every split is), "duo", "base",
    "rival" (each an entry of :func:`headline` or None), "dominated"}``; None when the split has no metric to rank or
    no base with another method. ``head``: :func:`headline` of ``view`` for metrics that may hold the ranked one (its
    entries, order and noise verdicts are those of that metric alone), else it is computed here."""
    m = ranked_metric(view, config)
    if m is None:
        return None
    if head is None or m not in head["order"]:
        head = headline(view, config, paired=paired, noise_=noise_, metrics=[m])
    entries, order = head["entries"], head["order"][m]
    key = _better(m)
    cheap = [entries[i] for i, role in order if role.startswith(CHEAP_ROLE)]
    others = [entries[i] for i, _ in order if entries[i]["kind"] == "other"]
    duo = min(cheap, key=lambda e: key(e["metrics"][m]["value"])) if cheap else None
    rival = min(others, key=lambda e: key(e["metrics"][m]["value"])) if others else None
    if rival is not None and not math.isfinite(rival["metrics"][m]["value"]):
        rival = None
    info = METRICS.get(m)
    hib = bool(info.higher_is_better) if info else False
    label = info.label if info else m
    cap = f"{config.headline_balance:g}"
    dominated = head["noise"].get(m, {}).get("dominated", False)
    base = None
    if duo is None:
        if rival is None:
            return None
        text = (
            f"no duo at FLOPs balance ≤ {cap}; best other method: {_name(rival)} ({rival['models']}) "
            f"{fmt_metric(rival['metrics'][m]['value'])}."
        )
    else:
        base = next((e for e in entries if e["kind"] == "alone" and e["base"] == duo["base"]), None)
        x = duo["metrics"][m]
        text = f"{duo['models']} (+{duo['balance']:.0%} compute): {fmt_metric(x['value'])}"
        if base is not None and math.isfinite(x["diff"]):
            ci = (
                f" [{_signed(x['lo'])}, {_signed(x['hi'])}]"
                if math.isfinite(x["lo"]) and math.isfinite(x["hi"])
                else ""
            )
            text += (
                f" vs {fmt_metric(base['metrics'][m]['value'])} for {duo['base']} alone "
                f"(Δ\u00a0{_signed(x['diff'])}{ci}, {_verdict(x, hib)})"
            )  # Δ and its value on one line
        if rival is not None:
            ratio = rival["gflops"] / duo["gflops"] if duo["gflops"] > 0 else math.nan
            cost = f" at {ratio:.1f}× the compute" if math.isfinite(ratio) else ""
            text += f"; {_name(rival)}: {fmt_metric(rival['metrics'][m]['value'])}{cost}"
        text += "."
    better = f"{'higher' if hib else 'lower'} is better"
    return {
        "metric": m,
        "lead": f"{label} {'↑' if hib else '↓'}",
        "better": better,
        "core": text,
        "text": text + (f" {NOISY}" if dominated else ""),
        "duo": duo,
        "base": base,
        "rival": rival,
        "dominated": dominated,
    }


def _name(e: dict) -> str:
    family, _, method = e["label"].partition(" · ")
    return family.replace("_", " ") + (f" · {method}" if method else "")
