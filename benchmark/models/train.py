"""Fine-tuning with AdamW (:func:`benchmark.models.portable.adamw`), linear warm-up then cosine, resumable after a kill.

Determinism: every epoch draws its shuffling, augmentation and dropout from a
generator seeded by ``(seed, epoch)``, so a run resumed from the checkpoint of
epoch ``e`` continues exactly as an uninterrupted run would.

Checkpoint folder layout (all writes atomic):

* ``resume.safetensors``: weights and AdamW moments, with the finished epoch,
  fingerprint and history in its metadata: one file, written atomically, so a
  kill never leaves weights of one epoch with the state of another; removed
  when training completes.
* (an older ``resume.json`` beside it is a leftover of the two-file format and never read).
* ``model.safetensors``: the selected weights (best validation score so far).
* ``train.json``: recipe, fingerprint, per-epoch history, selected epoch.

Several processes (a torchrun process group, see :mod:`benchmark.models.distributed`):
the model is wrapped in DDP; every rank draws the same permutation and
augmentation from the per-epoch generator, takes its rows of each global batch
and scales its loss so that the averaged gradient is the one-process gradient of
the global batch (:func:`~benchmark.models.distributed.global_batch_loss`). Validation
is sharded and gathered on every rank, so all ranks select the same epoch; only
rank 0 writes the folder (rank 0 also reads the resume checkpoint and broadcasts
it). BatchNorm: on CUDA its layers become SyncBatchNorm (global batch
statistics); on the CPU each rank normalises with its own rows' statistics and
the running statistics are rank 0's (standard DDP), so a BatchNorm model's
weights differ slightly from a one-process run. Dropout masks and a Dataset's
random transforms also differ from one process (they follow the global RNG).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm.auto import tqdm

from benchmark.config import numerics
from benchmark.core.members import member_cross_entropy
from benchmark.models import distributed, portable
from benchmark.models.recipe import Recipe
from benchmark.storage import store


def lr_factor(step: int, total: int, warmup: int, start_factor: float) -> float:
    """Linear warm-up from ``start_factor`` to 1 over ``warmup`` steps, then cosine to 0."""
    if warmup > 0 and step < warmup:
        return start_factor + (1.0 - start_factor) * step / warmup
    rest = max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(step - warmup, rest) / rest))


def selection_score(logits: torch.Tensor, labels: torch.Tensor, select_by: str) -> float:
    """Model-selection score on validation logits ``(N, C)`` or member logits ``(M, N, C)`` (mean of the
    members' softmax): accuracy, or macro F1 (:func:`benchmark.core.f1.macro_f1`: the classes in the labels or
    the predictions, as scikit-learn ``f1_score(average="macro")``) for ``select_by: macro_f1``."""
    probs = logits.softmax(-1)
    if probs.ndim == 3:
        probs = probs.mean(0)
    pred = probs.argmax(-1)
    if select_by == "accuracy":
        return (pred == labels).double().mean().item()
    from benchmark.core.f1 import macro_f1

    return macro_f1(pred, labels)


def _shift(x: torch.Tensor, pixels: int, gen: torch.Generator, start: int = 0, size: int | None = None) -> torch.Tensor:
    """Random translation by up to ``pixels``; ``x`` holds rows ``[start, start + len(x))`` of a batch of
    ``size`` (default ``len(x)``): the offsets are drawn for the whole batch, so every rank draws the same."""
    if pixels <= 0:
        return x
    b = x.shape[0]
    padded = F.pad(x, (pixels,) * 4, mode="replicate")
    dx = torch.randint(0, 2 * pixels + 1, (size or b,), generator=gen)[start : start + b]
    dy = torch.randint(0, 2 * pixels + 1, (size or b,), generator=gen)[start : start + b]
    h, w = x.shape[-2:]
    rows = (dy[:, None] + torch.arange(h)[None, :])[:, None, :, None].expand(b, x.shape[1], h, w + 2 * pixels)
    out = padded.gather(2, rows)
    cols = (dx[:, None] + torch.arange(w)[None, :])[:, None, None, :].expand(b, x.shape[1], h, w)
    return out.gather(3, cols)


RESUME, RESUME_KEY = "resume.safetensors", "resume"  # the file, and its metadata entry holding the state JSON


def _save_resume(folder: Path, model: nn.Module, opt: torch.optim.Optimizer, state: dict) -> None:
    tensors = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    for i, p in enumerate(opt.param_groups[0]["params"]):
        for k, v in opt.state.get(p, {}).items():
            tensors[f"opt.{i}.{k}"] = torch.as_tensor(v).detach().contiguous()
    with store.atomic_path(folder / RESUME) as tmp:
        save_file(tensors, str(tmp), metadata={RESUME_KEY: json.dumps(state, sort_keys=True)})


def _read_resume(folder: Path, fingerprint: str) -> tuple[dict, dict] | None:
    """(tensors, state) of the folder's resume checkpoint when its fingerprint is ``fingerprint``.

    A checkpoint that cannot be read, or whose state does not describe its
    tensors, is an error naming the file (never silently used or skipped).
    """
    path = folder / RESUME
    (folder / "resume.json").unlink(missing_ok=True)  # the older two-file format: its pair cannot be trusted
    if not path.exists():
        return None
    tensors, meta = read_checkpoint(path, what="resume checkpoint")
    try:
        state = json.loads(meta[RESUME_KEY])
        if not isinstance(state, dict) or not isinstance(state["epoch"], int) or not isinstance(state["record"], dict):
            raise ValueError("not an object with an integer 'epoch' and a 'record'")
    except (KeyError, TypeError, ValueError) as e:
        raise store.StoreError(
            f"{path}: resume checkpoint without a valid {RESUME_KEY!r} state in its metadata ({e}); "
            "delete it to train from the start"
        ) from None
    return (tensors, state) if state.get("fingerprint") == fingerprint else None


def read_checkpoint(path, what: str = "checkpoint") -> tuple[dict, dict]:
    """(tensors, metadata) of a ``.safetensors`` checkpoint; :class:`~benchmark.storage.store.StoreError`
    naming the file when it is missing or not valid safetensors."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.exists():
        raise store.StoreError(f"{path}: {what} not found")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = dict(f.metadata() or {})
        return load_file(str(path)), meta
    except (SafetensorError, OSError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise store.StoreError(f"{path}: not a valid safetensors {what} ({msg})") from None


def _apply_resume(tensors: dict, model: nn.Module, opt: torch.optim.Optimizer) -> None:
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")}, strict=True)
    for i, p in enumerate(opt.param_groups[0]["params"]):
        # a moment takes its parameter's layout (channels-last weights): the fused AdamW kernel walks both
        # as flat memory
        st = {
            k.split(".", 2)[2]: v if k.endswith(".step") else torch.empty_like(p).copy_(v)
            for k, v in tensors.items()
            if k.startswith(f"opt.{i}.")
        }
        if st:
            opt.state[p] = st


def save_weights(path, model: nn.Module) -> None:
    """Write ``model``'s state dict as a safetensors checkpoint at ``path``, atomically."""
    with store.atomic_path(path) as tmp:
        save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(tmp))


def load_weights(path, model: nn.Module) -> nn.Module:
    """Load the checkpoint at ``path`` into ``model`` (every tensor, strictly); :class:`StoreError` when it is missing
    or does not fit."""
    path = Path(path)
    if not path.exists():
        raise store.StoreError(f"{path}: checkpoint not found; run the train stage first (dvc repro)")
    tensors, _ = read_checkpoint(path)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as e:
        raise store.StoreError(f"{path}: checkpoint does not fit the model ({str(e).splitlines()[0]})") from None
    return model


def split_labels(data) -> torch.Tensor:
    """The labels of a split given as ``(inputs, labels)`` or as a dataset with ``.labels``."""
    if isinstance(data, tuple):
        return data[1]
    return torch.as_tensor(data.labels)


def _train_batches(train, idx_order: torch.Tensor, batch_size: int, num_workers: int):
    """``(x, y, start, rows, size)`` per global batch of ``idx_order``: this rank's ``rows`` rows from
    ``start`` of a global batch of ``size`` (all of it in one process); tensor slices, or a DataLoader over
    a dataset. A rank with no rows gets the batch's first row (its loss then counts 0)."""
    parts = []
    for i in range(0, len(idx_order), batch_size):
        idx = idx_order[i : i + batch_size]
        lo, hi = distributed.shard_bounds(len(idx))
        parts.append((idx[lo:hi], lo, hi - lo, len(idx)) if hi > lo else (idx[:1], 0, 0, len(idx)))
    if isinstance(train, tuple):
        x, y = train
        for idx, start, rows, size in parts:
            yield x[idx], y[idx], start, rows, size
        return
    from torch.utils.data import DataLoader

    loader = DataLoader(train, batch_sampler=[p[0].tolist() for p in parts], num_workers=num_workers)
    for item, (_, start, rows, size) in zip(loader, parts):
        yield item[0], item[1], start, rows, size


def training_model(
    entry, num_classes: int, recipe: Recipe, device: torch.device | None = None, *, load_weights: bool = True
) -> nn.Module:
    """The model a training run of zoo ``entry`` starts from, as ``train@`` builds it: its architecture and initial
    weights with ``num_classes`` outputs (:func:`benchmark.models.factory.create`, the recipe's ``drop_rate``), on
    ``device``, in channels-last order (:func:`benchmark.models.infer.channels_last`)."""
    from benchmark.models import factory
    from benchmark.models.infer import channels_last

    model = factory.create(entry, num_classes, load_weights=load_weights, drop_rate=recipe.drop_rate)
    return channels_last(model if device is None else model.to(device))


def make_optimizer(params, recipe: Recipe) -> torch.optim.Optimizer:
    """The optimizer of a training run: AdamW with the recipe's ``lr`` and ``weight_decay``, fused on the CPU
    (:func:`benchmark.models.portable.adamw`: bytes that do not depend on the CPU vendor)."""
    return portable.adamw(params, lr=recipe.lr, weight_decay=recipe.weight_decay)


def train_step(
    net: nn.Module,
    opt: torch.optim.Optimizer,
    xb: torch.Tensor,
    yb: torch.Tensor,
    recipe: Recipe,
    *,
    loss_fn: Callable = member_cross_entropy,
    rows: int | None = None,
    size: int | None = None,
    where: str = "",
    after_backward: Callable[[], None] | None = None,
) -> float:
    """One optimisation step of ``net`` on the batch ``(xb, yb)`` (on the model's device, in its memory format):
    ``loss_fn(net(xb), yb, recipe.label_smoothing)``, its gradient, ``opt.step()``; the loss's value.

    What every training run of the pipeline executes per batch (:func:`fine_tune`), and what the kernel fingerprint
    profiles (:mod:`benchmark.reproduce.fingerprint`), so the two cannot part. Several processes: this rank's
    ``rows`` of a global batch of ``size`` (:func:`~benchmark.models.distributed.global_batch_loss`).
    ``after_backward`` runs between the gradient and the update (the fingerprint reads the gradients there). A loss
    that is not finite is a :class:`FloatingPointError` naming ``where``."""
    with distributed.guard("the forward pass"):
        loss = loss_fn(net(xb), yb, recipe.label_smoothing)
    value = loss
    if distributed.world_size() > 1:
        loss, value = distributed.global_batch_loss(loss, rows, size)
    if not torch.isfinite(value):
        raise FloatingPointError(
            f"training loss became {value.item()} at {where or 'a training step'}; lower the learning rate"
        )
    opt.zero_grad(set_to_none=True)
    with distributed.guard("the gradient all-reduce"):
        loss.backward()
    if after_backward is not None:
        after_backward()
    opt.step()
    return value.item()


def fine_tune(
    model: nn.Module,
    train,
    val,
    recipe: Recipe,
    *,
    seed: int,
    folder,
    fingerprint: str,
    params=None,
    loss_fn: Callable = member_cross_entropy,
    progress: bool = True,
    stop_after_epoch: int | None = None,
    num_workers: int = 0,
) -> dict:
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
    from benchmark.models.infer import input_format, model_device

    folder, main, world = Path(folder), distributed.is_main(), distributed.world_size()
    if main:
        folder.mkdir(parents=True, exist_ok=True)
    if recipe.epochs == 0:
        record = {
            "recipe": asdict(recipe),
            "fingerprint": fingerprint,
            "seed": seed,
            "history": [],
            "best_epoch": None,
            "best_score": None,
            "trained": False,
            "note": "epochs 0: the initial weights as they are, no training",
        }
        if main:
            save_weights(folder / "model.safetensors", model)
            store.write_json(folder / "train.json", record)
        distributed.barrier("rank 0 writes the checkpoint")
        return record
    device = model_device(model)
    fmt = input_format(model)  # channels-last batches for a channels-last model (benchmark.models.infer.channels_last)
    net = model
    if world > 1:
        model, net = distributed.wrap(model, device)
    n = len(split_labels(train))
    params = list(model.parameters()) if params is None else list(params)
    opt = make_optimizer(params, recipe)  # fused on the CPU: vendor-independent bytes
    steps_per_epoch = math.ceil(n / recipe.batch_size)
    total, warmup = recipe.epochs * steps_per_epoch, round(recipe.warmup_epochs * steps_per_epoch)
    record = {
        "recipe": asdict(recipe),
        "fingerprint": fingerprint,
        "seed": seed,
        "history": [],
        "best_epoch": -1,
        "best_score": -1.0,
        "numerics": numerics.state(),
    }  # CPU kernels (benchmark.config.numerics): what byte-identity rests on
    start_epoch = 0
    found = distributed.broadcast_object(_read_resume(folder, fingerprint) if main else None)
    if found is not None:
        _apply_resume(found[0], model, opt)
        record, start_epoch = found[1]["record"], found[1]["epoch"] + 1
    for epoch in range(start_epoch, recipe.epochs):
        gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
        torch.manual_seed(seed * 100_003 + epoch)
        net.train()
        order = torch.randperm(n, generator=gen)
        losses = []
        bar = tqdm(
            _train_batches(train, order, recipe.batch_size, num_workers),
            total=steps_per_epoch,
            desc=f"epoch {epoch + 1}/{recipe.epochs}",
            disable=not (progress and main),
            leave=False,
        )
        for i, (xb, yb, start, rows, size) in enumerate(bar):
            step = epoch * steps_per_epoch + i
            for g in opt.param_groups:
                g["lr"] = recipe.lr * lr_factor(step, total, warmup, recipe.warmup_start_factor)
            xb = _shift(xb, recipe.shift_pixels, gen, start, size).to(device, non_blocking=True, memory_format=fmt)
            losses.append(
                train_step(
                    net,
                    opt,
                    xb,
                    yb.to(device),
                    recipe,
                    loss_fn=loss_fn,
                    rows=rows,
                    size=size,
                    where=f"epoch {epoch}, step {i}",
                )
            )
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        val_inputs = val[0] if isinstance(val, tuple) else val
        z = distributed.predict_logits(model, val_inputs, batch_size=4 * recipe.batch_size, num_workers=num_workers)
        score = selection_score(z, split_labels(val), recipe.select_by)
        record["history"].append(
            {"epoch": epoch, "train_loss": sum(losses) / len(losses), f"val_{recipe.select_by}": score}
        )
        if score > record["best_score"]:
            record["best_score"], record["best_epoch"] = score, epoch
            if main:
                save_weights(folder / "model.safetensors", model)
        if main:
            _save_resume(folder, model, opt, {"fingerprint": fingerprint, "epoch": epoch, "record": record})
        distributed.barrier("rank 0 writes the checkpoint")
        if stop_after_epoch is not None and epoch >= stop_after_epoch:
            return record
    if main:
        store.write_json(folder / "train.json", record)
        (folder / RESUME).unlink(missing_ok=True)
    distributed.barrier("rank 0 writes train.json")
    return record
