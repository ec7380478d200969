"""The headline and the page weight in real headless Chromium, on a results table of the embedded run's size."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from chromium import CHROMIUM, reopen
from report_synth import (
    SEEDED_ZOO,
    big_results,
    choose_column,
    first_render,
    headline_json,
    make_inputs,
    noisy_results,
    wait_until,
)

from benchmark.report import ReportConfig, build_report
from benchmark.report.tables import KEY, fmt_metric

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found: apt-get install chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install playwright")
MB = 1_000_000


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    res = big_results()
    assert len(res.drop_duplicates(KEY)) > 2900
    cfg = ReportConfig(plot_metrics=("aurc",), plot_splits=("test",), formats=("png", "svg"), dpi=60)
    page = build_report(make_inputs(res, config=cfg), tmp_path_factory.mktemp("big") / "reports", progress=False)
    return page, res


@pytest.fixture
def page(tab, site):
    return reopen(tab, site[0].as_uri())


def _headline(pg) -> list[dict]:
    return pg.eval_on_selector_all(
        "#headline-table tbody tr",
        """rs => rs.map(r => ({
        base: r.dataset.base, role: r.querySelector('th .role').textContent,
        method: r.querySelector('td.method').textContent,
        primary: r.querySelector('td.primary').dataset.sort}))""",
    )


def _choose_split(pg, label: str) -> None:
    """Choose the headline's split ``label`` and wait until it is drawn: a split after the first loads its data file."""
    pg.select_option("form.headline-controls select[name=split]", label=label)
    wait_until(pg, "() => !document.querySelector('.headline-empty').textContent.startsWith('Loading')")


def test_headline_is_the_first_table_with_the_rows_of_each_base(page, site):
    assert page.evaluate("document.querySelector('table').id") == "headline-table"
    rows = _headline(page)
    res = site[1]
    bases = sorted(set(res.loc[(res.family != "single") & (res.split == "test"), "base"]))
    assert sorted({r["base"] for r in rows}) == bases
    for b in bases:
        roles = [r["role"] for r in rows if r["base"] == b]
        assert roles.count("base alone") == 1
        cheap = ((res.base == b) & (res.family == "duo") & (res.balance <= 0.2) & (res.split == "test")).any()
        assert sum(r.startswith("best duo, balance ≤ 0.2") for r in roles) == int(cheap)
    assert sum(r["role"].startswith("best duo, balance ≤ 0.2") for r in rows) >= 6
    assert [r["role"] for r in rows if r["method"] == "deep_ensemble · mean"] == ["deep ensemble"]
    assert page.locator("#headline-table th.primary").inner_text().startswith("AURC")
    aurc = [float(r["primary"]) for r in rows]
    assert aurc == sorted(aurc)  # lower is better: best first
    others = len([r for r in rows if r["role"] != "base alone"])
    assert page.locator("#headline-table .d").count() == others  # a difference under the ranked value
    for m in ("accuracy", "auroc", "nll", "ece", "sac98"):  # the other metrics: behind the column chooser
        choose_column(page, "form.headline-controls", m)
    assert page.locator("#headline-table .d").count() == others * 6  # ... and under every value
    heads = page.eval_on_selector_all("#headline-table thead th", "ths => ths.map(t => t.textContent)")
    assert heads[1].startswith("AURC") and heads[-1].startswith("SAC@98")  # the ranked metric next to the row
    assert page.problems == []


def test_headline_shows_each_rows_training_budget(page):
    """Beside GFLOPs: the training images and parameters behind each row, compact (4.0k, 23M), as fmt_count writes
    them."""
    from benchmark.report.tables import fmt_count

    heads = "() => [...document.querySelectorAll('#headline-table thead th')].map(t => t.textContent)"
    assert "Train img" not in page.evaluate(heads)  # behind the column chooser
    choose_column(page, "form.headline-controls", "ti")
    choose_column(page, "form.headline-controls", "tp")
    heads = page.evaluate(heads)
    i = heads.index("Train img")
    assert heads[i - 1] == "GFLOPs" and heads[i + 1] == "Trained params"
    rows = page.eval_on_selector_all(
        "#headline-table tbody tr",
        f"""rs => rs.map(r => ({{
        models: r.querySelector('td.members').textContent, g: +r.querySelector('td.gflops').dataset.sort,
        img: r.cells[{i}].textContent, imgSort: r.cells[{i}].dataset.sort, par: r.cells[{i + 1}].textContent}}))""",
    )
    assert rows
    for r in rows:
        members = len(r["models"].split(" + "))
        assert (
            r["img"] == fmt_count(4000 * members) and float(r["imgSort"]) == 4000 * members
        )  # synthetic: 4,000 per member
        assert r["par"] == fmt_count(int(r["g"] * 5e6))  # synthetic: 5 M parameters per GFLOP
    assert any(r["img"] == "4.0k" for r in rows) and any(
        r["img"] == "12k" for r in rows
    )  # a model alone, a 3-member ensemble
    assert page.problems == []


def test_switching_the_primary_metric_reorders_the_headline(page):
    before = _headline(page)
    page.select_option("form.headline-controls select[name=metric]", "accuracy")
    after = _headline(page)
    assert page.locator("#headline-table th.primary").inner_text().startswith("Accuracy")
    acc = [float(r["primary"]) for r in after]
    assert acc == sorted(acc, reverse=True)  # higher is better
    assert [(r["base"], r["method"]) for r in after] != [(r["base"], r["method"]) for r in before]
    _choose_split(page, "shift")
    assert _headline(page) and page.locator(".headline-figs:not([hidden])").count() == 0  # no plots for shift
    assert page.problems == []


def test_page_weight_under_1_mb_and_the_rest_on_demand(page, site):
    r = first_render(page)
    assert r["bytes"] < MB, f"first render loads {r['bytes']} bytes: {[(f.name, f.stat().st_size) for f in r['files']]}"
    assert 0 < r["shared_bytes"] < 1.5 * MB  # the charting library, one copy for every page of a site
    data = list((site[0].parent / "data").glob("*.js"))
    assert len(data) == 6 and sum(f.stat().st_size for f in data) > r["bytes"] / 2  # the other splits wait until opened
    assert site[0].stat().st_size < 300_000
    assert not [f for f in r["files"] if f.parent.name == "headline"]  # the headline's other splits wait too
    splits = headline_json(site[0].parent, inline=True)["suites"][0]["splits"]
    assert "entries" in splits[0] and all(set(sp) == {"name", "file"} for sp in splits[1:]) and len(splits) > 2
    assert len(list((site[0].parent / "data" / "headline").glob("*.js"))) == len(splits) - 1
    last = page.locator("details.split").last
    last.locator("summary").click()
    wait_until(page, "() => document.querySelectorAll('details.split[data-ready]').length == 2")
    assert last.locator("table.results tbody tr").count() == 100  # paged
    last.locator(".pager button").click()
    assert last.locator("table.results tbody tr").count() == 200
    assert page.problems == []


def test_another_split_of_the_headline_loads_when_chosen(page, site):
    """Only the first split's headline is in the page; choosing another loads its data file once, and the table then
    shows that split's rows in that file's order for the chosen metric."""
    head = headline_json(site[0].parent)
    for sp in head["suites"][0]["splits"][1:3]:
        _choose_split(page, sp["name"])
        assert page.locator(".headline-empty").is_hidden()
        shown = [(r["base"], r["role"]) for r in _headline(page)]
        assert shown == [(sp["entries"][i]["b"], role) for i, role in sp["order"][head["default"]]] and shown
    sp = head["suites"][0]["splits"][1]
    page.select_option("form.headline-controls select[name=split]", label=sp["name"])  # loaded: drawn at once
    page.select_option("form.headline-controls select[name=metric]", "accuracy")
    assert [(r["base"], r["role"]) for r in _headline(page)] == [
        (sp["entries"][i]["b"], role) for i, role in sp["order"]["accuracy"]
    ]
    files = page.evaluate("[...document.scripts].map(s => s.getAttribute('src')).filter(s => s?.includes('headline/'))")
    assert sorted(files) == sorted(sp["file"] for sp in head["suites"][0]["splits"][1:3])  # each loaded once
    assert page.problems == []


def test_a_headline_split_whose_file_is_missing_says_so(tab, site, tmp_path):
    shutil.copytree(site[0].parent, tmp_path / "r")
    head = headline_json(tmp_path / "r", inline=True)
    gone = head["suites"][0]["splits"][1]
    (tmp_path / "r" / gone["file"]).unlink()
    pg = reopen(tab, (tmp_path / "r" / "index.html").as_uri())
    pg.select_option("form.headline-controls select[name=split]", label=gone["name"])
    wait_until(pg, "() => document.querySelector('.headline-empty').textContent.startsWith('Could not load')")
    assert pg.locator(".headline-empty").inner_text() == f"Could not load {gone['file']}."
    assert pg.locator("#headline-table tbody tr").count() == 0
    assert sorted(pg.problems) == [  # the missing file's request and its console line, nothing else
        "console: Failed to load resource: net::ERR_FILE_NOT_FOUND",
        f"request failed: {(tmp_path / 'r' / gone['file']).as_uri()}",
    ]
    pg.select_option("form.headline-controls select[name=split]", index=0)  # the first split: drawn again
    assert pg.locator("#headline-table tbody tr").count() > 0 and pg.locator(".headline-empty").is_hidden()
    pg.select_option("form.headline-controls select[name=split]", label=gone["name"])  # chosen again: said again
    assert pg.locator(".headline-empty").inner_text() == f"Could not load {gone['file']}."
    assert pg.locator("#headline-table tbody tr").count() == 0
    det = pg.locator("details.split").last  # a full table's file, through the same loader: said on opening
    (tmp_path / "r" / det.get_attribute("data-file")).unlink()
    det.locator("summary").click()
    wait_until(pg, "() => !document.querySelector('details.split:last-of-type .no-match').hidden")
    assert det.locator(".no-match").inner_text() == f"Could not load {det.get_attribute('data-file')}."


def test_notes_are_folded_away(page):
    assert page.evaluate("document.getElementById('notes') === null || !document.getElementById('notes').open")


@pytest.fixture(scope="module")
def noisy_site(tmp_path_factory):
    cfg = ReportConfig(plot_metrics=("aurc",), plot_splits=("test",), formats=())
    return build_report(
        make_inputs(noisy_results(), config=cfg, zoo=SEEDED_ZOO), tmp_path_factory.mktemp("noisy") / "r", progress=False
    )


def test_a_noise_dominated_split_says_so_and_shows_no_ranks(tab, noisy_site):
    pg = reopen(tab, noisy_site.as_uri())
    head = headline_json(noisy_site.parent)
    flags = {
        sp["name"]: [m[4] for i, _ in sp["order"][head["default"]] for m in sp["entries"][i]["m"]]
        for sp in head["suites"][0]["splits"]
    }  # the rows shown: those of the default metric, every metric
    ranks = (
        "() => [...document.querySelectorAll('#headline-table tbody th.row-name')]"
        ".map(th => th.querySelector('.rank')?.textContent ?? '')"
    )
    note = pg.locator(".noise-note")
    for m in head["metrics"]:  # every metric's column (the ranked one is always shown)
        if m["key"] != head["default"]:
            choose_column(pg, "form.headline-controls", m["key"])
    # test split (ranked for AURC): no notice, ranks 1..n; every difference within the seed noise marked and greyed
    assert note.is_hidden()
    got = pg.evaluate(ranks)
    assert got == [str(i + 1) for i in range(len(got))] and len(got) > 5
    assert pg.locator("#headline-table .mark.seed").count() == sum(1 for f in flags["test"] if f & 4) > 0
    assert pg.locator("#headline-table td.within-noise").count() == pg.locator("#headline-table .mark.seed").count()
    choose_column(pg, "form.headline-controls", "seed")
    assert set(
        pg.eval_on_selector_all("#headline-table td.seed-source", "ts => ts.map(t => t.textContent.split(' ')[0])")
    ) == {"", "own", "fallback"}
    # shift split: the seeds disagree more than the methods differ
    _choose_split(pg, "shift")
    assert note.is_visible()
    shift = next(sp for sp in head["suites"][0]["splits"] if sp["name"] == "shift")
    seed_sd, median, _ = shift["noise"][[m["key"] for m in head["metrics"]].index(head["default"])]
    assert note.inner_text() == (
        "Not ranked: typical differences on this split are within the training-seed spread. "
        f"AURC: median |Δ| {fmt_metric(median)} < 2 × {fmt_metric(seed_sd)}, the largest seed "
        "spread of a model alone; rows by base."
    )
    got = pg.evaluate(ranks)
    assert got and set(got) == {""}
    assert pg.evaluate("document.getElementById('headline-table').classList.contains('unranked')")
    bases = pg.eval_on_selector_all("#headline-table tbody tr", "rs => rs.map(r => r.dataset.base)")
    assert bases == sorted(bases)  # the fixed order: by base
    _choose_split(pg, "test")
    assert note.is_hidden() and pg.evaluate(ranks)[0] == "1"
    assert pg.problems == []
