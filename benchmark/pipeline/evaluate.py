"""The evaluate stage: every single model and every pair, cached per unit.

A *unit* (one single model, or one base-sidekick pair) is evaluated once for a
given content of its members' logits, evaluation settings and numeric-core
code; its rows are cached in ``results/units/<key>.csv``. When the zoo grows,
only the new units are computed; the results table is then assembled from the
cache and the cost files.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

import benchmark
from benchmark import store
from benchmark.core.pairs import enumerate_pairs
from benchmark.evaluation import DUO_VARIANTS, EvalConfig, duo_unit, single_unit
from benchmark.pipeline import config
from benchmark.results_schema import COLUMNS, validate_results

CODE = ("core", "evaluation.py")  # the code whose change invalidates cached units


def code_hash() -> str:
    root = Path(benchmark.__file__).parent
    h = hashlib.sha256()
    for part in CODE:
        for f in sorted((root / part).rglob("*.py")) if (root / part).is_dir() else [root / part]:
            h.update(f.relative_to(root).as_posix().encode() + f.read_bytes())
    return h.hexdigest()[:16]


def load_costs(names) -> dict[str, dict]:
    out = {}
    for name in names:
        path = config.paths(name)["cost"]
        if not path.exists():
            raise store.StoreError(f"{path}: missing cost of model {name!r}; run `dvc repro cost@{name}`")
        out[name] = store.read_json(path)
    return out


def load_model_logits(name: str) -> tuple[dict, str]:
    """split -> (logits, labels) of one model, and a hash of all its logits files."""
    folder = config.paths(name)["logits"]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise store.StoreError(f"{folder}: no logits of model {name!r}; run `dvc repro logits@{name}`")
    h = hashlib.sha256()
    out = {}
    for f in files:
        lf = store.load_logits_file(f)
        if lf.logits.ndim != 2:
            raise store.StoreError(f"{f}: expected (N, C) logits, got {tuple(lf.logits.shape)}")
        out[f.stem] = lf
        h.update(f.name.encode() + f.read_bytes())
    return out, h.hexdigest()[:16]


def _check_alignment(all_logits: dict[str, dict]) -> None:
    ref_name, ref = next(iter(all_logits.items()))
    for name, files in all_logits.items():
        if set(files) != set(ref):
            raise store.StoreError(f"models {ref_name!r} and {name!r} have logits for different splits: {sorted(set(files) ^ set(ref))}")
        for split in files:
            store.check_aligned(ref[split], files[split])


def _cached(folder: Path, key: str, compute) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    rows_path, paired_path = folder / f"{key}.csv", folder / f"{key}.paired.csv"
    if rows_path.exists() and paired_path.exists():
        return pd.read_csv(rows_path, keep_default_na=False, na_values=["NaN", "nan", ""]), pd.read_csv(paired_path), False
    rows, paired = compute()
    rows_df, paired_df = pd.DataFrame(rows), pd.DataFrame(paired, columns=["suite", "split", "base", "sidekick", "fit", "method", "metric", "diff", "ci_low", "ci_high", "p_value"])
    store.write_table(paired_path, paired_df)
    store.write_table(rows_path, rows_df)
    return rows_df, paired_df, True


def run(params: dict, *, progress: bool = True) -> dict:
    """Evaluate all units, write metrics.csv, paired.csv, models.csv, summary.json."""
    cfg = EvalConfig.from_params(params.get("suite", "embedded"), params["evaluate"])
    zoo = config.zoo(params)
    costs = load_costs(zoo)
    loaded = {name: load_model_logits(name) for name in zoo}
    logits = {n: {s: (lf.logits, lf.labels) for s, lf in files.items()} for n, (files, _) in loaded.items()}
    _check_alignment({n: files for n, (files, _) in loaded.items()})
    hashes = {n: h for n, (_, h) in loaded.items()}
    settings = config.fingerprint(cfg.__dict__, code_hash())
    bal = params["evaluate"].get("balance_range")
    pairs = enumerate_pairs([{"name": n, "gflops": c["gflops"], "params": c["params"]} for n, c in costs.items()],
                            balance_range=tuple(bal) if bal else None)
    units = [("single", (n,)) for n in zoo] + [("duo", (p.base, p.sidekick)) for p in pairs]
    folder = config.paths()["units"]
    folder.mkdir(parents=True, exist_ok=True)
    tables, paired_tables, keys, computed = [], [], set(), 0
    for kind, members in tqdm(units, desc="evaluate", disable=not progress):
        key = config.fingerprint(kind, members, [hashes[m] for m in members], settings)
        keys.add(key)
        if kind == "single":
            compute = lambda m=members[0]: (single_unit(cfg, m, logits[m]), [])  # noqa: E731
        else:
            compute = lambda b=members[0], s=members[1]: duo_unit(cfg, b, s, logits[b], logits[s])  # noqa: E731
        rows, paired, new = _cached(folder, key, compute)
        computed += new
        rows["inputs_hash"] = config.fingerprint([hashes[m] for m in members])
        tables.append(rows)
        paired_tables.append(paired)
    for stale in folder.glob("*.csv"):
        if stale.name.split(".")[0] not in keys:
            stale.unlink()
    results = _with_costs(pd.concat(tables, ignore_index=True), costs)
    p = config.paths()
    store.write_table(p["metrics"], results)
    store.write_table(p["paired"], pd.concat(paired_tables, ignore_index=True))
    store.write_table(p["models"], pd.DataFrame(costs.values())[["name", "arch", "init", "img_size", "seed", "role", "gflops", "params", "throughput"]])
    stats = {"units": len(units), "computed": computed, "reused": len(units) - computed, "pairs": len(pairs)}
    store.write_json(p["summary"], summary(results, params["evaluate"].get("main_fit", "converged")) | {"units": stats})
    store.write_json(folder / "last_run.json", stats)
    return stats


def _with_costs(rows: pd.DataFrame, costs: dict) -> pd.DataFrame:
    def member_cost(members: str, key: str) -> list[float]:
        return [costs[m][key] for m in members.split("+")]

    rows["gflops"] = [sum(member_cost(m, "gflops")) for m in rows["members"]]
    rows["params"] = [sum(member_cost(m, "params")) for m in rows["members"]]
    rows["throughput"] = [1.0 / sum(1.0 / t for t in member_cost(m, "throughput")) for m in rows["members"]]
    rows["balance"] = [costs[s]["gflops"] / costs[b]["gflops"] if s else float("nan") for b, s in zip(rows["base"], rows["sidekick"])]
    return validate_results(rows[[c for c in COLUMNS if c in rows.columns]], source="evaluation")


def summary(results: pd.DataFrame, fit: str) -> dict:
    """``dvc metrics`` view: test-split metrics of every single and weighted duo (``fit``, max confidence)."""
    keep = results[(results["split"] == "test") & (results["fit"] == fit) & (results["confidence"] == "max")]
    out: dict = {}
    for (family, method, members), g in keep.groupby(["family", "method", "members"], sort=True):
        if family == "duo" and (method, "max") != DUO_VARIANTS[0]:
            continue
        out.setdefault(family, {})[members] = {m: round(float(v), 6) for m, v in zip(g["metric"], g["value"])}
    return out
