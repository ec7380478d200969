"""``publish`` of the committed bundles (leaderboard/), the site a fresh clone builds: small, no static figure,
one copy of the charting library, the rows as Parquet and gzipped CSV with their schema."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import benchmark.report.plots
from benchmark.bundle.schema import load_bundle
from benchmark.bundle.site import find_bundles, publish
from benchmark.bundle.site_data import ENTRY_COLUMNS, ROW_COLUMNS
from benchmark.report.assets import PLOTLY

LEADERBOARD = Path(__file__).resolve().parents[2] / "leaderboard"
MB = 1_000_000


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not find_bundles(LEADERBOARD)[0]:
        pytest.skip("no committed bundle under leaderboard/")
    out = tmp_path_factory.mktemp("site") / "site"
    with pytest.MonkeyPatch.context() as mp:  # the site's charts are drawn in the browser: no matplotlib figure
        for name in ("write_plots", "save_figure"):
            mp.setattr(benchmark.report.plots, name, lambda *a, **k: pytest.fail("publish drew a static figure"))
        publish(LEADERBOARD, out, progress=False)
    return out


def test_small_site_no_file_over_25_mb(site):
    files = [p for p in site.rglob("*") if p.is_file()]
    assert max(p.stat().st_size for p in files) < 25 * MB
    assert sum(p.stat().st_size for p in files) < 20 * MB  # the embedded default's part of the papers' site
    assert not any(p.suffix in (".png", ".svg", ".pdf") for p in files)


def test_one_copy_of_plotly_for_every_page(site):
    copies = [p for p in site.rglob(PLOTLY)]
    assert copies == [site / "assets" / PLOTLY]
    pages = [p for p in site.glob("*/index.html") if p.parent.name not in ("assets", "bundles")]
    for page in pages:  # the charts' settings name the one copy (loaded by the page's script)
        text = page.read_text(encoding="utf-8")
        charts = json.loads(text.split('<script type="application/json" id="uq-charts">')[1].split("</script>")[0])
        assert charts["plotly"] == f"../assets/{PLOTLY}"
    assert pages


def test_downloads_hold_the_merged_rows_with_their_schema(site):
    for bundle in find_bundles(LEADERBOARD)[0]:
        b = load_bundle(bundle, check_arch=False)
        data = site / b.suite / "data"
        rows = pd.read_parquet(data / "rows.parquet")
        assert list(rows.columns) == list(ROW_COLUMNS) and len(rows) == len(b.rows)
        assert set(rows["bundle"]) == {b.name}
        key = ["split", "family", "method", "base", "sidekick", "members", "fit", "confidence", "metric"]
        got = rows.set_index(key)["value"].sort_index()
        want = b.rows.set_index(key)["value"].sort_index()
        pd.testing.assert_series_equal(got, want, check_names=False)  # typed values, exactly
        text = pd.read_csv(
            data / "rows.csv.gz", keep_default_na=False, na_values=[""]
        )  # pandas 3 parses floats exactly
        assert len(text) == len(rows)
        for c in ("value", "ci_low", "gflops"):
            assert np.array_equal(text[c].to_numpy(float), rows[c].to_numpy(float), equal_nan=True), c
        schema = json.loads((data / "schema.json").read_text())
        assert [f["name"] for f in schema["rows"]["fields"]] == list(ROW_COLUMNS)
        assert [f["name"] for f in schema["entries"]["fields"]] == list(ENTRY_COLUMNS)
        entries = pd.read_parquet(data / "entries.parquet")
        assert entries["bundle"].tolist() == [b.name] and int(entries["rows"].iloc[0]) == len(b.rows)
