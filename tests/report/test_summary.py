"""The sentence per split at the top of the page, its numbers against a direct pandas computation on the rows."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from report_synth import SEEDED_ZOO, make_inputs, noisy_results, synthetic_results

from benchmark.core import noise
from benchmark.report import ReportConfig, build_report
from benchmark.report.headline import headline_context, paired_lookup
from benchmark.report.headline_noise import split_noise
from benchmark.report.inputs import results_from_frame
from benchmark.report.summary import NOISY, ranked_metric, split_summary
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
    assert s["metric"] == "aurc" and (s["lead"], s["better"]) == ("AURC ↓", "lower is better")
    assert s["duo"]["models"] == f"{duo['base']} + {duo['sidekick']}"
    text = s["text"]
    assert text.startswith(
        f"{duo['base']} + {duo['sidekick']} (+{duo['balance']:.0%} compute): "
        f"{fmt_metric(duo['aurc'])} vs {fmt_metric(base['aurc'])} for {duo['base']} alone "
        f"(Δ\u00a0{_signed(duo['aurc'] - base['aurc'])}, "
    )
    ratio = rival["gflops"] / duo["gflops"]
    assert text.endswith(f"; deep ensemble · mean: {fmt_metric(rival['aurc'])} at {ratio:.1f}× the compute.")
    assert "seed noise not measured" in text  # no seed group in this zoo
    assert s["core"] == text and not s["dominated"]


def test_a_paired_interval_is_quoted_and_judged():
    view = _view(synthetic_results(models=MODELS))
    duos = view[(view["family"] == "duo") & (view["balance"] <= 0.2)]
    duo = duos.loc[duos["aurc"].idxmin()]
    paired = pd.DataFrame(
        [
            {
                "suite": duo["suite"],
                "split": "test",
                "base": duo["base"],
                "sidekick": duo["sidekick"],
                "fit": duo["fit"],
                "method": duo["method"],
                "metric": "aurc",
                "diff": -0.0123,
                "ci_low": -0.02,
                "ci_high": -0.004,
            }
        ]
    )
    s = split_summary(view, CFG, paired=paired_lookup(paired))
    assert "(Δ\u00a0−0.01230 [−0.02000, −0.00400], seed noise not measured; its interval excludes 0)" in s["text"]


def test_seed_noise_verdicts_of_the_duo_and_of_the_split():
    view = _view(noisy_results(), "shift")  # the seeds of vit disagree more than the methods differ
    groups = noise.seed_groups(SEEDED_ZOO)
    judged = split_noise(view, groups, CFG.reference_family, list(CFG.headline_metrics))
    s = split_summary(view, CFG, noise_=judged)
    x = s["duo"]["metrics"]["aurc"]
    row = view[
        (view["members"] == s["duo"]["models"].replace(" + ", "+"))
        & (view["family"] == "duo")
        & (view["method"] == s["duo"]["label"].split(" · ")[1])
    ].index[0]
    sd = judged.rows[(row, "aurc")][0]
    assert x["within_seed"] == (abs(x["diff"]) <= noise.FACTOR * sd)  # the judgement, from its definition
    verdict = "within the seed noise)" if x["within_seed"] else "outside the seed noise)"
    assert verdict in s["text"]
    assert s["dominated"] and s["text"] == s["core"] + " Typical differences on this split: within the seed noise."
    test = split_summary(
        _view(noisy_results(), "test"),
        CFG,
        noise_=split_noise(_view(noisy_results(), "test"), groups, CFG.reference_family, list(CFG.headline_metrics)),
    )
    assert not test["dominated"] and "Typical differences" not in test["text"]


def test_a_split_without_the_headline_metrics_is_summarised_on_its_own_metric():
    res = synthetic_results(models=MODELS, splits=("ood",))
    res = res[res["metric"] == "auroc"].assign(metric="ood_auroc")
    view = _view(res, "ood")
    assert ranked_metric(view, CFG) == "ood_auroc"
    s = split_summary(view, CFG)
    duos = view[(view["family"] == "duo") & (view["balance"] <= 0.2)]
    assert (s["lead"], s["better"]) == ("OOD AUROC ↑", "higher is better")
    assert f"compute): {fmt_metric(duos['ood_auroc'].max())} vs " in s["text"]  # higher is better: the largest


def test_no_cheap_duo_and_nothing_to_compare():
    res = synthetic_results(models={"vit": 4.6, "res": 4.1})  # balance 0.89: no duo is cheap
    s = split_summary(_view(res), CFG)
    assert s["duo"] is None and s["text"].startswith("no duo at FLOPs balance ≤ 0.2; best other method: deep ensemble")
    alone = synthetic_results(models={"vit": 4.6}, ensemble=False)
    assert split_summary(_view(alone), CFG) is None


def test_the_page_opens_with_the_sentences_escaped(tmp_path):
    evil = "<b>x</b>"
    res = synthetic_results(models={evil: 4.6, "res": 4.1, "mnv3": 0.06}, splits=("test", "shift"))
    page = build_report(
        make_inputs(res, config=ReportConfig(formats=())), tmp_path / "r", progress=False, figures=False
    )
    html = page.read_text(encoding="utf-8")
    glance = html[html.index('<section class="glance"') : html.index('<section id="headline"')]
    assert glance.count("<li data-split=") == 2 and "&lt;b&gt;x&lt;/b&gt;" in glance and "<b>x</b>" not in glance
    assert glance.index('<ul class="summary lead">') < glance.index('class="chart-panel"')
    head = headline_context({("embedded", "test"): _view(res)}, CFG, zoo={}, paired=None)
    summary = split_summary(_view(res), CFG, noise_=head["suites"][0]["splits"][0]["judged"])
    assert summary["text"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in glance
    assert np.isfinite(summary["duo"]["metrics"]["aurc"]["value"])


def _glance(res, tmp_path) -> str:
    cfg = ReportConfig(formats=())
    page = build_report(make_inputs(res, config=cfg, zoo=SEEDED_ZOO), tmp_path / "r", progress=False, figures=False)
    html = page.read_text(encoding="utf-8")
    return html[html.index('<section class="glance"') : html.index('<section id="headline"')]


def test_a_noise_verdict_every_split_shares_is_said_once(tmp_path):
    """shift is noise-dominated, test is not: shift's sentence ends with the verdict; when every split is (shift and
    a copy of it), the key above the sentences says it once and no sentence repeats it."""
    res = noisy_results()
    glance = _glance(res, tmp_path / "one")
    items = dict(re.findall(r'<li data-split="(\w[\w-]*)">(.*?)</li>', glance, re.S))
    assert set(items) == {"test", "shift"}
    assert items["shift"].endswith(NOISY) and NOISY not in items["test"] and "on every split" not in glance
    shift = res[res["split"] == "shift"]
    glance = _glance(pd.concat([shift, shift.assign(split="ood")], ignore_index=True), tmp_path / "both")
    items = dict(re.findall(r'<li data-split="(\w[\w-]*)">(.*?)</li>', glance, re.S))
    assert set(items) == {"shift", "ood"} and not any(NOISY in t for t in items.values())
    assert "on every split\n      the typical differences are within it." in glance


def test_the_pages_headline_passed_in_gives_the_sentence_computed_alone():
    """The page passes each split's headline (every headline metric) to split_summary instead of a headline of the
    ranked metric alone: the same sentence, the same rows quoted; a headline without the ranked metric is not used."""
    from benchmark.report.headline import headline

    for split in ("test", "shift"):
        view = _view(noisy_results(), split)
        judged = split_noise(view, noise.seed_groups(SEEDED_ZOO), CFG.reference_family, list(CFG.headline_metrics))
        alone = split_summary(view, CFG, noise_=judged)
        full = headline(view, CFG, noise_=judged)
        assert len(full["order"]) > 1 and alone["metric"] in full["order"]
        given = split_summary(view, CFG, noise_=judged, head=full)
        assert {k: given[k] for k in ("metric", "text", "core", "dominated")} == {
            k: alone[k] for k in ("metric", "text", "core", "dominated")
        }
        for who in ("duo", "base", "rival"):
            assert (given[who] is None) == (alone[who] is None)
            if alone[who] is not None:
                assert given[who]["models"] == alone[who]["models"] and given[who]["label"] == alone[who]["label"]
                m = alone["metric"]
                assert given[who]["metrics"][m] == alone[who]["metrics"][m]
        other = headline(view, CFG, noise_=judged, metrics=["nll"])
        assert split_summary(view, CFG, noise_=judged, head=other) == alone  # not the ranked metric: computed
