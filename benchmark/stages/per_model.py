"""The work of the per-model DVC stages ``train@<model>`` and ``logits@<model>`` (its cost record:
:mod:`benchmark.stages.model_cost`; the data stage: :func:`benchmark.stages.suite_source.prepare_data`).

A stage's entry parses what it reads once into one typed :class:`ModelStage` (:func:`model_stage`: the model
stages' params blocks, the zoo entry and its recipe, the suite's data source, the device) and hands it down; each
function validates before doing any work and writes its outputs atomically through :mod:`benchmark.storage.store`.
The suite's images come from the data source that params select (:mod:`benchmark.stages.suite_source`: the embedded
suite in memory, or a paper suite streamed from the data root).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from benchmark.models import distributed, factory
from benchmark.models.infer import amp_dtype, channels_last
from benchmark.models.recipe import Recipe, recipe_of
from benchmark.models.train import fine_tune, load_weights, training_model
from benchmark.models.zoo import ZooEntry
from benchmark.stages import stage_config, suite_source
from benchmark.stages.entry import EXPECTED, error, stage_main
from benchmark.stages.model_params import DistConfig, ModelParams
from benchmark.stages.suite_source import TRAIN, VAL, split_files
from benchmark.storage import store


@dataclass(frozen=True)
class ModelStage:
    """One zoo model's stage, as its entry parsed it: the model stages' params (``params``), zoo entry ``name``
    (``entry``) and its recipe, the suite's data source (``source``, opened once), the torch device params select and
    the stage's folders (``results/checkpoints/<name>``, ``results/logits/<name>``, ``results/cost/<name>.json``)."""

    name: str
    entry: ZooEntry
    recipe: Recipe
    source: object  # benchmark.stages.embedded_source.EmbeddedSource | benchmark.stages.paper_source.PaperSource
    params: ModelParams
    device: torch.device
    folders: dict[str, Path]

    def set_threads(self) -> None:
        """Torch threads as params ``threads`` says."""
        stage_config.set_threads(self.params)


def model_stage(params: ModelParams, name: str, source=None) -> ModelStage:
    """Zoo entry ``name`` of ``params``'s zoo, its recipe, the data source (``source``, else opened here) and the
    device, checked before any work: what a per-model stage's entry hands down."""
    entry = stage_config.entry(params, name)
    return ModelStage(
        name=name,
        entry=entry,
        recipe=recipe_of(params.recipes, entry.recipe, f"zoo entry {name!r}"),
        source=suite_source.for_params(params) if source is None else source,
        params=params,
        device=suite_source.device(params),
        folders=stage_config.paths(name),
    )


LAUNCHER = "benchmark.models.launch"  # torchrun: imported only when params ask for several processes


def launch_modules(cfg: DistConfig) -> list[str]:
    """The dotted modules a per-model stage's entry with a ``script`` imports at run time for params ``distributed``
    (``cfg``): the torchrun launcher when it asks for several processes, none otherwise (what the generated pipeline
    adds to the ``train@`` and ``logits@`` stages' dependencies)."""
    return [LAUNCHER] if cfg.world_size > 1 else []


def _data_parallel(script: str | None, stage: str, on_failure: str):
    """The ``runner`` of :func:`benchmark.stages.entry.stage_main` for a per-model stage: with a ``script`` (the stage
    script's path) the stage is data-parallel: when params ``distributed`` asks for several processes and this process
    is not a torchrun worker yet, the same command (``script`` + ``argv``) runs under torchrun instead
    (:mod:`benchmark.models.launch`) and a failure of any rank is one message naming ``stage`` and ``on_failure``
    (exit 1). In a worker, an expected error names the rank, and a failed collective (another rank stopped) exits 1
    with a one-line message."""

    def runner(params, args, argv, run) -> int:
        if script is not None:
            cfg = distributed.config(params.distributed, params.device)
            if cfg.world_size > 1 and not distributed.is_worker():
                return importlib.import_module(LAUNCHER).launch(cfg, script, argv, on_failure=on_failure, stage=stage)
        try:
            run(params, args)
        except EXPECTED as e:
            return error(e, f"rank {distributed.rank()}: " if distributed.world_size() > 1 else "")
        except distributed.RankFailure as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        distributed.shutdown()
        return 0

    return runner


def model_stage_main(
    description: str,
    fn: Callable[[ModelStage, argparse.Namespace], object],
    argv=None,
    *,
    arg: str = "model",
    help: str = "zoo entry name",
    script: str | None = None,
    on_failure: str = "its outputs were not written",
    add_args=None,
) -> int:
    """``stage_main`` for per-model stages (``foreach``): ``fn(stage, args)`` with ``--<arg> VALUE``, ``stage`` the
    typed :class:`ModelStage` of zoo entry VALUE that the entry builds (:func:`model_stage`: the params' model blocks,
    the zoo entry, the data source).

    ``script`` (the stage script's path) makes the stage data-parallel (:func:`_data_parallel`); the stage is named
    ``<script stem>@<value>`` as in dvc.yaml.
    """

    def add(p):
        p.add_argument(f"--{arg}", required=True, help=help)
        if add_args:
            add_args(p)

    def runner(params, args, argv, run) -> int:
        name = f"{Path(script or arg).stem}@{getattr(args, arg)}"
        return _data_parallel(script, name, on_failure)(params, args, argv, run)

    return stage_main(
        description, lambda params, a: fn(model_stage(params, getattr(a, arg)), a), add, argv, runner=runner
    )


def train(stage: ModelStage, *, progress: bool = True, stop_after_epoch: int | None = None) -> dict:
    """Fine-tune the stage's zoo entry; checkpoint in ``results/checkpoints/<name>/``.

    A recipe with ``epochs: 0`` saves the initial (pretrained) weights as the checkpoint.
    In a torchrun worker the ranks train one DDP model (see :mod:`benchmark.models.train`); rank 0 writes.
    """
    entry, recipe, src = stage.entry, stage.recipe, stage.source
    src.check_recipe(entry.recipe, recipe)
    dev = distributed.init(stage.params.distributed, stage.device)
    model = training_model(entry, src.num_classes(), recipe, dev)  # fails fast on missing weights
    stage.set_threads()
    train_data = val_data = None
    data_fp = []
    if recipe.epochs:  # epochs 0: the initial weights are the checkpoint, no data is read
        tr, va = src.inputs(TRAIN, entry, train=True), src.inputs(VAL, entry)
        train_data, val_data, data_fp = tr.fit_data, va.fit_data, [store.array_hash(tr.ids), store.array_hash(va.ids)]
    fp = stage_config.fingerprint(entry.as_dict(), asdict(recipe), *data_fp)
    return fine_tune(
        model,
        train_data,
        val_data,
        recipe,
        seed=entry.seed,
        folder=stage.folders["checkpoint"],
        fingerprint=fp,
        progress=progress,
        stop_after_epoch=stop_after_epoch,
        num_workers=src.num_workers,
    )


def load_trained(stage: ModelStage):
    """The stage's trained model in eval mode on the CPU, built with its recipe's ``drop_rate``."""
    model = factory.create(
        stage.entry, stage.source.num_classes(), load_weights=False, drop_rate=stage.recipe.drop_rate
    )
    folder = stage.folders["checkpoint"]
    if not (folder / "train.json").exists():
        raise store.StoreError(
            f"{folder}: training of {stage.name!r} has not finished (no train.json); run `dvc repro train@{stage.name}`"
        )
    load_weights(folder / "model.safetensors", model)
    return model.eval()


def logits(stage: ModelStage, model, *, progress: bool = True) -> list[str]:
    """Logits of ``model`` (the stage's trained model: :func:`load_trained`) on every split but train, one file per
    split in ``results/logits/<name>/``.

    In a torchrun worker each rank computes its shard of every split; rank 0
    gathers them in sample order and writes the folder (atomically, after every
    rank has finished); the other ranks write nothing. params ``logits.amp``
    (optional, default off): ``bfloat16``/``float16`` autocast of the forward.
    """
    amp = amp_dtype(stage.params.logits.amp)  # optional, default off: the forward under torch.autocast
    channels_last(model)
    device = distributed.init(stage.params.distributed, stage.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = (
            True  # fixed batch shapes: the fastest convolution algorithms (as timm's benchmark)
        )
    model.to(device)
    stage.set_threads()
    written = []
    with store.atomic_dir(stage.folders["logits"]) if distributed.is_main() else contextlib.nullcontext() as out:
        for split_name in split_files():
            if split_name == TRAIN:
                continue
            s = stage.source.inputs(split_name, stage.entry)
            z = distributed.predict_logits(
                model,
                s.inputs,
                to_all=False,
                batch_size=stage.params.logits.batch_size,
                desc=f"{stage.name}/{split_name}",
                progress=progress,
                num_workers=stage.source.num_workers,
                amp=amp,
            )
            if out is not None:
                store.save_logits_file(
                    out / f"{split_name}.safetensors",
                    z,
                    s.labels,
                    s.ids,
                    meta={"model": stage.name, "split": split_name, "arch": stage.entry.arch},
                )
            written.append(split_name)
        distributed.barrier("every split is done before rank 0 writes the folder")
    return written
