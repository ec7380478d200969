"""``publish``: the static leaderboard site from all bundles (no training, no ``results/``).

Layout (relative links only: works from ``file://`` and any static host)::

    index.html                         suites, their bundles and badges, the merge rules
    assets/                            plotly.js (one copy for every page's Pareto charts; benchmark.report.assets)
    <suite>/index.html                 the leaderboard of the suite's merged rows (benchmark.report's own page,
                                       interactive Pareto charts, no static figure)
    <suite>/entries.html               the suite's bundles (badge, contributor, provenance link), conflicts
    <suite>/data/rows.{parquet,csv.gz} the merged rows behind the tables, with bundle and status columns
    <suite>/data/entries.*, conflicts.*, schema.json (the columns of all three: benchmark.bundle.site_data)
    bundles/<suite>/<id>/index.html    a bundle's provenance (manifest rendered) + manifest.json, rows, verification.json

Merge rule (:func:`merge`, also on the index page): rows are keyed by
(suite, split, family, method, base, sidekick, members, fit, confidence, metric).
For a key given by several bundles the row shown comes from a verified bundle
before a self-reported one, then from the newest bundle (manifest ``created``),
then from the bundle id first in sort order. Two bundles of the same status
whose values for a key differ by more than 1e-6 are a *conflict*: the chosen
row is shown and both are listed in ``conflicts``.

Same bundles, byte-identical site: no build time is written, everything is sorted, gzip
carries no timestamp.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from tqdm.auto import tqdm

from benchmark.bundle.schema import KEY, MANIFEST, VERIFICATION, BundleError, load_bundle
from benchmark.bundle.site_data import suite_downloads
from benchmark.bundle.verify import TOLERANCE, VERIFIED, recorded_status
from benchmark.report.assets import write_assets
from benchmark.report.build import publishable
from benchmark.storage.results_schema import COLUMNS
from benchmark.storage.store import StoreError, atomic_dir, write_text

MARKER = ".uq-site"
RULE = ("Rows are keyed by suite, split, family, method, base, sidekick, members, fit, confidence and metric. "
        "When several bundles give the same key, the row shown comes from a verified bundle before a self-reported one, "
        "then from the newest bundle (manifest 'created'), then from the bundle id first in sort order. "
        f"Two bundles of the same status whose values differ by more than {TOLERANCE:g} are listed as conflicts.")
_ENV = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True,
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def find_bundles(root) -> list[Path]:
    root = Path(root)
    if not root.is_dir():
        raise BundleError(f"{root}: bundles folder not found")
    return sorted(p.parent for p in root.rglob(MANIFEST) if not any(part.startswith(".") for part in p.relative_to(root).parts))


def merge(bundles: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Merged rows of one suite's bundles (see the module doc) and the conflicts table."""
    frames = [b.rows.assign(bundle=b.name, status=b.status, created=b.manifest["created"]) for b in bundles]
    allrows = pd.concat(frames, ignore_index=True)
    allrows["_rank"] = (allrows["status"] != VERIFIED).astype(int)
    order = allrows.sort_values(["_rank", "created", "bundle"], ascending=[True, False, True], kind="mergesort")
    chosen = order.drop_duplicates(KEY, keep="first")
    conflicts = []
    for _, g in order[order.duplicated(KEY, keep=False)].groupby(KEY, sort=True):
        top = g.iloc[0]
        for _, r in g.iloc[1:].iterrows():
            a, b = float(top["value"]), float(r["value"])
            differ = not (math.isnan(a) and math.isnan(b)) and not abs(a - b) <= TOLERANCE
            if r["status"] == top["status"] and differ:
                conflicts.append({**{k: top[k] for k in KEY}, "shown_bundle": top["bundle"], "shown_value": a,
                                  "other_bundle": r["bundle"], "other_value": b, "status": r["status"]})
    merged = chosen.drop(columns=["_rank"]).sort_values(KEY, kind="mergesort").reset_index(drop=True)
    cols = list(KEY) + ["shown_bundle", "shown_value", "other_bundle", "other_value", "status"]
    return merged, pd.DataFrame(conflicts, columns=cols)


def _render(template: str, path: Path, **ctx) -> None:
    write_text(path, _ENV.get_template(template).render(**ctx))


def _merged_lock(bundles) -> dict:
    stages: dict = {}
    for b in bundles:  # bundles in priority order: the first one's stage wins
        for name, s in ((b.lock or {}).get("stages") or {}).items():
            stages.setdefault(name, s)
    return {"schema": "2.0", "stages": stages} if stages else None


def _models(bundles) -> pd.DataFrame | None:
    frames = [b.models for b in bundles if b.models is not None and "name" in b.models.columns]
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True).drop_duplicates("name", keep="first").reset_index(drop=True)


def _paired(bundles) -> pd.DataFrame | None:
    """Paired differences of the bundles, the first bundle (in merge priority) winning for a key."""
    from benchmark.bundle.verify import PAIRED_KEY

    frames = [b.paired for b in bundles if b.paired is not None]
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True).drop_duplicates(PAIRED_KEY, keep="first").reset_index(drop=True)


def _suite_report(suite: str, bundles: list, merged: pd.DataFrame, out: Path, downloads: dict) -> None:
    """The suite's leaderboard page, built by benchmark.report from the merged rows: interactive charts (plotly.js
    from the site's assets/), no static figure; ``downloads`` go to its data/ folder."""
    from benchmark.report import ReportConfig, ReportInputs, build_report, results_from_frame

    params = bundles[0].manifest["params"]
    results, notices = results_from_frame(merged[list(COLUMNS)].copy(), source=f"bundles of suite {suite}")
    zoo: dict = {}
    for b in bundles:
        for name, entry in b.manifest["zoo"].items():
            zoo.setdefault(name, entry)
    n_ver = sum(b.status == VERIFIED for b in bundles)
    notices = [f"Merged from {len(bundles)} bundle(s), {n_ver} verified: badges, contributors and provenance on "
               f"entries.html; rows as Parquet and CSV in data/."] + notices
    cfg = ReportConfig.from_params(params, source=f"{bundles[0].path / MANIFEST}: params")
    inputs = ReportInputs(results=results, models=_models(bundles), zoo=zoo, params=params, lock=_merged_lock(bundles),
                          config=cfg, notices=notices, sources={"results": f"the bundles of suite {suite}"},
                          paired=_paired(bundles), downloads=downloads)
    build_report(inputs, out, progress=False, figures=False, assets="../assets/")


def _bundle_page(b, out: Path) -> str:
    """Copy a bundle's small files and render its provenance page; returns its folder relative to the site."""
    rel = f"bundles/{b.suite}/{b.name}"
    folder = out / rel
    folder.mkdir(parents=True, exist_ok=True)
    names = [MANIFEST] + [f["path"] for f in b.manifest["files"].values()]
    if (b.path / VERIFICATION).is_file():
        names.append(VERIFICATION)
    for n in sorted(set(names)):
        (folder / n).parent.mkdir(parents=True, exist_ok=True)
        (folder / n).write_bytes((b.path / n).read_bytes())
    m = b.manifest
    units = [{"kind": u["kind"], "members": " + ".join(u["members"]), "hash": u["inputs_hash"],
              "rows": int((b.rows["inputs_hash"] == u["inputs_hash"]).sum())} for u in m["units"]]
    _render("bundle.html.j2", folder / "index.html", b=b, m=m, units=units, files=sorted(set(names)),
            logits=sorted(m["logits"].items()), stages=sorted(m["stages"].items()), up="../../../",
            manifest_json=json.dumps(m, indent=1, sort_keys=True))
    return rel


def publish(bundles_dir, out, *, progress: bool = True) -> Path:
    """Write the site under ``out`` (replaced as a whole); returns the index page."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir()) and not (out / MARKER).exists()):
        raise StoreError(f"{out}: exists and is not an empty folder or a previous site ({MARKER}); refusing to replace it")
    bundles = []
    for path in find_bundles(bundles_dir):
        b = load_bundle(path, check_arch=False)  # the architectures are checked by verify (CI), not on every publish
        b.status = recorded_status(b)
        bundles.append(b)
    if not bundles:
        raise BundleError(f"{bundles_dir}: no bundles (folders with {MANIFEST}); make one with `python -m benchmark submit`")
    by_suite: dict[str, list] = {}
    for b in sorted(bundles, key=lambda b: ((b.status != VERIFIED), _neg(b.manifest["created"]), b.name)):
        by_suite.setdefault(b.suite, []).append(b)
    suites = []
    with atomic_dir(out) as tmp:
        write_assets(tmp / "assets")
        for suite, bs in tqdm(sorted(by_suite.items()), desc="publish", disable=not progress):
            merged, conflicts = merge(bs)
            entries = []
            for b in bs:
                rel = _bundle_page(b, tmp)
                entries.append({"bundle": b.name, "status": b.status, "contributor": b.manifest["contributor"],
                                "created": b.manifest["created"], "commit": b.manifest["git"].get("commit") or "",
                                "rows": len(b.rows), "shown": int((merged["bundle"] == b.name).sum()),
                                "provenance": f"../{rel}/index.html"})
            _suite_report(suite, bs, merged, tmp / suite, suite_downloads(merged, pd.DataFrame(entries), conflicts))
            data = {name: {"parquet": f"data/{name}.parquet", "csv": f"data/{name}.csv.gz", "rows": n}
                    for name, n in (("rows", len(merged)), ("entries", len(entries)), ("conflicts", len(conflicts)))}
            _render("entries.html.j2", tmp / suite / "entries.html", suite=suite, entries=entries, data=data, rule=RULE,
                    conflicts=conflicts.to_dict("records"), schema="data/schema.json")
            suites.append({"name": suite, "entries": [dict(e, provenance=e["provenance"][3:]) for e in entries],
                           "verified": sum(e["status"] == VERIFIED for e in entries), "rows": len(merged),
                           "conflicts": len(conflicts)})
        _render("site_index.html.j2", tmp / "index.html", suites=suites, rule=RULE)
        write_text(tmp / MARKER, "written by `python -m benchmark publish`; this folder is replaced on every run\n")
        publishable(tmp)
    return out / "index.html"


def _neg(created: str) -> tuple:
    """Sort key putting the newest ISO timestamp first."""
    return tuple(-ord(c) for c in created)

