"""``reproduce pinning-cost``: a training stage timed pinned and native in scratch copies."""

import pytest

from benchmark.reproduce import pinning_cost


def test_summary_takes_medians_per_mode_and_their_ratio():
    runs = [
        {"mode": "pinned", "wall_s": 12.0, "cpu_s": 20.0},
        {"mode": "native", "wall_s": 10.0, "cpu_s": 16.0},
        {"mode": "pinned", "wall_s": 14.0, "cpu_s": 22.0},
        {"mode": "native", "wall_s": 10.0, "cpu_s": 16.0},
    ]
    s = pinning_cost.summarize(runs)
    assert s["median"] == {"pinned": {"wall_s": 13.0, "cpu_s": 21.0}, "native": {"wall_s": 10.0, "cpu_s": 16.0}}
    assert s["ratio"] == {"wall_s": 1.3, "cpu_s": 1.312}
    with pytest.raises(ValueError, match="runs of both modes are needed"):
        pinning_cost.summarize(runs[:1])


@pytest.mark.slow
def test_times_the_tiny_suites_train_stage_in_both_modes(caltech):
    from benchmark.dvcutil import lockfile

    before = lockfile.read(caltech / "suites/caltech256/dvc.lock")
    rec = pinning_cost.measure("suites/caltech256/dvc.yaml:train@res", 1, root=caltech, progress=False)
    assert [r["mode"] for r in rec["runs"]] == ["pinned", "native"]
    assert all(r["wall_s"] > 0 and r["cpu_s"] > 0 for r in rec["runs"]) and set(rec["ratio"]) == {"wall_s", "cpu_s"}
    assert lockfile.read(caltech / "suites/caltech256/dvc.lock") == before
    assert not list((caltech / ".dvc" / "tmp").glob("pinning-*"))
    with pytest.raises(ValueError, match="--repeats must be >= 1"):
        pinning_cost.measure("suites/caltech256/dvc.yaml:train@res", 0, root=caltech)


def test_the_docs_block_states_both_modes_and_the_ratio():
    from benchmark.docsgen.readme import pinning_table

    rec = {
        "stage": "train@m",
        "repeats": 2,
        "ratio": {"wall_s": 1.25, "cpu_s": 1.167},
        "median": {"pinned": {"wall_s": 40.0, "cpu_s": 70.0}, "native": {"wall_s": 32.0, "cpu_s": 60.0}},
        "machine": {"cpus": 2, "cpu": "X", "torch": "2"},
    }
    text = pinning_table(rec)
    assert "| pinned | 40.0 | 70.0 |" in text and "| native | 32.0 | 60.0 |" in text
    assert "pinned / native = **1.25x** wall, 1.17x CPU" in text and "median of 2 run(s)" in text
