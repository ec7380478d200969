"""The baseline stages that need weights: soups, MC dropout, last-layer Laplace, shallow and LoRA ensembles.

Each stage reads one entry of ``params.yaml`` ``baselines.<kind>.<key>``,
validates it (and that the method applies to the model's architecture) before
loading any checkpoint, builds the method from the trained checkpoints and
writes ``results/methods/<output>/`` through
:func:`benchmark.pipeline.stages.method_output` (the evaluate stage picks it up).

``splits`` (``baselines.splits``, or per entry) lists the splits a method output
covers: names or shell patterns (``corrupt-*-3``); ``val`` and ``test`` are required.

The methods follow their publications by default; another variant must be named
(``variant:``) and shows in the method name on the leaderboard: MC dropout
``T<T>-trained`` (samples the dropout the model was fine-tuned with, its recipe's
``drop_rate``) or ``T<T>-post-hoc`` (dropout switched on at test time only);
LoRA-Ensemble ``m<M>-r<r>-published`` (q, k, v and output projection adapted
separately, Xavier gain 10) or ``m<M>-r<r>-fused-qkv``. The greedy soup adds an
ingredient only on a strict validation improvement (the released code).
"""
from __future__ import annotations

from dataclasses import asdict

from torch import Tensor

from benchmark import cost as costs
from benchmark import models, store
from benchmark.infer import predict_logits
from benchmark.methods import laplace as lap
from benchmark.methods import lora_ensemble as lora
from benchmark.methods import mc_dropout as mcd
from benchmark.methods import shallow as sh
from benchmark.methods import soups
from benchmark.methods.last_layer import linear_head, penultimate_batched
from benchmark.pipeline import registry
from benchmark.pipeline.registry import register_method
from benchmark.pipeline import config, sources, stages
from benchmark.pipeline.baseline_configs import LaplaceConfig, LoRAConfig, MCDropoutConfig, ShallowConfig, SoupConfig
from benchmark.pipeline.sources import SplitInputs
from benchmark.train import _score as selection_score
from benchmark.zoo import NAME_RE

SECTION = "baselines"


def _title(kind: str) -> str:
    return registry.get_method(kind).title


def soup_outputs(key: str) -> dict[str, str]:
    """Soup kind -> output name of the soup entry ``key``."""
    return {"uniform": f"{key}-uniform", "greedy": f"{key}-greedy"}


def _item(params: dict, kind: str, key: str) -> dict:
    """``baselines.<kind>.<key>`` with defaults filled in; unknown/missing keys are errors."""
    section = params.get(SECTION) or {}
    entries = section.get(kind) or {}
    where = f"{SECTION}.{kind}.{key}"
    if key not in entries:
        raise ValueError(f"{where}: no such {_title(kind)} entry in params.yaml (known: {sorted(entries)})")
    spec = registry.get_method(kind)
    cfg = registry.parse_config(spec.config, entries[key], where)
    zoo = config.zoo(params)
    for name in spec.output_names(key):
        if not NAME_RE.match(name) or name in zoo:
            raise ValueError(f"{where}: output name {name!r} must be a valid name (letters, digits, '_', '.', '-') "
                             "and differ from every zoo model")
    item = {**asdict(cfg), "where": where, "zoo": zoo}
    return item


def _model(item: dict, kind: str, name) -> str:
    if not isinstance(name, str) or name not in item["zoo"]:
        raise ValueError(f"{item['where']}: {_title(kind)} of unknown model {name!r}; the zoo has {sorted(item['zoo'])}")
    return name


def _splits(params: dict, item: dict) -> list[str]:
    """The split names the output covers (patterns expanded against the data folder)."""
    patterns = item["splits"] if item["splits"] is not None else (params.get(SECTION) or {}).get("splits")
    return sources.resolve_splits(patterns, [s for s in stages.split_files() if s != stages.TRAIN], f"{item['where']}: splits")


def _skeleton(params: dict, name: str):
    """The architecture of zoo entry ``name`` without weights (to check applicability before any work)."""
    entry = config.entry(params, name)
    return models.create(entry, sources.for_params(params).num_classes(), load_weights=False,
                         drop_rate=config.recipes(params)[entry.recipe].drop_rate)


def _train_drop_rate(name: str) -> float:
    """The dropout rate zoo model ``name`` was fine-tuned with, from its ``train.json`` (0 before recipes had it)."""
    record = store.read_json(config.paths(name)["checkpoint"] / "train.json")
    return float((record.get("recipe") or {}).get("drop_rate", 0.0))


def _split(params: dict, entry, split: str, *, train: bool = False) -> SplitInputs:
    """One split prepared for ``entry`` by the suite's data source (``train``: with the fine-tuning augmentation)."""
    return sources.for_params(params).inputs(split, entry, train=train)


def _features(params: dict, model, split: SplitInputs) -> Tensor:
    """(N, D) penultimate features of ``model`` on a split, on the CPU."""
    return penultimate_batched(model, split.inputs, batch_size=params["logits"]["batch_size"],
                               num_workers=sources.for_params(params).num_workers)


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
    entry = config.entry(params, name)
    rate = config.recipes(params)[entry.recipe].drop_rate  # what train@<model> fine-tunes it with
    mcd.MCDropout(_skeleton(params, name), item["samples"], item["p"], model_name=name, variant=item["variant"],
                  train_rate=rate)  # applicability, variant and rate, before any checkpoint is read
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
        raise ValueError(f"{item['where']}: {_title(kind)} of model {item['model']!r}: unknown recipe {item['recipe']!r}; "
                         f"define it in params.yaml 'recipes' (known: {sorted(recipes)})")
    return recipes[item["recipe"]]


def check_shallow(params: dict, key: str) -> dict:
    item = _item(params, "shallow", key)
    name = _model(item, "shallow", item["model"])
    sh.check_members(item["members"], name)
    if item["backbone"] not in sh.BACKBONES:
        raise ValueError(f"{item['where']}: {sh.METHOD} of model {name!r}: backbone must be one of {list(sh.BACKBONES)}, "
                         f"got {item['backbone']!r}")
    if item["backbone"] == "frozen" and _recipe(params, item, "shallow").shift_pixels:
        raise ValueError(f"{item['where']}: {sh.METHOD} of model {name!r}: with a frozen backbone the heads train on "
                         f"features, so recipe {item['recipe']!r} must have shift_pixels: 0")
    _recipe(params, item, "shallow")
    linear_head(_skeleton(params, name), sh.METHOD, name)
    item["splits"] = _splits(params, item)
    return item


def check_lora(params: dict, key: str) -> dict:
    item = _item(params, "lora_ensemble", key)
    name = _model(item, "lora_ensemble", item["model"])
    item["alpha"] = float(item["rank"]) if item["alpha"] is None else item["alpha"]
    lora.check_adapter(item["members"], item["rank"], item["alpha"], name)
    lora.check_variant(item["variant"], name)
    _recipe(params, item, "lora_ensemble")
    skeleton = _skeleton(params, name)
    lora.target_layers(skeleton, name)
    linear_head(skeleton, lora.METHOD, name)
    item["splits"] = _splits(params, item)
    return item


@register_method(kind="soups", stage="soup", script="soup", family="soup", title=soups.METHOD, config=SoupConfig,
                 needs=("all-checkpoints",), outputs=lambda key: list(soup_outputs(key).values()),
                 comment="uniform and greedy soups of seeded fine-tunes",
                 example=lambda x: f"soup-{x['base']}: {{models: {x['group']}}}" if x["group"] != "[]" else None)
def soup(params: dict, key: str, *, progress: bool = True) -> dict[str, dict]:
    """Uniform and greedy soups of ``baselines.soups.<key>.models`` -> ``<key>-uniform``, ``<key>-greedy``."""
    item = check_soup(params, key)
    names = item["models"]
    loaded = [stages.load_trained(params, n) for n in names]
    entry, ingredients = loaded[0][0], [m for _, m in loaded]
    config.set_threads(params)
    select_by = config.recipes(params)[entry.recipe].select_by
    val = _split(params, entry, stages.VAL)
    bs, workers = params["logits"]["batch_size"], sources.for_params(params).num_workers

    def score(model) -> float:
        return selection_score(predict_logits(model, val.inputs, batch_size=bs, num_workers=workers), val.labels, select_by)

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
            common, method="greedy", rule="strict improvement (released code)", base=greedy.ingredients[0],
            ingredients=greedy.ingredients,
            val_score=greedy.score, history=greedy.history), splits=item["splits"], progress=progress),
    }


@register_method(kind="mc_dropout", script="mc_dropout", family="mc_dropout", title=mcd.METHOD, config=MCDropoutConfig,
                 needs=("checkpoints",), comment="MC dropout, T masks",
                 example=lambda x: f"mcdrop-{x['base']}: {{model: {x['base']}, samples: 8, p: 0.1}}")
def mc_dropout(params: dict, key: str, *, progress: bool = True) -> dict:
    """MC dropout with ``samples`` masks on zoo model ``model`` -> ``results/methods/<key>``."""
    item = check_mc_dropout(params, key)
    name = item["model"]
    entry, model = stages.load_trained(params, name)
    trained = _train_drop_rate(name)
    wrapper = mcd.MCDropout(model, item["samples"], item["p"], seed=item["seed"], model_name=name,
                            variant=item["variant"], train_rate=trained)
    config.set_threads(params)
    one = costs.count_flops(model, entry.img_size)
    info = {"family": "mc_dropout", "method": f"T{wrapper.samples}-{wrapper.variant}", "base": name,
            "variant": wrapper.variant, "samples": wrapper.samples,
            "p": wrapper.p, "seed": wrapper.seed, "trained_drop_rate": trained,
            "gflops": wrapper.samples * one, "gflops_one_forward": one,
            "gflops_as_run": costs.count_flops(wrapper, entry.img_size), "params": costs.count_params(model)}
    return stages.method_output(params, key, wrapper, entry, info, splits=item["splits"], progress=progress)


@register_method(kind="laplace", script="laplace", family="laplace", title=lap.METHOD, config=LaplaceConfig,
                 needs=("checkpoints",), comment="last-layer Laplace",
                 example=lambda x: f"laplace-{x['base']}: {{model: {x['base']}, hessian: kron, predictive: probit, "
                                   "prior_precisions: [1.0e-2, 1.0, 100.0, 1.0e+4]}")
def laplace(params: dict, key: str, *, progress: bool = True) -> dict:
    """Last-layer Laplace of zoo model ``model`` (GGN on train, prior precision by val NLL) -> ``results/methods/<key>``."""
    item = check_laplace(params, key)
    name = item["model"]
    entry, model = stages.load_trained(params, name)
    head = linear_head(model, lap.METHOD, name)
    config.set_threads(params)
    tr, va = _split(params, entry, stages.TRAIN), _split(params, entry, stages.VAL)  # train: no augmentation
    f_tr, f_va, y_va = _features(params, model, tr), _features(params, model, va), va.labels
    hessian = lap.fit_hessian(f_tr, tr.labels, head.weight.detach(), head.bias.detach(), item["hessian"])
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


@register_method(kind="shallow", script="shallow", family="shallow_ensemble", title=sh.METHOD, config=ShallowConfig,
                 needs=("checkpoints", "base-model"), persist=True, comment="one backbone, M heads (joint: from the init)",
                 example=lambda x: f"shallow-{x['base']}: {{model: {x['base']}, members: 5, recipe: {x['train_recipe']}}}")
def shallow(params: dict, key: str, *, progress: bool = True) -> dict:
    """Shallow ensemble of ``members`` heads on one backbone of zoo model ``model`` -> ``results/methods/<key>``.

    ``backbone: joint`` trains the backbone from the entry's initial (pretrained)
    weights together with the heads; ``frozen`` trains only the heads, on the
    features of the model's fine-tuned checkpoint (seconds). Either way with recipe
    ``recipe``, selected on validation, resumable in ``results/method_checkpoints/<key>``
    (the heads alone when frozen).
    """
    item = check_shallow(params, key)
    name, m, joint = item["model"], item["members"], item["backbone"] == "joint"
    recipe = _recipe(params, item, "shallow")
    src = sources.for_params(params)
    if joint:
        entry = config.entry(params, name)
        model = models.create(entry, src.num_classes(), drop_rate=recipe.drop_rate)  # the pretrained init; fails fast
    else:
        entry, model = stages.load_trained(params, name)
    head = linear_head(model, sh.METHOD, name)
    c, d = head.out_features, head.in_features
    heads = sh.EnsembleHeads(d, c, m, seed=item["seed"])
    wrapper = sh.ShallowEnsemble(model, heads, model_name=name, backbone=item["backbone"])
    config.set_threads(params)
    one = costs.count_flops(model, entry.img_size)  # before training moves the model to its device
    tr, va = _split(params, entry, stages.TRAIN, train=joint), _split(params, entry, stages.VAL)
    folder = config.RESULTS / "method_checkpoints" / key
    run = {"members": m, "seed": item["seed"], "backbone": item["backbone"]}
    if joint:
        fp = config.fingerprint(entry.as_dict(), asdict(recipe), run, store.array_hash(tr.ids), store.array_hash(va.ids))
        record = stages.train_once(wrapper.to(sources.device(params)), tr.fit_data, va.fit_data, recipe, seed=item["seed"],
                                   folder=folder, fingerprint=fp, params=[p for p in wrapper.parameters() if p.requires_grad],
                                   progress=progress, num_workers=src.num_workers)
    else:  # the heads train on the checkpoint's features: its weights are part of the fingerprint
        weights = store.file_hash(config.paths(name)["checkpoint"] / "model.safetensors")
        fp = config.fingerprint(entry.as_dict(), asdict(recipe), run, weights, store.array_hash(tr.ids), store.array_hash(va.ids))
        f_tr, f_va = (_features(params, model, s)[:, :, None, None] for s in (tr, va))
        record = stages.train_once(heads, (f_tr, tr.labels), (f_va, va.labels), recipe, seed=item["seed"], folder=folder,
                                   fingerprint=fp, progress=progress)
    info = {"family": "shallow_ensemble", "method": f"m{m}" + ("" if joint else "-frozen"), "base": name, "members": m,
            "backbone": item["backbone"], "recipe": item["recipe"], "seed": item["seed"], "best_epoch": record["best_epoch"],
            "val_score": record["best_score"], "gflops": one + (m - 1) * c * d / 1e9, "gflops_one_forward": one,
            "params": costs.count_params(model) + (m - 1) * (c * d + c),
            "trainable_params": sum(p.numel() for p in wrapper.parameters() if p.requires_grad)}
    return stages.method_output(params, key, wrapper, entry, info, splits=item["splits"], progress=progress)


@register_method(kind="lora_ensemble", script="lora_ensemble", family="lora_ensemble", title=lora.METHOD,
                 config=LoRAConfig, needs=("base-model",), persist=True, comment="M rank-r adapters (ViTs)",
                 example=lambda x: f"lora-{x['vit']}: {{model: {x['vit']}, members: 4, rank: 8, recipe: {x['train_recipe']}}}"
                 if x["vit"] else None)
def lora_ensemble(params: dict, key: str, *, progress: bool = True) -> dict:
    """LoRA-Ensemble on the pretrained init of ViT zoo model ``model`` -> ``results/methods/<key>``.

    Adapters and heads train with recipe ``recipe`` (resumable, in ``results/method_checkpoints/<key>``).
    """
    item = check_lora(params, key)
    name = item["model"]
    entry = config.entry(params, name)
    recipe = _recipe(params, item, "lora_ensemble")
    src = sources.for_params(params)
    model = models.create(entry, src.num_classes(), drop_rate=recipe.drop_rate)  # the pretrained init; fails fast
    tr, va = _split(params, entry, stages.TRAIN, train=True), _split(params, entry, stages.VAL)
    config.set_threads(params)
    one = costs.count_flops(model, entry.img_size)
    adapter = {k: item[k] for k in ("members", "rank", "alpha", "seed", "variant")}
    wrapper = lora.LoRAEnsemble(model, model_name=name, **adapter)
    folder = config.RESULTS / "method_checkpoints" / key
    fp = config.fingerprint(entry.as_dict(), asdict(recipe), adapter, store.array_hash(tr.ids), store.array_hash(va.ids))
    record = stages.train_once(wrapper.to(sources.device(params)), tr.fit_data, va.fit_data, recipe, seed=item["seed"],
                               folder=folder, fingerprint=fp, params=wrapper.trainable_parameters(), progress=progress,
                               num_workers=src.num_workers)
    info = {"family": "lora_ensemble", "method": f"m{item['members']}-r{item['rank']}-{item['variant']}", "base": name, **adapter,
            "recipe": item["recipe"], "targets": wrapper.layer_names[:2] + (["..."] if len(wrapper.layer_names) > 2 else []),
            "best_epoch": record["best_epoch"], "val_score": record["best_score"], "gflops_one_forward": one,
            "trainable_params": sum(p.numel() for p in wrapper.trainable_parameters()),
            "params": costs.count_params(wrapper) - costs.count_params(model.get_classifier())}  # the member heads replace it
    return stages.method_output(params, key, wrapper, entry, info, splits=item["splits"], progress=progress)
