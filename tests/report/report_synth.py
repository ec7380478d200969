"""Synthetic results tables for the report tests (and for looking at the page).

Imported by the test modules (``from report_synth import ...``); a unique name
so that it never clashes with other test folders' helpers.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from benchmark.report import ReportConfig, ReportInputs, results_from_frame
from benchmark.report.pagedata import CELLS
from benchmark.storage.results_schema import COLUMNS

EVIL = "<script>alert(1)</script>"
# name -> GFLOPs
MODELS = {"vit_small": 4.6, "resnet50": 4.1, "convnext_tiny": 4.5, "efficientnet_b0": 0.39, "mobilenetv3_small": 0.06}
METRIC_NAMES = ("accuracy", "auroc", "aurc", "sac98", "ece", "nll", "brier")


def _metrics(rng, quality: float) -> dict[str, float]:
    """Plausible metric values that improve with ``quality`` in [0, 1]."""
    acc = 0.70 + 0.15 * quality + rng.normal(0, 0.004)
    return {
        "accuracy": acc,
        "auroc": 0.84 + 0.04 * quality + rng.normal(0, 0.004),
        "aurc": 0.09 - 0.05 * quality + rng.normal(0, 0.002),
        "sac98": 0.25 + 0.35 * quality + rng.normal(0, 0.01),
        "ece": 0.035 - 0.015 * quality + abs(rng.normal(0, 0.003)),
        "nll": 1.1 - 0.5 * quality + rng.normal(0, 0.01),
        "brier": 0.42 - 0.2 * quality + rng.normal(0, 0.005),
    }


# (method, confidence) of every duo, as benchmark.methods.duo writes them
DUO_VARIANTS = (("weighted", "max"), ("weighted", "published"), ("unweighted", "max"), ("uq_only", "published"))


def _rows(suite, split, family, method, base, sidekick, members, gflops, balance, fits, conf, metrics, n, rng):
    out = []
    for fit in fits:
        for m, v in metrics.items():
            v = v + (0.002 if fit == "paper-exact" else 0.0)
            half = 0.004 + abs(rng.normal(0, 0.002))
            out.append(
                {
                    "suite": suite,
                    "split": split,
                    "family": family,
                    "method": method,
                    "base": base,
                    "sidekick": sidekick,
                    "members": members,
                    "fit": fit,
                    "confidence": conf,
                    "metric": m,
                    "value": v,
                    "ci_low": v - half,
                    "ci_high": v + half,
                    "n": n,
                    "gflops": gflops,
                    "params": int(gflops * 5e6),
                    "throughput": 400.0 / gflops,
                    "balance": balance,
                    "inputs_hash": hashlib.sha256(members.encode()).hexdigest()[:16],
                    # a training budget: 4 epochs x 1,000 images and a full fine-tune per member
                    "train_images": 4000.0 * len(members.split("+")),
                    "train_params": float(int(gflops * 5e6)),
                }
            )
    return out


def synthetic_results(
    models=None,
    splits=("test",),
    suite="embedded",
    fits=("converged", "paper-exact"),
    duo_variants=DUO_VARIANTS,
    ensemble=True,
    n=500,
    seed=0,
) -> pd.DataFrame:
    """A tidy results table: singles (confidence max), every duo variant of every pair with a
    larger base, and one 3-seed deep ensemble (converged, max only)."""
    models = dict(models or MODELS)
    rng = np.random.default_rng(seed)
    top = max(models.values())
    rows = []
    for split in splits:
        for m, g in models.items():
            q = np.log1p(g) / np.log1p(top)
            rows += _rows(
                suite, split, "single", "ts", m, "", m, g, np.nan, fits, "max", _metrics(rng, 0.8 * q), n, rng
            )
        for b, gb in models.items():
            for s, gs in models.items():
                if gb <= gs:
                    continue
                q = np.log1p(gb) / np.log1p(top)
                for k, (meth, conf) in enumerate(duo_variants):
                    mets = _metrics(rng, min(1.0, 0.8 * q + 0.08 + 0.1 * gs / gb - 0.02 * k))
                    rows += _rows(
                        suite, split, "duo", meth, b, s, f"{b}+{s}", gb + gs, gs / gb, fits, conf, mets, n, rng
                    )
        if ensemble:
            base = max(models, key=models.get)
            members = "+".join([base, f"{base}_s1", f"{base}_s2"])
            rows += _rows(
                suite,
                split,
                "deep_ensemble",
                "mean",
                base,
                "",
                members,
                3 * models[base],
                np.nan,
                fits[:1],
                "max",
                _metrics(rng, 1.0),
                n,
                rng,
            )
    df = pd.DataFrame(rows)
    for c, (dtype, _) in COLUMNS.items():  # columns this helper does not model (e.g. temperatures)
        if c not in df.columns:
            df[c] = "" if dtype == "string" else np.nan
    return df[list(COLUMNS)]


def models_table(models=None) -> pd.DataFrame:
    models = dict(models or MODELS)
    return pd.DataFrame(
        [
            {
                "name": m,
                "arch": m.split("_")[0],
                "init": "pretrained",
                "img_size": 224,
                "seed": 0,
                "gflops": g,
                "params": int(g * 5e6),
                "throughput": 400.0 / g,
            }
            for m, g in models.items()
        ]
    )


def make_inputs(
    results: pd.DataFrame, *, config: ReportConfig | None = None, models=None, zoo=None, lock=None, params=None
) -> ReportInputs:
    res, notes = results_from_frame(results, source="synthetic results")
    return ReportInputs(
        results=res,
        models=models,
        zoo=zoo or {},
        params=params or {},
        lock=lock,
        config=config or ReportConfig(),
        notices=notes,
        sources={"results": "synthetic"},
    )


def page_data(report_dir) -> dict[str, dict]:
    """The split data files of a built report: ``"suite/split" -> {"s", "columns", "rows"}``."""
    import json
    from pathlib import Path

    out = {}
    for f in sorted((Path(report_dir) / "data").glob("*.js")):
        text = f.read_text(encoding="utf-8")
        assert text.startswith("UQ.put(") and text.endswith(");\n"), f
        key, _, body = text[len("UQ.put(") : -3].partition(",")
        out[json.loads(key)] = json.loads(body)
    return out


def page_rows(report_dir) -> list[dict]:
    """Every full-table row of a built report, decoded: column key -> text or number (metrics: value)."""
    rows = []
    for key, d in page_data(report_dir).items():
        s = d["strings"] if "strings" in d else d["s"]
        for r in d["rows"]:
            rec = {
                "_key": key,
                "_base": s[r[0]],
                "_family": s[r[1]],
                "_fit": s[r[2]],
                "_confidence": s[r[3]],
                "_sidekick": s[r[8]],
            }
            for c, v in zip(d["columns"], r[CELLS:]):
                if c["metric"]:
                    rec[c["key"]] = np.nan if v[0] is None else v[0]
                elif c["num"]:
                    rec[c["key"]] = np.nan if v is None else v
                else:
                    rec[c["key"]] = s[v[0]] if isinstance(v, list) else s[v]
            rows.append(rec)
    return rows


def big_results(n_models: int = 12) -> pd.DataFrame:
    """A results table the size of the embedded run's (about 3,000 rows over 6 splits)."""
    models = {f"m{i:02d}": round(0.05 * 1.45**i, 3) for i in range(n_models)}
    return synthetic_results(models=models, splits=("test", "shift", "ood", "val", "corrupt-noise-3", "corrupt-blur-3"))


SEEDED_MODELS = {"vit": 4.6, "vit_s1": 4.6, "vit_s2": 4.6, "res": 4.1, "eff": 0.39, "mnv3": 0.06}
SEEDED_ZOO = {n: {"arch": n.split("_")[0], "seed": int(n[-1]) if "_s" in n else 0} for n in SEEDED_MODELS}


def noisy_results() -> pd.DataFrame:
    """Splits ``test`` and ``shift`` of :data:`SEEDED_MODELS` (vit in 3 seeds, :data:`SEEDED_ZOO`); on ``shift``
    every row built on vit_s1 / vit_s2 moves by 0.04 / 0.08: the seeds disagree far more than the methods differ
    (a noise-dominated split), while each difference to the base alone stays as it was."""
    res = synthetic_results(models=SEEDED_MODELS, splits=("test", "shift"))
    for base, offset in (("vit_s1", 0.04), ("vit_s2", 0.08)):
        on = (res["split"] == "shift") & (res["base"] == base)
        for c in ("value", "ci_low", "ci_high"):
            res.loc[on, c] = res.loc[on, c] + offset
    return res


def headline_json(report_dir, *, inline: bool = False) -> dict:
    """The headline data of a built report's page (``<script id="uq-headline">``), with every split's data: those
    after a suite's first read from their data files (``{name, file}`` in the page; kept so with ``inline=True``)."""
    import json
    import re
    from pathlib import Path

    html = (Path(report_dir) / "index.html").read_text(encoding="utf-8")
    head = json.loads(
        re.search(r'<script type="application/json" id="uq-headline">(.*?)</script>', html, re.S).group(1)
    )
    for su in [] if inline else head["suites"]:
        for sp in su["splits"]:
            if "file" in sp:
                text = (Path(report_dir) / sp["file"]).read_text(encoding="utf-8")
                key, data = re.fullmatch(r'UQ\.put\(("[^"]*"),(.*)\);\n', text, re.S).groups()
                assert json.loads(key) == f"headline:{su['name']}/{sp['name']}"
                sp.update(json.loads(data))
    return head


def wait_until(page, expression: str, arg=None, timeout: float = 15.0):
    """Poll ``expression`` (a JavaScript function of ``arg``) until it is truthy; returns its value.

    Playwright's ``wait_for_function`` compiles its predicate with ``eval``, which the pages' Content-Security-Policy
    refuses; ``evaluate`` runs outside the page's policy."""
    import time

    end = time.monotonic() + timeout
    while True:
        got = page.evaluate(expression, arg)
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {expression} ({arg!r})")
        page.wait_for_timeout(50)


def first_render(page) -> dict:
    """After ``goto``: ms until the headline and the first full table were rendered (``ms``: the first render), until
    the Pareto chart was drawn (``chart_ms``, where the page has one; plotly.js loads after the headline), and the
    local files loaded (``shared``: those of the site's or report's ``assets/``)."""
    from pathlib import Path
    from urllib.parse import unquote, urlsplit

    page.wait_for_selector("details.split[data-ready]", state="attached")
    charts = page.locator(".chart-panel").count()
    if charts:
        page.wait_for_selector(".chart[data-ready]", state="attached")
    marks = page.evaluate("Object.fromEntries(performance.getEntriesByType('mark').map(m => [m.name, m.startTime]))")
    urls = [page.url] + page.evaluate("""[...document.querySelectorAll('script[src]')].map(s => s.src).concat(
        [...document.images].filter(i => i.complete && i.naturalWidth).map(i => i.currentSrc))""")
    files = sorted({Path(unquote(urlsplit(u).path)) for u in urls if u.startswith("file:")})
    shared = [f for f in files if f.parent.name == "assets"]
    return {
        "ms": max(marks["uq-headline"], marks["uq-table"]),
        "chart_ms": marks["uq-chart"] if charts else None,
        "marks": marks,
        "files": files,
        "bytes": sum(f.stat().st_size for f in files if f not in shared),
        "shared_bytes": sum(f.stat().st_size for f in shared),
    }


def choose_column(page, form: str, key: str, on: bool = True) -> None:
    """Tick (or untick) column ``key`` in the column chooser of ``form`` (a CSS selector: ``form.filters``,
    ``form.headline-controls``), as a reader does: open its "Columns" box, click the box, close it."""
    box = page.locator(f"{form} details.columns")
    box.locator("summary").click()
    (page.check if on else page.uncheck)(f"{form} details.columns input[name=col][value='{key}']")
    box.locator("summary").click()
