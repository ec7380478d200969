"""The DVC-share table (docs/explanations/performance.md) from a record, with the replay without libyaml beside it."""

from benchmark.reproduce import dvc_share

RECORD = {
    "stages": 4,
    "lock_bytes": 128_000,
    "repeats": 2,
    "runs": [
        {"runner": "dvc repro", "jobs": 1, "wall_s": 8.0, "cpu_s": 7.9},
        {"runner": "benchmark run", "jobs": 2, "wall_s": 6.0, "cpu_s": 9.0},
    ],
}


def test_the_table_per_runner_and_per_stage():
    table = dvc_share.table(RECORD)
    assert "| `dvc repro` | 8.0 | 7.9 | 2.00 | 1.98 |\n" in table
    assert "| `python -m benchmark run --jobs 2` | 6.0 | 9.0 | 1.50 | 2.25 |\n" in table
    assert "without libyaml" not in table and "4 stages" in table and "128 kB" in table


def test_the_replay_without_libyaml_is_a_column_where_measured():
    rec = dict(RECORD, without_libyaml=[{"runner": "benchmark run", "jobs": 2, "wall_s": 12.5, "cpu_s": 14.0}])
    table = dvc_share.table(rec)
    assert table.splitlines()[0].endswith("| wall s without libyaml |")
    assert "| `python -m benchmark run --jobs 2` | 6.0 | 9.0 | 1.50 | 2.25 | 12.5 |" in table
    assert "| `dvc repro` | 8.0 | 7.9 | 2.00 | 1.98 | |" in table  # not measured without it: empty
    assert "`ruamel.yaml.clib` uninstalled" in table and "uninstalled" not in dvc_share.table(RECORD)
