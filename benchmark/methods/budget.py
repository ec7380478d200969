"""The training budget of a method output's rows: its own training and that of the zoo models it builds on.

A row's budget (columns ``train_images`` and ``train_params``, :data:`benchmark.core.costs.BUDGET`) is what it
took to make its models. A method output's ``cost.json`` holds two parts of it:

* its own training (:func:`own_budget`): ``own_train_images`` and ``own_train_params``, from the method's
  :class:`~benchmark.methods.registry.Training` (:func:`~benchmark.methods.registry.training_of`), the epochs of its
  recipe, the images of the train split and the ``trainable_params`` of its cost record
  (:func:`benchmark.core.costs.train_budget`); nothing for a method that trains nothing itself (soups, MC dropout,
  last-layer Laplace);
* ``builds_on``: the zoo models whose training it starts from (a soup's ingredients, all of them for the greedy soup
  too, since it needs them all trained; the model of MC dropout or Laplace; none for SVE or a LoRA-Ensemble, which
  start from the pretrained backbone).

The evaluate stage adds the two in one place (:func:`row_budget`, called by
:func:`benchmark.evaluation.stage.unit_list` with the zoo models' cost records). A method's stage
(:mod:`benchmark.stages.method_stage`) and ``verify`` (:mod:`benchmark.bundle.recost`) compute the own part with
:func:`own_budget`, so that ``verify`` recomputes both.
"""

from __future__ import annotations

import math

from benchmark.core.costs import BUDGET, sum_budget, train_budget
from benchmark.methods import registry
from benchmark.models.recipe import recipe_of

OWN = tuple(f"own_{k}" for k in BUDGET)  # cost.json: the output's own training
FIELDS = (*OWN, "builds_on")  # what own_budget adds to a cost record


def own_budget(method: registry.Method, cfg, info: dict, recipes: dict, train_size: int) -> dict:
    """``own_train_images``, ``own_train_params`` and ``builds_on`` of the output of ``method``'s params entry ``cfg``
    described by ``info`` (its cost record: ``trainable_params`` when the method trains); ``recipes``: name ->
    :class:`~benchmark.models.recipe.Recipe`; ``train_size``: images of the train split. ``ValueError`` naming what
    is missing."""
    t = registry.training_of(method, cfg, info)
    if not isinstance(t, registry.Training):
        raise ValueError(f"method {method.kind!r}: its training function returned {type(t).__name__}, not a Training")
    own = {"train_images": 0, "train_params": 0}
    if t.recipe:
        recipe = recipe_of(recipes, t.recipe, "its training")
        trainable = info.get("trainable_params")
        if trainable is None:
            raise ValueError(f"it trains (recipe {t.recipe!r}) but its cost record has no trainable_params")
        images = train_size if t.images is None else t.images
        own = train_budget(recipe.epochs, images, trainable, t.members)
    return {
        "own_train_images": own["train_images"],
        "own_train_params": own["train_params"],
        "builds_on": list(t.builds_on),
    }


def row_budget(info: dict, costs: dict) -> dict:
    """The budget of a method output's rows: its own (``info``: its cost record) plus that of every zoo model it builds
    on (``costs``: model -> its cost record); NaN when the record has none (written before budgets).
    ``ValueError`` when it builds on a model without a cost record."""
    names = info.get("builds_on")
    if names is None or any(k not in info for k in OWN):
        return {k: math.nan for k in BUDGET}
    missing = [n for n in names if n not in costs]
    if missing:
        raise ValueError(f"method output of {info.get('family')!r} builds on {missing}, which have no cost record")
    inherited = sum_budget(costs, names)
    return {k: float(info[f"own_{k}"]) + inherited[k] for k in BUDGET}
