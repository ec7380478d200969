"""publish: the static site from bundles only (merge rule, byte-identical output, real Chromium)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
from chromium import CHROMIUM, reopen
from helpers import manifest, read_rows, write_manifest, write_rows

from benchmark.bundle.schema import load_bundle
from benchmark.bundle.site_merge import merge
from benchmark.bundle.verify import SELF_REPORTED, VERIFIED, Report, record, recorded_status
from benchmark.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from report_synth import headline_json  # noqa: E402

pytestmark = pytest.mark.slow


def _when(minutes: int) -> str:
    """A 'created' this many minutes from now (at most the allowed clock skew ahead)."""
    return (dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def variant(src: Path, name: str, *, created: str, delta: float, records: Path | None = None) -> Path:
    """A copy of bundle ``src`` named ``name``: newer, the test accuracy of every single model set to 0.5 + ``delta``;
    with ``records``, a verification record of it there."""
    dst = src.parent / name
    shutil.copytree(src, dst)
    rows = read_rows(dst)
    sel = (rows.family == "single") & (rows.metric == "accuracy") & (rows.split == "test")
    rows.loc[sel, "value"] = repr(0.5 + delta)
    write_rows(dst, rows)
    write_manifest(dst, manifest(dst) | {"created": created})
    if (
        records is not None
    ):  # as if verify had recomputed it (its logits are not these; only the merge rule is tested here)
        b = load_bundle(dst)
        record(records, b, Report(status=VERIFIED, rows=len(b.rows), recomputed=len(b.rows), costs=len(b.rows)))
    return dst


def loaded(path, records):
    b = load_bundle(path)
    b.status = recorded_status(records, b)
    return b


@pytest.fixture
def recs(records, tmp_path):
    """A private copy of the session's verification records (tests add to it)."""
    dst = tmp_path / "records"
    shutil.copytree(records, dst)
    return dst


def test_merge_prefers_verified_then_newest_and_flags_conflicts(bundle, recs):
    old = loaded(bundle, recs)
    newer_self = loaded(variant(bundle, "b2", created=_when(0), delta=-0.01), recs)
    assert (old.status, newer_self.status) == (VERIFIED, SELF_REPORTED)
    merged, conflicts = merge([old, newer_self])
    assert set(merged["bundle"]) == {"b1"} and conflicts.empty  # verified beats a newer self-reported bundle
    newer_ver = loaded(variant(bundle, "b3", created=_when(1), delta=-0.02, records=recs), recs)
    merged, conflicts = merge([old, newer_self, newer_ver])
    sel = (merged.family == "single") & (merged.metric == "accuracy") & (merged.split == "test")
    assert set(merged.loc[sel, "bundle"]) == {"b3"} and set(merged.loc[~sel, "bundle"]) == {"b3"}  # newest verified
    assert len(merged) == len(old.rows)
    ref = old.rows.set_index(["fit", "base"]).loc[:, ["family", "metric", "split", "value"]]
    assert len(conflicts) == sel.sum() and set(conflicts["other_bundle"]) == {"b1"}  # two verified bundles disagree
    c = conflicts.iloc[0]
    want = ref[(ref.family == "single") & (ref.metric == "accuracy") & (ref.split == "test")].loc[
        (c["fit"], c["base"]), "value"
    ]
    assert c["other_value"] == pytest.approx(want) and c["shown_value"] == pytest.approx(0.48)


def test_publish_from_bundles_only_is_byte_identical(bundle, recs, tmp_path, monkeypatch, capsys):
    variant(bundle, "b2", created=_when(0), delta=-0.01)
    monkeypatch.chdir(tmp_path)  # no results/, no dvc.lock, no params.yaml here
    sites = []
    for name in ("site1", "site2"):
        assert (
            main(["publish", "--bundles", str(bundle.parent.parent), "--out", name, "--verified", str(recs), "--quiet"])
            == 0
        )
        sites.append(tmp_path / name)
    files = sorted(p.relative_to(sites[0]) for p in sites[0].rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(sites[1]) for p in sites[1].rglob("*") if p.is_file())
    for f in files:
        assert (sites[0] / f).read_bytes() == (sites[1] / f).read_bytes(), f
    names = {f.as_posix() for f in files}
    assert {
        "index.html",
        "assets/plotly-basic.min.js",
        "caltech256/index.html",
        "caltech256/entries.html",
        "caltech256/data/rows.parquet",
        "caltech256/data/rows.csv.gz",
        "caltech256/data/schema.json",
        "bundles/caltech256/b1/index.html",
        "bundles/caltech256/b1/manifest.json",
        "bundles/caltech256/b2/index.html",
    } <= names
    assert not any(n.startswith("caltech256/plots/") or n.endswith(".json") and "/data/rows" in n for n in names)
    rows_csv = pd.read_csv(sites[0] / "caltech256" / "data" / "rows.csv.gz")
    rows_pq = pd.read_parquet(sites[0] / "caltech256" / "data" / "rows.parquet")
    assert len(rows_csv) == len(rows_pq) == len(read_rows(bundle)) and set(rows_pq["status"]) == {VERIFIED}
    # every row's training budget travels to the downloads, typed and described
    assert rows_pq["train_images"].dtype == rows_pq["train_params"].dtype == "float64"
    assert (
        rows_pq["train_images"].notna().all()
        and (rows_pq["train_images"] > 0).all()
        and (rows_pq["train_params"] > 0).all()
    )
    assert {"train_images", "train_params"} <= set(rows_csv.columns)
    described = {
        f["name"] for f in json.loads((sites[0] / "caltech256" / "data" / "schema.json").read_text())["rows"]["fields"]
    }
    assert {"train_images", "train_params"} <= described
    for html in sites[0].rglob("*.html"):  # relative links only
        text = html.read_text()
        assert 'href="/' not in text and 'src="/' not in text and "http://" not in text.replace("http://www.w3.org", "")
    # a folder that is not a previous site is never replaced
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert main(["publish", "--bundles", str(bundle.parent.parent), "--out", "mine", "--quiet"]) == 2
    assert "refusing to replace it" in capsys.readouterr().err


def test_a_bundle_page_says_when_and_on_what_cpu_this_project_verified_it(bundle, recs, tmp_path, monkeypatch):
    """The verification record says when and on which CPU (benchmark.config.numerics.cpu) the rows were recomputed;
    the bundle's page shows it, escaped; a bundle without a record says it is self-reported."""
    import datetime
    import html

    from benchmark.config.numerics import cpu

    path = recs / "caltech256" / "b1.json"
    rec = json.loads(path.read_text())
    assert rec["verified_on"] == {k: cpu()[k] for k in ("kind", "cpu", "cores")}
    when = datetime.datetime.strptime(rec["verified_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    assert datetime.timedelta(0) <= datetime.datetime.now(datetime.timezone.utc) - when < datetime.timedelta(hours=6)
    rec["verified_on"]["cpu"] = "<b>Xeon</b> & co"  # what reaches HTML is escaped
    path.write_text(json.dumps(rec))
    variant(bundle, "b2", created=_when(0), delta=-0.01)
    monkeypatch.chdir(tmp_path)
    assert (
        main(["publish", "--bundles", str(bundle.parent.parent), "--out", "site", "--verified", str(recs), "--quiet"])
        == 0
    )
    page = (tmp_path / "site" / "bundles" / "caltech256" / "b1" / "index.html").read_text(encoding="utf-8")
    note = page.split('<p class="verification" role="note">')[1].split("</p>")[0]
    assert f"Verified by this project on {rec['verified_at']}" in note
    assert html.escape("<b>Xeon</b> & co") in note and "<b>Xeon" not in note and rec["verified_on"]["kind"] in note
    assert f"{rec['recomputed']} of {rec['rows']} rows" in note
    other = (tmp_path / "site" / "bundles" / "caltech256" / "b2" / "index.html").read_text(encoding="utf-8")
    assert "Self-reported: this project holds no verification" in other.split('<p class="verification"')[1]


def test_the_suite_page_names_the_source_of_every_row_and_its_conflicts(bundle, tmp_path):
    """Issue 50 item 3: two self-reported bundles of one suite disagree on the single models' test accuracy; the newer
    one's rows are shown, and the headline says so beside them: the bundle, contributor and status of every row (the
    Source column), the other bundle where they conflict (⚠), and above the table, not in a collapsed note."""
    variant(bundle, "b2", created=_when(0), delta=-0.01)
    (bundle.parent / "b2" / "manifest.json").write_text(
        (bundle.parent / "b2" / "manifest.json")
        .read_text()
        .replace('"contributor": "tests <b>&"', '"contributor": "Alice (lab X)"')
    )
    write_manifest(bundle.parent / "b2", manifest(bundle.parent / "b2"))  # the edited contributor, re-hashed
    assert main(["publish", "--bundles", str(bundle.parent.parent), "--out", str(tmp_path / "site"), "--quiet"]) == 0
    page = tmp_path / "site" / "caltech256" / "index.html"
    head = headline_json(page.parent)
    assert {k: (v["status"], v["contributor"]) for k, v in head["sources"].items()} == {
        "b1": (SELF_REPORTED, "tests <b>&"),
        "b2": (SELF_REPORTED, "Alice (lab X)"),
    }
    assert head["sources"]["b2"]["link"] == "../bundles/caltech256/b2/index.html"
    test = next(sp for sp in head["suites"][0]["splits"] if sp["name"] == "test")
    alone = [e for e in test["entries"] if e["k"] == "alone"]
    assert alone and all(e["src"] == "b2" and e["cf"] == "b1" for e in alone)  # newer shown; the other named beside
    assert all(e["src"] == "b2" and "cf" not in e for e in test["entries"] if e["k"] != "alone")  # the same values
    merged, conflicts = merge([load_bundle(bundle), load_bundle(bundle.parent / "b2")])
    rows = conflicts.drop_duplicates(["split", "family", "method", "base", "sidekick", "members", "fit", "confidence"])
    assert head["conflicts"] == len(rows) > 0
    text = page.read_text(encoding="utf-8")
    note = text.split('<p class="origin" role="note">')[1].split("</p>")[0]
    assert 'b1</a> <span class="badge self-reported">self-reported</span> by tests &lt;b&gt;&amp;' in note  # escaped
    assert "Alice (lab X)" in note and f"&#9888; {len(rows)} row(s) of this suite are given other values" in note
    assert text.index('<p class="origin"') < text.index('id="headline-table"')  # beside the table, not in the notes
    data = (tmp_path / "site" / "caltech256" / "data" / "caltech256_test.js").read_text(encoding="utf-8")
    table = json.loads(data[data.index(",") + 1 : data.rindex(")")])
    col = [c["key"] for c in table["columns"]].index("source")
    cells = {table["s"][r[9 + col][0]] for r in table["rows"]}
    assert cells == {"b2", "b2 ⚠"}  # the full table: every row's bundle, ⚠ where the other bundle disagrees


def test_publish_rejects_a_malformed_bundle(bundle, tmp_path, capsys):
    rows = read_rows(bundle)
    rows.loc[0, "metric"] = "top5"
    write_rows(bundle, rows)
    assert main(["publish", "--bundles", str(bundle.parent.parent), "--out", str(tmp_path / "s"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no valid bundle" in err and "unknown metric 'top5'" in err


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found: apt-get install chromium")
def test_site_opens_in_chromium_with_badges(bundle, recs, tmp_path, tab):
    variant(bundle, "b2", created=_when(0), delta=-0.01)
    assert (
        main(
            [
                "publish",
                "--bundles",
                str(bundle.parent.parent),
                "--out",
                str(tmp_path / "site"),
                "--verified",
                str(recs),
                "--quiet",
            ]
        )
        == 0
    )
    page = reopen(tab, (tmp_path / "site" / "index.html").as_uri())
    badges = page.locator(".badge").all_inner_texts()
    assert badges.count("verified") >= 2 and "self-reported" in badges  # legend + b1; b2
    assert page.locator("td", has_text="tests <b>&").count() == 2  # b1, b2; escaped: shown as text
    assert page.locator("b").count() == 0
    page.click("text=Leaderboard and plots")
    assert page.url.endswith("caltech256/index.html") and page.locator("table").count() > 0
    source = page.locator("#headline-table tbody tr td.source").first  # verified b1 beats the newer self-reported b2
    assert source.locator("a").inner_text() == "b1" and source.locator(".badge").inner_text() == "verified"
    page.wait_for_selector(".chart[data-ready]", state="attached")  # plotly.js from the site's assets/
    assert page.locator(".chart .scatterlayer .point").count() > 0
    page.go_back()
    page.click("text=entries and downloads")
    assert "verified" in page.locator(".badge").all_inner_texts()
    assert (
        page.locator("a[href='data/rows.parquet']").count() == 1
        and page.locator("a[href='data/schema.json']").count() == 1
    )
    page.click("a[href='data/schema.json']")
    assert json.loads(page.locator("body").inner_text())["rows"]["fields"][0]["name"] == "suite"
    page.go_back()
    page.locator("a", has_text="manifest").first.click()
    assert page.url.endswith("bundles/caltech256/b1/index.html")
    assert "verified" in page.locator("h1 .badge").inner_text()
    assert page.problems == []
