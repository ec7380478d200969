"""A seeded stratified order of samples: every prefix class-proportional (the embedded suite's splits, a method's
training subset). Its own module: a stage that draws a subset depends on this function, not on how the embedded
suite is built."""

from __future__ import annotations

import numpy as np


def stratified_order(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random order of ``range(len(labels))`` in which every prefix is class-proportional.

    The k-th (shuffled) member of a class of size n gets key (k + 0.5) / n; indices
    are sorted by key, ties broken at random.
    """
    key = np.empty(len(labels))
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        key[members] = (np.arange(members.size) + 0.5) / members.size
    return np.lexsort((rng.random(len(labels)), key))
