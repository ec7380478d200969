"""CPU numerics pinning (benchmark.config.numerics): what it sets, when it applies, and that it takes in a
fresh process (the stages' case) and is refused when torch chose its kernels first."""

import json
import os
import subprocess
import sys

import pytest

from benchmark.config import numerics

AVX2_HOST = numerics.pinnable()


def _run(code: str, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in (*numerics.PINNED, numerics.ENV)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**e, **env}, timeout=120)


def test_pin_sets_the_three_switches_on_a_pinnable_cpu(monkeypatch):
    monkeypatch.setattr(numerics, "pinnable", lambda: True)
    env = {"ATEN_CPU_CAPABILITY": "avx512"}  # a user's own choice is overridden: pinned means pinned
    applied = numerics.pin(env)
    assert applied == {"mode": "pinned", "pinned": True}
    assert env == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2,STRICT"}


def test_native_mode_and_unpinnable_cpus_leave_the_environment_alone(monkeypatch):
    monkeypatch.setattr(numerics, "pinnable", lambda: True)
    env = {numerics.ENV: "native"}
    assert numerics.pin(env) == {"mode": "native", "pinned": False}
    assert env == {numerics.ENV: "native"}
    monkeypatch.setattr(numerics, "pinnable", lambda: False)
    env = {}
    assert numerics.pin(env)["pinned"] is False and env == {}


def test_an_unknown_mode_is_one_clear_error():
    with pytest.raises(ValueError, match=r"UQ_NUMERICS='fast': must be one of \['pinned', 'native'\]"):
        numerics.pin({numerics.ENV: "fast"})


@pytest.mark.parametrize(
    "machine,flags,ok",
    [
        ("x86_64", {"avx2", "fma", "sse4_2"}, True),
        ("AMD64", {"avx2", "fma"}, True),
        ("x86_64", {"avx", "sse4_2"}, False),  # no AVX2: the caps cannot hold, the CPU's own kernels run
        ("aarch64", {"asimd"}, False),
    ],
)
def test_pinnable_needs_x86_64_with_avx2_and_fma(machine, flags, ok):
    assert numerics.pinnable(machine, flags) is ok


@pytest.mark.skipif(not AVX2_HOST, reason="needs an x86-64 CPU with AVX2")
def test_a_fresh_process_that_imports_benchmark_runs_avx2_kernels():
    out = _run(
        "import benchmark, json, torch; from benchmark.config import numerics; "
        "torch.ones(4).exp(); print(json.dumps(numerics.state()))"
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"numerics": "pinned", "pinned": True, "cpu_capability": "AVX2"}


@pytest.mark.skipif(not AVX2_HOST, reason="needs an x86-64 CPU with AVX2")
def test_native_mode_keeps_the_cpus_own_kernels():
    code = "import torch; torch.ones(2).exp(); print(torch.backends.cpu.get_cpu_capability())"
    native = _run(code).stdout.strip()
    out = _run(
        "import benchmark, json; from benchmark.config import numerics; import torch; torch.ones(2).exp(); "
        "print(json.dumps(numerics.state()))",
        UQ_NUMERICS="native",
    )
    assert json.loads(out.stdout) == {"numerics": "native", "pinned": False, "cpu_capability": native}


@pytest.mark.skipif(not AVX2_HOST, reason="needs an x86-64 CPU with AVX2")
def test_a_stage_refuses_to_run_when_torch_chose_its_kernels_first(tmp_path):
    native = _run("import torch; torch.ones(2).exp(); print(torch.backends.cpu.get_cpu_capability())").stdout.strip()
    if native == "AVX2":
        pytest.skip("this CPU's own kernels are AVX2: a late pin changes nothing")
    code = (
        "import torch; torch.ones(2).exp()\n"
        "from benchmark.stages.entry import stage_main\n"
        "raise SystemExit(stage_main('x', lambda p, a: None, argv=['--params', 'missing.yaml']))\n"
    )
    out = _run(code)
    assert out.returncode == 2
    assert "CPU numerics not pinned: torch chose" in out.stderr and "Traceback" not in out.stderr


TRAIN_STEPS = """
import hashlib, benchmark, timm, torch
torch.manual_seed(0); torch.set_num_threads(2)
from benchmark.models import portable
m = portable.make_portable(timm.create_model("lcnet_035", num_classes=10, in_chans=1))
opt = portable.adamw(m.parameters(), lr=1e-2, weight_decay=0.0)
g = torch.Generator().manual_seed(1)
for _ in range(3):
    x, y = torch.randn(16, 1, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
    loss = torch.nn.functional.cross_entropy(m(x), y); opt.zero_grad(); loss.backward(); opt.step()
m.eval()
h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in m.state_dict().values() if p.is_floating_point()))
h.update(m(torch.randn(8, 1, 32, 32, generator=g)).detach().numpy().tobytes())
print(h.hexdigest())
"""
# a CPU of this vendor without AVX-512, simulated: the switches that select kernels by ISA (ATen's, oneDNN's, MKL's)
OTHER_CPU = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


@pytest.mark.slow  # four fresh interpreters train: two of them on a simulated CPU
@pytest.mark.skipif(not AVX2_HOST, reason="needs an x86-64 CPU with AVX2")
def test_pinned_training_is_byte_identical_on_a_simulated_avx2_cpu():
    """Three AdamW steps of a small CNN (the pipeline's portable route) and its logits: pinned here == pinned on a
    simulated AVX2-only CPU of this vendor (MKL capped too). The negative control shows that the simulation changes
    the kernels: without pinning, this machine's own kernels and the simulated CPU's give different bytes (on an
    AVX-512 host). What an ISA cap cannot simulate is another vendor's MKL paths: those are the kernel
    fingerprints' part (tests/reproduce/test_fingerprint.py, results/fingerprints/)."""

    def digest(**env):
        out = _run(TRAIN_STEPS, **env)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    pinned = digest()
    assert digest(**OTHER_CPU) == pinned
    if (
        _run("import torch; torch.ones(2).exp(); print(torch.backends.cpu.get_cpu_capability())").stdout.strip()
        != "AVX2"
    ):
        native, native_other = digest(UQ_NUMERICS="native"), digest(UQ_NUMERICS="native", **OTHER_CPU)
        assert native != native_other, "the simulated CPU runs the same kernels: the check would prove nothing"
