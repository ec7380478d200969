"""The bundle checks' number parsing (:func:`benchmark.bundle.schema.to_float`, pyarrow's cast with pandas as the
fallback) reads every cell as ``pd.to_numeric(errors="coerce")`` does, so the checks accept and refuse the same
cells."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmark.bundle import schema
from benchmark.bundle.schema import BundleError

CELLS = [
    " 1",
    "1 ",
    "1_0",
    "0x10",
    "1e5",
    ".5",
    "5.",
    "+1",
    "-inf",
    "Infinity",
    "inf",
    "nan",
    "NaN",
    "NAN",
    "1,5",
    "\uff11",
    "1e400",
    "-0",
    "1d5",
    "infinity",
    "1e-400",
    "0.1f",
    "12345678901234567890",
    "9007199254740993",
    "True",
    "None",
    "null",
    "-",
    "e5",
    "1e",
    "--1",
    "0.30000000000000004",
    "4.9e-324",
    None,
]


@pytest.mark.parametrize("cell", CELLS)
def test_to_float_reads_a_cell_as_pandas_to_numeric(cell):
    col = pd.Series(["0.25", cell, "3"], dtype=str)
    want = pd.to_numeric(col, errors="coerce").astype("float64").to_numpy()
    got = schema.to_float(col)
    assert got.dtype == np.float64 and list(got.index) == list(col.index)
    assert np.array_equal(got.to_numpy(), want, equal_nan=True), (cell, got.tolist(), want.tolist())


def _reference_error(cell) -> bool:
    """The check as first written, on pandas alone: not a number (other than 'nan'/'NaN'), or infinite."""
    col = pd.Series([cell], dtype=str)
    num = pd.to_numeric(col, errors="coerce")
    bad = num.isna() & col.notna() & ~col.isin(["nan", "NaN"])
    return bool(bad.any() or (num.abs() == np.inf).any())


@pytest.mark.parametrize("cell", CELLS)
def test_the_number_check_refuses_exactly_what_pandas_refuses(cell):
    df = pd.DataFrame({"value": pd.Series(["0.5", cell], dtype=str)})
    if _reference_error(cell):
        with pytest.raises(BundleError, match=r"^rows.csv: row 3: column 'value' must be (a number|finite)"):
            schema._numbers(df, ["value"], "rows.csv")
    else:
        schema._numbers(df, ["value"], "rows.csv")


def test_a_large_table_takes_the_fast_path_and_keeps_its_values(monkeypatch):
    def no_pandas(*args, **kwargs):
        raise AssertionError("pandas' fallback used for a table pyarrow reads")

    monkeypatch.setattr(pd, "to_numeric", no_pandas)
    rng = np.random.default_rng(0)
    values = rng.standard_normal(50_000)
    col = pd.Series([repr(float(v)) for v in values], dtype=str)
    assert np.array_equal(schema.to_float(col).to_numpy(), values)  # repr round-trips every double exactly


def test_a_committed_bundles_rows_loaded_and_packed_again_are_its_bytes():
    """What ``load_bundle`` gives back is what ``submit`` wrote: packing the checked rows again gives the file as
    committed, byte for byte (an integer stays ``20000``, not ``20000.0``; every float keeps its digits)."""
    import gzip
    from pathlib import Path

    from benchmark.bundle.csv_files import to_csv_bytes
    from benchmark.bundle.schema import load_bundle

    bundles = sorted(p.parent for p in (Path(__file__).resolve().parents[2] / "leaderboard").glob("*/*/manifest.json"))
    assert bundles
    for folder in bundles:
        parts = sorted(folder.glob("rows*.csv*"))
        stored = b"".join(gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes() for p in parts)
        assert to_csv_bytes(load_bundle(folder, check_arch=False).rows) == stored, folder.name


def test_checked_rows_write_whole_numbers_as_they_were_written():
    """A number column holding whole numbers only (``train_images`` = 20000 in every row) is packed again as
    ``20000``: the checks' parsing does not turn the table's integers into floats (``20000.0``)."""
    import gzip
    import io
    from pathlib import Path

    from benchmark.bundle.csv_files import to_csv_bytes
    from benchmark.bundle.schema import check_rows

    folder = sorted(p.parent for p in (Path(__file__).resolve().parents[2] / "leaderboard").glob("*/*/manifest.json"))[
        0
    ]
    raw = b"".join(gzip.decompress(p.read_bytes()) for p in sorted(folder.glob("rows*.csv.gz")))
    df = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, na_values=[""])
    df["train_images"] = "20000"
    rows = check_rows(df, df["suite"].iloc[0], "rows.csv")
    again = pd.read_csv(io.BytesIO(to_csv_bytes(rows)), dtype=str)
    assert set(again["train_images"]) == {"20000"}
