"""The ``logits@<model>`` stage: the trained model's logits (:func:`benchmark.stages.per_model.logits`) and, with
``--cost``, its cost record ``results/cost/<model>.json`` (fvcore GFLOPs, parameters and CPU throughput at its input
size, and its training budget) in the same process: no separate cost stage, one Python start-up and import less per
model."""

from __future__ import annotations

import torch

from benchmark.core.costs import train_budget
from benchmark.models import cost as costs
from benchmark.models import distributed, factory
from benchmark.stages.per_model import ModelStage, load_trained, logits
from benchmark.stages.suite_source import train_size
from benchmark.storage import store


def cost(stage: ModelStage) -> dict:
    """GFLOPs, params and CPU throughput of the stage's zoo entry at its input size, and its training budget
    (:func:`benchmark.core.costs.train_budget`): its recipe's epochs over the train split (the images
    :func:`benchmark.stages.per_model.train` passes over), a full fine-tune of its parameters."""
    entry = stage.entry
    stage.set_threads()
    model = factory.create(entry, stage.source.num_classes(), load_weights=False)
    c = stage.params.cost
    static = costs.static_cost(model, entry.img_size)
    record = {
        "name": stage.name,
        "arch": entry.arch,
        "init": entry.init,
        "img_size": entry.img_size,
        "seed": entry.seed,
        "role": entry.role,
        **static,
        **train_budget(stage.recipe.epochs, train_size() if stage.recipe.epochs else 0, static["params"]),
        **costs.measured(model, entry.img_size, c),
        "threads": torch.get_num_threads(),
    }
    store.write_json(stage.folders["cost"], record)
    return record


def logits_and_cost(stage: ModelStage, *, with_cost: bool = True, progress: bool = True) -> list[str]:
    """The stage's logits (of its trained model) and, ``with_cost``, its cost record (rank 0 under torchrun); the
    splits written."""
    written = logits(stage, load_trained(stage), progress=progress)  # the trained model built first, then run
    if with_cost and distributed.is_main():
        cost(stage)
    return written
