"""The leaderboard in real headless Chromium, opened from the file system (tests/chromium.py: the browser and the
tab each test reopens)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from chromium import CHROMIUM, reopen
from report_synth import EVIL, choose_column, make_inputs, models_table, synthetic_results

from benchmark.report import ReportConfig, build_report
from benchmark.report.tables import KEY

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found: apt-get install chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install playwright")

MODELS = {EVIL: 0.5, "resnet50": 4.1, "tiny": 0.06}


@pytest.fixture(scope="module")
def results():
    res = synthetic_results(models=MODELS, fits=("converged", "paper-exact"))
    nan_row = (res.base == "tiny") & (res.family == "single") & (res.metric == "accuracy") & (res.fit == "converged")
    assert nan_row.sum() == 1
    res.loc[nan_row, "value"] = np.nan
    return res


@pytest.fixture(scope="module")
def page_url(results, tmp_path_factory):
    cfg = ReportConfig(plot_metrics=("accuracy", "aurc"), plot_splits=("test",), dpi=50)
    inputs = make_inputs(results, config=cfg, models=models_table(MODELS), zoo={EVIL: {"arch": "x", "seed": 0}})
    return build_report(inputs, tmp_path_factory.mktemp("site") / "reports", progress=False, figures=False).as_uri()


@pytest.fixture
def page(tab, page_url):
    pg = reopen(tab, page_url)
    pg.wait_for_selector("details.split[data-ready]", state="attached")
    return pg


def _default(results):
    """What the page shows first: converged fit; max confidence, but uq_only exists only as 'published'."""
    keep = (results.fit == "converged") & ((results.confidence == "max") | (results.method == "uq_only"))
    return results[keep].drop_duplicates(KEY)


def _visible_rows(pg):
    """The page renders only the rows that pass the filters."""
    return pg.locator("table.results tbody tr")


def _column(pg, col):
    return pg.eval_on_selector_all(
        "table.results tbody tr", f"rows => rows.map(r => r.cells[{col}].getAttribute('data-sort'))"
    )


def _sorted_as_page(values, ascending):
    nums = [float(v) for v in values if v != "NaN"]
    return [repr(v) for v in sorted(nums, reverse=not ascending)] + ["NaN"] * (len(values) - len(nums))


def test_loads_without_errors_and_with_expected_rows(page, results):
    default = _default(results)
    assert _visible_rows(page).count() == len(default)
    assert (
        page.locator("details.split .count").inner_text()
        == f"{len(default)} of {len(results.drop_duplicates(KEY))} rows"
    )
    page.select_option("form.filters select[name=fit]", "")
    page.select_option("form.filters select[name=confidence]", "")
    assert _visible_rows(page).count() == len(results.drop_duplicates(KEY))
    page.wait_for_selector(".chart[data-ready]", state="attached")  # the Pareto chart (tests: test_browser_charts.py)
    assert page.locator(".chart .scatterlayer .point").count() > 0
    assert page.problems == []


def test_clicking_a_header_sorts_with_nan_last(page, results):
    heads = page.eval_on_selector_all("table.results thead th", "hs => hs.map(h => h.textContent)")
    ACC_COL = next(i for i, h in enumerate(heads) if h.startswith("Accuracy"))
    header = page.locator("table.results thead th").nth(ACC_COL)
    assert header.inner_text().startswith("Accuracy")
    expected = _default(results)
    expected = results.merge(expected[KEY], on=KEY)
    expected = expected[expected.metric == "accuracy"]["value"]
    as_text = ["NaN" if np.isnan(v) else f"{v:.6g}" for v in expected]  # the page data: 6 significant digits
    for ascending in (True, False):
        header.locator("button").click()
        assert header.get_attribute("aria-sort") == ("ascending" if ascending else "descending")
        got = _column(page, ACC_COL)
        assert [float(v) if v != "NaN" else "NaN" for v in got] == [
            float(v) if v != "NaN" else "NaN" for v in _sorted_as_page(as_text, ascending)
        ]
        assert got[-1] == "NaN" and got.count("NaN") == 1
    nan_cell = page.locator("table.results tbody tr:visible td.nan").first
    assert nan_cell.inner_text() == "NaN"
    assert page.problems == []


def test_text_column_sorts_alphabetically(page):
    page.locator("table.results thead th").nth(1).locator("button").click()
    names = page.eval_on_selector_all("table.results tbody tr", "rs => rs.map(r => r.cells[1].textContent)")
    assert names == sorted(names, key=lambda s: s.lower()) or names == sorted(names)
    assert len(set(names)) > 3


def test_filters_hide_rows(page, results):
    default = _default(results)
    page.select_option("form.filters select[name=family]", "duo")
    assert _visible_rows(page).count() == (default.family == "duo").sum()
    families = page.eval_on_selector_all("table.results tbody tr", "rs => rs.map(r => r.dataset.family)")
    assert set(families) == {"duo"}
    page.select_option("form.filters select[name=family]", "")
    page.fill("form.filters input[name=bmin]", "0.1")
    page.fill("form.filters input[name=bmax]", "0.2")
    page.uncheck("form.filters input[name=nobalance]")
    in_range = default[(default.balance >= 0.1) & (default.balance <= 0.2)]
    assert len(in_range) > 0
    assert _visible_rows(page).count() == len(in_range)
    page.select_option("form.filters select[name=fit]", "")
    assert _visible_rows(page).count() == 2 * len(in_range)
    page.select_option("form.filters select[name=confidence]", "published")
    published = results[(results.confidence == "published") & (results.balance >= 0.1) & (results.balance <= 0.2)]
    assert _visible_rows(page).count() == len(published.drop_duplicates(KEY)) > 0
    page.click("form.filters button[type=reset]")  # the page re-filters just after the form resets
    sync_api.expect(_visible_rows(page)).to_have_count(len(default))
    assert page.problems == []


def test_script_model_name_is_text(page):
    scripts = page.eval_on_selector_all("script", "ss => ss.map(s => [s.type, s.getAttribute('src')])")
    # plotly.js from assets/, the headline and chart settings (JSON), the page's script, then its own data files
    assert scripts[:4] == [
        ["", "assets/plotly-basic.min.js"],
        ["application/json", None],
        ["application/json", None],
        ["", None],
    ]
    assert all(src and src.startswith("data/") for _, src in scripts[4:])
    cells = page.locator("table.results tbody td.t", has_text=EVIL)
    assert cells.count() > 0
    assert page.locator("article.model h3", has_text=EVIL).inner_text() == EVIL
    page.select_option("form.filters select[name=base]", EVIL)
    assert {r for r in page.eval_on_selector_all("table.results tbody tr", "rs => rs.map(r => r.dataset.base)")} == {
        EVIL
    }
    choose_column(page, "form.filters", "provenance")
    page.locator(f"td.prov a:text-is('{EVIL}')").first.click()
    assert page.evaluate("decodeURIComponent(location.hash)").startswith("#model-")
    assert page.problems == []  # in particular: no alert dialog
