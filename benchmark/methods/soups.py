"""Model soups (Wortsman et al., ICML 2022): average the weights of fine-tunes.

The ingredients are fine-tunes of one architecture from the same pretrained
initialisation (here: the seeded fine-tunes of one zoo architecture), so their
weights lie in one basin and can be averaged. Every floating-point tensor of
the ``state_dict`` is averaged -- parameters *and* BatchNorm running means and
variances (the averaged statistics only approximate those of the souped
network; the paper does the same for BN models). Integer buffers (BatchNorm's
``num_batches_tracked``) are taken from the first ingredient.

* uniform soup: ``theta = mean_k theta_k`` over all ingredients;
* greedy soup (the released code's rule, ``held_out_val_accuracy >
  best_val_acc_so_far`` in ``mlfoundations/model-soups``): sort the ingredients
  by their validation score (best first), start from the best, and add each next
  one only if the soup's validation score strictly improves; a tie leaves the
  ingredient out. The result is never worse on validation than its first
  ingredient (it starts there and only accepts improving steps).

BatchNorm statistics (``bn``): averaged running means and variances are not the
statistics of the averaged network (its features are not the ingredients' average),
and on the embedded default they wreck the soup (five lite0 fine-tunes at test
accuracy 0.954-0.961 averaged to 0.890). ``bn: recompute`` (the default) gives every
soup of two or more ingredients the statistics of its own features: one pass over the
training split without augmentation, every BatchNorm layer in train mode with a
cumulative average over the batches and the rest of the network in eval mode
(:func:`recompute_batchnorm`; the same soup then reached 0.959), as weight-averaging
work on BatchNorm networks does (REPAIR, Jordan et al. 2023; ``update_bn`` of
PyTorch's SWA utilities, which however switches dropout on for the pass). The greedy
soup scores each candidate after its recompute. ``bn: averaged`` keeps the averaged
statistics (the former behaviour). Networks without BatchNorm are unchanged either way.

A soup is one model: it costs one forward.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from benchmark.config.typed import check
from benchmark.methods import baselines as bl
from benchmark.methods.registry import Output, register_cost, register_method
from benchmark.models.infer import batches, predict_logits
from benchmark.models.recipe import recipe_of

METHOD = "model soup"


def average_state_dicts(
    state_dicts: Sequence[Mapping[str, Tensor]], names: Sequence[str] | None = None
) -> dict[str, Tensor]:
    """Mean of every floating-point tensor over ``state_dicts`` (same keys and shapes); other tensors from the first."""
    names = list(names or [f"ingredient {i}" for i in range(len(state_dicts))])
    if len(state_dicts) < 1:
        raise ValueError(f"{METHOD}: needs at least one ingredient")
    ref = state_dicts[0]
    for name, sd in zip(names[1:], state_dicts[1:]):
        if sd.keys() != ref.keys():
            diff = sorted(set(sd) ^ set(ref))[:5]
            raise ValueError(
                f"{METHOD}: {name!r} and {names[0]!r} have different weights ({diff}); soups need one architecture"
            )
        for k, v in sd.items():
            if v.shape != ref[k].shape:
                raise ValueError(
                    f"{METHOD}: tensor {k!r} has shape {tuple(v.shape)} in {name!r} but {tuple(ref[k].shape)} in "
                    f"{names[0]!r}"
                )
    out = {}
    for k, v in ref.items():
        if v.is_floating_point():
            out[k] = torch.stack([sd[k].to(torch.float64) for sd in state_dicts]).mean(0).to(v.dtype)
        else:
            out[k] = v.clone()
    return out


def _soup(
    models: Sequence[nn.Module], names: Sequence[str], finish: Callable[[nn.Module], None] | None = None
) -> nn.Module:
    soup = copy.deepcopy(models[0])
    soup.load_state_dict(average_state_dicts([m.state_dict() for m in models], names), strict=True)
    if finish is not None and len(models) > 1:
        finish(soup)
    return soup.eval()


@torch.no_grad()
def recompute_batchnorm(model: nn.Module, batches) -> nn.Module:
    """Replace every BatchNorm layer's running statistics by those of ``model``'s own features on ``batches`` (an
    iterable of input tensors): statistics reset, cumulative average over the batches (``momentum=None``), only the
    BatchNorm layers in train mode (dropout and drop-path stay off). Returns ``model`` in eval mode."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model.eval()
    momenta = [m.momentum for m in bns]
    model.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    seen = 0
    for x in batches:
        model(x)
        seen += len(x)
    for m, mom in zip(bns, momenta):
        m.momentum = mom
    if seen == 0:
        raise ValueError(f"{METHOD}: no images to recompute the BatchNorm statistics on")
    return model.eval()


def check_ingredients(models: Sequence, names: Sequence[str] | None = None) -> list[str]:
    """The ingredients' names (``ingredient i`` when not given), at least two and one per model; ``ValueError``
    otherwise."""
    names = list(names) if names is not None else [f"ingredient {i}" for i in range(len(models))]
    if len(names) != len(models):
        raise ValueError(f"{METHOD}: {len(models)} models but {len(names)} names")
    if len(models) < 2:
        raise ValueError(f"{METHOD} of {names}: needs at least 2 ingredients, got {len(models)}")
    return names


def uniform_soup(
    models: Sequence[nn.Module], names: Sequence[str] | None = None, finish: Callable[[nn.Module], None] | None = None
) -> nn.Module:
    """A copy of ``models[0]`` holding the mean of all ingredients' weights (eval mode), then ``finish(soup)`` (e.g. the
    BatchNorm recompute)."""
    return _soup(models, check_ingredients(models, names), finish)


@dataclass(frozen=True)
class GreedySoup:
    model: nn.Module
    ingredients: list[str]  # in the order they were added; the first is the best single ingredient
    score: float  # validation score of the soup
    scores: dict[str, float]  # validation score of each ingredient alone
    history: list[dict]  # one entry per candidate: name, soup score with it, accepted


def greedy_soup(
    models: Sequence[nn.Module],
    score: Callable[[nn.Module], float],
    names: Sequence[str] | None = None,
    finish: Callable[[nn.Module], None] | None = None,
) -> GreedySoup:
    """Greedy soup: ``score(model)`` is the validation score (higher is better); ``finish`` is applied to every soup of
    two or more ingredients before it is scored; see the module docstring."""
    names = check_ingredients(models, names)
    scores = {n: float(score(m.eval())) for n, m in zip(names, models)}
    order = sorted(range(len(models)), key=lambda i: -scores[names[i]])  # stable: ties keep the given order
    chosen = [order[0]]
    best, current = scores[names[order[0]]], models[order[0]]
    history = []
    for i in order[1:]:
        candidate = _soup([models[j] for j in chosen + [i]], [names[j] for j in chosen + [i]], finish)
        s = float(score(candidate))
        accepted = s > best  # strict, as published: a tie keeps the smaller soup
        history.append({"name": names[i], "score": s, "accepted": accepted})
        if accepted:
            chosen.append(i)
            best, current = s, candidate
    soup = current if len(chosen) > 1 else copy.deepcopy(current).eval()
    return GreedySoup(model=soup, ingredients=[names[j] for j in chosen], score=best, scores=scores, history=history)


# ---- the method: params.yaml baselines.soups.<key> -> two outputs (registered; see benchmark.methods.baselines) ----


def soup_outputs(key: str) -> dict[str, str]:
    """Soup kind -> output name of the soup entry ``key``."""
    return {"uniform": f"{key}-uniform", "greedy": f"{key}-greedy"}


@dataclass(frozen=True)
class SoupConfig:
    models: list[str]  # at least 2 distinct fine-tunes of one architecture (checked with the zoo)
    splits: list[str] | None = bl.splits_field()
    bn: str = field(
        default="recompute", metadata=check(choices=("recompute", "averaged"))
    )  # BatchNorm statistics of a soup


def check_soup(ctx, cfg: SoupConfig) -> list[str]:
    """The entry's ingredients checked against the zoo, and the splits its outputs cover."""
    names = cfg.models
    if not isinstance(names, list) or len(names) < 2 or len(set(names)) != len(names):
        raise ValueError(f"{ctx.where}: {METHOD} needs a list of at least 2 distinct models, got {names!r}")
    entries = [ctx.zoo[bl.model(ctx, n)] for n in names]
    for e in entries[1:]:
        for attr in ("arch", "init", "img_size", "recipe"):
            if getattr(e, attr) != getattr(entries[0], attr):
                raise ValueError(
                    f"{ctx.where}: {METHOD} ingredients must be fine-tunes of one architecture from one "
                    f"init; model {e.name!r} has {attr} {getattr(e, attr)!r} but {names[0]!r} has "
                    f"{getattr(entries[0], attr)!r}"
                )
    return ctx.splits(cfg.splits)


@register_method(
    kind="soups",
    stage="soup",
    family="soup",
    title=METHOD,
    config=SoupConfig,
    needs=("checkpoints",),
    outputs=lambda key: list(soup_outputs(key).values()),
    chosen=("greedy",),
    comment="uniform and greedy soups of seeded fine-tunes",
    example=lambda x: f"soup-{x['base']}: {{models: {x['group']}}}" if x["group"] != "[]" else None,
)
def soup(ctx, cfg: SoupConfig, key: str) -> list[Output]:
    """Uniform and greedy soups of ``baselines.soups.<key>.models`` -> ``<key>-uniform``, ``<key>-greedy``."""
    splits = check_soup(ctx, cfg)
    names = cfg.models
    loaded = [ctx.load_trained(n) for n in names]
    entry, ingredients = loaded[0][0], [m for _, m in loaded]
    ctx.set_threads()
    select_by = recipe_of(ctx.recipes, entry.recipe, f"zoo entry {names[0]!r}").select_by
    val = ctx.inputs(bl.VAL, entry)
    bs, workers = ctx.batch_size, ctx.source.num_workers

    def score(model) -> float:
        return bl.selection_score(
            predict_logits(model, val.inputs, batch_size=bs, num_workers=workers), val.labels, select_by
        )

    finish = None
    if cfg.bn == "recompute":
        train = ctx.inputs(bl.TRAIN, entry)  # no augmentation

        def finish(model):
            recompute_batchnorm(model, batches(train.inputs, bs, num_workers=workers))

    greedy = greedy_soup(ingredients, score, names, finish)
    uniform = uniform_soup(ingredients, names, finish)
    out = soup_outputs(key)
    common = {
        "family": "soup",
        "arch": entry.arch,
        "select_by": select_by,
        "val_scores": greedy.scores,
        "bn_stats": "recomputed on train" if cfg.bn == "recompute" else "averaged",
    }
    return [
        Output(
            out["uniform"],
            dict(common, method="uniform", base=names[0], ingredients=names),
            model=uniform,
            entry=entry,
            splits=splits,
        ),
        Output(
            out["greedy"],
            dict(
                common,
                method="greedy",
                rule="strict improvement (released code)",
                base=greedy.ingredients[0],
                ingredients=greedy.ingredients,
                val_score=greedy.score,
                history=greedy.history,
            ),
            model=greedy.model,
            entry=entry,
            splits=splits,
        ),
    ]


@register_cost("soup")
def soup_output_cost(info: dict, entry, num_classes: int, members: int, cfg: SoupConfig) -> dict:
    """A soup is one model of its ingredients' architecture: what its stage counts on it
    (:func:`benchmark.models.cost.static_cost`, as :meth:`benchmark.stages.method_stage.MethodContext.costs`), the model
    built without weights (:func:`benchmark.models.cost.structure_cost`)."""
    from benchmark.models.cost import structure_cost

    if members != 1:
        raise ValueError(f"a soup is one model, but the logits have {members} members")
    return structure_cost(entry, num_classes)
