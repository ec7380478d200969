"""The evaluate stage: every single model and every pair, cached per unit.

A *unit* (one single model, or one base-sidekick pair) is evaluated once for a
given content of its members' logits, evaluation settings and numeric-core
code; its rows are cached in ``results/units/<key>.csv``. When the zoo grows,
only the new units are computed; the results table is then assembled from the
cache and the cost files.
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

import benchmark
from benchmark import store
from benchmark.core.pairs import enumerate_pairs
from benchmark.evaluation import (DUO_VARIANTS, EvalConfig, duo_unit, ensemble_unit, multi_member_unit, single_temperature,
                                  single_unit)
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


def load_model_logits(name: str, folder: Path | None = None) -> tuple[dict, str]:
    """split -> logits file of one model (or method output), and a hash of all its logits files."""
    folder = folder or config.paths(name)["logits"]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise store.StoreError(f"{folder}: no logits of model {name!r}; run `dvc repro logits@{name}`")
    h = hashlib.sha256()
    out = {}
    for f in files:
        out[f.stem] = store.load_logits_file(f)
        h.update(f.name.encode() + f.read_bytes())
    return out, h.hexdigest()[:16]


def _check_alignment(models: dict[str, dict], methods: dict[str, dict]) -> None:
    """All zoo models have logits for the same splits, on the same samples in the same order;
    method outputs cover val and test at least, aligned with the models on the splits they have."""
    ref_name, ref = next(iter(models.items()))
    for name, files in models.items():
        if set(files) != set(ref):
            raise store.StoreError(f"models {ref_name!r} and {name!r} have logits for different splits: {sorted(set(files) ^ set(ref))}")
    for name, files in (models | methods).items():
        if name in methods and ({"val", "test"} - set(files) or set(files) - set(ref)):
            raise store.StoreError(f"method output {name!r} has splits {sorted(files)}; it needs val and test and only splits of the models {sorted(ref)}")
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


def _split_groups(params: dict, logits: dict) -> dict:
    """split -> group ids (e.g. iWildCam camera locations) where the suite's data index has them."""
    from benchmark.pipeline.sources import read_index

    ref = next(iter(logits.values()))
    out = {}
    for split in ref:
        path = config.paths()["data"] / f"{split}.npz"
        index = read_index(path, split) if path.exists() else None
        if index is not None and index.groups is not None:
            if not torch.equal(torch.as_tensor(index.labels), ref[split][1]):
                raise store.StoreError(f"{path}: labels differ from the logits of split {split!r}; rerun the pipeline (dvc repro)")
            out[split] = torch.as_tensor(index.groups)
    return out


def deep_ensemble_groups(zoo: dict, sizes) -> list[list[str]]:
    """Member lists of the deep ensembles: for each group of zoo entries that differ only
    in their seed (at least 2 seeds), the first ``m`` seeds for every ``m`` in ``sizes``.

    Raises ``ValueError`` naming the method and model when a group has fewer seeds than asked.
    """
    groups: dict[tuple, list] = {}
    for e in zoo.values():
        groups.setdefault((e.arch, e.init, e.img_size, e.recipe), []).append(e)
    out = []
    for entries in groups.values():
        if len(entries) < 2:
            continue
        names = [e.name for e in sorted(entries, key=lambda e: e.seed)]
        for m in sizes:
            if isinstance(m, bool) or not isinstance(m, int) or m < 2:
                raise ValueError(f"evaluate.deep_ensembles: sizes must be integers >= 2, got {m!r}")
            if m > len(names):
                raise ValueError(f"deep_ensemble m={m} of model {entries[0].arch!r} ({names[0]}, ...): only {len(names)} seeds "
                                 f"in the zoo ({names}); add seeds to the zoo or lower evaluate.deep_ensembles")
            out.append(names[:m])
    return out


def method_outputs(folder: Path) -> dict[str, dict]:
    """Outputs of method stages (SVE, MC dropout, soups, ...): ``<folder>/<name>/{cost.json, <split>.safetensors}``."""
    out = {}
    for cost_file in sorted(folder.glob("*/cost.json")) if folder.exists() else []:
        info = store.read_json(cost_file)
        for key in ("family", "method", "base", "gflops", "params", "throughput"):
            if key not in info:
                raise store.StoreError(f"{cost_file}: missing key {key!r}")
        out[cost_file.parent.name] = info
    return out


def _sum_cost(costs: dict, members) -> dict:
    """Cost of running ``members`` one after the other; balance = sidekick/base GFLOPs for pairs."""
    return {"gflops": sum(costs[m]["gflops"] for m in members), "params": sum(costs[m]["params"] for m in members),
            "throughput": 1.0 / sum(1.0 / costs[m]["throughput"] for m in members),
            "balance": costs[members[1]]["gflops"] / costs[members[0]]["gflops"] if len(members) == 2 else float("nan")}


def _units(cfg, zoo, costs, logits, pairs, ensembles, methods) -> list[tuple]:
    """(identity, compute, cost) of every unit; identity[1:] are the names whose logits it reads."""
    nan = float("nan")
    units = [(("single", n), lambda n=n: (single_unit(cfg, n, logits[n]), []), _sum_cost(costs, [n])) for n in zoo]
    memo: dict = {}

    def temperature(model_logits: dict, fit: str) -> float:  # each model's own fit, once for all its pairs
        key = (id(model_logits), fit)
        if key not in memo:
            memo[key] = single_temperature(model_logits, fit)
        return memo[key]

    units += [(("duo", p.base, p.sidekick),
               lambda b=p.base, s=p.sidekick: duo_unit(cfg, b, s, logits[b], logits[s], temperature=temperature),
               _sum_cost(costs, [p.base, p.sidekick])) for p in pairs]
    units += [(("deep_ensemble", *ms), lambda ms=ms: (ensemble_unit(cfg, ms, [logits[m] for m in ms]), []),
               dict(_sum_cost(costs, ms), balance=nan)) for ms in ensembles]
    units += [(("method", n), lambda n=n, i=info: (multi_member_unit(cfg, _method_ident(n, i), logits[n]), []),
               {"gflops": info["gflops"], "params": info["params"], "throughput": info["throughput"], "balance": nan,
                "overhead_percent": info.get("overhead_percent", nan)})
              for n, info in methods.items()]
    return units


def _method_ident(name: str, info: dict) -> dict:
    """Rows of a method output name the zoo models it was built from (soup ingredients, or its base)."""
    ingredients = info.get("ingredients")
    members = "+".join(ingredients) if isinstance(ingredients, list) and ingredients else info["base"]
    return {"family": info["family"], "method": info["method"], "base": info["base"], "members": members}


def run(params: dict, *, progress: bool = True) -> dict:
    """Evaluate all units, write metrics.csv, paired.csv, models.csv, summary.json."""
    ev = params["evaluate"]
    cfg = EvalConfig.from_params(params.get("suite", "embedded"), ev)
    zoo = config.zoo(params)
    ensembles = deep_ensemble_groups(zoo, ev.get("deep_ensembles") or [])
    costs = load_costs(zoo)
    methods = method_outputs(config.paths()["methods"])
    loaded = {name: load_model_logits(name) for name in zoo}
    loaded |= {name: load_model_logits(name, config.paths()["methods"] / name) for name in methods}
    _check_alignment({n: loaded[n][0] for n in zoo}, {n: loaded[n][0] for n in methods})
    logits = {n: {s: (lf.logits, lf.labels) for s, lf in files.items()} for n, (files, _) in loaded.items()}
    hashes = {n: h for n, (_, h) in loaded.items()}
    cfg = dataclasses.replace(cfg, groups=_split_groups(params, logits))
    settings = config.fingerprint(cfg.settings(), code_hash())
    bal = ev.get("balance_range")
    pairs = enumerate_pairs([{"name": n, "gflops": c["gflops"], "params": c["params"]} for n, c in costs.items()],
                            balance_range=tuple(bal) if bal else None)
    units = _units(cfg, zoo, costs, logits, pairs, ensembles, methods)
    folder = config.paths()["units"]
    folder.mkdir(parents=True, exist_ok=True)
    tables, paired_tables, keys, computed = [], [], set(), 0
    for ident, compute, cost in tqdm(units, desc="evaluate", disable=not progress):
        inputs = [hashes[m] for m in ident[1:]]
        key = config.fingerprint(ident, inputs, settings)
        keys.add(key)
        rows, paired, new = _cached(folder, key, compute)
        computed += new
        for col, val in cost.items():
            rows[col] = val
        rows["inputs_hash"] = config.fingerprint(inputs)
        tables.append(rows)
        paired_tables.append(paired)
    for stale in folder.glob("*.csv"):
        if stale.name.split(".")[0] not in keys:
            stale.unlink()
    results = validate_results(pd.concat(tables, ignore_index=True), source="evaluation")[list(COLUMNS)]
    p = config.paths()
    store.write_table(p["metrics"], results)
    store.write_table(p["paired"], pd.concat(paired_tables, ignore_index=True))
    model_cols = ["name", "arch", "init", "img_size", "seed", "role", "gflops", "params", "throughput"]
    store.write_table(p["models"], pd.DataFrame(costs.values())[model_cols])
    stats = {"units": len(units), "computed": computed, "reused": len(units) - computed, "pairs": len(pairs)}
    store.write_json(p["summary"], summary(results, ev.get("main_fit", "converged")) | {"units": stats})
    store.write_json(folder / "last_run.json", stats)
    return stats


def summary(results: pd.DataFrame, fit: str) -> dict:
    """``dvc metrics`` view: test-split metrics of every single and weighted duo (``fit``, max confidence)."""
    keep = results[(results["split"] == "test") & (results["fit"] == fit) & (results["confidence"] == "max")]
    out: dict = {}
    for (family, method, members), g in keep.groupby(["family", "method", "members"], sort=True):
        if family == "duo" and (method, "max") != DUO_VARIANTS[0]:
            continue
        out.setdefault(family, {})[members] = {m: round(float(v), 6) for m, v in zip(g["metric"], g["value"])}
    return out
