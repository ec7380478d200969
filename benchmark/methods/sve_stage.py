"""The SVE stage: fine-tune a Singular Value Ensemble (arXiv 2601.22068) of ``M``
members on a zoo entry's pretrained backbone and write its member logits.

``params.yaml`` ``sve:`` (validated before any work):

============  ================================================================
base          zoo entry whose ``arch``, pretrained ``init`` and ``img_size`` SVE
              starts from (the entry's own fine-tuned checkpoint is not used)
members       ensemble sizes ``M``: stage ``sve-train`` trains them, one stage
              ``sve@<M>`` per size writes its output
nested        true (default): train only the largest size; ``sve-m<M>`` is its first
              ``M`` members (each member its own noise stream and loss term). false:
              train every size on its own (one noise stream, mean member loss: the
              numbers committed before nesting)
recipe        training recipe in ``recipes`` (SVE trains singular values,
              biases and heads only, so it wants a larger lr than a fine-tune)
sigma_init    std of the singular-value noise ``S^(m) = S (1 + eps^(m))``;
              default 0.01, the authors' released ``init_std``. 0 is refused
              when the members would be clones (the backbone's head reused for
              all members, i.e. a 1000-class suite; see
              :func:`benchmark.methods.sve.check_diversity`)
seed          seed of the noise and the member heads, the train subset and training
patterns      regexes of the adapted layers; null = the defaults of
              :func:`benchmark.methods.sve.select_layers`
train_subset  train on a stratified seeded subset of this many images (null = all)
splits        split names or shell patterns the output covers, with val and
              test (null = every split but train)
============  ================================================================

The backbone keeps its 1000-class pretrained head until SVE replaces it by
fresh per-member heads. Output ``sve-m<M>``: the checkpoint in
``results/method_checkpoints/sve/m<M>/`` (stage ``sve-train``)
or ``sve-m<M>/`` (``--members M --alone``), resumable (a finished run with the
same fingerprint is not trained again) and, through
:func:`benchmark.stages.per_model.method_output`, member logits (M, N, C) and
``cost.json`` in ``results/methods/sve-m<M>/``. Costs (paper convention):
``gflops = M x`` GFLOPs of one member as a dense model; ``trainable_params = M
(singular values + biases + head)``; ``overhead_percent = 100 trainable_params
/ backbone`` (all M members and their heads: 1.36 % for ViT-B/16, M = 8, 10 classes);
``extra_params_percent = 100 (M - 1) (singular values + biases) / backbone``,
the paper's figure, what SVE adds over one fine-tuned model (its ``5 (M - 1) /
(4 d)``: 1.14 % at M = 8, d = 768); ``params = backbone + trainable_params``
(backbone: pretrained, without its classifier).
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import numpy as np

from benchmark.config.typed import parse_config
from benchmark.core.members import member_cross_entropy
from benchmark.data.embedded import stratified_order
from benchmark.methods.sve import SingularValueEnsemble, check_diversity, check_members
from benchmark.models import factory
from benchmark.models import cost as costs
from benchmark.models.train import Recipe, selection_score
from benchmark.models.zoo import ZooEntry
from benchmark.stages import per_model, stage_config, suite_source
from benchmark.stages.params_config import SveParams
from benchmark.stages.registry import register_cost
from benchmark.stages.suite_source import SplitInputs
from benchmark.storage import store

SECTION = "sve"
REQUIRED = ("base", "members", "recipe")
IMAGES_PER_CALL = 64  # member images per forward when writing logits (M x B beyond ~64 gets slower on CPU)


def output_name(members: int) -> str:
    return f"sve-m{members}"


def sve_config(params: dict) -> SveParams:
    """The typed ``sve`` block (the one :func:`~benchmark.stages.stage_config.load_params` parsed, or ``params["sve"]``
    parsed now, e.g. a copy with other sizes); raises ``ValueError`` naming the field."""
    typed = getattr(params, "typed", None)
    if typed is not None and typed.sve is not None and params == params.parsed_from:
        cfg = typed.sve
    else:
        raw = params.get(SECTION)
        if not isinstance(raw, dict):
            raise ValueError(f"params.yaml: missing or malformed section {SECTION!r}; it needs {list(REQUIRED)} "
                             f"(see benchmark.stages.params_config.SveParams)")
        cfg = parse_config(SveParams, raw, f"params.yaml {SECTION}")
    if not cfg.members:
        raise ValueError(f"params.yaml {SECTION}.members is [] (no SVE: the pipeline has no SVE stage); list the sizes M "
                         f"to run, e.g. [1, 2, 4, 8]")
    if cfg.recipe not in params.get("recipes", {}):
        raise ValueError(f"params.yaml {SECTION}.recipe: unknown recipe {cfg.recipe!r}; define it in params.yaml recipes "
                         f"(known: {sorted(params.get('recipes', {}))})")
    return cfg


def base_entry(params: dict, cfg: dict) -> ZooEntry:
    """The zoo entry named by ``sve.base``; it must exist, have pretrained weights and not clash with the outputs."""
    zoo = stage_config.zoo(params)
    base = cfg.base
    if base not in zoo:
        raise ValueError(f"params.yaml {SECTION}.base: unknown zoo entry {base!r}; the zoo {params['zoo']} has {sorted(zoo)}")
    entry = zoo[base]
    if not entry.pretrained:
        raise ValueError(f"params.yaml {SECTION}.base: zoo entry {base!r} has init 'scratch'; SVE needs a pretrained "
                         "backbone (its singular vectors are the members' shared basis)")
    clash = sorted(output_name(m) for m in cfg.members if output_name(m) in zoo)
    if clash:
        raise ValueError(f"params.yaml {SECTION}: output names {clash} are zoo entries; rename those entries")
    return entry


def train_subset(split: SplitInputs, n: int | None, seed: int) -> SplitInputs:
    """A stratified seeded subset of ``n`` samples (in split order); the split itself if ``n`` is None."""
    if n is None:
        return split
    if n > len(split):
        raise ValueError(f"params.yaml {SECTION}.train_subset: {n} exceeds the {len(split)} images of split {split.name!r}")
    return split.subset(np.sort(stratified_order(split.labels.numpy(), np.random.default_rng([seed, 0x5E5E]))[:n]))


def build(entry: ZooEntry, cfg: dict, members: int, num_classes: int, *, load_weights: bool = True) -> SingularValueEnsemble:
    """The entry's pretrained timm model wrapped in an ``M``-member SVE with fresh heads.

    The backbone is built with a 1000-class linear head (the ImageNet one where the
    weights have it, so nothing is reset); SVE removes it and keeps its place for
    :meth:`~benchmark.methods.sve.SingularValueEnsemble.export_member`. ``load_weights=False``:
    a random backbone of the same shapes (costs and parameter counts only, e.g. ``verify``).
    """
    backbone = factory.create(entry, 1000, load_weights=load_weights)
    return SingularValueEnsemble(backbone, members=members, num_classes=num_classes, patterns=cfg.patterns,
                                 sigma_init=cfg.sigma_init, seed=cfg.seed, pretrained=load_weights,
                                 allow_random_init=not load_weights, member_streams=cfg.nested)


def cost_info(model: SingularValueEnsemble, img_size: int, one: float | None = None) -> dict:
    """GFLOPs (``M x`` one dense member: ``one``, counted when not given) and parameter counts of an SVE
    (see the module docstring)."""
    one = costs.count_flops(model.export_member(0), img_size) if one is None else one
    ov = model.overhead()
    return {"gflops": model.members * one, "gflops_one_forward": one, "trainable_params": ov["trainable"],
            "backbone_params": ov["backbone"], "params": ov["backbone"] + ov["trainable"],
            "overhead_percent": ov["percent"], "extra_params_percent": ov["percent_extra"]}


@register_cost("sve")
def sve_output_cost(info: dict, entry: ZooEntry, num_classes: int, members: int, params: dict) -> dict:
    """:func:`cost_info` of output ``sve-m<members>`` (params ``sve``, base ``entry``), rebuilt without weights."""
    if info.get("members") != members:
        raise ValueError(f"members {info.get('members')!r}, but the logits have {members}")
    raw = params.get(SECTION)
    if not isinstance(raw, dict):
        raise ValueError(f"params has no {SECTION!r} section")
    model = build(entry, parse_config(SveParams, raw, f"params {SECTION}"), members, num_classes, load_weights=False)
    if info.get("adapted_layers") != len(model.layer_names):
        raise ValueError(f"adapted_layers {info.get('adapted_layers')!r}, but params {SECTION} adapts {len(model.layer_names)}")
    c = cost_info(model, entry.img_size)
    return {k: c[k] for k in ("gflops", "gflops_one_forward", "params", "overhead_percent", "extra_params_percent")}


def check(params: dict, members) -> tuple[dict, ZooEntry, Recipe, list[str]]:
    """Everything the stage needs, validated before any work: config, base entry, recipe, splits."""
    try:
        members = check_members(members)
    except ValueError as e:
        raise ValueError(f"sve stage: {e} (--members)") from None
    cfg = sve_config(params)
    entry = base_entry(params, cfg)
    recipe = stage_config.recipes(params)[cfg.recipe]
    splits = suite_source.resolve_splits(None if cfg.splits is None else list(cfg.splits), [s for s in per_model.split_files() if s != per_model.TRAIN],
                                    f"params.yaml {SECTION}.splits")
    # build() gives the backbone its 1000-class head; SVE copies it into every member when the suite has 1000 classes
    check_diversity(members, cfg.sigma_init, suite_source.for_params(params).num_classes() == 1000,
                    f"params.yaml {SECTION} (sve@{members})")
    return cfg, entry, recipe, splits


def summed_member_cross_entropy(logits, labels, label_smoothing: float = 0.0):
    """Sum over members of each member's mean cross-entropy on the batch, for (M, B, C) logits.

    Member ``m``'s gradient is that of its own loss, whatever ``M`` (the mean over
    members would scale it by ``1 / M``): with AdamW's per-parameter updates, the
    first ``k`` members of an ``M``-member run are the ``k``-member run (nested SVE).
    """
    if logits.dim() == 2:
        return member_cross_entropy(logits, labels, label_smoothing)
    return sum(member_cross_entropy(z, labels, label_smoothing) for z in logits.unbind(0))


NESTED = "sve"  # results/method_checkpoints/sve/m<M>: what stage sve-train trained (see train_nested)


class _Run(NamedTuple):
    cfg: dict
    entry: ZooEntry
    recipe: Recipe
    splits: list[str]
    src: object
    tr: SplitInputs
    va: SplitInputs
    model: SingularValueEnsemble
    fingerprint: str
    folder: Path


def _plan(params: dict, members: int) -> tuple:
    """Validated config, base entry, recipe, splits, data source, train/val inputs and the run's fingerprint."""
    cfg, entry, recipe, splits = check(params, members)
    src = suite_source.for_params(params)
    tr = train_subset(src.inputs(per_model.TRAIN, entry, train=True), cfg.train_subset, cfg.seed)
    va = src.inputs(per_model.VAL, entry)
    run = {"sigma_init": cfg.sigma_init, "seed": cfg.seed, "patterns": cfg.patterns, "members": members}
    if cfg.nested:
        run["loss"] = "summed"  # and per-member noise streams
    fp = stage_config.fingerprint(entry.as_dict(), asdict(recipe), run, store.array_hash(tr.ids), store.array_hash(va.ids))
    return cfg, entry, recipe, splits, src, tr, va, fp


def _training(params: dict, members: int, folder_name: str) -> _Run:
    """Validated config, the ``members``-member model, its data, fingerprint and checkpoint folder (no training yet)."""
    cfg, entry, recipe, splits, src, tr, va, fp = _plan(params, members)
    stage_config.set_threads(params)
    model = build(entry, cfg, members, src.num_classes())
    folder = stage_config.RESULTS / "method_checkpoints" / folder_name  # not results/checkpoints: the soups depend on it
    return _Run(cfg, entry, recipe, splits, src, tr, va, model, fp, folder)


def _fit(params, t, progress: bool) -> dict:
    cfg, _, recipe, _, src, tr, va, model, fp, folder = t
    return per_model.train_once(model.to(suite_source.device(params)), tr.fit_data, va.fit_data, recipe, seed=cfg.seed,
                             folder=folder, fingerprint=fp, params=model.trainable_parameters(),
                             loss_fn=summed_member_cross_entropy if cfg.nested else member_cross_entropy,
                             progress=progress, num_workers=src.num_workers)


OUTPUTS = "outputs"  # <trained folder>/outputs: member logits of every output split + sizes.json (stage sve-train)


def _size_info(t, record: dict, members: int, val_logits, one: float, params: dict) -> dict:
    """``cost.json`` of output ``sve-m<members>``: the first ``members`` members of the trained model of ``t``."""
    cfg, entry, recipe, _, _, tr, va, model, _, _ = t
    sub = model if members == model.members else model.first_members(members)
    c = params["cost"]
    return {"family": "sve", "method": f"m{members}", "base": entry.name, "members": members, "arch": entry.arch,
            "img_size": entry.img_size, "sigma_init": cfg.sigma_init, "seed": cfg.seed,
            "adapted_layers": len(model.layer_names), "train_images": len(tr), "trained_members": model.members,
            "val_score": record["best_score"] if sub is model else selection_score(val_logits[:members], va.labels, recipe.select_by),
            "select_by": recipe.select_by, **cost_info(sub, entry.img_size, one),
            "throughput": costs.measure_throughput(sub, entry.img_size, batch_size=c["throughput_batch"], iters=c["throughput_iters"])}


def _predict(params, t, progress: bool) -> dict:
    """split -> (member logits (M, N, C), labels, ids) of the trained model of ``t`` on the output splits."""
    model = t.model.cpu().eval()
    return per_model.predict_splits(params, model, t.entry, t.splits, batch_size=max(1, IMAGES_PER_CALL // model.members),
                                 desc=output_name(model.members), progress=progress)


def _sizes(cfg: dict, trained: int) -> list[int]:
    """The output sizes a model of ``trained`` members serves: its first M members (nested) or itself."""
    return sorted(m for m in cfg.members if m <= trained and (cfg.nested or m == trained))


def _write_members(params, t, record: dict, progress: bool) -> dict:
    """Stage ``sve-train``'s second half: one forward of all trained members on every output split, into
    ``<folder>/outputs/`` (member logits + ``sizes.json``: the ``cost.json`` of every size it serves), so that
    stage ``sve@<M>`` only slices (no model, no second forward)."""
    model = t.model
    predictions = _predict(params, t, progress)
    stage_config.set_threads(params)
    model.cpu()
    one = costs.count_flops(model.export_member(0), t.entry.img_size)
    sizes = {str(m): _size_info(t, record, m, predictions[per_model.VAL][0], one, params) for m in _sizes(t.cfg, model.members)}
    with store.atomic_dir(t.folder / OUTPUTS) as out:
        for split_name, (z, labels, ids) in predictions.items():
            store.save_logits_file(out / f"{split_name}.safetensors", z, labels, ids,
                                   meta={"model": output_name(model.members), "split": split_name, "family": "sve"})
        store.write_json(out / "sizes.json", {"fingerprint": t.fingerprint, "splits": t.splits, "sizes": sizes})
    return sizes


def _write(params, t, record: dict, members: int, progress: bool) -> dict:
    """Method output ``sve-m<members>`` of the trained model of ``t`` (all its members; ``--alone``)."""
    predictions = _predict(params, t, progress)
    info = _size_info(t, record, members, predictions[per_model.VAL][0], costs.count_flops(t.model.export_member(0), t.entry.img_size), params)
    return per_model.write_method_output(params, output_name(members), predictions, info)


def train_sve(params: dict, members: int, *, progress: bool = True) -> dict:
    """Fine-tune an ``members``-member SVE (params ``sve``) alone and write its method output; returns ``cost.json``."""
    t = _training(params, members, output_name(members))
    return _write(params, t, _fit(params, t, progress), members, progress)


def largest(params: dict) -> int:
    return max(sve_config(params).members)


def trained_sizes(params: dict) -> list[int]:
    """The sizes stage ``sve-train`` trains: the largest of ``sve.members`` (nested), else every size."""
    cfg = sve_config(params)
    return [max(cfg.members)] if cfg.nested else sorted(cfg.members)


def train_nested(params: dict, *, progress: bool = True) -> dict[int, dict]:
    """Stage ``sve-train``: into ``results/method_checkpoints/sve/m<M>/``, train the largest size of
    ``sve.members`` once (``sve.nested: true``) or every size on its own (``false``); returns the records.

    Nested SVE: member ``m`` has its own noise stream, parameters and loss term and
    sees the same batches, so the first ``M`` members of the largest run are what an
    ``M``-member run trains, up to float rounding (tests/methods/test_sve_nested.py).
    With a recipe of several epochs, every size takes the epoch the largest selects.
    ``nested: false`` keeps the former per-size training (one noise stream for all
    members, mean member loss): the numbers of separate ``M``-member runs.
    """
    records = {}
    for m in trained_sizes(params):
        t = _training(params, m, f"{NESTED}/m{m}")
        records[m] = _fit(params, t, progress)
        _write_members(params, t, records[m], progress)
    return records


def nested_output(params: dict, members: int, *, progress: bool = True) -> dict:
    """Stage ``sve@<M>``: method output ``sve-m<M>``, the first ``M`` members of what ``sve-train`` trained
    (sliced from the member logits it wrote; no model is built)."""
    try:
        check_members(members)
    except ValueError as e:
        raise ValueError(f"sve stage: {e} (--members)") from None
    cfg = sve_config(params)
    if members not in cfg.members:
        raise ValueError(f"sve stage: --members {members} is not in params.yaml {SECTION}.members {list(cfg.members)}")
    trained = next(m for m in trained_sizes(params) if m >= members)
    folder = stage_config.RESULTS / "method_checkpoints" / NESTED / f"m{trained}"
    done, index = folder / "train.json", folder / OUTPUTS / "sizes.json"
    fingerprint = _plan(params, trained)[-1]
    record = store.read_json(done) if done.exists() else None
    written = store.read_json(index) if index.exists() and record is not None else None
    if (written is None or {record.get("fingerprint"), written.get("fingerprint")} != {fingerprint}
            or str(members) not in written.get("sizes", {})):
        raise store.StoreError(f"{done}: no finished SVE training for the current params; run `dvc repro sve-train` "
                               f"(or pipelines/sve.py --train)")
    predictions = {}
    for split_name in written["splits"]:
        f = store.load_logits_file(folder / OUTPUTS / f"{split_name}.safetensors")
        predictions[split_name] = (f.logits[:members], f.labels, f.ids)
    return per_model.write_method_output(params, output_name(members), predictions, written["sizes"][str(members)])


def train_sves(params: dict, sizes: list[int] | None = None, *, progress: bool = True) -> list[dict]:
    """``sve-train`` then ``sve@<M>`` for every ``M`` of ``sizes`` (default params ``sve.members``), in one process."""
    if sizes is not None:
        params = {**params, SECTION: {**params[SECTION], "members": list(sizes)}}
    train_nested(params, progress=progress)
    return [nested_output(params, m, progress=progress) for m in sorted(sve_config(params).members)]
