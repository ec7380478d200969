"""The checkpoint files of a training run (:func:`benchmark.models.train.fine_tune`), every write atomic: a model's
weights (``model.safetensors``) and the resume checkpoint (``resume.safetensors``: weights, AdamW moments and the
run's state in one file, so a kill never leaves weights of one epoch with the state of another)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from benchmark.storage import store

RESUME, RESUME_KEY = "resume.safetensors", "resume"  # the file, and its metadata entry holding the state JSON


def save_resume(folder: Path, model: nn.Module, opt: torch.optim.Optimizer, state: dict) -> None:
    """Write the resume checkpoint of ``folder``: ``model``'s weights, ``opt``'s moments (of its first parameter
    group) and ``state`` (JSON in the metadata), in one file, atomically."""
    tensors = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    for i, p in enumerate(opt.param_groups[0]["params"]):
        for k, v in opt.state.get(p, {}).items():
            tensors[f"opt.{i}.{k}"] = torch.as_tensor(v).detach().contiguous()
    with store.atomic_path(folder / RESUME) as tmp:
        save_file(tensors, str(tmp), metadata={RESUME_KEY: json.dumps(state, sort_keys=True)})


def read_resume(folder: Path, fingerprint: str) -> tuple[dict, dict] | None:
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


def apply_resume(tensors: dict, model: nn.Module, opt: torch.optim.Optimizer) -> None:
    """Load the tensors of a resume checkpoint (:func:`read_resume`) into ``model`` (strictly) and ``opt``."""
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
