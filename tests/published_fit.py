"""The published temperature fits, transcribed line for line from REFERENCE.md (test helper, not the package).

``published_single`` and ``published_duo`` return the grid point and the final
temperatures after the LBFGS step; ``benchmark.core.temperature``'s
``paper-exact`` mode must reproduce both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _lbfgs(params, loss_fn):
    opt = torch.optim.LBFGS(params, lr=0.01, max_iter=50)

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)


def published_single(logits, labels):
    """Single-model calibration: grid ``arange(0.05, 5.05, 0.05)``, then LBFGS."""
    best_nll, best_t = float("inf"), 1.0
    for t in torch.arange(0.05, 5.05, 0.05):
        nll = F.cross_entropy(logits / t.item(), labels).item()
        if nll < best_nll:
            best_nll, best_t = nll, t.item()
    temp = torch.tensor([best_t], requires_grad=True)
    _lbfgs([temp], lambda: F.cross_entropy(logits / temp, labels))
    return best_t, temp.item()


def published_duo(zl, zs, labels):
    """Joint calibration: grid ``T_L, T_S in arange(0.05, 5.05, 0.2)`` (25 x 25), then LBFGS."""
    best_nll, best = float("inf"), None
    grid = torch.arange(0.05, 5.05, 0.2)
    assert len(grid) == 25
    for tl in grid:
        for ts in grid:
            nll = F.cross_entropy((zl / tl + zs / ts) / 2, labels).item()
            if nll < best_nll:
                best_nll, best = nll, (tl.item(), ts.item())
    tl = torch.tensor([best[0]], requires_grad=True)
    ts = torch.tensor([best[1]], requires_grad=True)
    _lbfgs([tl, ts], lambda: F.cross_entropy((zl / tl + zs / ts) / 2, labels))
    return best, (tl.item(), ts.item())
