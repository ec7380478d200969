"""Data-parallel stages under torchrun (torch.distributed): settings, sharding, gathering (the launch:
:mod:`benchmark.models.launch`).

One process is the default. params.yaml's ``distributed`` block (missing = one
process) asks for more::

    distributed: {nproc_per_node: 2, nnodes: 1, node_rank: null, master_addr: 127.0.0.1,
                  master_port: 29500, backend: auto}

A stage entry that is not yet a torchrun worker then re-runs its own command
under torchrun (:func:`benchmark.models.launch.launch`, imported only then); each worker (``RANK``/``WORLD_SIZE`` set by
torchrun, also when a user calls ``torchrun`` directly) starts the process group
with :func:`init`. Rank ``r`` of ``W`` takes the contiguous rows
``[r*n//W, (r+1)*n//W)`` of any ``n`` samples (:func:`shard_bounds`), so the
ranks' results concatenated in rank order are in input order (:func:`gather_rows`).
Outside a process group every helper is the one-process identity.

Fault injection (tests): ``UQBENCH_FAIL_RANK=<r>`` makes rank ``r`` kill itself
(SIGKILL) just before it gathers logits.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import threading

import torch
import torch.distributed as dist
from torch import nn

FAIL_RANK_ENV = "UQBENCH_FAIL_RANK"


class RankFailure(RuntimeError):
    """A collective operation failed: typically another rank has stopped."""


def config(cfg, device: str = "cpu"):
    """``cfg`` (params ``distributed``, typed: :class:`benchmark.stages.model_params.DistConfig`) checked against
    params ``device``: nccl needs CUDA."""
    if cfg.world_size > 1 and cfg.backend == "nccl" and device == "cpu":
        cfg.backend_for(torch.device("cpu"))  # raises: nccl needs CUDA
    return cfg


def is_worker() -> bool:
    """True in a process started by torchrun (``RANK`` and ``WORLD_SIZE`` are set)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def world_size() -> int:
    """The processes of this run (1 outside torch.distributed)."""
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    """This process's rank (0 outside torch.distributed)."""
    return dist.get_rank() if dist.is_initialized() else 0


def is_main() -> bool:
    """Whether this is rank 0, the process that writes."""
    return rank() == 0


def _terminate(signum, frame):
    if _in_thread_shutdown(frame):  # the stage's code has ended: nothing to unwind. End as a default SIGTERM does
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # (raising inside threading's shutdown, which the interpreter
        os.kill(os.getpid(), signal.SIGTERM)  # runs before the atexit callbacks, printed a traceback)
        return
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the unwinding
    raise SystemExit(128 + signum)  # unwinds: atomic writes in progress remove their temporary files


def _in_thread_shutdown(frame) -> bool:
    """Whether ``frame`` runs inside :mod:`threading`'s interpreter-exit wait for non-daemon threads."""
    code = getattr(getattr(threading, "_shutdown", None), "__code__", None)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _default_sigterm() -> None:
    """At interpreter exit a SIGTERM just ends the process (raising inside another atexit callback printed a
    traceback)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def init(cfg, device: torch.device) -> torch.device:
    """In a torchrun worker: start the process group (once) with ``cfg`` (params ``distributed``) and return this
    rank's device (``cuda:<LOCAL_RANK>`` for CUDA); elsewhere return ``device`` unchanged."""
    if not is_worker():
        return device
    if device.type == "cuda":
        local, count = int(os.environ.get("LOCAL_RANK", 0)), torch.cuda.device_count()
        if local >= count:
            raise ValueError(
                f"params 'distributed': local rank {local} has no GPU (this node has {count}); "
                f"nproc_per_node must be <= {count}"
            )
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(cfg.backend_for(device))
        signal.signal(signal.SIGTERM, _terminate)  # torchrun stops the other workers with SIGTERM
        atexit.register(_default_sigterm)  # runs before the callbacks registered earlier (torch's)
    return device


def shutdown() -> None:
    """End the process group, when there is one."""
    if dist.is_initialized():
        dist.destroy_process_group()


@contextlib.contextmanager
def guard(what: str):
    """Turn a failed collective into one :class:`RankFailure` that says what was going on (several processes only)."""
    try:
        yield
    except RuntimeError as e:
        if world_size() == 1 or isinstance(e, RankFailure):
            raise
        first = re.sub(r"^\[[^\]]*\.(cc|cpp|h):\d+\] ", "", (str(e).strip().splitlines() or [type(e).__name__])[0])
        raise RankFailure(
            f"rank {rank()}: {what} failed ({first}); if another rank stopped, its message is the cause"
        ) from None


def barrier(what: str) -> None:
    """Wait for every rank (no-op in one process)."""
    if world_size() > 1:
        with guard(f"waiting for the other ranks ({what})"):
            dist.barrier()


def broadcast_object(obj):
    """Rank 0's ``obj`` on every rank (pickled; ``obj`` of the other ranks is ignored)."""
    if world_size() == 1:
        return obj
    box = [obj]
    with guard("receiving rank 0's state"):
        dist.broadcast_object_list(box, src=0)
    return box[0]


def shard_bounds(n: int, world: int | None = None, r: int | None = None) -> tuple[int, int]:
    """Rows ``[r*n//W, (r+1)*n//W)`` of ``n``: contiguous, sizes differ by at most one, rank order = input order."""
    world = world_size() if world is None else world
    r = rank() if r is None else r
    return r * n // world, (r + 1) * n // world


def _comm_device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def gather_rows(local: torch.Tensor | None, n: int, *, dim: int = -2) -> torch.Tensor:
    """Every rank's shard (rows along ``dim``, ``None`` for an empty shard) concatenated in rank order, on the CPU, on
    every rank."""
    world = world_size()
    if world == 1:
        return local
    sizes = [hi - lo for lo, hi in (shard_bounds(n, world, r) for r in range(world))]
    if local is not None and local.shape[dim] != sizes[rank()]:
        raise ValueError(f"rank {rank()}: shard has {local.shape[dim]} rows, expected {sizes[rank()]} of {n}")
    metas = [None] * world
    with guard("gathering shard shapes"):
        dist.all_gather_object(metas, None if local is None else (tuple(local.shape), local.dtype))
    ref = next((m for m in metas if m is not None), None)
    if ref is None:
        raise ValueError("inputs are empty")
    shape = list(ref[0])
    shape[dim] = max(sizes)
    buf = torch.zeros(shape, dtype=ref[1], device=_comm_device())
    if local is not None:
        buf.narrow(dim, 0, local.shape[dim]).copy_(local)
    parts = [torch.empty_like(buf) for _ in range(world)]
    with guard("gathering results"):
        dist.all_gather(parts, buf)
    return torch.cat([p.narrow(dim, 0, s) for p, s in zip(parts, sizes)], dim=dim).cpu()


def _fail_point() -> None:
    if os.environ.get(FAIL_RANK_ENV) == str(rank()) and world_size() > 1:
        os.kill(os.getpid(), signal.SIGKILL)


def predict_logits(
    model: nn.Module, inputs, *, to_all: bool = True, progress: bool = False, **kw
) -> torch.Tensor | None:
    """:func:`benchmark.models.infer.predict_logits` with the inputs sharded over the ranks and the logits
    gathered back in input order: on every rank (``to_all``) or on rank 0 only (the others get None)."""
    from torch.utils.data import Subset

    from benchmark.models.infer import predict_logits as predict

    if world_size() == 1:
        return predict(model, inputs, progress=progress, **kw)
    n = len(inputs)
    lo, hi = shard_bounds(n)
    part = inputs[lo:hi] if isinstance(inputs, torch.Tensor) else Subset(inputs, range(lo, hi))
    local = predict(model, part, progress=progress and is_main(), **kw) if hi > lo else None
    _fail_point()
    z = gather_rows(local, n)
    return z if to_all or is_main() else None


def global_batch_loss(loss: torch.Tensor, rows: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss to back-propagate, the global batch's mean loss) for a rank holding ``rows`` of a global batch of ``size``.

    ``loss`` is the mean over this rank's rows; DDP averages gradients over the
    ``W`` ranks, so back-propagating ``loss * rows * W / size`` gives the gradient of
    ``sum_r rows_r/size * loss_r``: the mean over the whole global batch, as in one
    process. A rank with no rows (a last batch smaller than ``W``) counts 0.
    """
    w = world_size()
    scaled = loss * (rows * w / size)
    total = scaled.detach().clone()
    with guard("summing the batch loss"):
        dist.all_reduce(total)
    return scaled, total / w


def wrap(model: nn.Module, device: torch.device) -> tuple[nn.Module, nn.Module]:
    """(model, its DDP wrapper); on CUDA BatchNorm layers become SyncBatchNorm (global batch statistics)."""
    from torch.nn.parallel import DistributedDataParallel

    if device.type == "cuda":
        from timm.layers import convert_sync_batchnorm

        model = convert_sync_batchnorm(model)
        return model, DistributedDataParallel(model, device_ids=[device.index])
    return model, DistributedDataParallel(model)
