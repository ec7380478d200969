"""Fine-tuning with AdamW, linear warm-up then cosine, resumable after a kill.

Determinism: every epoch draws its shuffling, augmentation and dropout from a
generator seeded by ``(seed, epoch)``, so a run resumed from the checkpoint of
epoch ``e`` continues exactly as an uninterrupted run would.

Checkpoint folder layout (all writes atomic):

* ``resume.safetensors`` + ``resume.json``: weights, AdamW moments and the
  finished epoch; removed when training completes.
* ``model.safetensors``: the selected weights (best validation score so far).
* ``train.json``: recipe, fingerprint, per-epoch history, selected epoch.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm.auto import tqdm

from benchmark import store
from benchmark.infer import predict_logits


@dataclass(frozen=True)
class Recipe:
    """A training recipe (params.yaml ``recipes.<name>``)."""

    epochs: int
    batch_size: int
    lr: float
    weight_decay: float = 0.0
    warmup_epochs: float = 0.0
    warmup_start_factor: float = 0.1
    label_smoothing: float = 0.0
    shift_pixels: int = 0  # random translation augmentation, in input pixels
    select_by: str = "accuracy"  # "accuracy" | "macro_f1" (validation score for model selection)

    @classmethod
    def from_params(cls, name: str, raw) -> "Recipe":
        if not isinstance(raw, dict):
            raise ValueError(f"recipe {name!r}: must be a mapping")
        allowed = set(cls.__dataclass_fields__)
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise ValueError(f"recipe {name!r}: unknown keys {unknown}; allowed {sorted(allowed)}")
        try:
            r = cls(**raw)
        except TypeError as e:
            raise ValueError(f"recipe {name!r}: {e}") from None
        if r.epochs < 1 or r.batch_size < 1 or r.lr <= 0 or r.weight_decay < 0:
            raise ValueError(f"recipe {name!r}: epochs and batch_size must be >= 1, lr > 0, weight_decay >= 0")
        if r.select_by not in ("accuracy", "macro_f1"):
            raise ValueError(f"recipe {name!r}: select_by must be 'accuracy' or 'macro_f1'")
        return r


def lr_factor(step: int, total: int, warmup: int, start_factor: float) -> float:
    """Linear warm-up from ``start_factor`` to 1 over ``warmup`` steps, then cosine to 0."""
    if warmup > 0 and step < warmup:
        return start_factor + (1.0 - start_factor) * step / warmup
    rest = max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(step - warmup, rest) / rest))


def cross_entropy_any(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Cross-entropy for (B, C) logits, or mean over members for (M, B, C)."""
    if logits.ndim == 3:
        m, b, c = logits.shape
        return F.cross_entropy(logits.reshape(m * b, c), labels.repeat(m), label_smoothing=label_smoothing)
    return F.cross_entropy(logits, labels, label_smoothing=label_smoothing)


def _score(logits: torch.Tensor, labels: torch.Tensor, select_by: str) -> float:
    probs = logits.softmax(-1)
    if probs.ndim == 3:
        probs = probs.mean(0)
    pred = probs.argmax(-1)
    if select_by == "accuracy":
        return (pred == labels).double().mean().item()
    from sklearn.metrics import f1_score

    return float(f1_score(labels.numpy(), pred.numpy(), average="macro"))


def _shift(x: torch.Tensor, pixels: int, gen: torch.Generator) -> torch.Tensor:
    if pixels <= 0:
        return x
    b = x.shape[0]
    padded = F.pad(x, (pixels,) * 4, mode="replicate")
    dx = torch.randint(0, 2 * pixels + 1, (b,), generator=gen)
    dy = torch.randint(0, 2 * pixels + 1, (b,), generator=gen)
    h, w = x.shape[-2:]
    rows = (dy[:, None] + torch.arange(h)[None, :])[:, None, :, None].expand(b, x.shape[1], h, w + 2 * pixels)
    out = padded.gather(2, rows)
    cols = (dx[:, None] + torch.arange(w)[None, :])[:, None, None, :].expand(b, x.shape[1], h, w)
    return out.gather(3, cols)


def _save_resume(folder: Path, model: nn.Module, opt: torch.optim.Optimizer, state: dict) -> None:
    tensors = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    for i, p in enumerate(opt.param_groups[0]["params"]):
        for k, v in opt.state.get(p, {}).items():
            tensors[f"opt.{i}.{k}"] = torch.as_tensor(v).detach().contiguous()
    with store.atomic_path(folder / "resume.safetensors") as tmp:
        save_file(tensors, str(tmp))
    store.write_json(folder / "resume.json", state)


def _load_resume(folder: Path, model: nn.Module, opt: torch.optim.Optimizer) -> None:
    tensors = load_file(str(folder / "resume.safetensors"))
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")}, strict=True)
    for i, p in enumerate(opt.param_groups[0]["params"]):
        st = {k.split(".", 2)[2]: v for k, v in tensors.items() if k.startswith(f"opt.{i}.")}
        if st:
            opt.state[p] = st


def save_weights(path, model: nn.Module) -> None:
    with store.atomic_path(path) as tmp:
        save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(tmp))


def load_weights(path, model: nn.Module) -> nn.Module:
    path = Path(path)
    if not path.exists():
        raise store.StoreError(f"{path}: checkpoint not found; run the train stage first (dvc repro)")
    model.load_state_dict(load_file(str(path)), strict=True)
    return model


def fine_tune(model: nn.Module, train: tuple[torch.Tensor, torch.Tensor], val: tuple[torch.Tensor, torch.Tensor],
              recipe: Recipe, *, seed: int, folder, fingerprint: str, params=None,
              loss_fn: Callable = cross_entropy_any, progress: bool = True, stop_after_epoch: int | None = None) -> dict:
    """Train ``model`` on ``train`` = (inputs, labels), select on ``val``; resumable.

    ``params`` are the trainable parameters (default: all). ``fingerprint``
    identifies the run (entry, recipe, data): a resume checkpoint with another
    fingerprint is discarded. ``stop_after_epoch`` simulates a kill (tests).
    Returns the ``train.json`` record.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    x, y = train
    n = x.shape[0]
    params = list(model.parameters()) if params is None else list(params)
    opt = torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)
    steps_per_epoch = math.ceil(n / recipe.batch_size)
    total, warmup = recipe.epochs * steps_per_epoch, round(recipe.warmup_epochs * steps_per_epoch)
    record = {"recipe": asdict(recipe), "fingerprint": fingerprint, "seed": seed, "history": [], "best_epoch": -1, "best_score": -1.0}
    start_epoch = 0
    resume = folder / "resume.json"
    if resume.exists():
        state = store.read_json(resume)
        if state.get("fingerprint") == fingerprint:
            _load_resume(folder, model, opt)
            record, start_epoch = state["record"], state["epoch"] + 1
    for epoch in range(start_epoch, recipe.epochs):
        gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
        torch.manual_seed(seed * 100_003 + epoch)
        model.train()
        order = torch.randperm(n, generator=gen)
        losses = []
        bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{recipe.epochs}", disable=not progress, leave=False)
        for i in bar:
            idx = order[i * recipe.batch_size : (i + 1) * recipe.batch_size]
            step = epoch * steps_per_epoch + i
            for g in opt.param_groups:
                g["lr"] = recipe.lr * lr_factor(step, total, warmup, recipe.warmup_start_factor)
            loss = loss_fn(model(_shift(x[idx], recipe.shift_pixels, gen)), y[idx], recipe.label_smoothing)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"training loss became {loss.item()} at epoch {epoch}, step {i}; lower the learning rate")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        score = _score(predict_logits(model, val[0]), val[1], recipe.select_by)
        record["history"].append({"epoch": epoch, "train_loss": sum(losses) / len(losses), f"val_{recipe.select_by}": score})
        if score > record["best_score"]:
            record["best_score"], record["best_epoch"] = score, epoch
            save_weights(folder / "model.safetensors", model)
        _save_resume(folder, model, opt, {"fingerprint": fingerprint, "epoch": epoch, "record": record})
        if stop_after_epoch is not None and epoch >= stop_after_epoch:
            return record
    store.write_json(folder / "train.json", record)
    for name in ("resume.safetensors", "resume.json"):
        (folder / name).unlink(missing_ok=True)
    return record
