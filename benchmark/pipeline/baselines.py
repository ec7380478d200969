"""The baseline stages that need weights: soups, MC dropout, last-layer Laplace, shallow and LoRA ensembles.

Each stage reads one entry of ``params.yaml`` ``baselines.<kind>.<key>``,
validates it (and that the method applies to the model's architecture) before
loading any checkpoint, builds the method from the trained checkpoints and
writes ``results/methods/<output>/`` through
:func:`benchmark.pipeline.stages.method_output` (the evaluate stage picks it up).

``splits`` (``baselines.splits``, or per entry) lists the splits a method output
covers: names or shell patterns (``corrupt-*-3``); ``val`` and ``test`` are required.
"""
from __future__ import annotations

import fnmatch
import tempfile
from dataclasses import asdict

import torch

from benchmark import cost as costs
from benchmark import models, store
from benchmark.data.splits_io import load_split
from benchmark.infer import predict_logits
from benchmark.methods import laplace as lap
from benchmark.methods import lora_ensemble as lora
from benchmark.methods import mc_dropout as mcd
from benchmark.methods import shallow as sh
from benchmark.methods import soups
from benchmark.methods.last_layer import linear_head, penultimate_batched
from benchmark.pipeline import config, stages
from benchmark.train import _score as selection_score
from benchmark.train import fine_tune, load_weights
from benchmark.zoo import NAME_RE

SECTION = "baselines"
REQUIRED_SPLITS = ("val", "test")
KEYS = {  # kind -> (required keys, optional keys with defaults)
    "soups": ({"models"}, {"splits": None}),
    "mc_dropout": ({"model", "samples"}, {"p": None, "seed": 0, "splits": None}),
    "laplace": ({"model", "prior_precisions"},
                {"hessian": "kron", "predictive": "probit", "samples": 0, "seed": 0, "splits": None}),
    "shallow": ({"model", "members", "recipe"}, {"seed": 0, "splits": None}),
    "lora_ensemble": ({"model", "members", "rank", "recipe"}, {"alpha": None, "seed": 0, "splits": None}),
}
METHODS = {"soups": soups.METHOD, "mc_dropout": mcd.METHOD, "laplace": lap.METHOD, "shallow": sh.METHOD,
           "lora_ensemble": lora.METHOD}


def soup_outputs(key: str) -> dict[str, str]:
    """Soup kind -> output name of the soup entry ``key``."""
    return {"uniform": f"{key}-uniform", "greedy": f"{key}-greedy"}


def _item(params: dict, kind: str, key: str) -> dict:
    """``baselines.<kind>.<key>`` with defaults filled in; unknown/missing keys are errors."""
    section = params.get(SECTION) or {}
    entries = section.get(kind) or {}
    where = f"{SECTION}.{kind}.{key}"
    if key not in entries:
        raise ValueError(f"{where}: no such {METHODS[kind]} entry in params.yaml (known: {sorted(entries)})")
    raw = entries[key]
    required, optional = KEYS[kind]
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be a mapping with keys {sorted(required)} (+ optional {sorted(optional)})")
    missing, unknown = sorted(required - set(raw)), sorted(set(raw) - required - set(optional))
    if missing or unknown:
        raise ValueError(f"{where}: missing keys {missing}, unknown keys {unknown}; allowed: {sorted(required | set(optional))}")
    names = soup_outputs(key).values() if kind == "soups" else [key]
    zoo = config.zoo(params)
    for name in names:
        if not NAME_RE.match(name) or name in zoo:
            raise ValueError(f"{where}: output name {name!r} must be a valid name (letters, digits, '_', '.', '-') "
                             "and differ from every zoo model")
    item = {**optional, **raw, "where": where, "zoo": zoo}
    seed = item.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"{where}: seed must be a non-negative integer, got {seed!r}")
    return item


def _model(item: dict, kind: str, name) -> str:
    if not isinstance(name, str) or name not in item["zoo"]:
        raise ValueError(f"{item['where']}: {METHODS[kind]} of unknown model {name!r}; the zoo has {sorted(item['zoo'])}")
    return name


def _splits(params: dict, item: dict) -> list[str]:
    """The split names the output covers (patterns expanded against the data folder)."""
    patterns = item["splits"] if item["splits"] is not None else (params.get(SECTION) or {}).get("splits")
    available = [s for s in stages.split_files() if s != stages.TRAIN]
    if patterns is None:
        return available
    if isinstance(patterns, str) or not isinstance(patterns, list) or not patterns:
        raise ValueError(f"{item['where']}: splits must be a non-empty list of split names or patterns, got {patterns!r}")
    chosen = []
    for pat in patterns:
        hits = [s for s in available if fnmatch.fnmatchcase(s, str(pat))]
        if not hits:
            raise ValueError(f"{item['where']}: split {pat!r} matches none of {available}")
        chosen += [s for s in hits if s not in chosen]
    missing = [s for s in REQUIRED_SPLITS if s not in chosen]
    if missing:
        raise ValueError(f"{item['where']}: splits must include {list(REQUIRED_SPLITS)}; missing {missing}")
    return chosen


def _skeleton(params: dict, name: str):
    """The architecture of zoo entry ``name`` without weights (to check applicability before any work)."""
    labels = load_split(stages.split_files()[stages.TRAIN], stages.TRAIN).labels
    return models.create(config.entry(params, name), stages.num_classes(labels), load_weights=False)


def check_soup(params: dict, key: str) -> dict:
    item = _item(params, "soups", key)
    names = item["models"]
    if not isinstance(names, list) or len(names) < 2 or len(set(names)) != len(names):
        raise ValueError(f"{item['where']}: {soups.METHOD} needs a list of at least 2 distinct models, got {names!r}")
    entries = [item["zoo"][_model(item, "soups", n)] for n in names]
    for e in entries[1:]:
        for field in ("arch", "init", "img_size", "recipe"):
            if getattr(e, field) != getattr(entries[0], field):
                raise ValueError(f"{item['where']}: {soups.METHOD} ingredients must be fine-tunes of one architecture from one "
                                 f"init; model {e.name!r} has {field} {getattr(e, field)!r} but {names[0]!r} has {getattr(entries[0], field)!r}")
    item["splits"] = _splits(params, item)
    return item


def check_mc_dropout(params: dict, key: str) -> dict:
    item = _item(params, "mc_dropout", key)
    name = _model(item, "mc_dropout", item["model"])
    mcd.check_samples(item["samples"], name)
    mcd.MCDropout(_skeleton(params, name), item["samples"], item["p"], model_name=name)  # applicability, rate
    item["splits"] = _splits(params, item)
    return item


def check_laplace(params: dict, key: str) -> dict:
    item = _item(params, "laplace", key)
    name = _model(item, "laplace", item["model"])
    lap.check_options(item["hessian"], item["predictive"], item["samples"], name)
    grid = item["prior_precisions"]
    if not isinstance(grid, list) or not grid:
        raise ValueError(f"{item['where']}: prior_precisions must be a non-empty list of positive numbers, got {grid!r}")
    for d in grid:
        lap.check_prior_precision(d, f"{item['where']} ({lap.METHOD} of model {name!r})")
    linear_head(_skeleton(params, name), lap.METHOD, name)
    item["splits"] = _splits(params, item)
    return item


def _recipe(params: dict, item: dict, kind: str):
    recipes = config.recipes(params)
    if item["recipe"] not in recipes:
        raise ValueError(f"{item['where']}: {METHODS[kind]} of model {item['model']!r}: unknown recipe {item['recipe']!r}; "
                         f"define it in params.yaml 'recipes' (known: {sorted(recipes)})")
    return recipes[item["recipe"]]


def check_shallow(params: dict, key: str) -> dict:
    item = _item(params, "shallow", key)
    name = _model(item, "shallow", item["model"])
    sh.check_members(item["members"], name)
    if _recipe(params, item, "shallow").shift_pixels:
        raise ValueError(f"{item['where']}: {sh.METHOD} of model {name!r}: the heads train on features, so recipe "
                         f"{item['recipe']!r} must have shift_pixels: 0")
    linear_head(_skeleton(params, name), sh.METHOD, name)
    item["splits"] = _splits(params, item)
    return item


def check_lora(params: dict, key: str) -> dict:
    item = _item(params, "lora_ensemble", key)
    name = _model(item, "lora_ensemble", item["model"])
    item["alpha"] = float(item["rank"]) if item["alpha"] is None else item["alpha"]
    lora.check_adapter(item["members"], item["rank"], item["alpha"], name)
    _recipe(params, item, "lora_ensemble")
    skeleton = _skeleton(params, name)
    lora.target_layers(skeleton, name)
    linear_head(skeleton, lora.METHOD, name)
    item["splits"] = _splits(params, item)
    return item


def _val(params: dict, entry) -> tuple[torch.Tensor, torch.Tensor]:
    return stages._inputs(load_split(stages.split_files()[stages.VAL], stages.VAL), entry)


def soup(params: dict, key: str, *, progress: bool = True) -> dict[str, dict]:
    """Uniform and greedy soups of ``baselines.soups.<key>.models`` -> ``<key>-uniform``, ``<key>-greedy``."""
    item = check_soup(params, key)
    names = item["models"]
    loaded = [stages.load_trained(params, n) for n in names]
    entry, ingredients = loaded[0][0], [m for _, m in loaded]
    config.set_threads(params)
    select_by = config.recipes(params)[entry.recipe].select_by
    x, y = _val(params, entry)
    bs = params["logits"]["batch_size"]

    def score(model) -> float:
        return selection_score(predict_logits(model, x, batch_size=bs), y, select_by)

    greedy = soups.greedy_soup(ingredients, score, names)
    uniform = soups.uniform_soup(ingredients, names)
    out = soup_outputs(key)
    common = {"family": "soup", "arch": entry.arch, "select_by": select_by, "val_scores": greedy.scores,
              "bn_stats": "averaged"}
    return {
        out["uniform"]: stages.method_output(params, out["uniform"], uniform, entry, dict(
            common, method="uniform", base=names[0], ingredients=names),
            splits=item["splits"], progress=progress),
        out["greedy"]: stages.method_output(params, out["greedy"], greedy.model, entry, dict(
            common, method="greedy", base=greedy.ingredients[0], ingredients=greedy.ingredients,
            val_score=greedy.score, history=greedy.history), splits=item["splits"], progress=progress),
    }


def mc_dropout(params: dict, key: str, *, progress: bool = True) -> dict:
    """MC dropout with ``samples`` masks on zoo model ``model`` -> ``results/methods/<key>``."""
    item = check_mc_dropout(params, key)
    name = item["model"]
    entry, model = stages.load_trained(params, name)
    wrapper = mcd.MCDropout(model, item["samples"], item["p"], seed=item["seed"], model_name=name)
    config.set_threads(params)
    one = costs.count_flops(model, entry.img_size)
    info = {"family": "mc_dropout", "method": f"T{wrapper.samples}", "base": name, "samples": wrapper.samples,
            "p": wrapper.p, "seed": wrapper.seed, "trained_drop_rate": mcd.trained_rate(model),
            "gflops": wrapper.samples * one, "gflops_one_forward": one,
            "gflops_as_run": costs.count_flops(wrapper, entry.img_size), "params": costs.count_params(model)}
    return stages.method_output(params, key, wrapper, entry, info, splits=item["splits"], progress=progress)


def laplace(params: dict, key: str, *, progress: bool = True) -> dict:
    """Last-layer Laplace of zoo model ``model`` (GGN on train, prior precision by val NLL) -> ``results/methods/<key>``."""
    item = check_laplace(params, key)
    name = item["model"]
    entry, model = stages.load_trained(params, name)
    head = linear_head(model, lap.METHOD, name)
    config.set_threads(params)
    bs = params["logits"]["batch_size"]
    tr = load_split(stages.split_files()[stages.TRAIN], stages.TRAIN)
    x_tr, y_tr = stages._inputs(tr, entry)
    x_va, y_va = _val(params, entry)
    f_tr, f_va = penultimate_batched(model, x_tr, batch_size=bs), penultimate_batched(model, x_va, batch_size=bs)
    hessian = lap.fit_hessian(f_tr, y_tr, head.weight.detach(), head.bias.detach(), item["hessian"])
    opts = {"predictive": item["predictive"], "samples": item["samples"], "seed": item["seed"]}
    delta, nll = lap.select_prior_precision(hessian, head.weight, head.bias, f_va, y_va, item["prior_precisions"], **opts)
    la_head = lap.LaplaceHead(hessian, head.weight, head.bias, delta, **opts)
    wrapper = lap.LastLayerLaplace(model, la_head, model_name=name)
    one = costs.count_flops(model, entry.img_size)
    info = {"family": "laplace", "method": f"{item['hessian']}-{item['predictive']}", "base": name,
            "hessian": item["hessian"], "predictive": item["predictive"], "samples": item["samples"] if item["predictive"] == "mc" else 0,
            "prior_precision": delta, "val_nll": {str(d): v for d, v in nll.items()},
            "gflops": one + la_head.extra_macs() / 1e9, "gflops_one_forward": one,
            "params": costs.count_params(model) + la_head.stored_floats()}
    return stages.method_output(params, key, wrapper, entry, info, splits=item["splits"], progress=progress)


def shallow(params: dict, key: str, *, progress: bool = True) -> dict:
    """Shallow ensemble of ``members`` heads on the frozen backbone of ``model`` -> ``results/methods/<key>``.

    The heads train on the backbone's train-split features with recipe ``recipe``
    (selected on validation, in a temporary folder: they take seconds).
    """
    item = check_shallow(params, key)
    name = item["model"]
    entry, model = stages.load_trained(params, name)
    head = linear_head(model, sh.METHOD, name)
    recipe = _recipe(params, item, "shallow")
    config.set_threads(params)
    bs = params["logits"]["batch_size"]
    tr = load_split(stages.split_files()[stages.TRAIN], stages.TRAIN)
    (x_tr, y_tr), (x_va, y_va) = stages._inputs(tr, entry), _val(params, entry)
    f_tr, f_va = (penultimate_batched(model, x, batch_size=bs)[:, :, None, None] for x in (x_tr, x_va))
    heads = sh.EnsembleHeads(head.in_features, head.out_features, item["members"], seed=item["seed"])
    with tempfile.TemporaryDirectory() as tmp:
        record = fine_tune(heads, (f_tr, y_tr), (f_va, y_va), recipe, seed=item["seed"], folder=tmp,
                           fingerprint=key, progress=progress)
        load_weights(f"{tmp}/model.safetensors", heads)
    wrapper = sh.ShallowEnsemble(model, heads, model_name=name)
    one, m = costs.count_flops(model, entry.img_size), item["members"]
    c, d = head.out_features, head.in_features
    info = {"family": "shallow_ensemble", "method": f"m{m}", "base": name, "members": m, "backbone": "frozen",
            "recipe": item["recipe"], "seed": item["seed"], "best_epoch": record["best_epoch"], "val_score": record["best_score"],
            "gflops": one + (m - 1) * c * d / 1e9, "gflops_one_forward": one,
            "params": costs.count_params(model) + (m - 1) * (c * d + c), "trainable_params": costs.count_params(heads)}
    return stages.method_output(params, key, wrapper, entry, info, splits=item["splits"], progress=progress)


def lora_ensemble(params: dict, key: str, *, progress: bool = True) -> dict:
    """LoRA-Ensemble on the pretrained init of ViT zoo model ``model`` -> ``results/methods/<key>``.

    Adapters and heads train with recipe ``recipe`` (resumable, in ``results/method_checkpoints/<key>``).
    """
    item = check_lora(params, key)
    name = item["model"]
    entry = config.entry(params, name)
    recipe = _recipe(params, item, "lora_ensemble")
    tr, va = (load_split(stages.split_files()[s], s) for s in (stages.TRAIN, stages.VAL))
    model = models.create(entry, stages.num_classes(tr.labels))  # the pretrained init; fails fast on missing weights
    config.set_threads(params)
    one = costs.count_flops(model, entry.img_size)
    adapter = {k: item[k] for k in ("members", "rank", "alpha", "seed")}
    wrapper = lora.LoRAEnsemble(model, model_name=name, **adapter)
    folder = config.RESULTS / "method_checkpoints" / key
    fp = config.fingerprint(entry.as_dict(), asdict(recipe), adapter, store.array_hash(tr.ids), store.array_hash(va.ids))
    record = fine_tune(wrapper, stages._inputs(tr, entry), stages._inputs(va, entry), recipe, seed=item["seed"], folder=folder,
                       fingerprint=fp, params=wrapper.trainable_parameters(), progress=progress)
    load_weights(folder / "model.safetensors", wrapper)
    info = {"family": "lora_ensemble", "method": f"m{item['members']}-r{item['rank']}", "base": name, **adapter,
            "recipe": item["recipe"], "targets": wrapper.layer_names[:2] + (["..."] if len(wrapper.layer_names) > 2 else []),
            "best_epoch": record["best_epoch"], "val_score": record["best_score"], "gflops_one_forward": one,
            "trainable_params": sum(p.numel() for p in wrapper.trainable_parameters()),
            "params": costs.count_params(wrapper) - costs.count_params(model.get_classifier())}  # the member heads replace it
    return stages.method_output(params, key, wrapper, entry, info, splits=item["splits"], progress=progress)
