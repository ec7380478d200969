"""The SVE method: fine-tune a Singular Value Ensemble (arXiv 2601.22068) of ``M``
members on a zoo entry's pretrained backbone and write its member logits (the model:
:mod:`benchmark.methods.sve`). Its stages (``pipelines/sve.py``): ``sve-train``
(:func:`train_nested`) and ``sve@<M>`` (:func:`nested_output`, the registered method);
``ctx`` is what the stage hands down (:class:`benchmark.stages.method_stage.MethodContext`).

``params.yaml`` ``sve:`` (:class:`SveConfig`, validated before any work):

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
same fingerprint is not trained again) and, written by the stage, member logits (M, N, C) and
``cost.json`` in ``results/methods/sve-m<M>/``. Costs (paper convention):
``gflops = M x`` GFLOPs of one member as a dense model; ``trainable_params = M
(singular values + biases + head)``; ``overhead_percent = 100 trainable_params
/ backbone`` (all M members and their heads: 1.36 % for ViT-B/16, M = 8, 10 classes);
``extra_params_percent = 100 (M - 1) (singular values + biases) / backbone``,
the paper's figure, what SVE adds over one fine-tuned model (its ``5 (M - 1) /
(4 d)``: 1.14 % at M = 8, d = 768); ``params = backbone + trainable_params``
(backbone: pretrained, without its classifier). Training budget (:mod:`benchmark.methods.budget`):
``M x epochs x`` the images of an epoch (each member runs the whole network on every image; with nested training
member ``m`` does not depend on ``M``, so ``sve-m<M>`` counts its ``M`` members), ``trainable_params`` trained; it
starts from the pretrained backbone, so no fine-tune of the zoo is part of it.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

from benchmark.core.members import member_cross_entropy
from benchmark.methods.baselines import TRAIN, VAL, train_once
from benchmark.methods.registry import Output, register_method
from benchmark.methods.sve import SingularValueEnsemble, check_members
from benchmark.methods.sve_setup import (
    IMAGES_PER_CALL,
    SECTION,
    SveConfig,
    build,
    check,
    check_config,
    cost_info,
    output_name,
    summed_member_cross_entropy,
    sve_training,
    train_subset,
)
from benchmark.models import cost as costs
from benchmark.models.recipe import Recipe
from benchmark.models.train import selection_score
from benchmark.models.zoo import ZooEntry
from benchmark.storage import store

NESTED = "sve"  # results/method_checkpoints/sve/m<M>: what stage sve-train trained (see train_nested)


class _Run(NamedTuple):
    cfg: SveConfig
    entry: ZooEntry
    recipe: Recipe
    splits: list[str]
    tr: object  # SplitInputs of the training subset
    va: object
    model: SingularValueEnsemble
    fingerprint: str
    folder: Path


def _plan(ctx, cfg: SveConfig, members: int) -> tuple:
    """Validated base entry, recipe, splits, train/val inputs and the run's fingerprint."""
    entry, recipe, splits = check(ctx, cfg, members)
    tr = train_subset(ctx.inputs(TRAIN, entry, train=True), cfg.train_subset, cfg.seed)
    va = ctx.inputs(VAL, entry)
    run = {"sigma_init": cfg.sigma_init, "seed": cfg.seed, "patterns": cfg.patterns, "members": members}
    if cfg.nested:
        run["loss"] = "summed"  # and per-member noise streams
    fp = ctx.fingerprint(entry.as_dict(), asdict(recipe), run, store.array_hash(tr.ids), store.array_hash(va.ids))
    return entry, recipe, splits, tr, va, fp


def _training(ctx, cfg: SveConfig, members: int, folder_name: str) -> _Run:
    """Validated config, the ``members``-member model, its data, fingerprint and checkpoint folder (no training yet)."""
    entry, recipe, splits, tr, va, fp = _plan(ctx, cfg, members)
    ctx.set_threads()
    model = build(entry, cfg, members, ctx.source.num_classes())
    folder = ctx.method_folder(folder_name)  # not results/checkpoints: the soups depend on it
    return _Run(cfg, entry, recipe, splits, tr, va, model, fp, folder)


def _fit(ctx, t: _Run) -> dict:
    cfg, _, recipe, _, tr, va, model, fp, folder = t
    return train_once(
        model.to(ctx.device()),
        tr.fit_data,
        va.fit_data,
        recipe,
        seed=cfg.seed,
        folder=folder,
        fingerprint=fp,
        params=model.trainable_parameters(),
        loss_fn=summed_member_cross_entropy if cfg.nested else member_cross_entropy,
        progress=ctx.progress,
        num_workers=ctx.source.num_workers,
    )


OUTPUTS = "outputs"  # <trained folder>/outputs: member logits of every output split + sizes.json (stage sve-train)


def _size_info(ctx, t: _Run, record: dict, members: int, val_logits, one: float) -> dict:
    """``cost.json`` of output ``sve-m<members>``: the first ``members`` members of the trained model of ``t``."""
    cfg, entry, recipe, _, tr, va, model, _, _ = t
    sub = model if members == model.members else model.first_members(members)
    c = ctx.params.cost
    return {
        "family": "sve",
        "method": f"m{members}",
        "base": entry.name,
        "members": members,
        "arch": entry.arch,
        "img_size": entry.img_size,
        "sigma_init": cfg.sigma_init,
        "seed": cfg.seed,
        "adapted_layers": len(model.layer_names),
        "epoch_images": len(tr),
        "trained_members": model.members,
        "val_score": record["best_score"]
        if sub is model
        else selection_score(val_logits[:members], va.labels, recipe.select_by),
        "select_by": recipe.select_by,
        **cost_info(sub, entry.img_size, one),
        **costs.measured(sub, entry.img_size, c),
    }


def _predict(ctx, t: _Run) -> dict:
    """split -> (member logits (M, N, C), labels, ids) of the trained model of ``t`` on the output splits."""
    model = t.model.cpu().eval()
    return ctx.predict(
        model, t.entry, t.splits, batch_size=max(1, IMAGES_PER_CALL // model.members), desc=output_name(model.members)
    )


def _sizes(cfg: SveConfig, trained: int) -> list[int]:
    """The output sizes a model of ``trained`` members serves: its first M members (nested) or itself."""
    return sorted(m for m in cfg.members if m <= trained and (cfg.nested or m == trained))


def _write_members(ctx, t: _Run, record: dict) -> dict:
    """Stage ``sve-train``'s second half: one forward of all trained members on every output split, into
    ``<folder>/outputs/`` (member logits + ``sizes.json``: the ``cost.json`` of every size it serves), so that
    stage ``sve@<M>`` only slices (no model, no second forward)."""
    model = t.model
    predictions = _predict(ctx, t)
    ctx.set_threads()
    model.cpu()
    one = costs.count_flops(model.export_member(0), t.entry.img_size)
    sizes = {str(m): _size_info(ctx, t, record, m, predictions[VAL][0], one) for m in _sizes(t.cfg, model.members)}
    with store.atomic_dir(t.folder / OUTPUTS) as out:
        for split_name, (z, labels, ids) in predictions.items():
            store.save_logits_file(
                out / f"{split_name}.safetensors",
                z,
                labels,
                ids,
                meta={"model": output_name(model.members), "split": split_name, "family": "sve"},
            )
        store.write_json(out / "sizes.json", {"fingerprint": t.fingerprint, "splits": t.splits, "sizes": sizes})
    return sizes


def train_sve(ctx, cfg: SveConfig, members: int) -> Output:
    """Fine-tune an ``members``-member SVE (params ``sve``) alone (``pipelines/sve.py --members M --alone``); its output
    ``sve-m<members>`` (all its members)."""
    t = _training(ctx, cfg, members, output_name(members))
    record = _fit(ctx, t)
    predictions = _predict(ctx, t)
    info = _size_info(
        ctx, t, record, members, predictions[VAL][0], costs.count_flops(t.model.export_member(0), t.entry.img_size)
    )
    return Output(output_name(members), info, predictions=predictions)


def trained_sizes(cfg: SveConfig) -> list[int]:
    """The sizes stage ``sve-train`` trains: the largest of ``sve.members`` (nested), else every size."""
    return [max(cfg.members)] if cfg.nested else sorted(cfg.members)


def train_nested(ctx, cfg: SveConfig) -> dict[int, dict]:
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
    for m in trained_sizes(check_config(ctx, cfg)):
        t = _training(ctx, cfg, m, f"{NESTED}/m{m}")
        records[m] = _fit(ctx, t)
        _write_members(ctx, t, records[m])
    return records


@register_method(
    kind="sve",
    family="sve",
    group="sve",
    section=SECTION,
    script="sve",
    config=SveConfig,
    needs=("base-model",),
    persist=True,
    title="Singular Value Ensemble",
    training=sve_training,
    comment="Singular Value Ensembles (params.yaml sve): stages sve-train and sve",
)
def nested_output(ctx, cfg: SveConfig, members) -> list[Output]:
    """Stage ``sve``: method outputs ``sve-m<M>`` for every size ``M`` of ``members`` (an integer or a list of them;
    the stage lists every size of ``sve.members``, the outputs ``dvc.yaml`` declares), each the first ``M`` members
    of what ``sve-train`` trained (sliced from the member logits it wrote; no model is built, each trained model's
    logits are read once)."""
    sizes = _output_sizes(cfg, members)
    trained = {m: next(t for t in trained_sizes(cfg) if t >= m) for m in sizes}
    outputs = []
    for t in sorted(set(trained.values())):
        folder = ctx.method_folder(NESTED) / f"m{t}"
        done, index = folder / "train.json", folder / OUTPUTS / "sizes.json"
        fingerprint = _plan(ctx, cfg, t)[-1]
        record = store.read_json(done) if done.exists() else None
        written = store.read_json(index) if index.exists() and record is not None else None
        mine = [m for m in sizes if trained[m] == t]
        if (
            written is None
            or {record.get("fingerprint"), written.get("fingerprint")} != {fingerprint}
            or any(str(m) not in written.get("sizes", {}) for m in mine)
        ):
            raise store.StoreError(
                f"{done}: no finished SVE training for the current params; run `dvc repro sve-train` "
                f"(or pipelines/sve.py --train)"
            )
        files = {
            split_name: store.load_logits_file(folder / OUTPUTS / f"{split_name}.safetensors")
            for split_name in written["splits"]
        }
        outputs += [
            Output(
                output_name(m),
                written["sizes"][str(m)],
                predictions={s: (f.logits[:m], f.labels, f.ids) for s, f in files.items()},
            )
            for m in mine
        ]
    return sorted(outputs, key=lambda o: int(o.name.removeprefix("sve-m")))


def _output_sizes(cfg: SveConfig, members) -> list[int]:
    """The sizes a run of stage ``sve`` writes (``--members``), checked: every size of ``sve.members`` and no other
    (the stage's declared outputs are generated from it: a size left out means a ``dvc.yaml`` older than
    ``params.yaml``)."""
    sizes = []
    for m in [members] if isinstance(members, int) or not isinstance(members, (list, tuple)) else members:
        try:
            sizes.append(check_members(m))
        except ValueError as e:
            raise ValueError(f"sve stage: {e} (--members)") from None
    if not cfg.members:
        raise ValueError(
            f"params.yaml {SECTION}.members is [] (no SVE: the pipeline has no SVE stage); list the sizes M "
            f"to run, e.g. [1, 2, 4, 8]"
        )
    stray = [m for m in sizes if m not in cfg.members]
    if stray:
        raise ValueError(
            f"sve stage: --members {' '.join(map(str, stray))} is not in params.yaml {SECTION}.members "
            f"{list(cfg.members)}: dvc.yaml is older than params.yaml; regenerate it (python -m benchmark "
            f"suite-pipeline embedded, or suite-pipeline <suite> for a paper suite)"
        )
    left_out = sorted(set(cfg.members) - set(sizes))
    if left_out:
        raise ValueError(
            f"sve stage: --members {' '.join(map(str, sizes))} leaves out {left_out} of params.yaml "
            f"{SECTION}.members {list(cfg.members)}: dvc.yaml, which declares the outputs of the sizes it "
            f"lists, is older than params.yaml; regenerate it (python -m benchmark suite-pipeline embedded, "
            f"or suite-pipeline <suite> for a paper suite)"
        )
    return sorted(set(sizes))
