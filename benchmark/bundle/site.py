"""``publish``: the static leaderboard site from all bundles (no training, no ``results/``).

Layout (relative links only: works from ``file://`` and any static host)::

    index.html                         suites, their bundles and badges, the merge rules
    assets/                            plotly.js (one copy for every page's Pareto charts; benchmark.report.assets)
    <suite>/index.html                 the leaderboard of the suite's merged rows (benchmark.report's own page,
                                       interactive Pareto charts, no static figure)
    <suite>/entries.html               the suite's bundles (badge, contributor, provenance link), conflicts
    <suite>/data/rows.{parquet,csv.gz} the merged rows behind the tables, with bundle and status columns
    <suite>/data/entries.*, conflicts.*, schema.json (the columns of all three: benchmark.bundle.site_data)
    bundles/<suite>/<id>/index.html    a bundle's provenance (manifest rendered) + its validated files

Bundles are found at ``<bundles>/<suite>/<id>/`` only (their identity, see
:func:`benchmark.bundle.schema.identity`); each is read and checked on its own, and one that
fails (at intake or at any later step of its own) is reported in one line and left out, as
is a suite whose page cannot be built: the rest of the site is written, and
:func:`publish` returns the problems (the CLI then exits 3). A bundle's badge is
*verified* only when ``--verified DIR`` holds this project's verification record of it
(:func:`benchmark.bundle.verify.recorded_status`); nothing in a bundle can claim it. The
page of a suite is configured by the repository (``params.yaml`` for the embedded default,
``suites/<name>/params.yaml`` for a paper suite), never by a bundle.

Merge rule: :mod:`benchmark.bundle.site_merge` (also written on the index page).

Same bundles, byte-identical site: no build time is written, everything is sorted, gzip
carries no timestamp.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from tqdm.auto import tqdm

from benchmark.bundle import site_merge
from benchmark.bundle.intake import MANIFEST, show
from benchmark.bundle.schema import REPORTED, BundleError, load_bundle
from benchmark.bundle.site_data import suite_downloads
from benchmark.bundle.verify import SELF_REPORTED, TOLERANCE, VERIFIED, recorded
from benchmark.report.assets import write_assets
from benchmark.report.build import publishable
from benchmark.report.inputs import Origin
from benchmark.storage.results_schema import COLUMNS
from benchmark.storage.store import StoreError, atomic_dir, write_text

MARKER = ".uq-site"
RULE = (
    "Rows are keyed by suite, split, family, method, base, sidekick, members, fit, confidence and metric. "
    "When several bundles give the same key, the row shown comes from a verified bundle before a self-reported one, "
    "then from the newest bundle (manifest 'created'), then from the bundle id first in sort order. "
    f"Two bundles of the same status whose values differ by more than {TOLERANCE:g} are listed as conflicts. "
    "A bundle is verified only when this project recomputed every row, costs included, from its logits; "
    "throughput is the contributor's own measurement and is never verified."
)
_ENV = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def find_bundles(root) -> tuple[list[Path], list[str]]:
    """The bundle folders ``root/<suite>/<id>/`` (never through a link) and one line per thing that is not one
    (a link, a manifest at another depth). Hidden names (``.x``: leftovers of interrupted writes) are skipped."""
    root = Path(root)
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            raise BundleError(f"{show(root)}: bundles folder is not a folder")
    except FileNotFoundError:
        raise BundleError(f"{show(root)}: bundles folder not found") from None
    found, problems = [], []
    for top, dirs, files in os.walk(root, followlinks=False):
        rel = Path(top).relative_to(root)
        depth = len(rel.parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for d in list(dirs):
            if os.path.islink(os.path.join(top, d)):
                problems.append(f"{show(Path(top) / d)}: a symbolic link under the bundles folder; left out")
                dirs.remove(d)
        if depth == 2:
            found.append(Path(top))
            dirs[:] = []  # a bundle has no sub-folders (load_bundle refuses them)
        elif MANIFEST in files:
            problems.append(f"{show(Path(top) / MANIFEST)}: a bundle must be at {show(root)}/<suite>/<id>/; left out")
    return sorted(found), problems


def _render(template: str, path: Path, **ctx) -> None:
    write_text(path, _ENV.get_template(template).render(**ctx))


def repo_params(suite: str, repo=".") -> tuple[dict, Path, list[str]]:
    """The repository's params of ``suite`` (what configures its page): ``params.yaml`` for the embedded default,
    ``suites/<name>/params.yaml`` for a paper suite; missing = {} (the report's defaults) + notice."""
    from benchmark.bundle.pack import suite_folder
    from benchmark.report.inputs import read_mapping

    path = suite_folder(suite, repo) / "params.yaml"
    params, notices = read_mapping(path, "the page uses the report's default settings")
    return params or {}, path, notices


def origin(merged: pd.DataFrame, conflicts: pd.DataFrame, entries: list[dict]) -> Origin:
    """Where each leaderboard row (:data:`benchmark.report.tables.KEY`: a row of every metric) of the merged table comes
    from: the bundles its values are shown from, and the other bundles in conflict with any of them; and each bundle's
    contributor, status and provenance page (``entries``: the suite's entries, links relative to its page)."""
    from benchmark.report.tables import KEY as ROW

    def joined(frame: pd.DataFrame, col: str) -> pd.Series:
        pairs = frame[ROW + [col]].drop_duplicates().sort_values(col, kind="mergesort")
        return pairs.groupby(ROW, sort=False, dropna=False)[col].agg(" ".join)

    rows = joined(merged, "bundle").rename("source").to_frame()
    rows["conflict"] = joined(conflicts, "other_bundle") if len(conflicts) else ""
    rows["conflict"] = rows["conflict"].fillna("")
    sources = {
        e["bundle"]: {
            "contributor": e["contributor"],
            "status": e["status"],
            "link": e["provenance"],
            "shown": e["shown"],
        }
        for e in entries
    }
    return Origin(rows=rows.reset_index(), sources=sources)


def _suite_report(
    suite: str,
    bundles: list,
    merged: pd.DataFrame,
    out: Path,
    downloads: dict,
    repo=".",
    rows_origin: Origin | None = None,
) -> None:
    """The suite's leaderboard page, built by benchmark.report from the merged rows and configured by the repository's
    params of the suite: interactive charts (plotly.js from the site's assets/), no static figure; ``downloads`` go to
    its data/ folder."""
    from benchmark.report import ReportConfig, ReportInputs, build_report, results_from_frame

    params, path, notes = repo_params(suite, repo)
    results, notices = results_from_frame(merged[list(COLUMNS)].copy(), source=f"bundles of suite {suite}")
    zoo: dict = {}
    for b in bundles:
        for name, entry in b.manifest["zoo"].items():
            zoo.setdefault(name, entry)
    n_ver = sum(b.status == VERIFIED for b in bundles)
    notices = (
        [
            f"Merged from {len(bundles)} bundle(s), {n_ver} verified: badges, contributors and provenance on "
            f"entries.html; rows as Parquet and CSV in data/. Throughput (img/s) is each contributor's own "
            f"measurement, not verified."
        ]
        + notes
        + notices
    )
    cfg = ReportConfig.from_params(params, source=str(path))
    inputs = ReportInputs(
        results=results,
        models=site_merge.merged_models(bundles),
        zoo=zoo,
        params=params,
        lock=site_merge.merged_lock(bundles),
        config=cfg,
        notices=notices,
        sources={"results": f"the bundles of suite {suite}"},
        paired=site_merge.merged_paired(bundles),
        downloads=downloads,
        origin=rows_origin,
    )
    build_report(inputs, out, progress=False, figures=False, assets="../assets/")


def _bundle_page(b, out: Path) -> str:
    """Write a bundle's validated files and its provenance page; returns its folder relative to the site."""
    rel = f"bundles/{b.suite}/{b.name}"  # the validated identity: nothing else can write here
    folder = out / rel
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in sorted(b.files.items()):  # fixed names (manifest.json and the known roles), bytes as checked
        (folder / name).write_bytes(data)
    m = b.manifest
    units = [
        {
            "kind": u["kind"],
            "members": " + ".join(u["members"]),
            "hash": u["inputs_hash"],
            "rows": int((b.rows["inputs_hash"] == u["inputs_hash"]).sum()),
        }
        for u in m["units"]
    ]
    _render(
        "bundle.html.j2",
        folder / "index.html",
        b=b,
        m=m,
        units=units,
        files=sorted(b.files),
        logits=sorted(m["logits"].items()),
        stages=sorted(m["stages"].items()),
        up="../../../",
        reported=REPORTED,
        manifest_json=json.dumps(m, indent=1, sort_keys=True),
    )
    return rel


def _load(paths, verified, progress: bool) -> tuple[list, list[str]]:
    bundles, problems = [], []
    for path in tqdm(paths, desc="read bundles", disable=not progress):
        try:
            b = load_bundle(
                path, check_arch=False
            )  # the architectures are checked by verify (CI), not on every publish
            b.verification = recorded(verified, b)
            b.status = VERIFIED if b.verification else SELF_REPORTED
            bundles.append(b)
        except Exception as e:  # noqa: BLE001 - one bad bundle is reported and left out, never stops the site
            problems.append(_left_out(path, e))
    return bundles, problems


def _left_out(what, e: Exception) -> str:
    msg = " ".join(str(e).split())
    msg = msg if isinstance(e, (BundleError, StoreError)) else f"{type(e).__name__}: {msg}"
    return f"left out {show(what)}: {msg[:500]}"


def _suite(suite: str, bs: list, tmp: Path, repo) -> dict:
    """Write one suite's pages and data under ``tmp``; returns its entry for the index page."""
    merged, conflicts = site_merge.merge(bs)
    entries = []
    for b in bs:
        rel = _bundle_page(b, tmp)
        entries.append(
            {
                "bundle": b.name,
                "status": b.status,
                "contributor": b.manifest["contributor"],
                "created": b.manifest["created"],
                "commit": b.manifest["git"].get("commit") or "",
                "rows": len(b.rows),
                "shown": int((merged["bundle"] == b.name).sum()),
                "provenance": f"../{rel}/index.html",
            }
        )
    rows = merged.rename(columns={c: f"{c}_reported" for c in REPORTED})  # measured by the contributor, not verified
    _suite_report(
        suite,
        bs,
        merged,
        tmp / suite,
        suite_downloads(rows, pd.DataFrame(entries), conflicts),
        repo=repo,
        rows_origin=origin(merged, conflicts, entries),
    )
    data = {
        name: {"parquet": f"data/{name}.parquet", "csv": f"data/{name}.csv.gz", "rows": n}
        for name, n in (("rows", len(merged)), ("entries", len(entries)), ("conflicts", len(conflicts)))
    }
    _render(
        "entries.html.j2",
        tmp / suite / "entries.html",
        suite=suite,
        entries=entries,
        data=data,
        rule=RULE,
        reported=REPORTED,
        conflicts=conflicts.to_dict("records"),
        schema="data/schema.json",
    )
    return {
        "name": suite,
        "entries": [dict(e, provenance=e["provenance"][3:]) for e in entries],
        "verified": sum(e["status"] == VERIFIED for e in entries),
        "rows": len(merged),
        "conflicts": len(conflicts),
    }


def _isolate(suite: str, bs: list, tmp: Path, repo) -> tuple[list, list[str]]:
    """The bundles of a suite whose page failed that can be published: each is tried alone (in a scratch folder);
    those failing alone are left out."""
    keep, problems = [], []
    for b in bs:
        with tempfile.TemporaryDirectory(dir=tmp, prefix=".try-") as scratch:
            try:
                _suite(suite, [b], Path(scratch), repo)
                keep.append(b)
            except Exception as e:  # noqa: BLE001
                problems.append(_left_out(b.path, e))
    return keep, problems


def publish(bundles_dir, out, *, progress: bool = True, verified=None, repo=".") -> tuple[Path, list[str]]:
    """Write the site under ``out`` (replaced as a whole); returns the index page and the problems (one line each:
    bundles and suites left out). ``verified``: the folder of verification records (``verify --record-to``); without
    it every bundle is self-reported. ``repo``: the repository whose params configure the suites' pages."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir()) and not (out / MARKER).exists()):
        raise StoreError(
            f"{out}: exists and is not an empty folder or a previous site ({MARKER}); refusing to replace it"
        )
    paths, problems = find_bundles(bundles_dir)
    bundles, bad = _load(paths, verified, progress)
    problems += bad
    if not bundles:
        raise BundleError(
            f"{bundles_dir}: no valid bundle (folders <suite>/<id>/ with {MANIFEST})"
            + (f"; {len(problems)} left out, first: {problems[0]}" if problems else "")
            + "; make one with `python -m benchmark submit`"
        )
    by_suite: dict[str, list] = {}
    for b in sorted(bundles, key=lambda b: ((b.status != VERIFIED), _neg(b.manifest["created"]), b.name)):
        by_suite.setdefault(b.suite, []).append(b)
    suites = []
    with atomic_dir(out) as tmp:
        write_assets(tmp / "assets")
        for suite, bs in tqdm(sorted(by_suite.items()), desc="publish", disable=not progress):
            try:
                suites.append(_suite(suite, bs, tmp, repo))
                continue
            except Exception as e:  # noqa: BLE001 - find the bundles that break it, publish the others
                first = _left_out(f"suite {suite}", e)
            shutil.rmtree(tmp / suite, ignore_errors=True)
            for b in bs:
                shutil.rmtree(tmp / "bundles" / suite / b.name, ignore_errors=True)
            keep, bad = _isolate(suite, bs, tmp, repo)
            problems += bad
            try:
                if not keep:
                    raise RuntimeError("no bundle of it can be published")
                suites.append(_suite(suite, keep, tmp, repo))
            except Exception:  # noqa: BLE001
                problems.append(first)
                shutil.rmtree(tmp / suite, ignore_errors=True)
                shutil.rmtree(tmp / "bundles" / suite, ignore_errors=True)
        _render("site_index.html.j2", tmp / "index.html", suites=suites, rule=RULE, problems=len(problems))
        write_text(tmp / MARKER, "written by `python -m benchmark publish`; this folder is replaced on every run\n")
        publishable(tmp)
    return out / "index.html", problems


def _neg(created: str) -> tuple:
    """Sort key putting the newest ISO timestamp first."""
    return tuple(-ord(c) for c in created)
