"""Fine-tuning with AdamW (:func:`benchmark.models.portable.adamw`), linear warm-up then cosine, resumable after a kill.

Determinism: every epoch draws its shuffling, augmentation and dropout from a
generator seeded by ``(seed, epoch)``, so a run resumed from the checkpoint of
epoch ``e`` continues exactly as an uninterrupted run would.

Checkpoint folder layout (all writes atomic; the files' I/O is :mod:`benchmark.models.checkpoint`):

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

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from benchmark.config import numerics
from benchmark.core.members import member_cross_entropy
from benchmark.models import checkpoint, distributed, portable
from benchmark.models.checkpoint import load_weights as load_weights  # re-exported: where the callers import it
from benchmark.models.checkpoint import read_checkpoint as read_checkpoint
from benchmark.models.checkpoint import save_weights
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


def _untrained(model: nn.Module, recipe: Recipe, *, seed: int, folder: Path, fingerprint: str, main: bool) -> dict:
    """``epochs == 0``: the model's weights saved as they are, with their ``train.json`` record."""
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


def _start_or_resume(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    recipe: Recipe,
    *,
    seed: int,
    folder: Path,
    fingerprint: str,
    main: bool,
) -> tuple[dict, int]:
    """(record, first epoch to run) of :func:`fine_tune`: a fresh record from epoch 0, or the state of the folder's
    resume checkpoint of this ``fingerprint`` (rank 0 reads it, every rank loads it into ``model`` and ``opt``)."""
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
    found = distributed.broadcast_object(checkpoint.read_resume(folder, fingerprint) if main else None)
    if found is not None:
        checkpoint.apply_resume(found[0], model, opt)
        record, start_epoch = found[1]["record"], found[1]["epoch"] + 1
    return record, start_epoch


@dataclass(frozen=True)
class _Run:
    """What every epoch of one :func:`fine_tune` run uses: the model as trained (``net``: the DDP wrapper when
    several processes train), its optimizer, the batches' device and memory format, the number ``n`` of training
    rows and the learning-rate schedule (steps per epoch, total steps, warm-up steps)."""

    net: nn.Module
    opt: torch.optim.Optimizer
    device: torch.device
    fmt: torch.memory_format
    n: int
    steps_per_epoch: int
    total: int
    warmup: int


def _prepare(model: nn.Module, train, params, recipe: Recipe) -> tuple[nn.Module, _Run]:
    """(model, run) of :func:`fine_tune`: the model (DDP's when several processes train) and what its epochs use, with
    the optimizer of ``params`` (default: all the model's parameters)."""
    from benchmark.models.infer import input_format, model_device

    device = model_device(model)
    fmt = input_format(model)  # channels-last batches for a channels-last model (benchmark.models.infer.channels_last)
    net = model
    if distributed.world_size() > 1:
        model, net = distributed.wrap(model, device)
    n = len(split_labels(train))
    params = list(model.parameters()) if params is None else list(params)
    opt = make_optimizer(params, recipe)  # fused on the CPU: vendor-independent bytes
    steps_per_epoch = math.ceil(n / recipe.batch_size)
    total, warmup = recipe.epochs * steps_per_epoch, round(recipe.warmup_epochs * steps_per_epoch)
    return model, _Run(net, opt, device, fmt, n, steps_per_epoch, total, warmup)


def _train_epoch(
    run: _Run, train, recipe: Recipe, epoch: int, *, seed: int, loss_fn: Callable, progress: bool, num_workers: int
) -> list[float]:
    """The training losses of epoch ``epoch`` of :func:`fine_tune`: shuffling, augmentation and dropout drawn from
    the epoch's seed ``(seed, epoch)``."""
    gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
    torch.manual_seed(seed * 100_003 + epoch)
    run.net.train()
    order = torch.randperm(run.n, generator=gen)
    losses: list[float] = []
    bar = tqdm(
        _train_batches(train, order, recipe.batch_size, num_workers),
        total=run.steps_per_epoch,
        desc=f"epoch {epoch + 1}/{recipe.epochs}",
        disable=not progress,
        leave=False,
    )
    for i, (xb, yb, start, rows, size) in enumerate(bar):
        step = epoch * run.steps_per_epoch + i
        for g in run.opt.param_groups:
            g["lr"] = recipe.lr * lr_factor(step, run.total, run.warmup, recipe.warmup_start_factor)
        xb = _shift(xb, recipe.shift_pixels, gen, start, size).to(run.device, non_blocking=True, memory_format=run.fmt)
        losses.append(
            train_step(
                run.net,
                run.opt,
                xb,
                yb.to(run.device),
                recipe,
                loss_fn=loss_fn,
                rows=rows,
                size=size,
                where=f"epoch {epoch}, step {i}",
            )
        )
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return losses


def _select_epoch(
    model: nn.Module,
    val,
    recipe: Recipe,
    record: dict,
    *,
    epoch: int,
    losses: list[float],
    folder: Path,
    main: bool,
    num_workers: int,
) -> None:
    """Score epoch ``epoch`` on ``val`` into ``record``'s history; rank 0 saves the weights when it is the best so
    far."""
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
    folder, main = Path(folder), distributed.is_main()
    if main:
        folder.mkdir(parents=True, exist_ok=True)
    if recipe.epochs == 0:
        return _untrained(model, recipe, seed=seed, folder=folder, fingerprint=fingerprint, main=main)
    model, run = _prepare(model, train, params, recipe)
    record, start_epoch = _start_or_resume(
        model, run.opt, recipe, seed=seed, folder=folder, fingerprint=fingerprint, main=main
    )
    for epoch in range(start_epoch, recipe.epochs):
        losses = _train_epoch(
            run, train, recipe, epoch, seed=seed, loss_fn=loss_fn, progress=progress and main, num_workers=num_workers
        )
        _select_epoch(
            model, val, recipe, record, epoch=epoch, losses=losses, folder=folder, main=main, num_workers=num_workers
        )
        if main:
            checkpoint.save_resume(
                folder, model, run.opt, {"fingerprint": fingerprint, "epoch": epoch, "record": record}
            )
        distributed.barrier("rank 0 writes the checkpoint")
        if stop_after_epoch is not None and epoch >= stop_after_epoch:
            return record
    if main:
        store.write_json(folder / "train.json", record)
        (folder / checkpoint.RESUME).unlink(missing_ok=True)
    distributed.barrier("rank 0 writes train.json")
    return record
