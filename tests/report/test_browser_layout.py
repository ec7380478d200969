"""The leaderboard at a glance on a laptop (1366x768) and a phone (390x844), in real headless Chromium, from the
rendered page: the report stage's page (``reports/index.html``) and the published site's suite page, both built
from the committed embedded bundle (the numbers a reader sees; no pipeline run).

Asserted: no page-level sideways scroll (also with every folded part open); in the first screen at 1366x768,
unscrolled, the summary sentences, the Pareto chart and the headline's ranked column (its header, the first row's
value, the first value with its delta); the ranked metric's header and the first row's value inside the window; the
tables without sideways scroll at 1366 and scrolling inside their own box, the row's name fixed, on the phone; the
filters and the column chooser change the table; axe-core (vendored: :func:`benchmark.report.assets.axe_js`) finds
no serious or critical violation; the greyed values keep a 4.5:1 contrast; keyboard focus is visible.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import CHROMIUM, reopen
from report_synth import choose_column, wait_until

from benchmark.report import ReportConfig, ReportInputs, build_report, results_from_frame

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found: apt-get install chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install playwright")

ROOT = Path(__file__).resolve().parents[2]
LAPTOP, PHONE = {"width": 1366, "height": 768}, {"width": 390, "height": 844}
SIZES = [pytest.param(LAPTOP, id="1366x768"), pytest.param(PHONE, id="390x844")]
PAGES = ["report", "site"]
OVERFLOW = "() => [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]"
RECT = (
    "e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; }"
)


def embedded_bundle() -> Path:
    """The newest committed bundle of the embedded default (what the README and the site show)."""
    return sorted(p.parent for p in (ROOT / "leaderboard" / "embedded").glob("*/manifest.json"))[-1]


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, str]:
    """``report``: the report stage's page of the committed bundle's rows (static figures of the test split drawn, as
    the stage draws them, below the headline); ``site``: ``publish`` of the committed bundles, its embedded page."""
    import yaml

    from benchmark.bundle.schema import load_bundle
    from benchmark.bundle.site import publish
    from benchmark.storage.results_schema import COLUMNS

    out = tmp_path_factory.mktemp("layout")
    b = load_bundle(embedded_bundle(), check_arch=False)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    figures = {"plot_metrics": ["aurc", "ood_auroc"], "plot_splits": ["test"], "dpi": 40}  # fewer figures: quicker
    cfg = ReportConfig.from_params(params | {"report": params["report"] | figures})
    results, notes = results_from_frame(b.rows[list(COLUMNS)].copy(), source="the committed bundle")
    inputs = ReportInputs(
        results=results,
        models=b.models,
        zoo=b.manifest["zoo"],
        params=params,
        lock=b.lock,
        config=cfg,
        notices=notes,
        sources={"results": "results/metrics.csv"},
        paired=b.paired,
    )
    report = build_report(inputs, out / "reports", progress=False)
    site, problems = publish(ROOT / "leaderboard", out / "site", progress=False, repo=ROOT)
    assert problems == []
    others = [
        site,
        site.parent / "embedded" / "entries.html",
        *sorted((site.parent / "bundles").glob("*/*/index.html")),
    ]
    return {
        "report": report.as_uri(),
        "site": (site.parent / "embedded" / "index.html").as_uri(),
        "others": [p.as_uri() for p in others],
    }


def open_page(tab, url: str, size: dict):
    """The page at ``size``, its headline, first full table and Pareto chart drawn."""
    pg = reopen(tab, url, size)
    pg.wait_for_selector("details.split[data-ready]", state="attached")
    pg.wait_for_selector(".chart[data-ready]", state="attached")
    return pg


def no_sideways_scroll(pg) -> None:
    doc, body, width = pg.evaluate(OVERFLOW)
    assert doc <= width and body <= width, f"the page is {max(doc, body)} px wide in a {width} px window"


def rect(pg, selector: str) -> dict:
    return pg.locator(selector).first.evaluate(RECT)


def inside(r: dict, size: dict, *, vertically: bool = True) -> bool:
    ok = r["left"] >= -0.5 and r["right"] <= size["width"] + 0.5 and r["right"] > r["left"]  # (sub-pixel layout)
    return ok and (not vertically or (r["top"] >= -0.5 and r["bottom"] <= size["height"] + 0.5))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("which", PAGES)
def test_no_page_level_sideways_scroll_even_with_everything_open(tab, pages, which, size):
    pg = open_page(tab, pages[which], size)
    no_sideways_scroll(pg)
    pg.evaluate(
        "() => document.querySelectorAll('details').forEach(d => { d.open = true; })"
    )  # notes, guide, tables...
    wait_until(pg, "() => [...document.querySelectorAll('details.split')].every(d => d.dataset.ready)")
    pg.wait_for_timeout(200)  # plotly re-lays out a resized chart
    no_sideways_scroll(pg)
    assert pg.problems == []


@pytest.mark.parametrize("which", PAGES)
def test_the_first_screen_at_1366_gives_the_answer_the_chart_and_the_ranked_column(tab, pages, which):
    """Unscrolled, at 1366x768: every split's sentence, the Pareto chart of the ranked metric against FLOPs and the
    headline table's ranked column (its header, the first row's value and the first value with its Δ), each box
    wholly inside the window."""
    pg = open_page(tab, pages[which], LAPTOP)
    assert pg.evaluate("() => [window.scrollX, window.scrollY]") == [0, 0]
    first = pg.locator("ul.summary.lead li").first
    assert first.inner_text().startswith("test · AURC ↓ — lite")  # the split, its ranked metric, then the cheap duo
    assert " vs " in first.inner_text() and " alone (Δ\u00a0" in first.inner_text()
    assert inside(first.evaluate(RECT), LAPTOP), "the summary sentence is not in the first screen"
    chart = pg.locator(".chart").first
    assert inside(chart.evaluate(RECT), LAPTOP), "the Pareto chart is not in the first screen"
    assert (chart.get_attribute("data-metric"), chart.get_attribute("data-x"), chart.get_attribute("data-split")) == (
        "aurc",
        "gflops",
        "embedded/test",
    )  # the ranked metric against FLOPs
    assert int(chart.get_attribute("data-points")) > 20
    splits = pg.eval_on_selector_all("ul.summary li", "ls => ls.map(l => l.dataset.split)")
    assert splits[:3] == ["test", "shift", "ood"] and all(
        inside(r, LAPTOP) for r in pg.eval_on_selector_all("ul.summary li", f"ls => ls.map({RECT})")
    )  # one sentence per split, every one in the first screen
    # the embedded default: every split noise-dominated, said once above the sentences, not in each
    assert "on every split the typical differences are within it" in pg.locator(".glance-key").inner_text()
    texts = pg.eval_on_selector_all("ul.summary li", "ls => ls.map(l => l.textContent)")
    assert not any("Typical differences" in t for t in texts)
    header = pg.locator("#headline-table thead th.primary")
    assert header.inner_text().startswith("AURC")
    assert inside(header.evaluate(RECT), LAPTOP), (
        "the ranked column's header is not in the first screen",
        header.evaluate(RECT),
    )
    row = pg.locator("#headline-table tbody tr").first
    value = row.locator("td.primary")
    assert value.locator(".v").inner_text() and inside(value.evaluate(RECT), LAPTOP), value.evaluate(RECT)
    assert inside(row.locator("th.row-name").evaluate(RECT), LAPTOP)  # with its row's name
    delta = pg.locator("#headline-table tbody td.primary:has(.d)").first  # the first value with its Δ
    assert delta.locator(".d").inner_text().startswith("Δ ")
    assert inside(delta.evaluate(RECT), LAPTOP), delta.evaluate(RECT)
    assert not pg.locator("#how-to-read").evaluate("d => d.open")  # the notation waits behind "How to read this"
    assert not pg.locator("details.notation").evaluate("d => d.open")
    assert pg.problems == []


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("which", PAGES)
def test_the_ranked_metric_and_its_first_value_are_in_the_window(tab, pages, which, size):
    pg = open_page(tab, pages[which], size)
    pg.locator("#headline-table").evaluate("t => t.scrollIntoView({block: 'start'})")
    header = pg.locator("#headline-table thead th.primary")
    assert header.inner_text().startswith("AURC")
    assert inside(header.evaluate(RECT), size), header.evaluate(RECT)
    value = pg.locator("#headline-table tbody tr").first.locator("td.primary")
    assert inside(value.evaluate(RECT), size), value.evaluate(RECT)
    wraps = (
        "sel => { const w = document.querySelector(sel).closest('.table-wrap'); "
        "return [w.scrollWidth, w.clientWidth]; }"
    )
    if size is LAPTOP:  # the default columns fit: no sideways scroll in the headline nor in the full table
        for table in ("#headline-table", "details.split[open] table.results"):
            scroll, client = pg.evaluate(wraps, table)
            assert scroll <= client, f"{table}: {scroll} px of content in a {client} px box"
    else:  # the table scrolls inside its box; the row's name stays at its left edge
        wrap = pg.locator("#headline-table").locator("xpath=..")
        left = wrap.evaluate(RECT)["left"]
        wrap.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
        name = pg.locator("#headline-table tbody tr").first.locator("th.row-name")
        assert abs(name.evaluate(RECT)["left"] - left) < 1
        assert pg.evaluate(wraps, "#headline-table")[0] > pg.evaluate(wraps, "#headline-table")[1]  # it did scroll
        assert name.locator(".who").is_visible()  # the models, under the row's name on a phone
    no_sideways_scroll(pg)
    assert pg.problems == []


@pytest.mark.parametrize("which", PAGES)
def test_at_1280_the_default_columns_fit_without_sideways_scroll(tab, pages, which):
    size = {"width": 1280, "height": 800}
    pg = open_page(tab, pages[which], size)
    for table in ("#headline-table", "details.split[open] table.results"):
        wrap = pg.locator(table).locator("xpath=ancestor::div[contains(@class, 'table-wrap')][1]")
        scroll, client = wrap.evaluate("w => [w.scrollWidth, w.clientWidth]")
        assert scroll <= client, f"{table}: {scroll} px of content in a {client} px box"
        heads = pg.eval_on_selector_all(f"{table} thead th", "ths => ths.map(t => t.textContent)")
        assert heads[1].startswith("AURC") and "Models" in heads and "GFLOPs" in heads, heads
    deltas = pg.eval_on_selector_all(
        "#headline-table tbody tr:not(.kind-alone) td.primary .d", "ds => ds.map(d => d.textContent)"
    )
    assert len(deltas) > 10 and all(d.startswith("Δ") for d in deltas)  # the ranked metric with its delta
    no_sideways_scroll(pg)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("which", PAGES)
def test_the_filters_and_the_column_chooser_change_the_table(tab, pages, which, size):
    pg = open_page(tab, pages[which], size)
    rows = (
        "() => [...document.querySelectorAll('details.split[open] table.results tbody tr')].map(r => r.dataset.family)"
    )
    points = "() => +document.querySelector('.chart').dataset.points"
    before, drawn = pg.evaluate(rows), pg.evaluate(points)
    assert len(set(before)) > 3
    form = pg.locator("form.filters").first
    form.scroll_into_view_if_needed()
    assert inside(form.evaluate(RECT), size, vertically=False)  # usable: all of it on the screen
    pg.select_option("form.filters select[name=family]", "duo")
    after = pg.evaluate(rows)
    assert set(after) == {"duo"} and 0 < len(after) < len(before)
    wait_until(pg, f"n => {points[6:]} !== n", drawn)  # the chart follows the filters
    heads = "() => [...document.querySelectorAll('details.split[open] table.results thead th')].map(t => t.textContent)"
    assert pg.evaluate(heads)[:2] == ["Method", "AURC ↓"]  # the row's name, then the ranked metric
    assert "img/s" not in pg.evaluate(heads)
    choose_column(pg, "form.filters", "throughput")
    choose_column(pg, "form.filters", "models", on=False)
    got = pg.evaluate(heads)
    assert "img/s" in got and "Models" not in got
    cells = pg.eval_on_selector_all("details.split[open] table.results tbody tr", "rs => rs.map(r => r.cells.length)")
    assert set(cells) == {len(got)}
    no_sideways_scroll(pg)
    assert pg.problems == []


def _axe(pg) -> list[dict]:
    from benchmark.report.assets import axe_js

    pg.evaluate(axe_js() + "\n;0")  # evaluated outside the page's Content-Security-Policy, as wait_until is
    return pg.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                       nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
    }""")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("which", PAGES)
def test_axe_finds_no_serious_violation(tab, pages, which, size):
    pg = open_page(tab, pages[which], size)
    pg.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")  # everything on show
    wait_until(pg, "() => [...document.querySelectorAll('details.split')].every(d => d.dataset.ready)")
    bad = [v for v in _axe(pg) if v["impact"] in ("serious", "critical")]
    assert bad == [], bad


def _luminance(rgb) -> float:
    def lin(c):
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg, bg) -> float:
    """WCAG 2 contrast ratio of two sRGB colours."""
    a, b = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


COLOURS = """els => els.map(e => {
    const rgb = s => s.match(/[\\d.]+/g).map(Number);
    let bg = null, o = 1;
    for (let p = e; p && !bg; p = p.parentElement) {
        const c = rgb(getComputedStyle(p).backgroundColor);
        if (c.length < 4 || c[3] > 0) bg = c;
        o *= +getComputedStyle(p).opacity;
    }
    return {fg: rgb(getComputedStyle(e).color), bg: bg || [255, 255, 255], opacity: o, text: e.textContent};
})"""


def test_greyed_values_within_the_noise_keep_a_4_5_contrast(tab, pages):
    pg = open_page(tab, pages["site"], LAPTOP)
    for m in ("accuracy", "nll", "ece"):
        choose_column(pg, "form.headline-controls", m)
    found = pg.eval_on_selector_all(
        "#headline-table tr.within-noise td, #headline-table td.within-noise .d, "
        "#headline-table .mark.not-finding, #headline-table .mark.seed",
        COLOURS,
    )
    assert len(found) > 20  # the embedded default: most differences are within the seed noise
    for f in found:
        assert f["opacity"] == 1 and (len(f["fg"]) < 4 or f["fg"][3] == 1), f  # no see-through grey
        assert contrast(f["fg"], f["bg"]) >= 4.5, f


@pytest.mark.parametrize("which", PAGES)
def test_keyboard_focus_is_visible(tab, pages, which):
    pg = open_page(tab, pages[which], LAPTOP)
    kinds = set()
    for _ in range(40):
        pg.keyboard.press("Tab")
        f = pg.evaluate("""() => { const e = document.activeElement, s = getComputedStyle(e);
            return {tag: e.tagName, style: s.outlineStyle, width: parseFloat(s.outlineWidth),
                    color: s.outlineColor}; }""")
        if f["tag"] in ("BODY", "HTML") or f["tag"] == "DIV" and f["style"] == "none":
            continue  # plotly's own chart parts
        assert f["style"] != "none" and f["width"] >= 2, f
        kinds.add(f["tag"])
    assert {"A", "SELECT", "INPUT", "SUMMARY"} <= kinds
    assert pg.problems == []


@pytest.mark.parametrize("size", SIZES)
def test_the_sites_other_pages_fit_and_pass_axe(tab, pages, size):
    """The site's index, the suite's entries and a bundle's provenance page: no sideways scroll (their tables scroll
    in their own boxes), no serious or critical axe-core violation."""
    assert len(pages["others"]) >= 3
    for url in pages["others"]:
        pg = reopen(tab, url, size)
        no_sideways_scroll(pg)
        bad = [v for v in _axe(pg) if v["impact"] in ("serious", "critical")]
        assert bad == [], (url, bad)
        assert pg.problems == []
