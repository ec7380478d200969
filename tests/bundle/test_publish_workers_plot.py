"""``publish --workers``: the processes drawing the site's figures (as report.workers for the report stage)."""
from __future__ import annotations

from pathlib import Path

import pytest

import yaml

import benchmark.report
from benchmark.bundle.site import find_bundles, publish
from benchmark.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
LEADERBOARD = ROOT / "leaderboard"


def test_workers_below_one_is_one_line_exit_2(tmp_path, capsys):
    assert main(["publish", "--out", str(tmp_path / "site"), "--workers", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--workers: must be >= 1, got 0" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("workers", [None, 3])
def test_publish_hands_workers_to_the_report(tmp_path, monkeypatch, workers):
    bundles, _ = find_bundles(LEADERBOARD)
    if not bundles:
        pytest.skip("no committed bundle under leaderboard/")
    seen = []
    monkeypatch.setattr(benchmark.report, "build_report", lambda inputs, out, **kw: seen.append(inputs.config.workers))
    _, problems = publish(LEADERBOARD, tmp_path / "site", progress=False, workers=workers, repo=ROOT)
    assert problems == []  # the committed bundles pass the intake
    # the repository's params configure the page (never a bundle's)
    configured = (yaml.safe_load((ROOT / "params.yaml").read_text()).get("report") or {}).get("workers", 1)
    assert seen and set(seen) == {configured if workers is None else workers}
