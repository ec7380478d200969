"""The evaluate stage's all-pairs sweep on a small synthetic zoo (CI size).

K = 4 models, 5,000 test and 500 validation samples, 100 classes: 4 singles
and 6 duos, converged fit, all metrics, no bootstrap, 2 worker processes. Each
round starts from an empty unit cache. The full size (40 models, 47,500 +
2,500 samples, 1,000 classes, 780 pairs; time and peak memory of the process
tree) is run by hand: ``python -m benchmark.evaluation.sweep_bench --models 40 --workers 2``.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from benchmark.evaluation import stage
from benchmark.evaluation.sweep_bench import make_zoo, params
from benchmark.stages.params_config import parse_params

K, N_TEST, N_VAL, C, WORKERS = 4, 5000, 500, 100, 2


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep_bench")
    make_zoo(root, models=K, n_test=N_TEST, n_val=N_VAL, classes=C, progress=False)
    return root


def test_bench_sweep(benchmark, zoo, monkeypatch):
    monkeypatch.chdir(zoo)
    p = parse_params(params(WORKERS), "params")
    stats = benchmark.pedantic(
        lambda: stage.run(p, progress=False),
        setup=lambda: shutil.rmtree("results/units", ignore_errors=True),
        rounds=3,
        warmup_rounds=0,
    )
    pairs = K * (K - 1) // 2
    assert stats == {"units": K + pairs, "computed": K + pairs, "reused": 0, "pairs": pairs}
    metrics = pd.read_csv("results/metrics.csv")
    duo = metrics[metrics["family"] == "duo"]
    assert duo["members"].nunique() == pairs and set(duo["split"]) == {"test"}
    per_duo = duo.groupby("members")["metric"].nunique()
    assert np.isfinite(metrics["value"]).all() and per_duo.eq(per_duo.iloc[0]).all() and per_duo.iloc[0] >= 11
    benchmark.extra_info.update(models=K, pairs=pairs, workers=WORKERS, n_test=N_TEST, classes=C)
    assert stage.run(p, progress=False)["computed"] == 0  # a second run recomputes nothing
