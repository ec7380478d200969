"""No bundle configures the page: a suite's report settings come from the repository (params.yaml for the embedded
default, suites/<name>/params.yaml for a paper suite), whatever the bundles' params say."""

from __future__ import annotations

import pytest
import yaml
from helpers import manifest, write_manifest

import benchmark.report
from benchmark.cli.main import main
from benchmark.config.report_config import ReportConfig

HOSTILE = {
    "title": "<script>alert(1)</script>",
    "dpi": 10000,
    "workers": 64,
    "formats": ["pdf"],
    "metrics": ["nll"],
    "headline_metric": "nll",
    "headline_metrics": ["nll"],
}


@pytest.fixture
def seen(monkeypatch):
    got = []

    def build(inputs, out, **kw):
        got.append(inputs)
        out.mkdir(parents=True, exist_ok=True)
        (out / "index.html").write_text("page")
        return out / "index.html"

    monkeypatch.setattr(benchmark.report, "build_report", build)
    return got


def _hostile(bundle):
    m = manifest(bundle)
    m["params"]["report"] = HOSTILE
    write_manifest(bundle, m)


def test_the_repositorys_params_configure_the_page(bundle, tmp_path, seen, capsys):
    _hostile(bundle)
    repo = tmp_path / "repo"
    (repo / "suites" / "caltech256").mkdir(parents=True)
    mine = {"report": {"title": "Caltech from the repository", "dpi": 90, "workers": 1}}
    (repo / "suites" / "caltech256" / "params.yaml").write_text(yaml.safe_dump(mine))
    assert (
        main(
            [
                "publish",
                "--bundles",
                str(bundle.parent.parent),
                "--out",
                str(tmp_path / "site"),
                "--repo",
                str(repo),
                "--quiet",
            ]
        )
        == 0
    ), capsys.readouterr().err
    (inputs,) = seen
    assert inputs.config == ReportConfig.from_params(mine)
    assert inputs.params == mine
    for f in (tmp_path / "site").rglob("*.html"):
        assert "<script>alert(1)" not in f.read_text()


def test_without_repository_params_the_defaults(bundle, tmp_path, seen):
    _hostile(bundle)
    assert (
        main(
            [
                "publish",
                "--bundles",
                str(bundle.parent.parent),
                "--out",
                str(tmp_path / "site"),
                "--repo",
                str(tmp_path / "empty"),
                "--quiet",
            ]
        )
        == 0
    )
    (inputs,) = seen
    assert inputs.config == ReportConfig() and any("default settings" in n for n in inputs.notices)


def test_the_committed_suites_configure_their_pages(bundle, tmp_path, seen):
    """The default --repo is the checkout (the tests run from anywhere: pass the repository root)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    _hostile(bundle)
    assert (
        main(
            [
                "publish",
                "--bundles",
                str(bundle.parent.parent),
                "--out",
                str(tmp_path / "site"),
                "--repo",
                str(root),
                "--quiet",
            ]
        )
        == 0
    )
    (inputs,) = seen
    want = yaml.safe_load((root / "suites" / "caltech256" / "params.yaml").read_text())
    assert inputs.config == ReportConfig.from_params(want)
