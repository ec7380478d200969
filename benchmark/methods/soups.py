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

A soup is one model: it costs one forward.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

METHOD = "model soup"


def average_state_dicts(state_dicts: Sequence[Mapping[str, Tensor]], names: Sequence[str] | None = None) -> dict[str, Tensor]:
    """Mean of every floating-point tensor over ``state_dicts`` (same keys and shapes); other tensors from the first."""
    names = list(names or [f"ingredient {i}" for i in range(len(state_dicts))])
    if len(state_dicts) < 1:
        raise ValueError(f"{METHOD}: needs at least one ingredient")
    ref = state_dicts[0]
    for name, sd in zip(names[1:], state_dicts[1:]):
        if sd.keys() != ref.keys():
            diff = sorted(set(sd) ^ set(ref))[:5]
            raise ValueError(f"{METHOD}: {name!r} and {names[0]!r} have different weights ({diff}); soups need one architecture")
        for k, v in sd.items():
            if v.shape != ref[k].shape:
                raise ValueError(f"{METHOD}: tensor {k!r} has shape {tuple(v.shape)} in {name!r} but {tuple(ref[k].shape)} in {names[0]!r}")
    out = {}
    for k, v in ref.items():
        if v.is_floating_point():
            out[k] = torch.stack([sd[k].to(torch.float64) for sd in state_dicts]).mean(0).to(v.dtype)
        else:
            out[k] = v.clone()
    return out


def _soup(models: Sequence[nn.Module], names: Sequence[str]) -> nn.Module:
    soup = copy.deepcopy(models[0])
    soup.load_state_dict(average_state_dicts([m.state_dict() for m in models], names), strict=True)
    return soup.eval()


def check_ingredients(models: Sequence, names: Sequence[str] | None = None) -> list[str]:
    names = list(names) if names is not None else [f"ingredient {i}" for i in range(len(models))]
    if len(names) != len(models):
        raise ValueError(f"{METHOD}: {len(models)} models but {len(names)} names")
    if len(models) < 2:
        raise ValueError(f"{METHOD} of {names}: needs at least 2 ingredients, got {len(models)}")
    return names


def uniform_soup(models: Sequence[nn.Module], names: Sequence[str] | None = None) -> nn.Module:
    """A copy of ``models[0]`` holding the mean of all ingredients' weights (eval mode)."""
    return _soup(models, check_ingredients(models, names))


@dataclass(frozen=True)
class GreedySoup:
    model: nn.Module
    ingredients: list[str]  # in the order they were added; the first is the best single ingredient
    score: float  # validation score of the soup
    scores: dict[str, float]  # validation score of each ingredient alone
    history: list[dict]  # one entry per candidate: name, soup score with it, accepted


def greedy_soup(models: Sequence[nn.Module], score: Callable[[nn.Module], float],
                names: Sequence[str] | None = None) -> GreedySoup:
    """Greedy soup: ``score(model)`` is the validation score (higher is better); see the module docstring."""
    names = check_ingredients(models, names)
    scores = {n: float(score(m.eval())) for n, m in zip(names, models)}
    order = sorted(range(len(models)), key=lambda i: -scores[names[i]])  # stable: ties keep the given order
    chosen = [order[0]]
    best, current = scores[names[order[0]]], models[order[0]]
    history = []
    for i in order[1:]:
        candidate = _soup([models[j] for j in chosen + [i]], [names[j] for j in chosen + [i]])
        s = float(score(candidate))
        accepted = s > best  # strict, as published: a tie keeps the smaller soup
        history.append({"name": names[i], "score": s, "accepted": accepted})
        if accepted:
            chosen.append(i)
            best, current = s, candidate
    soup = current if len(chosen) > 1 else copy.deepcopy(current).eval()
    return GreedySoup(model=soup, ingredients=[names[j] for j in chosen], score=best, scores=scores, history=history)
