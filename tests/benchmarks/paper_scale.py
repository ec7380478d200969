"""Synthetic result bundles at the papers' scale, packed by the project's own ``submit``.

For every suite under ``suites/``: its zoo (``zoo/<suite>.yaml`` through ``suites/<suite>/params.yaml``), its reported
splits (``suites/<suite>.yaml``; ``corrupt-*`` = CIFAR-100-C's 19 corruptions x 5 severities), and every unit its
evaluate stage runs: each model alone, every pair with GFLOPs(base) > GFLOPs(sidekick)
(:func:`benchmark.core.pairs.enumerate_pairs`), the deep ensembles of its seed groups
(:func:`benchmark.core.noise.seed_groups`) and its SVE sizes. The rows of a unit have the structure the evaluate stage
gives them: the stage's own unit functions (the method modules, :mod:`benchmark.methods.rows`) run once on tiny
synthetic logits, and their (method, fit, confidence, metric) rows are repeated for every unit and split, with values
drawn at random in each metric's range (full precision, as real values). Each model's logits are a tiny file (they
only make the rows' ``inputs_hash``); :func:`benchmark.bundle.pack.submit` packs the results folder as a contributor
would, so the bundles pass the same checks.

``scale`` keeps that fraction of each suite's reported splits (``test`` always), so the rows grow about
linearly with it. Made once and cached (:func:`cached_bundles`). By hand::

    python tests/benchmarks/paper_scale.py OUT [--scale 1.0]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONTRIBUTOR = "synthetic paper-scale benchmark (tests/benchmarks/paper_scale.py)"
N_SAMPLES = 5000  # the rows' n
# what the cache key covers: this generator, the code that packs and checks bundles, the rows' structure, the suites
KEY_FILES = (
    "tests/benchmarks/paper_scale.py",
    "benchmark/bundle/pack.py",
    "benchmark/bundle/schema.py",
    "benchmark/methods/rows.py",
    "benchmark/methods/single.py",
    "benchmark/methods/duo.py",
    "benchmark/methods/deep_ensemble.py",
    "benchmark/storage/results_schema.py",
)
KEY_GLOBS = ("suites/*.yaml", "suites/*/params.yaml", "zoo/*.yaml")


def suite_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "suites").glob("*.yaml"))


def reported_splits(suite: str, scale: float = 1.0) -> list[str]:
    """The splits a suite's rows cover (all but train and val), ``test`` first; ``scale`` keeps that fraction."""
    from benchmark.data.corruptions import SEVERITIES
    from benchmark.data.paper.cifar import CIFAR_C_CORRUPTIONS

    spec = yaml.safe_load((ROOT / "suites" / f"{suite}.yaml").read_text())
    out = []
    for name in spec["splits"]:
        if name == "corrupt-*":
            out += [f"corrupt-{c}-{s}" for c in CIFAR_C_CORRUPTIONS for s in SEVERITIES]
        elif name not in ("train", "val"):
            out.append(name)
    out = sorted(out, key=lambda s: s != "test")
    return out[: max(1, math.ceil(scale * len(out)))]


def fake_gflops(arch: str) -> float:
    """A stable, plausible GFLOPs per architecture (log-uniform in [0.05, 60]); same arch, same cost."""
    u = int(hashlib.sha256(arch.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return float(math.exp(math.log(0.05) + u * math.log(60 / 0.05)))


# ---- the rows' structure, from the evaluate stage's own unit functions ---------------------------


def _tiny_logits(seed: int, splits, members: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    out = {}
    for s in splits:
        y = torch.arange(24) % 4
        shape = (members, 24, 4) if members else (24, 4)
        out[s] = (torch.randn(shape, generator=g) + 2.0 * torch.nn.functional.one_hot(y, 4), y)
    return out


_TEMPLATES: dict[str, dict[str, pd.DataFrame]] = {}


def templates(suite: str, evaluate: dict) -> dict[str, pd.DataFrame]:
    """Per unit kind (single, duo, deep_ensemble, sve-1, sve-M), the rows of one unit on the splits ``test``,
    ``other`` (any other labelled split) and ``ood``: ident columns, metric, and whether it has an interval.
    They do not depend on the scale: made once per suite and evaluate params (per process), on one torch thread
    (the logits are tiny: more threads only wait on each other)."""
    key = json.dumps([suite, evaluate], sort_keys=True, default=str)
    if key not in _TEMPLATES:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            _TEMPLATES[key] = _templates(suite, evaluate)
        finally:
            torch.set_num_threads(threads)
    return {k: v.copy() for k, v in _TEMPLATES[key].items()}


def _templates(suite: str, evaluate: dict) -> dict[str, pd.DataFrame]:
    from benchmark.config.evaluate import EvalConfig
    from benchmark.methods.deep_ensemble import ensemble_unit
    from benchmark.methods.duo import duo_unit
    from benchmark.methods.rows import multi_member_unit
    from benchmark.methods.single import single_unit

    cfg = EvalConfig.from_params(suite, evaluate)
    cfg = dataclasses.replace(cfg, n_bootstrap=20, bootstrap_splits=("test", "other", "ood"))
    if suite == "iwildcam":  # the evaluate stage adds group rows where the data index has groups (camera traps)
        cfg = dataclasses.replace(cfg, groups={s: torch.arange(24) % 3 for s in ("test", "other")})
    splits = ("val", "test", "other", "ood")
    a, b = _tiny_logits(0, splits), _tiny_logits(1, splits)
    duo_rows, paired_rows = duo_unit(cfg, "a", "b", a, b)
    rows = {
        "single": single_unit(cfg, "a", a),
        "duo": duo_rows,
        "deep_ensemble": ensemble_unit(cfg, ["a", "b"], [a, b]),
        "sve-1": multi_member_unit(
            cfg, {"family": "sve", "method": "m1", "base": "a", "members": "a"}, _tiny_logits(2, splits)
        ),
        "sve-M": multi_member_unit(
            cfg, {"family": "sve", "method": "mM", "base": "a", "members": "a"}, _tiny_logits(3, splits, members=2)
        ),
    }
    out = {}
    for kind, rs in rows.items():
        t = pd.DataFrame(rs)
        t["has_ci"] = t["ci_low"].notna()
        t["has_t"] = t["temperature_base"].notna()
        out[kind] = t[["split", "family", "method", "fit", "confidence", "metric", "has_ci", "has_t"]]
    paired = pd.DataFrame(paired_rows)
    out["paired"] = paired[paired["split"] == "test"].drop(columns=["base", "sidekick", "split", "suite"])
    return out


# ---- one suite's results folder -----------------------------------------------------------------------


def _units(zoo: dict, params: dict) -> pd.DataFrame:
    from benchmark.core.noise import seed_groups
    from benchmark.core.pairs import enumerate_pairs

    models = {
        n: {"name": n, "gflops": fake_gflops(e.arch), "params": int(fake_gflops(e.arch) * 4.1e6)}
        for n, e in zoo.items()
    }
    thr = {n: 900.0 / m["gflops"] for n, m in models.items()}
    units = [
        {
            "kind": "single",
            "base": n,
            "sidekick": "",
            "members": n,
            "gflops": m["gflops"],
            "params": m["params"],
            "throughput": thr[n],
            "balance": np.nan,
        }
        for n, m in models.items()
    ]
    for p in enumerate_pairs(models.values(), (params["evaluate"].get("balance_range") or None)):
        units.append(
            {
                "kind": "duo",
                "base": p.base,
                "sidekick": p.sidekick,
                "members": f"{p.base}+{p.sidekick}",
                "gflops": p.gflops,
                "params": p.params,
                "balance": p.balance,
                "throughput": 1.0 / (1.0 / thr[p.base] + 1.0 / thr[p.sidekick]),
            }
        )
    for names in (list(g.names) for g in seed_groups(zoo)):  # by seed: the first m seeds
        for m in params["evaluate"].get("deep_ensembles") or []:
            ms = names[:m]
            units.append(
                {
                    "kind": "deep_ensemble",
                    "base": ms[0],
                    "sidekick": "",
                    "members": "+".join(ms),
                    "method": f"m{m}",
                    "gflops": sum(models[x]["gflops"] for x in ms),
                    "params": sum(models[x]["params"] for x in ms),
                    "throughput": thr[ms[0]] / m,
                    "balance": np.nan,
                }
            )
    sve = params.get("sve") or {}
    for m in sve.get("members") or []:
        b = sve["base"]
        units.append(
            {
                "kind": "sve-1" if m == 1 else "sve-M",
                "base": b,
                "sidekick": "",
                "members": b,
                "method": f"m{m}",
                "gflops": m * models[b]["gflops"],
                "params": models[b]["params"] + int(m * 2.5e5),
                "throughput": thr[b] / m,
                "balance": np.nan,
                "overhead_percent": 0.85 * m,
                "extra_params_percent": 0.47 * (m - 1),
            }
        )
    df = pd.DataFrame(
        units
    )  # training budgets (synthetic): every zoo model fine-tuned on 10,000 images, all parameters
    one = {n: (10_000, m["params"]) for n, m in models.items()}
    members = df["members"].str.split("+")
    df["train_images"] = [
        m * 10_000 if k.startswith("sve") else sum(one[x][0] for x in ms)
        for k, ms, m in zip(
            df["kind"],
            members,
            df.get("method", pd.Series([""] * len(df))).fillna("").str.lstrip("m").replace("", "1").astype(int),
        )
    ]
    df["train_params"] = [
        int(m * 2.5e5) if k.startswith("sve") else sum(one[x][1] for x in ms)
        for k, ms, m in zip(
            df["kind"],
            members,
            df.get("method", pd.Series([""] * len(df))).fillna("").str.lstrip("m").replace("", "1").astype(int),
        )
    ]
    return df


def _write_logits(results: Path, units: pd.DataFrame, splits: list[str]) -> dict[str, str]:
    """Tiny logits files for every model and method output (distinct bytes each); returns unit folder -> hash."""
    from benchmark.bundle.pack import folder_hash
    from benchmark.storage.store import save_logits_file

    folders = {}
    for i, u in enumerate(units.itertuples()):
        if u.kind in ("single", "sve-1", "sve-M"):
            folder = f"logits/{u.base}" if u.kind == "single" else f"methods/sve-{u.method}"
            for k, s in enumerate(["val", *splits]):
                save_logits_file(
                    results / folder / f"{s}.safetensors",
                    torch.full((2, 3), float(i * 1000 + k)),
                    torch.tensor([0, 1]),
                    meta={"synthetic": folder},
                )
            if u.kind != "single":
                (results / folder / "cost.json").write_text(
                    json.dumps(
                        {
                            "family": "sve",
                            "method": u.method,
                            "base": u.base,
                            "members": int(u.method[1:]),
                            "gflops": u.gflops,
                            "params": int(u.params),
                            "throughput": u.throughput,
                        }
                    )
                )
            folders[folder] = folder_hash(results / folder)
    return folders


def _values(rng, metric: pd.Series, q: np.ndarray) -> np.ndarray:
    """Random values in each metric's range, better with quality ``q`` in [0, 1]."""
    from benchmark.bundle.schema import RANGES
    from benchmark.core.metric_info import METRICS

    u = np.clip(0.25 + 0.6 * q + rng.normal(0, 0.04, len(q)), 0.01, 0.99)
    hib = metric.map(lambda m: METRICS[m].higher_is_better).to_numpy(dtype=bool)
    u = np.where(hib, u, 1 - u)
    hi = metric.map(lambda m: RANGES.get(m, (0.0, 1.0))[1]).to_numpy(dtype=float)
    return np.where(np.isfinite(hi), u * np.minimum(hi, 1.0), 3.0 * u)


def results_folder(suite: str, folder: Path, scale: float, seed: int = 0) -> int:
    """Write ``folder/results`` (logits, metrics.csv, paired.csv, models.csv) of ``suite``; returns the rows."""
    from benchmark.bundle.csv_files import to_csv_bytes
    from benchmark.models.zoo import load_zoo
    from benchmark.stages.stage_config import fingerprint
    from benchmark.storage.results_schema import COLUMNS

    params = yaml.safe_load((folder / "params.yaml").read_text())
    zoo = load_zoo(folder / params["zoo"], check_arch=False)
    splits = reported_splits(suite, scale)
    units = _units(zoo, params)
    results = folder / "results"
    hashes = _write_logits(results, units, splits)
    member_hash = lambda name: hashes[f"logits/{name}"]  # noqa: E731
    units["inputs_hash"] = [
        fingerprint([hashes[f"methods/sve-{u.method}"]])
        if u.kind.startswith("sve")
        else fingerprint([member_hash(m) for m in u.members.split("+")])
        for u in units.itertuples()
    ]
    logg = np.log(units["gflops"].to_numpy())
    units["q"] = (logg - logg.min()) / max(np.ptp(logg), 1e-9) * 0.8 + np.where(units["kind"] == "duo", 0.1, 0.0)
    units["unit"] = np.arange(len(units))
    rng = np.random.default_rng(seed)
    tpl = templates(suite, params["evaluate"])
    parts = []
    for kind, g in units.groupby("kind", sort=True):
        t = tpl[kind]
        for split in splits:
            sk = "ood" if split == "ood" else "test" if split == "test" else "other"
            unit = g.drop(columns=["kind"]).rename(columns={"method": "unit_method"})
            rows = unit.merge(t[t["split"] == sk].drop(columns=["split"]), how="cross")
            if kind not in ("single", "duo"):  # ensembles and SVE: the unit's size names the method (m5, m5_logit, ...)
                rows["method"] = rows["unit_method"] + rows["method"].str.extract(r"(_logit)$")[0].fillna("")
            rows = rows.drop(columns=["unit_method"], errors="ignore")
            rows["split"] = split
            rows["ci"] = rows.pop("has_ci") & (split in params["evaluate"].get("bootstrap_splits", ["test"]))
            parts.append(rows)
    df = pd.concat(parts, ignore_index=True)
    severity = {s: float(s[-1]) if s[-2:-1] == "-" and s[-1].isdigit() else 0.0 for s in splits}  # corrupt-*-<1..5>
    q = df["q"].to_numpy() - 0.15 * df["split"].map(severity).to_numpy(dtype=float) / 5
    df["value"] = _values(rng, df["metric"], q)
    half = rng.uniform(0.002, 0.02, len(df))
    lo, hi = df["value"] - half, df["value"] + half
    top = df["metric"].map(lambda m: 1.0 if m not in ("nll", "brier", "aurc_trapezoid") else np.inf)
    df["ci_low"] = np.where(df["ci"], np.maximum(lo, 0.0), np.nan)
    df["ci_high"] = np.where(df["ci"], np.minimum(hi, top), np.nan)
    t = rng.uniform(0.6, 2.5, (len(units), 2))  # per unit and fit: base and sidekick temperatures
    fit_i = (df["fit"] == "paper-exact").to_numpy(dtype=int)
    unit = df["unit"].to_numpy()
    tb = np.where(df["has_t"], t[unit, fit_i], np.nan)
    ts = np.where(df["has_t"] & (df["sidekick"] != ""), t[(unit + 1) % len(units), fit_i], np.nan)
    duo = (df["sidekick"] != "").to_numpy()
    df["temperature_base"], df["temperature_side"] = tb, ts
    df["weight_base"] = np.where(duo, 1 / (2 * tb), 1 / tb)
    df["weight_side"] = np.where(duo, 1 / (2 * ts), np.where(df["has_t"], 0.0, np.nan))
    df["n"] = N_SAMPLES
    df["suite"] = suite
    for c in ("overhead_percent", "extra_params_percent"):
        if c not in df.columns:
            df[c] = np.nan
    (results / "metrics.csv").write_bytes(to_csv_bytes(df[list(COLUMNS)]))  # = to_csv(index=False), faster
    pairs = units[units["kind"] == "duo"][["base", "sidekick"]].merge(tpl["paired"], how="cross")
    pairs.insert(0, "split", "test")
    pairs.insert(0, "suite", suite)
    for c in ("diff", "ci_low", "ci_high"):
        if c in pairs.columns:
            pairs[c] = rng.normal(0.005, 0.01, len(pairs))
    if "test" in splits:
        pairs.to_csv(results / "paired.csv", index=False)
    pd.DataFrame(
        [
            {
                "name": n,
                "arch": e.arch,
                "init": e.init,
                "img_size": e.img_size,
                "seed": e.seed,
                "role": e.role,
                "gflops": fake_gflops(e.arch),
                "params": int(fake_gflops(e.arch) * 4.1e6),
                "throughput": 900.0 / fake_gflops(e.arch),
            }
            for n, e in zoo.items()
        ]
    ).to_csv(results / "models.csv", index=False)
    return len(df)


def make_bundles(out: Path, scale: float = 1.0, *, progress: bool = False) -> dict[str, int]:
    """``out/<suite>/paper-scale/`` for every suite (made through ``submit``) and ``out/embedded/<id>/`` (the
    committed embedded bundle, copied); returns rows per suite."""
    from benchmark.bundle.pack import submit
    from benchmark.bundle.site import find_bundles

    work = out.parent / f".{out.name}.work"
    shutil.rmtree(work, ignore_errors=True)
    rows = {}
    for suite in suite_names():
        folder = work / "suites" / suite
        folder.mkdir(parents=True)
        shutil.copy(ROOT / "suites" / f"{suite}.yaml", work / "suites" / f"{suite}.yaml")
        params = yaml.safe_load((ROOT / "suites" / suite / "params.yaml").read_text())
        (folder / "params.yaml").write_text(yaml.safe_dump(params))
        (work / "zoo").mkdir(exist_ok=True)
        zoo_src = (ROOT / "suites" / suite / params["zoo"]).resolve()
        shutil.copy(zoo_src, work / "zoo" / zoo_src.name)
        rows[suite] = results_folder(suite, folder, scale)
        if progress:
            print(f"paper_scale: {suite}: {rows[suite]} rows", file=sys.stderr)
        submit(suite, out / suite / "paper-scale", root=work, contributor=CONTRIBUTOR)
        shutil.rmtree(folder / "results")
    for b in find_bundles(ROOT / "leaderboard")[0]:
        shutil.copytree(b, out / b.relative_to(ROOT / "leaderboard"))
        rows[b.parent.name] = rows.get(b.parent.name, 0) + _bundle_rows(b)
    shutil.rmtree(work)
    return rows


def _bundle_rows(bundle: Path) -> int:
    from benchmark.bundle.schema import load_bundle

    return len(load_bundle(bundle, check_arch=False).rows)


def cache_key(scale: float) -> str:
    h = hashlib.sha256(repr(scale).encode())
    files = [ROOT / f for f in KEY_FILES] + sorted(p for g in KEY_GLOBS for p in ROOT.glob(g))
    files += sorted((ROOT / "leaderboard").rglob("manifest.json"))
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode() + f.read_bytes())
    return h.hexdigest()[:16]


def cached_bundles(cache_dir: Path, scale: float = 1.0) -> tuple[Path, dict[str, int]]:
    """The bundles of ``scale`` under ``cache_dir`` (made once per cache key); returns (folder, rows per suite)."""
    folder = Path(cache_dir) / f"scale-{scale:g}-{cache_key(scale)}"
    done = folder / "rows.json"
    if not done.is_file():
        shutil.rmtree(folder, ignore_errors=True)
        rows = make_bundles(folder / "bundles", scale)
        done.write_text(json.dumps(rows, sort_keys=True))
    return folder / "bundles", json.loads(done.read_text())


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="folder for the bundles (must not exist)")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of each suite's splits")
    args = ap.parse_args()
    print(json.dumps(make_bundles(args.out, args.scale, progress=True), indent=1))
