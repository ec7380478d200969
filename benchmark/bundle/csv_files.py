"""A bundle's tables as files: CSV bytes exactly as pandas writes them (fast, through pyarrow), gzipped above a size
and cut into parts of consecutive rows where one file would pass the intake's limits (:mod:`benchmark.bundle.pack`
writes them, :mod:`benchmark.bundle.schema` reads them back)."""

from __future__ import annotations

import gzip
import os

import pandas as pd

from benchmark.bundle.intake import MAX_UNPACKED_BYTES
from benchmark.bundle.schema import GZIP_ABOVE, MAX_FILE_BYTES, BundleError

PART_BYTES = MAX_FILE_BYTES  # a table file (rows, paired) larger than this, gzipped, is split in parts


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """``df.to_csv(index=False).encode()``, byte for byte, many times faster on large tables: pyarrow's writer, the
    numbers formatted as pandas writes them (numpy's ``astype(str)``, each distinct value once; '' for NaN). Tables
    it cannot write so (other dtypes, or a cell that needs quoting) go through pandas."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if df.shape[1] < 2 or df.empty or not df.columns.is_unique:
        return df.to_csv(index=False).encode()
    arrays = []
    for c in df.columns:
        s = df[c]
        if s.dtype in (np.float64, np.int64):
            v = s.to_numpy()
            uniq, first, inverse = np.unique(v.view(np.int64), return_index=True, return_inverse=True)
            text = v[first].astype(str).astype(object)
            if s.dtype == np.float64:
                text[np.isnan(v[first])] = None
            arrays.append(pa.array(text, type=pa.string()).take(pa.array(inverse)))
        elif isinstance(s.dtype, pd.StringDtype) and not s.isna().any():
            arrays.append(pa.array(s.array, type=pa.string()))
        else:
            return df.to_csv(index=False).encode()
    sink = pa.BufferOutputStream()
    try:  # quoting "none": a cell holding a delimiter, quote or line break raises (pandas would quote it)
        pacsv.write_csv(
            pa.Table.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))]),
            sink,
            pacsv.WriteOptions(include_header=False, quoting_style="none", eol=os.linesep),
        )
    except pa.ArrowInvalid:
        return df.to_csv(index=False).encode()
    return df.iloc[:0].to_csv(index=False).encode() + sink.getvalue().to_pybytes()


def row_texts(df: pd.DataFrame, data: bytes, step: int) -> list[bytes]:
    """``df.iloc[i : i + step].to_csv(index=False).encode()`` for i = 0, step, ...: cut from ``data`` (the whole
    table's CSV) where no cell is quoted (then every row is one line); else written part by part."""
    import numpy as np

    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")) + 1
    if b'"' in data or len(ends) != len(df) + 1:
        return [df.iloc[i : i + step].to_csv(index=False).encode() for i in range(0, len(df), step)]
    head = data[: ends[0]]
    return [head + data[ends[i] : ends[min(i + step, len(df))]] for i in range(0, len(df), step)]


def csv_parts(stem: str, df: pd.DataFrame) -> list[tuple[str, str, bytes]]:
    """(role, file name, bytes): ``<stem>.csv``; gzipped (``.csv.gz``, no timestamp) above :data:`GZIP_ABOVE`
    bytes; in parts ``<stem>.csv.gz``, ``<stem>-001.csv.gz``, ... of consecutive rows when one file would be
    :data:`PART_BYTES` or more, or inflate to more than the intake's limit (:data:`MAX_UNPACKED_BYTES`)."""
    data = to_csv_bytes(df)
    if len(data) <= GZIP_ABOVE:
        return [(stem, f"{stem}.csv", data)]
    packed = gzip.compress(data, compresslevel=9, mtime=0)
    if len(packed) < PART_BYTES and len(data) <= MAX_UNPACKED_BYTES:
        return [(stem, f"{stem}.csv.gz", packed)]
    k = max(
        -(-len(packed) * 5 // (4 * PART_BYTES)), -(-len(data) * 5 // (4 * MAX_UNPACKED_BYTES)), 2
    )  # ~80% of a limit
    while True:
        step = -(-len(df) // k)
        texts = row_texts(df, data, step)
        parts = [gzip.compress(t, compresslevel=9, mtime=0) for t in texts]
        if max(map(len, parts)) < PART_BYTES and max(map(len, texts)) <= MAX_UNPACKED_BYTES:
            return [
                (stem if i == 0 else f"{stem}-{i:03d}", f"{stem}.csv.gz" if i == 0 else f"{stem}-{i:03d}.csv.gz", p)
                for i, p in enumerate(parts)
            ]
        if step == 1:
            raise BundleError(f"{stem}: one row gzips to {max(map(len, parts))} bytes; cannot stay under {PART_BYTES}")
        k += 1
