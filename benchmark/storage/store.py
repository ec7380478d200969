"""All file I/O of the benchmark: logits files, tables, JSON, atomic writes.

Logits files
------------
A logits file holds one model's outputs on one split:

* ``.npz`` (numpy) or ``.safetensors`` with arrays ``logits`` (N, C) float and
  ``labels`` (N,) int; optionally ``ids`` (N,) int sample ids. For SVE and other
  multi-member methods, ``logits`` may be (M, N, C).
* Files written by the pipeline also carry ``labels_hash`` and ``ids_hash``
  (safetensors metadata) so that two files that do not describe the same samples
  in the same order are detected before they are combined.

Every write goes to a temporary file in the target folder and is renamed into
place, so an interrupted run never leaves a half-written file behind
(:mod:`benchmark.storage.atomic`, re-exported here).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from benchmark.storage.atomic import (  # the write helpers, re-exported: store is where I/O is looked for
    PathLike,
    atomic_path,
    write_text,
)
from benchmark.storage.atomic import atomic_dir as atomic_dir
from benchmark.storage.atomic import clean_leftovers as clean_leftovers
from benchmark.storage.atomic import is_leftover as is_leftover
from benchmark.storage.atomic import listing as listing
from benchmark.storage.atomic import write_boundary as write_boundary

if TYPE_CHECKING:
    import pandas as pd


META_KEY = "benchmark"  # safetensors metadata key of the logits files' JSON metadata


class StoreError(ValueError):
    """A file is missing, unreadable or does not hold what it must."""


def write_json(path: PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON with sorted keys (NumPy and torch numbers as numbers), atomically."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, torch.Tensor):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def read_json(path: PathLike) -> Any:
    """The JSON value of file ``path``; :class:`StoreError` when the file is missing."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: file not found")
    return json.loads(path.read_text(encoding="utf-8"))


def write_table(path: PathLike, df: pd.DataFrame) -> None:
    """Write a pandas DataFrame as CSV atomically."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)


def array_hash(a: np.ndarray | torch.Tensor) -> str:
    """Stable short hash of an integer array (dtype- and order-sensitive content)."""
    arr = np.ascontiguousarray(np.asarray(a, dtype=np.int64))
    return hashlib.sha256(arr.tobytes()).hexdigest()[:16]


def file_hash(path: PathLike, chunk: int = 1 << 20) -> str:
    """Short sha256 of a file's bytes, read in chunks (no whole-file copy in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()[:16]


@dataclass
class LogitsFile:
    """The contents of one logits file."""

    logits: torch.Tensor  # (N, C) or (M, N, C) float32
    labels: torch.Tensor  # (N,) int64
    ids: torch.Tensor | None = None  # (N,) int64
    meta: dict = field(default_factory=dict)
    path: str = ""

    @property
    def alignment_key(self) -> tuple[str, str]:
        """What two logits files of one split must share: the hashes of their labels and sample ids."""
        return (array_hash(self.labels), array_hash(self.ids) if self.ids is not None else "")


def load_logits_file(path: PathLike) -> LogitsFile:
    """Read a ``.npz`` or ``.safetensors`` logits file and validate its arrays.

    Raises :class:`StoreError` naming the file and the problem: missing file,
    unknown extension, missing ``logits``/``labels`` arrays, wrong ranks, a
    hash in the metadata that does not match the arrays.
    """
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: file not found")
    meta: dict = {}
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        elif path.suffix == ".safetensors":
            from safetensors import safe_open
            from safetensors.numpy import load_file

            arrays = load_file(str(path))
            with safe_open(str(path), framework="numpy") as f:
                meta = dict(f.metadata() or {})
            meta = _meta_entry(path, meta)
        else:
            raise StoreError(f"{path}: unknown logits file type {path.suffix!r}; use .npz or .safetensors")
    except StoreError:
        raise
    except Exception as e:  # corrupt zip, bad header, ...
        raise StoreError(f"{path}: cannot read logits file ({type(e).__name__}: {e})") from e
    return _checked_logits_file(path, arrays, meta)


def _meta_entry(path: Path, meta: Any) -> dict:
    """The JSON object of the ``benchmark`` metadata entry (see :func:`save_logits_file`), else ``meta`` as it is."""
    if not isinstance(meta, dict):
        raise StoreError(f"{path}: cannot read logits file (the safetensors metadata is not a mapping)")
    if META_KEY not in meta:
        return meta
    try:
        out = json.loads(meta[META_KEY])
    except (TypeError, ValueError) as e:
        raise StoreError(f"{path}: cannot read logits file (bad {META_KEY!r} metadata: {e})") from None
    if not isinstance(out, dict):
        raise StoreError(
            f"{path}: cannot read logits file (its {META_KEY!r} metadata is {type(out).__name__} JSON, "
            "not a JSON object)"
        )
    return out


F32_MAX = float(np.finfo(np.float32).max)


def check_arrays(path: PathLike, arrays: dict) -> None:
    """Every member read from an ``.npz`` file must be an array: ``np.load`` gives the raw bytes of a zip
    member that is not an ``.npy`` (e.g. ``logits`` instead of ``logits.npy``)."""
    for key, value in arrays.items():
        if not isinstance(value, np.ndarray):
            raise StoreError(
                f"{path}: member {key!r} is not a numpy array (.npy) but {type(value).__name__}; "
                "write the file with numpy.savez"
            )


def _checked_logits_file(path: Path, arrays: dict, meta: dict) -> LogitsFile:
    """Validate the arrays of a logits file (see :func:`load_logits_file`) and wrap them."""
    for key in ("logits", "labels"):
        if key not in arrays:
            raise StoreError(
                f"{path}: missing array {key!r} (found {sorted(arrays)}); a logits file needs 'logits' (N, C) and "
                "'labels' (N,)"
            )
    check_arrays(path, arrays)
    logits, labels = arrays["logits"], arrays["labels"]
    if not np.issubdtype(logits.dtype, np.floating):
        raise StoreError(f"{path}: 'logits' must be floating point, got {logits.dtype}")
    if logits.dtype.itemsize > 4 and logits.size:
        big = float(np.abs(logits[np.isfinite(logits)]).max(initial=0.0))  # NaN and Inf: see core.validation
        if big > F32_MAX:
            raise StoreError(
                f"{path}: 'logits' ({logits.dtype}) hold values up to {big:.3g}, beyond the float32 range "
                f"(|x| <= {F32_MAX:.3g}) the benchmark computes in; rescale or clip them"
            )
    if logits.ndim not in (2, 3):
        raise StoreError(f"{path}: 'logits' must be (N, C) or (M, N, C), got shape {logits.shape}")
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise StoreError(f"{path}: 'labels' must be a 1-D integer array, got {labels.dtype} {labels.shape}")
    if labels.shape[0] != logits.shape[-2]:
        raise StoreError(f"{path}: 'logits' has N={logits.shape[-2]} rows but 'labels' has {labels.shape[0]}")
    ids = arrays.get("ids")
    if ids is not None and not np.issubdtype(ids.dtype, np.integer):
        raise StoreError(
            f"{path}: 'ids' must be integers, got {ids.dtype} (non-integer ids are refused, not truncated)"
        )
    if ids is not None and ids.shape != labels.shape:
        raise StoreError(f"{path}: 'ids' has shape {ids.shape}, expected {labels.shape}")
    out = LogitsFile(
        logits=torch.from_numpy(np.ascontiguousarray(logits, dtype=np.float32)),
        labels=torch.from_numpy(labels.astype(np.int64)),
        ids=None if ids is None else torch.from_numpy(ids.astype(np.int64)),
        meta=meta,
        path=str(path),
    )
    lh, ih = out.alignment_key
    if "labels_hash" in meta and meta["labels_hash"] != lh:
        raise StoreError(f"{path}: labels do not match the labels_hash in its metadata (file corrupted or edited)")
    if "ids_hash" in meta and ids is not None and meta["ids_hash"] != ih:
        raise StoreError(f"{path}: ids do not match the ids_hash in its metadata (file corrupted or edited)")
    return out


_SAFETENSORS_DTYPES = {
    "F16": "<f2",
    "F32": "<f4",
    "F64": "<f8",
    "I8": "i1",
    "I16": "<i2",
    "I32": "<i4",
    "I64": "<i8",
    "U8": "u1",
    "U16": "<u2",
    "U32": "<u4",
    "U64": "<u8",
    "BOOL": "?",
}


def _safetensors_header(path: Path, size: int) -> tuple[dict, int]:
    """The JSON header of a ``.safetensors`` file and the byte offset of its data section."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise StoreError(f"{path}: cannot read logits file (shorter than a safetensors header)")
        n = int.from_bytes(raw, "little")
        if n > size - 8:
            raise StoreError(f"{path}: cannot read logits file (header length {n} exceeds the file size {size})")
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise StoreError(f"{path}: cannot read logits file (bad safetensors header: {e})") from e
    if not isinstance(header, dict):
        raise StoreError(f"{path}: cannot read logits file (the safetensors header is not a JSON object)")
    return header, 8 + n


_MAPPINGS: list[tuple[int, int, weakref.ref]] = []  # (start address, end address, mmap) of live mappings


def _map_array(path: Path, offset: int, dtype: np.dtype, count: int) -> np.ndarray:
    """``count`` items at byte ``offset`` of a copy-on-write mapping of the whole file, without a copy."""
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    start = np.frombuffer(mm, np.uint8, count=1).__array_interface__["data"][0]
    _MAPPINGS[:] = [m for m in _MAPPINGS if m[2]() is not None]
    _MAPPINGS.append((start, start + len(mm), weakref.ref(mm)))
    return np.frombuffer(mm, dtype=dtype, count=count, offset=offset)


def release_pages(block: torch.Tensor) -> None:
    """Drop the resident pages behind ``block``, a contiguous slice of logits from :func:`mmap_logits_file`.

    The process's resident memory shrinks by the block's size; touching the
    block again reads it back from the file (page cache), so its values must
    not have been changed in place. A no-op for any other tensor, and where
    the OS has no ``madvise``.
    """
    if not hasattr(mmap, "MADV_DONTNEED") or not block.is_contiguous() or block.numel() == 0:
        return
    lo = block.data_ptr()
    hi = lo + block.numel() * block.element_size()
    for start, end, ref in _MAPPINGS:
        mm = ref()
        if mm is not None and start <= lo and hi <= end:
            page = mmap.PAGESIZE  # whole pages around the block: a page shared with the next block is read again
            a, b = (lo - start) // page * page, min(-(-(hi - start) // page) * page, end - start)
            mm.madvise(mmap.MADV_DONTNEED, a, b - a)
            return


def mmap_logits_file(path: PathLike) -> LogitsFile:
    """:func:`load_logits_file`, with the logits of a ``.safetensors`` file memory-mapped.

    The header (8-byte little-endian length, then JSON) is parsed here and the
    float32 ``logits`` become a tensor over a copy-on-write mapping of the file
    (the file is never written): nothing is read until a row is touched, and
    touched pages count towards the process's resident memory until the tensor
    is released or :func:`release_pages` drops them. Labels and ids are read
    into memory. Same validation and errors as :func:`load_logits_file`;
    ``.npz`` files and logits stored in another float type are read whole
    (converted to float32).
    """
    path = Path(path)
    if path.suffix != ".safetensors" or not path.exists():
        return load_logits_file(path)
    size = path.stat().st_size
    header, start = _safetensors_header(path, size)
    meta = _meta_entry(path, header.pop("__metadata__", None) or {})
    arrays = {}
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = (
                np.dtype(_SAFETENSORS_DTYPES[info["dtype"]]),
                tuple(info["shape"]),
                info["data_offsets"],
            )
        except (KeyError, TypeError, ValueError) as e:
            raise StoreError(
                f"{path}: cannot read logits file (tensor {name!r}: unsupported or malformed entry {info!r})"
            ) from e
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= size - start or end - begin != count * dtype.itemsize:
            raise StoreError(
                f"{path}: cannot read logits file (tensor {name!r}: data offsets {[begin, end]} do not fit "
                f"shape {list(shape)} {info['dtype']} in a data section of {size - start} bytes)"
            )
        if name == "logits" and dtype == np.float32 and count:
            arrays[name] = _map_array(path, start + begin, dtype, count).reshape(shape)
        else:
            arrays[name] = np.fromfile(path, dtype=dtype, count=count, offset=start + begin).reshape(shape)
    return _checked_logits_file(path, arrays, meta)


def save_logits_file(
    path: PathLike,
    logits: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray,
    ids: torch.Tensor | np.ndarray | None = None,
    meta: dict | None = None,
) -> None:
    """Write a ``.safetensors`` (or ``.npz``) logits file atomically, with hashes."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {
        "logits": np.ascontiguousarray(torch.as_tensor(logits).float().cpu().numpy()),
        "labels": np.ascontiguousarray(torch.as_tensor(labels).long().cpu().numpy()),
    }
    if ids is not None:
        arrays["ids"] = np.ascontiguousarray(torch.as_tensor(ids).long().cpu().numpy())
    m = {str(k): str(v) for k, v in (meta or {}).items()}
    m["labels_hash"] = array_hash(arrays["labels"])
    if ids is not None:
        m["ids_hash"] = array_hash(arrays["ids"])
    with atomic_path(path) as tmp:
        if path.suffix == ".safetensors":
            from safetensors.numpy import save_file

            # safetensors stores metadata in a hash map whose order changes from process to
            # process; one key holding sorted JSON keeps the file byte-for-byte reproducible.
            save_file(arrays, str(tmp), metadata={META_KEY: json.dumps(m, sort_keys=True)})
        elif path.suffix == ".npz":
            with open(tmp, "wb") as f:
                # (numpy's stubs match **arrays against savez's allow_pickle too; every value is an array)
                np.savez(f, **arrays)  # type: ignore[arg-type]
        else:
            raise StoreError(f"{path}: unknown logits file type {path.suffix!r}; use .npz or .safetensors")


def check_aligned(*files: LogitsFile) -> None:
    """Raise :class:`StoreError` unless all files describe the same samples in order."""
    if not files:
        return
    ref = files[0]
    for f in files[1:]:
        if f.labels.shape != ref.labels.shape:
            raise StoreError(f"{f.path}: N={f.labels.shape[0]} samples but {ref.path} has N={ref.labels.shape[0]}")
        if f.alignment_key != ref.alignment_key:
            raise StoreError(f"{f.path} and {ref.path}: labels/ids differ (files are not aligned on the same samples)")
