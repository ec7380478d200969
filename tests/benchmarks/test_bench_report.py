"""First render of the leaderboard in headless Chromium, on a results table of the embedded run's size.

The time from navigation start until the headline table and the first full table
are rendered (the page's ``performance.mark``s), opened from the file system; the
Pareto chart (drawn once plotly.js has loaded, after the headline) within 2 s.
The paper-scale site's pages: tests/benchmarks/test_bench_site_scale.py.
Target: under 1 s. Run for real with
``pytest --benchmark-enable tests/benchmarks/test_bench_report.py``: only then are the milliseconds checked. In the
test command (benchmarks disabled, the other xdist worker busy) every run checks what holds on any machine: the chart
is drawn, and a first render loads under 1 MB.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from chromium import CHROMIUM, VIEWPORT  # noqa: E402
from report_synth import big_results, first_render, make_inputs  # noqa: E402

from benchmark.report import ReportConfig, build_report  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found: apt-get install chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install playwright")


def test_bench_first_render(benchmark, tmp_path, browser):
    cfg = ReportConfig(plot_metrics=("aurc",), plot_splits=("test",), formats=("png",), dpi=110)
    url = build_report(
        make_inputs(big_results(), config=cfg), tmp_path / "reports", progress=False, figures=False
    ).as_uri()
    times, charts, weight = [], [], []

    def render():  # a new tab each time: a visitor's first visit (tests/chromium.py)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(url)
        r = first_render(page)
        times.append(r["ms"])
        charts.append(r["chart_ms"])
        weight.append(r["bytes"])
        page.close()

    for _ in range(0 if benchmark.disabled else 3):  # measured: 3 cold renders, then the fixture's 1 + 5
        render()
    benchmark.pedantic(render, rounds=5, iterations=1, warmup_rounds=1)  # the test command: 1 render, no time checked
    assert times and None not in charts  # the chart was drawn every time
    assert max(weight) < 1_000_000, f"first render loads {weight} bytes"  # on any machine: the page's weight
    if benchmark.disabled:  # the test command: milliseconds on a loaded runner are no measurement
        return
    assert statistics.median(times) < 1000, f"first render {times} ms"
    assert statistics.median(charts) < 2000, f"chart drawn after {charts} ms"
