"""The evaluate stage: every single model and every pair, cached per unit.

A *unit* (one single model, one base-sidekick pair, one deep ensemble or one
method output) is evaluated once for a given content of its members' logits,
evaluation settings and code (every package file the module computing it imports:
its method's module for a single, duo or deep ensemble, :mod:`benchmark.methods.rows`
for a method output); its rows are cached in ``results/units/<key>.csv``. When the
zoo grows, only the new units are computed; the results table is then assembled
from the cache and the cost files. The methods evaluated per unit are the registered methods of group
``evaluate`` (:func:`benchmark.methods.registry.list_methods`: single, duo, deep ensemble, then any other by its
module's name): a module that registers one is all it takes, nothing lists it here (the generated pipeline makes
their modules dependencies of this stage); every other method's stage writes an output.

Logits are memory-mapped, never all loaded: each unit maps only its members'
files, and ``evaluate.workers`` > 1 runs the units in that many worker
processes (:mod:`benchmark.evaluation.runner`); the results do not depend on it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pandas as pd
import torch

import benchmark
from benchmark.config.evaluate import EvalConfig
from benchmark.evaluation.runner import OUTPUT, Context, Unit, cached, read_unit, remove_stale, rows_function, run_units
from benchmark.methods import duo, registry
from benchmark.methods.budget import row_budget
from benchmark.methods.registry import LogitsInput
from benchmark.stages import stage_config
from benchmark.stages.params_config import Params
from benchmark.storage import imports, store
from benchmark.storage.results_schema import COLUMNS, validate_results


def code_hash(kind: str) -> str:
    """A hash of the code that computes a unit of ``kind``: every package file the module of its rows function
    imports (a changed method invalidates its cached units, and only those)."""
    root = Path(benchmark.__file__).parent.parent
    files = imports.closure(root, rows_function(kind).__module__)
    return imports.code_hash(root, files)


def load_costs(names) -> dict[str, dict]:
    """Each zoo model's cost record (``results/cost/<name>.json``); :class:`StoreError` naming the stage that writes a
    missing one."""
    out = {}
    for name in names:
        path = stage_config.paths(name)["cost"]
        if not path.exists():
            raise store.StoreError(
                f"{path}: missing cost of model {name!r}; run `dvc repro logits@{name}` (it writes the cost record)"
            )
        out[name] = store.read_json(path)
    return out


def model_files(name: str, folder: Path | None = None) -> tuple[dict[str, Path], str]:
    """split -> logits file of one model (or method output), and a hash of all its logits files
    (their names and bytes, read in 16 MB chunks)."""
    folder = folder or stage_config.paths(name)["logits"]
    files = store.listing(folder, "*.safetensors")  # hidden names: leftovers of a killed write
    if not files:
        raise store.StoreError(f"{folder}: no logits of model {name!r}; run `dvc repro logits@{name}`")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 24):
                h.update(chunk)
    return {f.stem: f for f in files}, h.hexdigest()[:16]


def _check_alignment(models: dict[str, dict], methods: dict[str, dict]) -> None:
    """All zoo models have logits for the same splits, on the same samples in the same order;
    method outputs cover val and test at least, aligned with the models on the splits they have."""
    ref_name, ref = next(iter(models.items()))
    for name, files in models.items():
        if set(files) != set(ref):
            raise store.StoreError(
                f"models {ref_name!r} and {name!r} have logits for different splits: {sorted(set(files) ^ set(ref))}"
            )
    for name, files in (models | methods).items():
        if name in methods and ({"val", "test"} - set(files) or set(files) - set(ref)):
            raise store.StoreError(
                f"method output {name!r} has splits {sorted(files)}; it needs val and test and only splits of the "
                f"models {sorted(ref)}"
            )
        for split in files:
            store.check_aligned(ref[split], files[split])


def split_groups(labels: dict) -> dict:
    """split -> group ids (e.g. iWildCam camera locations) where the suite's data index has them;
    ``labels``: split -> labels of the logits."""
    from benchmark.stages.suite_source import read_index

    out = {}
    for split, y in labels.items():
        path = stage_config.paths()["data"] / f"{split}.npz"
        index = read_index(path, split) if path.exists() else None
        if index is not None and index.groups is not None:
            if not torch.equal(torch.as_tensor(index.labels), y):
                raise store.StoreError(
                    f"{path}: labels differ from the logits of split {split!r}; rerun the pipeline (dvc repro)"
                )
            out[split] = torch.as_tensor(index.groups)
    return out


def method_outputs(folder: Path) -> dict[str, dict]:
    """Outputs of method stages (SVE, MC dropout, soups, ...): ``<folder>/<name>/{cost.json, <split>.safetensors}``."""
    out = {}
    for cost_file in store.listing(folder, "*/cost.json"):  # not .name.xxxx/ leftovers of a killed write
        info = store.read_json(cost_file)
        for key in ("family", "method", "base", "gflops", "params", "throughput"):
            if key not in info:
                raise store.StoreError(f"{cost_file}: missing key {key!r}")
        out[cost_file.parent.name] = info
    return out


def unit_list(zoo, costs, cfg: EvalConfig, methods) -> list[tuple[tuple, dict | None, dict]]:
    """(identity, method info, cost) of every unit; identity[1:] are the names whose logits it reads.

    The units of the methods of group ``evaluate`` (:func:`benchmark.methods.registry.list_methods`: single, duo,
    deep ensemble, then the others by module name) in that order, then
    one unit per method output in ``results/methods/`` (every other method's stage writes one). ``costs``: zoo
    model -> its cost record; ``methods``: output name -> its ``cost.json``. The training budget of a method output
    is its own plus that of the zoo models it builds on (:func:`benchmark.methods.budget.row_budget`, the one place
    that adds them); a duo's or deep ensemble's is its members' (:func:`benchmark.core.costs.sum_cost`). ``verify``
    recomputes a bundle's costs with it (:mod:`benchmark.bundle.recost`)."""
    nan = float("nan")
    x = LogitsInput(zoo=zoo, costs=costs, cfg=cfg)
    units = [u for kind in registry.list_methods("evaluate") for u in registry.get_method(kind).units(x)]
    for n, info in methods.items():
        try:
            trained = row_budget(info, costs)
        except ValueError as e:
            raise ValueError(f"method output {n!r}: {e}") from None
        units.append(
            (
                (OUTPUT, n),
                info,
                {
                    "gflops": info["gflops"],
                    "params": info["params"],
                    "throughput": info["throughput"],
                    "balance": nan,
                    "overhead_percent": info.get("overhead_percent", nan),
                    "extra_params_percent": info.get("extra_params_percent", nan),
                    **trained,
                },
            )
        )
    return units


def run(params: Params, *, progress: bool = True) -> dict:
    """Evaluate all units, write metrics.csv, paired.csv, models.csv, summary.json."""
    cfg = params.evaluate  # params evaluate, parsed field by field at the stage entry (its suite: params suite)
    zoo = stage_config.zoo(params, check_arch=False)  # builds no model (its inputs' stages checked the archs)
    costs = load_costs(zoo)
    methods = method_outputs(stage_config.paths()["methods"])
    found = {name: model_files(name) for name in zoo}
    found |= {name: model_files(name, stage_config.paths()["methods"] / name) for name in methods}
    files = {n: f for n, (f, _) in found.items()}
    hashes = {n: h for n, (_, h) in found.items()}
    mapped = {
        n: {s: store.mmap_logits_file(f) for s, f in fs.items()} for n, fs in files.items()
    }  # labels only are read
    _check_alignment({n: mapped[n] for n in zoo}, {n: mapped[n] for n in methods})
    cfg = dataclasses.replace(cfg, groups=split_groups({s: lf.labels for s, lf in next(iter(mapped.values())).items()}))
    del mapped
    folder = stage_config.paths()["units"]
    folder.mkdir(parents=True, exist_ok=True)
    units, code = [], {}
    for ident, info, cost in unit_list(zoo, costs, cfg, methods):
        inputs = [hashes[m] for m in ident[1:]]
        if ident[0] not in code:
            code[ident[0]] = stage_config.fingerprint(cfg.settings(), code_hash(ident[0]))
        units.append((Unit(ident, stage_config.fingerprint(ident, inputs, code[ident[0]]), info), inputs, cost))
    todo = [u for u, _, _ in units if not cached(folder, u.key)]
    ctx = Context(
        cfg=cfg,
        files={n: {s: str(f.absolute()) for s, f in fs.items()} for n, fs in files.items()},
        folder=str(folder.absolute()),
    )
    fresh = run_units(
        todo, ctx, workers=cfg.workers, progress=progress
    )  # one torch thread per process (runner.THREADS)
    tables, paired_tables = [], []
    for unit, inputs, cost in units:
        rows, paired = fresh[unit.key] if unit.key in fresh else read_unit(folder, unit.key)
        for col, val in cost.items():
            rows[col] = val
        rows["inputs_hash"] = stage_config.fingerprint(inputs)
        tables.append(rows)
        paired_tables.append(paired)
    keys = {u.key for u, _, _ in units}
    remove_stale(folder, keys)
    results = validate_results(pd.concat(tables, ignore_index=True), source="evaluation")[list(COLUMNS)]
    p = stage_config.paths()
    store.write_table(p["metrics"], results)
    store.write_table(p["paired"], pd.concat(paired_tables, ignore_index=True))
    model_cols = ["name", "arch", "init", "img_size", "seed", "role", "gflops", "params", "throughput"]
    store.write_table(p["models"], pd.DataFrame(costs.values())[model_cols])
    pairs = sum(u.ident[0] == "duo" for u, _, _ in units)
    stats = {"units": len(units), "computed": len(fresh), "reused": len(units) - len(fresh), "pairs": pairs}
    store.write_json(p["summary"], summary(results, cfg.main_fit))  # run stats: last_run.json only
    store.write_json(folder / "last_run.json", stats)
    return stats


def summary(results: pd.DataFrame, fit: str) -> dict:
    """``dvc metrics`` view: test-split metrics of every single and weighted duo (``fit``, max confidence)."""
    keep = results[(results["split"] == "test") & (results["fit"] == fit) & (results["confidence"] == "max")]
    out: dict = {}
    for (family, method, members), g in keep.groupby(["family", "method", "members"], sort=True):
        if family == "duo" and (method, "max") != duo.VARIANTS[0]:
            continue
        out.setdefault(family, {})[members] = {m: round(float(v), 6) for m, v in zip(g["metric"], g["value"])}
    return out
