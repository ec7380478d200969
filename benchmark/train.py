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
    """A training recipe (params.yaml ``recipes.<name>``).

    ``epochs: 0`` means no training: the initial (e.g. pretrained) weights are
    the checkpoint; such a recipe takes no other hyper-parameters.
    """

    epochs: int
    batch_size: int | None = None
    lr: float | None = None
    weight_decay: float = 0.0
    warmup_epochs: float = 0.0
    warmup_start_factor: float = 0.1
    label_smoothing: float = 0.0
    shift_pixels: int = 0  # random translation augmentation, in input pixels
    select_by: str = "accuracy"  # "accuracy" | "macro_f1" (validation score for model selection)

    def __post_init__(self):
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or self.epochs < 0:
            raise ValueError(f"recipe: epochs must be an integer >= 0, got {self.epochs!r}")
        if self.select_by not in ("accuracy", "macro_f1"):
            raise ValueError(f"recipe: select_by must be 'accuracy' or 'macro_f1', got {self.select_by!r}")
        if self.epochs == 0:
            if (self.batch_size, self.lr) != (None, None):
                raise ValueError("recipe: epochs 0 means no training; it takes no batch_size or lr")
            return
        if self.batch_size is None or self.batch_size < 1 or self.lr is None or self.lr <= 0 or self.weight_decay < 0:
            raise ValueError(f"recipe: training (epochs {self.epochs}) needs batch_size >= 1, lr > 0 and weight_decay >= 0; "
                             f"got batch_size {self.batch_size!r}, lr {self.lr!r}, weight_decay {self.weight_decay!r}")

    @classmethod
    def from_params(cls, name: str, raw) -> "Recipe":
        if not isinstance(raw, dict):
            raise ValueError(f"recipe {name!r}: must be a mapping")
        allowed = set(cls.__dataclass_fields__)
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise ValueError(f"recipe {name!r}: unknown keys {unknown}; allowed {sorted(allowed)}")
        if raw.get("epochs") == 0 and set(raw) - {"epochs", "select_by"}:
            raise ValueError(f"recipe {name!r}: epochs 0 means no training; it takes no other keys than select_by, "
                             f"got {sorted(set(raw) - {'epochs', 'select_by'})}")
        try:
            return cls(**raw)
        except (TypeError, ValueError) as e:
            raise ValueError(f"recipe {name!r}: {str(e).removeprefix('recipe: ')}") from None


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
        st = {k.split(".", 2)[2]: v if k.endswith(".step") else v.to(p.device)
              for k, v in tensors.items() if k.startswith(f"opt.{i}.")}
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


def _labels(data) -> torch.Tensor:
    if isinstance(data, tuple):
        return data[1]
    return torch.as_tensor(data.labels)


def _train_batches(train, idx_order: torch.Tensor, batch_size: int, num_workers: int):
    """(x, y) batches in the order ``idx_order``: tensor slices, or a DataLoader over a dataset."""
    if isinstance(train, tuple):
        x, y = train
        for i in range(0, len(idx_order), batch_size):
            idx = idx_order[i : i + batch_size]
            yield x[idx], y[idx]
        return
    from torch.utils.data import DataLoader

    loader = DataLoader(train, batch_size=batch_size, sampler=idx_order.tolist(), num_workers=num_workers)
    for item in loader:
        yield item[0], item[1]


def fine_tune(model: nn.Module, train, val, recipe: Recipe, *, seed: int, folder, fingerprint: str, params=None,
              loss_fn: Callable = cross_entropy_any, progress: bool = True, stop_after_epoch: int | None = None,
              num_workers: int = 0) -> dict:
    """Train ``model`` on ``train``, select on ``val``; resumable.

    ``train`` and ``val`` are ``(inputs, labels)`` tensors, or datasets of
    ``(x, label[, id])`` items with a ``labels`` attribute (streamed through a
    DataLoader, for suites too large for memory). Batches go to the model's
    device. ``params`` are the trainable parameters (default: all).
    ``fingerprint`` identifies the run (entry, recipe, data): a resume checkpoint
    with another fingerprint is discarded. ``stop_after_epoch`` simulates a kill
    (tests). A recipe with ``epochs == 0`` saves the model's weights as they are
    (``train`` and ``val`` are not read and may be None). Returns the ``train.json`` record.
    """
    from benchmark.infer import model_device

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if recipe.epochs == 0:
        save_weights(folder / "model.safetensors", model)
        record = {"recipe": asdict(recipe), "fingerprint": fingerprint, "seed": seed, "history": [], "best_epoch": None,
                  "best_score": None, "trained": False, "note": "epochs 0: the initial weights as they are, no training"}
        store.write_json(folder / "train.json", record)
        return record
    device = model_device(model)
    n = len(_labels(train))
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
        bar = tqdm(_train_batches(train, order, recipe.batch_size, num_workers), total=steps_per_epoch,
                   desc=f"epoch {epoch + 1}/{recipe.epochs}", disable=not progress, leave=False)
        for i, (xb, yb) in enumerate(bar):
            step = epoch * steps_per_epoch + i
            for g in opt.param_groups:
                g["lr"] = recipe.lr * lr_factor(step, total, warmup, recipe.warmup_start_factor)
            xb = _shift(xb, recipe.shift_pixels, gen).to(device, non_blocking=True)
            loss = loss_fn(model(xb), yb.to(device), recipe.label_smoothing)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"training loss became {loss.item()} at epoch {epoch}, step {i}; lower the learning rate")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        val_inputs = val[0] if isinstance(val, tuple) else val
        score = _score(predict_logits(model, val_inputs, batch_size=4 * recipe.batch_size, num_workers=num_workers),
                       _labels(val), recipe.select_by)
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
