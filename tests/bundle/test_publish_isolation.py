"""publish survives one bad bundle: a bundle failing at intake or at any later step of its own, or a suite whose page
cannot be built, is reported in one line and left out; the rest of the site is written and the exit code is 3."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from helpers import manifest, read_rows, stub_page, write_manifest, write_rows

import benchmark.report
from benchmark.bundle import site as site_mod
from benchmark.cli.main import main

MARK = "0.123456789"


def _publish(board, out, capsys):
    rc = main(["publish", "--bundles", str(board), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, [line for line in err.splitlines() if line.strip()]


def _bundles(site, suite="caltech256"):
    return sorted(pd.read_csv(site / suite / "data" / "entries.csv.gz")["bundle"])


@pytest.fixture
def board(bundle, pristine):
    """leaderboard/caltech256/{b1, good}: two valid bundles."""
    shutil.copytree(pristine, bundle.parent / "good")
    return bundle.parent.parent


def test_a_malformed_bundle_is_left_out(board, tmp_path, capsys, fast_report):
    rows = read_rows(board / "caltech256" / "b1")
    rows.loc[0, "metric"] = "top5"
    write_rows(board / "caltech256" / "b1", rows)
    rc, err = _publish(board, tmp_path / "site", capsys)
    assert rc == 3 and len(err) == 1 and "left out" in err[0] and "unknown metric 'top5'" in err[0]
    assert _bundles(tmp_path / "site") == ["good"]


def test_no_valid_bundle_at_all_is_exit_2(board, tmp_path, capsys, fast_report):
    for b in ("b1", "good"):
        (board / "caltech256" / b / "evil.html").write_text("x")
    assert main(["publish", "--bundles", str(board), "--out", str(tmp_path / "site"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no valid bundle" in err and not (tmp_path / "site").exists()


def test_a_bundle_breaking_its_own_page_is_left_out(board, tmp_path, capsys, fast_report, monkeypatch):
    real = site_mod._bundle_page

    def page(b, out):
        if b.name == "b1":
            raise KeyError("a later step broke on this bundle")
        return real(b, out)

    monkeypatch.setattr(site_mod, "_bundle_page", page)
    rc, err = _publish(board, tmp_path / "site", capsys)
    assert rc == 3 and len(err) == 1 and "left out" in err[0] and "b1" in err[0] and "KeyError" in err[0]
    site = tmp_path / "site"
    assert _bundles(site) == ["good"] and not (site / "bundles" / "caltech256" / "b1").exists()
    assert (site / "bundles" / "caltech256" / "good" / "index.html").is_file() and (site / "index.html").is_file()


def test_a_bundle_breaking_the_suite_page_is_left_out(board, tmp_path, capsys, monkeypatch):
    rows = read_rows(board / "caltech256" / "b1")
    rows["value"] = rows["value"].where(
        rows["metric"] != "accuracy", MARK
    )  # b1's rows are the ones the report trips on
    write_rows(board / "caltech256" / "b1", rows)

    def build(inputs, out, **kw):
        if (inputs.results["value"] == float(MARK)).any():
            raise ValueError("the report cannot draw this")
        return stub_page(inputs, out)

    monkeypatch.setattr(benchmark.report, "build_report", build)
    rc, err = _publish(board, tmp_path / "site", capsys)
    assert rc == 3 and len(err) == 1 and "b1" in err[0] and "the report cannot draw this" in err[0]
    assert _bundles(tmp_path / "site") == ["good"]


def test_a_suite_that_cannot_be_built_is_left_out_and_the_others_are_built(board, tmp_path, capsys, monkeypatch):
    emb = board / "embedded" / "e1"  # the same run, as the embedded suite
    shutil.copytree(board / "caltech256" / "good", emb)
    write_rows(emb, read_rows(emb).assign(suite="embedded"))
    m = manifest(emb)
    m["suite"], m["params"]["suite"] = "embedded", "embedded"
    write_manifest(emb, m)
    paired = pd.read_csv(emb / "paired.csv", dtype=str, keep_default_na=False).assign(suite="embedded")
    paired.to_csv(emb / "paired.csv", index=False)
    from helpers import rehash

    rehash(emb, "paired")

    def build(inputs, out, **kw):
        if "caltech256" in set(inputs.results["suite"]):
            raise RuntimeError("this suite's page is broken")
        return stub_page(inputs, out)

    monkeypatch.setattr(benchmark.report, "build_report", build)
    rc, err = _publish(board, tmp_path / "site", capsys)
    site = tmp_path / "site"
    assert rc == 3 and err and all("left out" in line for line in err)
    assert not (site / "caltech256").exists() and not (site / "bundles" / "caltech256").exists()
    assert _bundles(site, "embedded") == ["e1"] and (site / "bundles" / "embedded" / "e1" / "index.html").is_file()
    index = (site / "index.html").read_text()
    assert 'id="suite-embedded"' in index and 'id="suite-caltech256"' not in index
