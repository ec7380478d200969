"""``submit``'s table writer (benchmark.bundle.pack): the same bytes as pandas' ``to_csv(index=False)`` (the
independent definition), on the cases where its fast path and its fallbacks differ, and the parts cut from the
whole table's text equal the parts written one by one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmark.bundle import csv_files


def _pandas(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


FLOATS = [0.0, -0.0, 0.1, 1 / 3, 1e-06, 5e-324, 1e16, 1.5e300, -2.5, np.nan, np.inf, -np.inf, 123456789.0, 0.1 + 0.2]


def _rows(n: int = 50, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "suite": pd.array(["caltech256"] * n, dtype="string"),
            "metric": pd.array(rng.choice(["accuracy", "nll", "ece"], n), dtype="string"),
            "value": rng.choice(FLOATS, n),  # repeated values: each distinct one formatted once
            "noise": rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12, n),
            "members": rng.integers(-3, 10**12, n),
        }
    )


def test_the_fast_path_writes_pandas_bytes():
    df = _rows()
    assert df["value"].isna().any() and (df["value"] == np.inf).any()  # the edge values are in
    assert csv_files.to_csv_bytes(df) == _pandas(df)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.assign(
            metric=pd.array(["a,b", 'q"uote', "line\nbreak", "cr\rx"] + ["x"] * (len(d) - 4), dtype="string")
        ),
        lambda d: d.assign(suite=pd.array([None] + ["s"] * (len(d) - 1), dtype="string")),  # text with a missing cell
        lambda d: d.assign(flag=[True, False] * (len(d) // 2)),  # another dtype
        lambda d: d.assign(when=pd.Timestamp("2026-12-02")),
        lambda d: d.rename(columns={"value": "a,header"}),  # a header cell that needs quoting
        lambda d: d.set_axis(["suite", "suite", "value", "noise", "members"], axis=1),  # repeated column names
        lambda d: d[["value"]],  # one column
        lambda d: d.iloc[:0],  # no rows
        lambda d: d.assign(value=np.float32(0.1)),  # float32: pandas writes its own repr
    ],
)
def test_the_fallbacks_write_pandas_bytes(edit):
    df = edit(_rows())
    assert csv_files.to_csv_bytes(df) == _pandas(df)


@pytest.mark.parametrize("quoted", [False, True])
@pytest.mark.parametrize("step", [1, 7, 50, 64])
def test_parts_cut_from_the_whole_text_equal_parts_written_one_by_one(step, quoted):
    df = _rows(n=50, seed=1)
    if quoted:  # a quoted cell may hold a line break: written part by part instead
        df.loc[3, "metric"] = "two\nlines"
    parts = csv_files.row_texts(df, csv_files.to_csv_bytes(df), step)
    assert parts == [_pandas(df.iloc[i : i + step]) for i in range(0, len(df), step)]
