"""The sentence per split at the top of the page, its numbers against a direct pandas computation on the rows."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from report_synth import SEEDED_ZOO, make_inputs, noisy_results, synthetic_results

from benchmark.core import noise
from benchmark.report import ReportConfig, build_report
from benchmark.report.headline import headline_context, paired_lookup
from benchmark.report.headline_noise import split_noise
from benchmark.report.inputs import results_from_frame
from benchmark.report.summary import ranked_metric, split_summary
from benchmark.report.tables import default_view, fmt_metric, wide_table

MODELS = {"vit": 4.6, "res": 4.1, "eff": 0.39, "mnv3": 0.06}
CFG = ReportConfig()


def _view(res: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    res, _ = results_from_frame(res)
    view = default_view(wide_table(res), CFG.fit, CFG.confidence)
    return view[view["split"] == split]


def _signed(v: float) -> str:
    return ("−" if v < 0 else "+") + fmt_metric(abs(v))


def test_the_sentence_quotes_the_cheap_duo_its_base_and_the_best_other_method():
    view = _view(synthetic_results(models=MODELS))
    s = split_summary(view, CFG)
    # independently: the best (lowest AURC) duo of balance <= 0.2 over every base, its base alone, the best row of a
    # family that is neither the reference nor a duo
    duos = view[(view["family"] == "duo") & (view["balance"] <= 0.2)]
    duo = duos.loc[duos["aurc"].idxmin()]
    base = view[(view["family"] == "single") & (view["base"] == duo["base"])].iloc[0]
    others = view[~view["family"].isin(["single", "duo"])]
    rival = others.loc[others["aurc"].idxmin()]
    assert s["metric"] == "aurc" and s["lead"] == "AURC (lower is better)"
    assert s["duo"]["models"] == f"{duo['base']} + {duo['sidekick']}"
    text = s["text"]
    assert text.startswith(f"the best duo at FLOPs balance ≤ 0.2, {duo['base']} + {duo['sidekick']} "
                           f"(+{duo['balance']:.0%} compute), scores {fmt_metric(duo['aurc'])} against "
                           f"{fmt_metric(base['aurc'])} for {duo['base']} alone (Δ {_signed(duo['aurc'] - base['aurc'])}: ")
    assert f"and {fmt_metric(rival['aurc'])} for deep ensemble · mean at {rival['gflops'] / duo['gflops']:.1f}× the compute." in text
    assert "training-seed noise not measured" in text  # no seed group in this zoo


def test_a_paired_interval_is_quoted_and_judged():
    view = _view(synthetic_results(models=MODELS))
    duos = view[(view["family"] == "duo") & (view["balance"] <= 0.2)]
    duo = duos.loc[duos["aurc"].idxmin()]
    paired = pd.DataFrame([{"suite": duo["suite"], "split": "test", "base": duo["base"], "sidekick": duo["sidekick"],
                            "fit": duo["fit"], "method": duo["method"], "metric": "aurc", "diff": -0.0123,
                            "ci_low": -0.02, "ci_high": -0.004}])
    s = split_summary(view, CFG, paired=paired_lookup(paired))
    assert "(Δ −0.01230 [−0.02000, −0.00400]: training-seed noise not measured; its interval excludes 0)" in s["text"]


def test_seed_noise_verdicts_of_the_duo_and_of_the_split():
    view = _view(noisy_results(), "shift")  # the seeds of vit disagree more than the methods differ
    groups = noise.seed_groups(SEEDED_ZOO)
    judged = split_noise(view, groups, CFG.reference_family, list(CFG.headline_metrics))
    s = split_summary(view, CFG, noise_=judged)
    x = s["duo"]["metrics"]["aurc"]
    row = view[(view["members"] == s["duo"]["models"].replace(" + ", "+")) & (view["family"] == "duo")
               & (view["method"] == s["duo"]["label"].split(" · ")[1])].index[0]
    sd = judged.rows[(row, "aurc")][0]
    assert x["within_seed"] == (abs(x["diff"]) <= noise.FACTOR * sd)  # the judgement, from its definition
    verdict = "within the training-seed noise" if x["within_seed"] else "outside the training-seed noise"
    assert verdict in s["text"]
    assert s["dominated"] and s["text"].endswith("This split's AURC ranking as a whole is within the training-seed spread.")
    test = split_summary(_view(noisy_results(), "test"), CFG, noise_=split_noise(
        _view(noisy_results(), "test"), groups, CFG.reference_family, list(CFG.headline_metrics)))
    assert not test["dominated"] and "ranking as a whole" not in test["text"]


def test_a_split_without_the_headline_metrics_is_summarised_on_its_own_metric():
    res = synthetic_results(models=MODELS, splits=("ood",))
    res = res[res["metric"] == "auroc"].assign(metric="ood_auroc")
    view = _view(res, "ood")
    assert ranked_metric(view, CFG) == "ood_auroc"
    s = split_summary(view, CFG)
    duos = view[(view["family"] == "duo") & (view["balance"] <= 0.2)]
    assert s["lead"] == "OOD AUROC (higher is better)"
    assert f"scores {fmt_metric(duos['ood_auroc'].max())}" in s["text"]  # higher is better: the largest


def test_no_cheap_duo_and_nothing_to_compare():
    res = synthetic_results(models={"vit": 4.6, "res": 4.1})  # balance 0.89: no duo is cheap
    s = split_summary(_view(res), CFG)
    assert s["duo"] is None and s["text"].startswith("no duo has a FLOPs balance ≤ 0.2; the best other method, deep ensemble")
    alone = synthetic_results(models={"vit": 4.6}, ensemble=False)
    assert split_summary(_view(alone), CFG) is None


def test_the_page_opens_with_the_sentences_escaped(tmp_path):
    evil = "<b>x</b>"
    res = synthetic_results(models={evil: 4.6, "res": 4.1, "mnv3": 0.06}, splits=("test", "shift"))
    page = build_report(make_inputs(res, config=ReportConfig(formats=())), tmp_path / "r", progress=False, figures=False)
    html = page.read_text(encoding="utf-8")
    glance = html[html.index('<section class="glance"'):html.index('<section id="headline"')]
    assert glance.count("<li data-split=") == 2 and "&lt;b&gt;x&lt;/b&gt;" in glance and "<b>x</b>" not in glance
    assert glance.index('<ul class="summary lead">') < glance.index('class="chart-panel"')
    head = headline_context({("embedded", "test"): _view(res)}, CFG, zoo={}, paired=None)
    summary = split_summary(_view(res), CFG, noise_=head["suites"][0]["splits"][0]["judged"])
    assert summary["text"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in glance
    assert np.isfinite(summary["duo"]["metrics"]["aurc"]["value"])
