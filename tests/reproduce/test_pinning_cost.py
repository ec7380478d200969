"""``reproduce pinning-cost``: a training stage timed pinned and native in scratch copies."""
import pytest

from benchmark.reproduce import pinning_cost


def test_summary_takes_medians_per_mode_and_their_ratio():
    runs = [{"mode": "pinned", "wall_s": 12.0, "cpu_s": 20.0}, {"mode": "native", "wall_s": 10.0, "cpu_s": 16.0},
            {"mode": "pinned", "wall_s": 14.0, "cpu_s": 22.0}, {"mode": "native", "wall_s": 10.0, "cpu_s": 16.0}]
    s = pinning_cost.summarize(runs)
    assert s["median"] == {"pinned": {"wall_s": 13.0, "cpu_s": 21.0}, "native": {"wall_s": 10.0, "cpu_s": 16.0}}
    assert s["ratio"] == {"wall_s": 1.3, "cpu_s": 1.312}
    with pytest.raises(ValueError, match="runs of both modes are needed"):
        pinning_cost.summarize(runs[:1])


@pytest.mark.slow
def test_times_the_tiny_suites_train_stage_in_both_modes(caltech):
    from benchmark.reproduce import lockfile

    before = lockfile.read(caltech / "suites/caltech256/dvc.lock")
    rec = pinning_cost.measure("suites/caltech256/dvc.yaml:train@res", 1, root=caltech, progress=False)
    assert [r["mode"] for r in rec["runs"]] == ["pinned", "native"]
    assert all(r["wall_s"] > 0 and r["cpu_s"] > 0 for r in rec["runs"]) and set(rec["ratio"]) == {"wall_s", "cpu_s"}
    assert lockfile.read(caltech / "suites/caltech256/dvc.lock") == before
    assert not list((caltech / ".dvc" / "tmp").glob("pinning-*"))
    with pytest.raises(ValueError, match="--repeats must be >= 1"):
        pinning_cost.measure("suites/caltech256/dvc.yaml:train@res", 0, root=caltech)
