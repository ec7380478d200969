"""The published report: a static HTML leaderboard with interactive Pareto charts from the results table.

``load_inputs`` reads the files, ``build_report`` writes ``index.html`` (drawing its
charts in the browser with the shipped plotly.js), ``data/`` (the rows as Parquet and
gzipped CSV with their schema) and, for the report stage, ``plots/`` (static PNG/SVG
figures and the CSV curves for ``dvc plots``). Method families are read from the
results table; none is named in the code.
"""

from benchmark.config.report_config import ReportConfig
from benchmark.report.build import build_report
from benchmark.report.inputs import ReportInputs, load_inputs, results_from_frame
from benchmark.report.published import load_published, parse_published

__all__ = [
    "ReportConfig",
    "ReportInputs",
    "build_report",
    "load_inputs",
    "load_published",
    "parse_published",
    "results_from_frame",
]
