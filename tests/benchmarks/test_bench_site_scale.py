"""``publish`` at the papers' scale: a synthetic bundle for every suite under suites/ (its zoo, its splits; made
through ``submit`` by tests/benchmarks/paper_scale.py) plus the committed embedded bundle, published together.

Targets (issue 25): publish of all of them within 5 minutes on 2 cores (wall, ``python -m benchmark publish``);
the whole site at most 250 MB with no file over 25 MB; the embedded default's part (its pages, data and bundle
copy, and the shared assets) at most 20 MB; each suite page's first render in Chromium (headline and first full
table drawn, from the file system) under 1 s, and its Pareto chart (plotly.js loads after the headline) within
2 s (ours); publish's CPU time and the site's size grow at
most linearly in rows, measured at 0.25x and 1x the rows (a quarter of each suite's reported splits, ``test``
always: a fourfold growth tells a line from a curve better than a twofold one, and the small size costs less to
make and publish). The 10x estimate (a straight line through the two) is printed and kept in the benchmark's
``extra_info``.

The seconds, the milliseconds and the growth from 0.25x to 1x are checked only when measured
(``--benchmark-enable``); the test command (benchmarks disabled, the other xdist worker busy) makes and publishes
the 1x bundles only and checks what holds on any machine: the site's and its files' sizes, every page renders
without an error and draws its chart, and each page's first render loads under 1 MB.

The bundles are made once and kept in pytest's cache (``.pytest_cache/d/paper-scale/``; the key covers the
generator, the suites, the zoos and the bundle code). Run for real (numbers for the README: a quiet machine)::

    pytest --benchmark-enable tests/benchmarks/test_bench_site_scale.py -s

Run so (benchmarks enabled), the figures are also written to ``results/site_scale.json`` (committed; the README's
and the performance page's generated lines read it: ``python -m benchmark reproduce readme --write``).
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from chromium import CHROMIUM, VIEWPORT  # noqa: E402
from paper_scale import cached_bundles, suite_names  # noqa: E402
from report_synth import first_render  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # the papers' scale: bundles, two publishes, 19 page loads
RECORD = ROOT / "results" / "site_scale.json"
MB = 1_000_000
LIMITS = {
    "publish_s": 300,
    "site_bytes": 250 * MB,
    "file_bytes": 25 * MB,
    "embedded_bytes": 20 * MB,
    "render_ms": 1000,
    "chart_ms": 2000,
}
SLACK = 1.25  # a ratio up to 25% over proportional still counts as linear (timing noise, fixed costs shrink)
SCALES = (0.25, 1.0)
ROUNDS = 3  # renders of every page whose median is checked against the limits
_SITES: dict[float, dict] = {}


@pytest.fixture(scope="module")
def bundles(request, measured):
    """The bundles of each scale measured: 1x alone in the test command (0.25x only serves the growth figures)."""
    cache = request.config.cache.mkdir("paper-scale")
    return {s: cached_bundles(cache, s) for s in (SCALES if measured else SCALES[-1:])}


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("paper-scale-sites")


def _publish(bundles: dict, out_dir: Path, scale: float) -> dict:
    """``python -m benchmark publish`` of the bundles of ``scale`` (a fresh process, as a user runs it): wall and CPU
    seconds, rows, the site's files."""
    folder, rows = bundles[scale]
    site = out_dir / f"site-{scale:g}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "benchmark", "publish", "--bundles", str(folder), "--out", str(site), "--quiet"],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    files = {p.relative_to(site).as_posix(): p.stat().st_size for p in site.rglob("*") if p.is_file()}
    embedded = sum(
        n for f, n in files.items() if f.startswith(("embedded/", "bundles/embedded/", "assets/")) or "/" not in f
    )
    _SITES[scale] = {
        "site": site,
        "wall": wall,
        "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        "rows": sum(rows.values()),
        "suites": rows,
        "bytes": sum(files.values()),
        "files": len(files),
        "largest": max(files.items(), key=lambda kv: kv[1]),
        "embedded_bytes": embedded,
    }
    return _SITES[scale]


def _site(bundles, out_dir, scale: float) -> dict:
    return _SITES.get(scale) or _publish(bundles, out_dir, scale)


def _record(benchmark, **figures) -> None:
    """Merge ``figures`` into ``results/site_scale.json`` (atomically), only when the benchmark really measures."""
    if benchmark.disabled:
        return
    from benchmark.reproduce.timing import machine
    from benchmark.storage.store import write_json

    rec = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    rec.update(figures, limits=LIMITS, machine=machine(), date=time.strftime("%Y-%m-%d"))
    write_json(RECORD, rec)


def _extrapolate(a: dict, b: dict, key: str, rows: float) -> float:
    slope = (b[key] - a[key]) / (b["rows"] - a["rows"])
    return b[key] + slope * (rows - b["rows"])


def test_bench_publish_paper_scale(benchmark, bundles, out_dir):
    # the growth from 0.25x to 1x is a figure of the measured run (the test command publishes 1x alone)
    small = None if benchmark.disabled else _publish(bundles, out_dir, SCALES[0])
    full = benchmark.pedantic(lambda: _publish(bundles, out_dir, 1.0), rounds=1, iterations=1)
    assert set(full["suites"]) == set(suite_names()) | {"embedded"}
    assert full["bytes"] <= LIMITS["site_bytes"], f"site {full['bytes'] / MB:.1f} MB"
    assert full["largest"][1] <= LIMITS["file_bytes"], f"largest file {full['largest']}"
    assert full["embedded_bytes"] <= LIMITS["embedded_bytes"], f"embedded part {full['embedded_bytes'] / MB:.1f} MB"
    if small is None:  # the test command: seconds on a loaded runner are no measurement
        return
    ten = {k: _extrapolate(small, full, k, 10 * full["rows"]) for k in ("wall", "cpu", "bytes")}
    report = {f"{s:g}x": {k: v for k, v in _SITES[s].items() if k not in ("site", "suites")} for s in SCALES}
    report["10x estimate"] = {"rows": 10 * full["rows"], **ten}
    benchmark.extra_info.update({k: {kk: str(vv) for kk, vv in v.items()} for k, v in report.items()})
    print(f"\npaper-scale publish: {report}")
    _record(
        benchmark,
        publish={k: {kk: (list(vv) if kk == "largest" else vv) for kk, vv in v.items()} for k, v in report.items()},
        suites=full["suites"],
    )
    assert full["wall"] <= LIMITS["publish_s"], f"publish took {full['wall']:.0f} s"
    growth = full["rows"] / small["rows"]
    assert growth > 2.5  # the two sizes differ enough to tell a line from a curve
    assert full["cpu"] / small["cpu"] <= SLACK * growth, (
        f"CPU {small['cpu']:.0f} s -> {full['cpu']:.0f} s for rows x{growth:.2f}"
    )
    assert full["bytes"] / small["bytes"] <= SLACK * growth, (
        f"size {small['bytes']} -> {full['bytes']} for rows x{growth:.2f}"
    )


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found: apt-get install chromium")
def test_bench_first_render_paper_scale(benchmark, bundles, out_dir, browser):
    site = _site(bundles, out_dir, 1.0)["site"]
    pages = sorted(p for p in site.glob("*/index.html") if p.parent.name not in ("assets", "bundles"))
    assert {p.parent.name for p in pages} == set(suite_names()) | {"embedded"}
    times: dict[str, list[float]] = {}
    charts: dict[str, list[float]] = {}
    weight: dict[str, int] = {}

    def render(page_path: Path):
        page = browser.new_page(viewport=VIEWPORT)  # a new tab: a first visit (tests/chromium.py)
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri())
        r = first_render(page)
        times.setdefault(page_path.parent.name, []).append(r["ms"])
        charts.setdefault(page_path.parent.name, []).append(r["chart_ms"])
        weight[page_path.parent.name] = r["bytes"]
        page.close()
        assert errors == []

    # Measured, every page is rendered ROUNDS times, round-robin, before the benchmark fixture measures the biggest:
    # round-robin spreads a burst of other work over one sample of several pages, not every sample of one page. In
    # the test command (benchmarks disabled: no times checked) once each is enough.
    rounds = 1 if benchmark.disabled else ROUNDS
    for _ in range(rounds):
        for page_path in pages:
            render(page_path)
    biggest = site / "cifar100" / "index.html"  # CIFAR-100-C: the most splits and rows
    benchmark.pedantic(lambda: render(biggest), rounds=3, iterations=1, warmup_rounds=1)
    assert all(len(v) >= rounds for v in times.values()), {k: len(v) for k, v in times.items()}
    assert all(c is not None for v in charts.values() for c in v), charts  # every suite page draws its chart
    # What a first render costs, on any machine: at the papers' scale, as at the embedded default's, a page loads
    # under 1 MB before its headline and first table (the other splits' data waits until opened).
    heavy = {k: v for k, v in weight.items() if v >= MB}
    assert not heavy, f"first render loads 1 MB or more: {heavy}"
    medians = {k: round(statistics.median(v)) for k, v in times.items()}
    chart = {k: round(statistics.median(v)) for k, v in charts.items()}
    benchmark.extra_info.update(first_render_ms=medians, chart_ms=chart, first_render_bytes=weight)
    print(f"\nfirst render (median ms): {medians}\nchart drawn (median ms): {chart}\nfirst render bytes: {weight}")
    if benchmark.disabled:  # the test command: milliseconds on a loaded runner are no measurement (CI at 773810f,
        return  # a Zen 3 beside the other xdist worker: imagenet's chart 2,153 ms; 628 ms on a quiet Zen 4)
    _record(benchmark, first_render_ms=medians, chart_ms=chart)
    slow = {k: v for k, v in medians.items() if v >= LIMITS["render_ms"]}
    assert not slow, f"first render over {LIMITS['render_ms']} ms: {slow}"
    slow = {k: v for k, v in chart.items() if v >= LIMITS["chart_ms"]}
    assert not slow, f"chart drawn after more than {LIMITS['chart_ms']} ms: {slow}"
