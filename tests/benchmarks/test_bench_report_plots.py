"""Drawing one metric's Pareto figures (``gflops``, ``balance``, ``overhead`` views, PNG and SVG).

One (suite, split, metric) of a results table of the embedded run's size, the
unit of work of the report stage's drawing processes (``report.workers``) and of
``python -m benchmark publish``: building the figures (adjustText places the
base-model names), constrained layout and ``savefig`` once per format. Measured
on the committed embedded bundle (2-core machine, loaded): saving the figures is
about half of publish's CPU time (about 17 of 34 s; the layout, run once per
format, about 7 s), building them about a fifth. Laying a figure out once for
both formats would save about a quarter of saving, but the SVG is laid out with
its own 72-dpi text metrics, and reusing the PNG's layout changes it (the
outlier note ran past the right edge in a browser), so each format keeps its own.
Run for real with
``pytest --benchmark-enable tests/benchmarks/test_bench_report_plots.py``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from report_synth import big_results  # noqa: E402

from benchmark.report import ReportConfig  # noqa: E402
from benchmark.report.build import default_rows  # noqa: E402
from benchmark.report.plots import write_plots  # noqa: E402
from benchmark.report.tables import wide_table  # noqa: E402


@pytest.fixture(scope="module")
def view():
    res = big_results()
    # a barely trained model: its far-off values go to the axis edge and the wrapped note under the axes
    bad = (res["base"] == "m00") & (res["family"] == "single") & (res["metric"] == "aurc")
    res.loc[bad, ["value", "ci_low", "ci_high"]] = [0.69, 0.68, 0.70]
    return default_rows(wide_table(res), ReportConfig())


def test_bench_draw_one_metric(benchmark, tmp_path, view):
    cfg = ReportConfig(plot_metrics=("aurc",), plot_splits=("test",), formats=("png", "svg"), workers=1)
    out = tmp_path / "report"

    def draw():
        shutil.rmtree(out, ignore_errors=True)
        return write_plots(view, cfg, out, progress=False)

    got = benchmark.pedantic(draw, rounds=3, iterations=1, warmup_rounds=1)
    files = got[("embedded", "test")]["aurc"]
    assert set(files) == {"gflops", "balance"} and all(set(f) == {"png", "svg"} for f in files.values())
    svg = (out / files["gflops"]["svg"]).read_text(encoding="utf-8")
    assert "outside the axis range" in svg  # the outlier note is drawn
