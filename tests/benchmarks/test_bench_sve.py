"""SVE benchmarks (CPU, one thread): batched vs sequential members; training-step memory.

* ``test_bench_sve_forward``: one batched forward of M = 8 members (inference:
  cached member weights where they pay, see :mod:`benchmark.methods.sve_layers`)
  against the same 8 members exported as dense timm models and run one after the
  other (``sequential``), for CNNs also with channels-last inputs and weights
  (``sequential-cl``: PyTorch's one-thread 1x1 convolution is much faster on
  channels-last tensors at small batches). Timed in thread CPU time, so that other
  processes on a shared machine do not count.
* ``test_bench_sve_train_step``: time of one training step (AdamW) of SVE at
  M = 8 against a full fine-tune of the same backbone on the same batch (``full``)
  and on M times the batch (``full-Mx-batch``, as many images as SVE runs); the
  step's peak memory is measured in a fresh subprocess as the growth of the
  peak resident set (``VmHWM`` after resetting it through
  ``/proc/self/clear_refs``) over the resident set before the step, and stored
  in ``extra_info["peak_step_mb"]``.

Run for real with ``pytest --benchmark-enable tests/benchmarks/test_bench_sve.py``.
This file is also the subprocess: ``python test_bench_sve.py VARIANT`` prints the memory figures as JSON.
"""

from __future__ import annotations

import ctypes
import gc
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import timm
import torch

from benchmark.core.members import member_cross_entropy
from benchmark.methods.sve import SingularValueEnsemble

MEMBERS = 8
CLASSES = 10
FORWARD_CASES = {  # name: (timm arch, create kwargs, image size, batch)
    "lite0-64px-B1": ("tf_efficientnet_lite0", {}, 64, 1),
    "lite0-64px": ("tf_efficientnet_lite0", {}, 64, 8),
    "vit_tiny-64px-B1": ("vit_tiny_patch16_224", {"img_size": 64}, 64, 1),
    "vit_tiny-64px": ("vit_tiny_patch16_224", {"img_size": 64}, 64, 8),
}
STEP_VARIANTS = ("sve", "sve-materialized", "full", "full-Mx-batch")  # full-Mx-batch: M * B images, like SVE
STEP_ARCH, STEP_SIZE, STEP_BATCH = "tf_efficientnet_lite0", 64, 16


def build_sve(arch: str, kwargs: dict, mode: str = "auto") -> SingularValueEnsemble:
    """M = 8 members around a randomly initialised backbone (speed and memory do not depend on the weights)."""
    torch.manual_seed(0)
    return SingularValueEnsemble(
        timm.create_model(arch, pretrained=False, **kwargs),
        members=MEMBERS,
        num_classes=CLASSES,
        pretrained=False,
        allow_random_init=True,
        sigma_init=0.1,
        mode=mode,
    )


@pytest.fixture(scope="module")
def forward_models():
    """Ensembles and their dense members, built once per test module for all cases of an architecture (the SVD of
    every layer is most of a case's time; a forward decides per batch whether cached member weights pay, so batch
    sizes do not see each other) and released with the module."""
    return {}


def _models(cache: dict, arch: str, kwargs: dict, layout: torch.memory_format | None = None):
    """The ensemble of ``arch`` in eval mode, or (``layout``) its members exported as dense timm models in it."""
    key = (arch, json.dumps(kwargs, sort_keys=True))
    if key not in cache:
        cache[key] = build_sve(arch, kwargs).eval()
    if layout is None:
        return cache[key]
    if (*key, layout) not in cache:
        cache[(*key, layout)] = [cache[key].export_member(m).to(memory_format=layout) for m in range(MEMBERS)]
    return cache[(*key, layout)]


@pytest.mark.benchmark(timer=time.thread_time)
@pytest.mark.parametrize("how", ["batched", "sequential", "sequential-cl"])
@pytest.mark.parametrize("case", list(FORWARD_CASES))
def test_bench_sve_forward(benchmark, forward_models, case, how):
    torch.set_num_threads(1)
    arch, kwargs, size, batch = FORWARD_CASES[case]
    sve = _models(forward_models, arch, kwargs)
    if how == "sequential-cl" and not sve.channels_last:
        pytest.skip("no pointwise convolutions adapted: channels-last is for CNNs")
    layout = torch.channels_last if how == "sequential-cl" else torch.contiguous_format
    dense = _models(forward_models, arch, kwargs, layout)
    benchmark.group = f"sve-forward-{case}-M{MEMBERS}-B{batch}"
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(0))
    x_dense = x.contiguous(memory_format=layout)
    with torch.no_grad():
        batched, sequential = sve(x), torch.stack([d(x_dense) for d in dense])
        torch.testing.assert_close(batched, sequential, atol=1e-4, rtol=1e-4)
        benchmark(sve if how == "batched" else lambda x: [d(x) for d in dense], x if how == "batched" else x_dense)


def build_step(variant: str):
    """(model, one AdamW training step) for a variant on a fixed batch."""
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    batch = STEP_BATCH * (MEMBERS if variant == "full-Mx-batch" else 1)
    x = torch.randn(batch, 3, STEP_SIZE, STEP_SIZE, generator=g)
    y = torch.randint(0, CLASSES, (batch,), generator=g)
    if variant.startswith("full"):
        torch.manual_seed(0)
        model = timm.create_model(STEP_ARCH, pretrained=False, num_classes=CLASSES).train()
        params, loss_fn = list(model.parameters()), torch.nn.functional.cross_entropy
    else:
        model = build_sve(STEP_ARCH, {}, mode="materialized" if variant == "sve-materialized" else "factored").train()
        params, loss_fn = model.trainable_parameters(), member_cross_entropy
    opt = torch.optim.AdamW(params, lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return model, step


def _status_kb(field: str) -> int:
    return int(re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M).group(1))


def measure_step_memory(variant: str) -> dict:
    """Peak resident-set growth (MB) of the first training step; run in a fresh process."""
    model, step = build_step(variant)
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand freed heap back, so the step's pages count as growth
    before = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident set
    step()
    peak = _status_kb("VmHWM")
    return {
        "peak_step_mb": (peak - before) / 1024,
        "rss_before_mb": before / 1024,
        "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }


@pytest.mark.parametrize("variant", STEP_VARIANTS)
def test_bench_sve_train_step(benchmark, variant):
    benchmark.group = f"sve-train-step-{STEP_ARCH}-{STEP_SIZE}px-B{STEP_BATCH}"
    if not benchmark.disabled:  # the step's peak memory, in a fresh process: a figure only a measured run reports
        if not sys.platform.startswith("linux"):
            pytest.skip("peak memory is read from Linux /proc/self/status")
        run = subprocess.run([sys.executable, __file__, variant], capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        mem = json.loads(run.stdout.strip().splitlines()[-1])
        assert mem["peak_step_mb"] > 0
        benchmark.extra_info.update(mem, members=1 if variant.startswith("full") else MEMBERS)
    _, step = build_step(variant)
    loss = benchmark(step)
    assert loss == loss and loss > 0


if __name__ == "__main__":
    print(json.dumps(measure_step_memory(sys.argv[1])))
