"""The interactive Pareto charts in real headless Chromium, opened from the file system.

Every request the page makes is intercepted: only the report's own files (``file://``) may be
loaded. The expected points, frontiers and hover texts are computed here from the results table
(pandas, :func:`benchmark.core.pareto.pareto_front`), independently of the page's JavaScript.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from chromium import CHROMIUM, reopen
from report_synth import EVIL, make_inputs, synthetic_results, wait_until

from benchmark.core.metric_info import METRICS
from benchmark.core.pareto import pareto_front
from benchmark.report import ReportConfig, build_report
from benchmark.report.tables import default_view, method_label, wide_table

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found: apt-get install chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install playwright")

IMG = '<img src=x onerror="window.__pwned=1">'
MODELS = {IMG: 0.5, "resnet50": 4.1, "tiny": 0.06, EVIL: 1.7, "vit": 9.0}
RTOL = 1e-5  # the page's data keeps 6 significant digits
POINTS = "n => document.querySelectorAll('.chart .scatterlayer .point').length == n"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    res = synthetic_results(models=MODELS, fits=("converged", "paper-exact"), splits=("test", "shift"))
    cfg = ReportConfig(plot_metrics=("accuracy", "aurc"), plot_splits=("test",))
    page = build_report(
        make_inputs(res, config=cfg), tmp_path_factory.mktemp("charts") / "reports", progress=False, figures=False
    )
    return page, default_view(wide_table(make_inputs(res).results), cfg.fit, cfg.confidence)


@pytest.fixture(scope="module")
def watched(tab):
    """The module's tab with every request it makes recorded and only ``file://`` ones let through."""
    tab.requests = []

    def intercept(route):
        tab.requests.append(route.request.url)
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            route.abort()

    tab.route("**/*", intercept)
    return tab


@pytest.fixture
def page(watched, report):
    watched.requests.clear()
    pg = reopen(watched, report[0].as_uri())
    pg.wait_for_selector(".chart[data-ready]", state="attached")
    pg.locator(".chart-panel").scroll_into_view_if_needed()
    yield pg
    root = report[0].parent.as_uri()
    assert pg.requests and all(u.startswith(root + "/") for u in pg.requests), pg.requests  # nothing from a network
    assert pg.evaluate("window.__pwned") is None
    assert pg.problems == []


def expected(view, metric: str, x: str = "gflops", split: str = "test"):
    """The chart's points for ``metric`` against ``x`` on ``split`` (default view, as the page rounds values)."""
    v = view[(view["split"] == split) & np.isfinite(view[metric].astype(float))].copy()
    v["y"] = [float(f"{a:.6g}") for a in v[metric]]
    if x == "gflops":
        v["x"] = v["gflops"].astype(float)
        return v[v["x"] > 0]
    bal = v["balance"].astype(float)
    duo_bases = set(v.loc[np.isfinite(bal), "base"])
    v["x"] = np.where(np.isfinite(bal), bal, 0.0)
    return v[np.isfinite(bal) | ((v["family"] == "single") & v["base"].isin(duo_bases))]


def chart(page) -> list[dict]:
    """The chart's traces: kind, name, x, y, visibility, and each marker's pixel position from the axes."""
    return page.evaluate("""() => {
      const gd = document.querySelector('.chart'), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
      const r = gd.getBoundingClientRect();
      return gd._fullData.map(t => ({kind: t.meta.kind, name: t.name, visible: t.visible, x: t.x, y: t.y,
        px: t.x.map(v => r.left + xa._offset + xa.c2p(v)), py: t.y.map(v => r.top + ya._offset + ya.c2p(v)),
        points: t.meta.points || null}));
    }""")


def wait_drawn(page, **attrs):
    sel = ".chart" + "".join(f"[data-{k}='{v}']" for k, v in attrs.items())
    page.wait_for_selector(sel, state="attached")


def test_chart_draws_every_point_of_the_default_view(page, report):
    want = expected(report[1], "aurc")
    traces = chart(page)
    fams = {t["name"]: t for t in traces if t["kind"] == "family"}
    assert set(fams) == set(want["family"])  # names as escaped text, see test_hostile_names_stay_text
    for fam, g in want.groupby("family"):
        got = sorted(zip(fams[fam]["x"], fams[fam]["y"]))
        assert np.allclose(got, sorted(zip(g["x"], g["y"])), rtol=RTOL)
    assert page.locator(".chart .scatterlayer .point").count() == len(want)
    assert (
        page.locator(".chart .xtitle").text_content().startswith("total GFLOPs per image (log scale)")
    )  # 0.06 .. 27 GFLOPs
    assert "lower is better" in page.locator(".chart .ytitle").text_content()


def test_frontiers_are_the_non_dominated_points(page, report):
    hib = METRICS["aurc"].higher_is_better
    want = expected(report[1], "aurc")
    traces = chart(page)
    front = next(t for t in traces if t["kind"] == "frontier-all")
    on = want[pareto_front(want["x"].to_numpy(), want["y"].to_numpy(), hib)].sort_values(["x", "y"])
    assert np.allclose(sorted(zip(front["x"], front["y"])), list(zip(on["x"], on["y"])), rtol=RTOL)
    bases = [t for t in traces if t["kind"] == "frontier"]
    assert len(bases) >= 3
    for t in bases:
        mine = want[want["base"] == t["name"].replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")]
        on = mine[pareto_front(mine["x"].to_numpy(), mine["y"].to_numpy(), hib)].sort_values(["x", "y"])
        assert np.allclose(sorted(zip(t["x"], t["y"])), list(zip(on["x"], on["y"])), rtol=RTOL), t["name"]


def _hover(page, px: float, py: float) -> str:
    """Move the mouse onto (px, py) and read the hover label (plotly throttles hover events to one per 50 ms: the
    last move comes after a pause)."""
    page.mouse.move(px + 1, py)
    page.wait_for_timeout(120)
    page.mouse.move(px, py)
    page.wait_for_timeout(120)
    page.wait_for_selector(".chart .hoverlayer .hovertext", state="attached")
    return page.locator(".chart .hoverlayer .hovertext").first.text_content()


def _isolated(traces, want, family: str) -> tuple[dict, tuple[float, float]]:
    """The row of ``want`` (family ``family``) drawn farthest from every other marker, and its pixel position."""
    marks = [
        (t["x"][i], t["y"][i], t["px"][i], t["py"][i])
        for t in traces
        if t["kind"] == "family"
        for i in range(len(t["x"]))
    ]
    best, where, gap = None, None, -1.0
    for r in want[want["family"] == family].to_dict("records"):
        px, py = next(
            (m[2], m[3]) for m in marks if np.isclose(m[0], r["x"], rtol=RTOL) and np.isclose(m[1], r["y"], rtol=RTOL)
        )
        d = min(
            np.hypot(m[2] - px, m[3] - py)
            for m in marks
            if not (np.isclose(m[0], r["x"], rtol=RTOL) and np.isclose(m[1], r["y"], rtol=RTOL))
        )
        if d > gap:
            best, where, gap = r, (px, py), d
    assert gap > 12, f"no {family} point stands alone ({gap:.1f} px)"
    return best, where


def test_hovering_a_duo_names_its_pair_cost_and_value(page, report):
    want = expected(report[1], "aurc")
    row, (px, py) = _isolated(chart(page), want, "duo")
    marker = page.evaluate(
        """([px, py]) => [...document.querySelectorAll('.chart .scatterlayer .point')].map(p => {
        const b = p.getBoundingClientRect(); return Math.hypot(b.x + b.width / 2 - px, b.y + b.height / 2 - py); })
        .reduce((a, b) => Math.min(a, b))""",
        [px, py],
    )
    assert marker < 2  # the axes' pixel is where the marker is drawn
    text = _hover(page, px, py)
    assert method_label(row["family"], row["method"]) in text
    assert f"base: {row['base']}" in text and f"sidekick: {row['sidekick']}" in text
    assert f"FLOPs balance: {_js_number(row['balance'])}" in text and f"GFLOPs: {_js_number(row['gflops'])}" in text
    lo, hi = _metric(row["aurc:lo"]), _metric(row["aurc:hi"])
    assert f"AURC: {_metric(row['aurc'])} [{lo}, {hi}]" in text


def _js_number(v: float, digits: int = 4) -> str:
    """``String(parseFloat(v.toPrecision(digits)))`` in JavaScript."""
    x = float(f"{v:.{digits}g}")
    return str(int(x)) if x.is_integer() else repr(x)


def _metric(v: float) -> str:
    """The page's metric format (benchmark.report.tables.fmt_metric)."""
    return f"{v:.5f}" if abs(v) < 0.1 else f"{v:.4f}"


def test_switching_metric_and_axis_redraws(page, report):
    page.select_option(".chart-controls select[name=metric]", "accuracy")
    wait_drawn(page, metric="accuracy", x="gflops")
    want = expected(report[1], "accuracy")
    got = sorted((x, y) for t in chart(page) if t["kind"] == "family" for x, y in zip(t["x"], t["y"]))
    assert np.allclose(got, sorted(zip(want["x"], want["y"])), rtol=RTOL)
    assert "Accuracy (higher is better)" in page.locator(".chart .ytitle").text_content()
    page.select_option(".chart-controls select[name=x]", "balance")
    wait_drawn(page, metric="accuracy", x="balance")
    want = expected(report[1], "accuracy", "balance")
    traces = chart(page)
    got = sorted((x, y) for t in traces if t["kind"] == "family" for x, y in zip(t["x"], t["y"]))
    assert np.allclose(got, sorted(zip(want["x"], want["y"])), rtol=RTOL)
    assert {t["name"] for t in traces if t["kind"] == "family"} == {"duo", "single"}
    assert not any(t["kind"] == "frontier-all" for t in traces)  # per base only, each with its base alone at 0
    assert page.locator(".chart .xtitle").text_content().startswith("FLOPs balance")


def test_switching_split_redraws(page, report):
    assert page.locator(".chart").get_attribute("data-split") == "embedded/test"
    page.select_option(".chart-controls select[name=split]", "embedded/shift")
    wait_drawn(page, split="embedded/shift", metric="aurc")
    want = expected(report[1], "aurc", split="shift")
    got = sorted((x, y) for t in chart(page) if t["kind"] == "family" for x, y in zip(t["x"], t["y"]))
    assert np.allclose(got, sorted(zip(want["x"], want["y"])), rtol=RTOL)
    test = expected(report[1], "aurc")
    assert not np.allclose(got, sorted(zip(test["x"], test["y"])), rtol=RTOL)  # not the test split's points


def test_legend_click_hides_and_shows_a_family(page, report):
    n_duo = (expected(report[1], "aurc")["family"] == "duo").sum()
    total = page.locator(".chart .scatterlayer .point").count()
    item = page.locator(".chart .legend .traces", has_text="duo")
    assert item.count() == 1
    item.locator(".legendtoggle").click()
    wait_until(page, POINTS, int(total - n_duo))
    assert next(t for t in chart(page) if t["name"] == "duo")["visible"] == "legendonly"
    item.locator(".legendtoggle").click()
    wait_until(page, POINTS, total)


def test_suite_filters_apply_to_the_chart(page, report):
    page.select_option("form.filters select[name=family]", "single")
    wait_until(page, POINTS, int((expected(report[1], "aurc")["family"] == "single").sum()))
    assert {t["name"] for t in chart(page) if t["kind"] == "family"} == {"single"}


def test_hostile_names_stay_text(page, report):
    legend = page.locator(".chart .legend").text_content()
    assert IMG in legend and EVIL in legend  # frontier items, named by base: shown as written
    assert page.locator(".chart img, .chart script").count() == 0
    want = expected(report[1], "aurc")
    star = want[(want["family"] == "single") & (want["base"] == IMG)].iloc[0]
    t = next(t for t in chart(page) if t["name"] == "single")
    i = next(
        i
        for i in range(len(t["x"]))
        if np.isclose(t["x"][i], star["x"], rtol=RTOL) and np.isclose(t["y"][i], star["y"], rtol=RTOL)
    )
    assert f"base: {IMG}" in _hover(page, t["px"][i], t["py"][i])
    assert page.locator(".hoverlayer img").count() == 0


def test_the_page_forbids_network_loads(page):
    csp = page.locator("meta[http-equiv=Content-Security-Policy]").get_attribute("content")
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp
    seen = len(page.requests)
    got = page.evaluate("""() => fetch('https://example.invalid/x.js').then(() => 'fetched', () => 'blocked')""")
    assert got == "blocked" and len(page.requests) == seen  # refused by the page itself, before any request
    page.problems.clear()  # the refusal is reported on the console
