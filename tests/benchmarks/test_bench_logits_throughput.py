"""Logits-extraction throughput of the embedded base model against timm's own inference benchmark.

* ``test_bench_timm_inference``: timm's method (``benchmark.py``, ``InferenceBenchmarkRunner``):
  ``model.eval()``, ``torch.no_grad()``, one fixed random batch, warm-up steps, then the same
  batch forwarded again and again; images/s = batch / step time.
* ``test_bench_predict_logits``: the logits stage's path, ``benchmark.models.infer.predict_logits`` over
  ``BATCHES`` x batch images (slicing, forward, ``.float().cpu()``, ``torch.cat``).

Both run the zoo's first ``role: base`` entry (random weights: speed does not depend on them) at
its ``img_size``, with params.yaml's ``logits.batch_size`` and one CPU thread; ``extra_info``
holds ``imgs_per_s`` (median round). On a shared machine the load drifts between the two tests,
so ``predict_logits`` also stores ``ratio`` (target >= 0.9): its images/s over timm's, the median
over ``PAIRS`` back-to-back pairs (``BATCHES`` timm steps, then one ``predict_logits`` call over
as many images, the order alternating), which share the same background load. Run for real with
``pytest --benchmark-enable tests/benchmarks/test_bench_logits_throughput.py``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
import timm
import torch
import yaml

from benchmark.models import factory
from benchmark.models.infer import predict_logits
from benchmark.models.zoo import load_zoo

ROOT = Path(__file__).resolve().parents[2]
CLASSES = 10  # the embedded suite: MNIST digits
BATCHES = 2  # batches per predict_logits call
WARMUP, ROUNDS = 3, 15  # timm's defaults are 10 and 40; fewer keep the run short
PAIRS = 10  # interleaved pairs for the ratio
GROUP = "logits-throughput"


def _base():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    zoo = load_zoo(ROOT / params["zoo"], recipes=params["recipes"])
    entry = next(e for e in zoo.values() if e.role == "base")
    return entry, int(params["logits"]["batch_size"])


@pytest.fixture(scope="module")
def setup():
    """(entry, batch size, our model, timm's reference model with the same weights) on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    entry, batch = _base()
    ours = factory.create(entry, CLASSES, load_weights=False).eval()
    # as timm's BenchmarkRunner builds it (create_model drops the None-valued options)
    ref = timm.create_model(entry.arch, num_classes=CLASSES, in_chans=3, drop_rate=0.0).eval()
    ref.load_state_dict(ours.state_dict(), strict=True)
    yield entry, batch, ours, ref
    torch.set_num_threads(threads)


def _imgs_per_s(benchmark, images: int) -> None:
    if benchmark.stats is not None:  # None under --benchmark-disable: ran once, nothing timed
        benchmark.extra_info["imgs_per_s"] = round(images / benchmark.stats.stats.median, 1)


@torch.no_grad()
def _timm_steps(model, x, steps: int) -> float:
    t = time.perf_counter()
    for _ in range(steps):
        model(x)
    return time.perf_counter() - t


def _paired_ratio(model, x, batch: int) -> float:
    """Median over interleaved pairs of (time of BATCHES timm steps) / (time of predict_logits on as many images)."""
    ratios = []
    for i in range(PAIRS):
        first_timm = i % 2 == 0
        t_timm = _timm_steps(model, x[:batch], BATCHES) if first_timm else None
        t = time.perf_counter()
        predict_logits(model, x, batch_size=batch)
        t_ours = time.perf_counter() - t
        if not first_timm:
            t_timm = _timm_steps(model, x[:batch], BATCHES)
        ratios.append(t_timm / t_ours)
    return statistics.median(ratios)


def test_bench_timm_inference(benchmark, setup):
    entry, batch, _, ref = setup
    benchmark.group = f"{GROUP}-{entry.name}-{entry.img_size}px-B{batch}"
    benchmark.extra_info.update(arch=entry.arch, img_size=entry.img_size, batch=batch, threads=torch.get_num_threads())
    x = torch.randn(batch, 3, entry.img_size, entry.img_size, generator=torch.Generator().manual_seed(0))

    def step():
        with torch.no_grad():
            return ref(x)

    out = benchmark.pedantic(step, rounds=ROUNDS, warmup_rounds=WARMUP, iterations=1)
    assert out.shape == (batch, CLASSES) and torch.isfinite(out).all()
    _imgs_per_s(benchmark, batch)


def test_bench_predict_logits(benchmark, setup):
    entry, batch, ours, ref = setup
    benchmark.group = f"{GROUP}-{entry.name}-{entry.img_size}px-B{batch}"
    benchmark.extra_info.update(
        arch=entry.arch, img_size=entry.img_size, batch=batch, images=BATCHES * batch, threads=torch.get_num_threads()
    )
    x = torch.randn(BATCHES * batch, 3, entry.img_size, entry.img_size, generator=torch.Generator().manual_seed(0))

    z = benchmark.pedantic(
        predict_logits, args=(ours, x), kwargs={"batch_size": batch}, rounds=ROUNDS, warmup_rounds=1, iterations=1
    )
    with torch.no_grad():  # the same numbers as timm's forward, batch by batch
        expected = torch.cat([ref(x[i : i + batch]) for i in range(0, len(x), batch)])
    torch.testing.assert_close(z, expected)
    assert z.dtype == torch.float32 and z.device.type == "cpu"
    _imgs_per_s(benchmark, BATCHES * batch)
    if benchmark.stats is not None:
        benchmark.extra_info["ratio"] = round(_paired_ratio(ours, x, batch), 3)
