"""Emulated CPU kinds (benchmark/reproduce/emulate.py): the child process under qemu-x86_64, what reaches the user,
a deliberate vendor-parting change caught by the emulated Intel, and a CPU without AVX2 that runs (no SIGILL) and
says what it cannot promise. The emulator runs in the slow tests; `bash scripts/setup.sh test` installs it."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.reproduce import emulate

ROOT = Path(__file__).resolve().parents[2]
QEMU = shutil.which(emulate.QEMU)
needs_qemu = pytest.mark.skipif(
    QEMU is None, reason="qemu-x86_64 (Debian's qemu-user) not installed: `bash scripts/setup.sh test` installs it"
)


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


def test_the_child_runs_from_an_argument_list_under_the_named_cpu(monkeypatch):
    monkeypatch.setattr(emulate, "qemu", lambda: "/usr/bin/qemu-x86_64")
    cmd = emulate.child_command(
        "Icelake-Server; rm -rf /",
        params="p.yaml",
        out="/tmp/o.json",
        all_modes=True,
        with_ops=True,
        with_pipeline=False,
        names=["lite0-s0"],
    )
    assert cmd[:4] == ["/usr/bin/qemu-x86_64", "-cpu", "Icelake-Server; rm -rf /", sys.executable]
    assert cmd[4:] == [
        "-m",
        "benchmark.reproduce.emulate",
        "--params",
        "p.yaml",
        "--out",
        "/tmp/o.json",
        "--all-modes",
        "--no-pipeline",
        "--models",
        "lite0-s0",
    ]


def test_a_missing_emulator_is_one_sentence_naming_the_package(monkeypatch):
    monkeypatch.setattr(emulate.shutil, "which", lambda name: None)
    with pytest.raises(emulate.EmulationError, match=r"qemu-x86_64 not found: install Debian's qemu-user"):
        emulate.qemu()


def test_qemus_feature_warnings_never_reach_the_user_and_progress_feeds_the_bar():
    class Bar:
        total = n = 0
        desc = ""

        def set_description(self, d):
            self.desc = d

        def refresh(self):
            pass

    lines = (
        "qemu-x86_64: warning: TCG doesn't support requested feature: CPUID.01H:ECX.vmx [bit 5]\n"
        f"{emulate._PROGRESS}3 9 the pipeline's lite1\n"
        "Traceback (most recent call last):\n"
    )
    bar, kept = Bar(), []
    emulate._read_child(io.StringIO(lines), bar, kept, "Icelake-Server")
    assert kept == ["Traceback (most recent call last):\n"]
    assert (bar.n, bar.total, bar.desc) == (3, 9, "QEMU-Icelake-Server: the pipeline's lite1")


@needs_qemu
def test_an_unknown_cpu_model_is_refused_with_the_known_ones():
    with pytest.raises(emulate.EmulationError, match=r"no CPU model 'Pentium9000'; it knows: .*Icelake-Server"):
        emulate.fingerprint("Pentium9000", progress=False)


@pytest.mark.slow
@needs_qemu
def test_a_change_that_parts_the_vendors_fails_the_emulated_intel_and_names_the_first_differing_layer(tmp_path):
    """The classifier through F.linear (MKL's sgemm, which takes other code paths on an Intel CPU) instead of the
    portable linear: the emulated Intel's pipeline operations of the smallest zoo architecture part from its committed
    record and from both AMD records at the classifier's forward, and the step fails naming it."""
    (tmp_path / "sitecustomize.py").write_text(
        "import torch.nn.functional as F\n"
        "from benchmark.models import portable\n"
        "portable.Linear.forward = lambda self, x: F.linear(x, self.weight, self.bias)\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmark",
            "reproduce",
            "fingerprint",
            "--emulate",
            "Icelake-Server",
            "--models",
            "mnv3s050",
            "--no-ops",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        env=_env(PYTHONPATH=str(tmp_path)),
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "QEMU-Icelake-Server" in out.stdout and "TCG doesn't support" not in out.stdout + out.stderr
    lines = out.stdout.splitlines()
    for kind in ("QEMU-Icelake-Server", "AuthenticAMD-f25-m17"):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"vs {kind} "))
        assert "FAIL (must agree)" in lines[at]
        assert lines[at + 1].startswith("  first differing layer: mobilenetv3_small_050 48px [")
        assert lines[at + 1].endswith(": forward classifier")


@pytest.mark.slow
@needs_qemu
def test_a_cpu_without_avx2_runs_its_own_kernels_records_them_and_says_what_it_cannot_promise(tmp_path):
    """Under an emulated Nehalem (SSE4.2, no AVX): no SIGILL in the package's import, the CLI, a stage's entry, a few
    training steps, a logits pass or a cost record; train.json and the cost record say what ran (not pinned, not
    AVX2); the stage says in one line what it cannot promise."""
    cli = subprocess.run(
        [QEMU, "-cpu", "Nehalem", sys.executable, "-m", "benchmark", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )
    assert cli.returncode == 0 and "usage" in cli.stdout, cli.stderr[-2000:]
    run = subprocess.run(
        [QEMU, "-cpu", "Nehalem", sys.executable, str(ROOT / "tests/reproduce/data/no_avx2_run.py"), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(ATEN_CPU_CAPABILITY="avx2", MKL_CBWR="AVX2,STRICT"),
    )  # a pinned parent's caps
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-3000:]}"  # -4 would be SIGILL
    result = json.loads(run.stdout.strip().splitlines()[-1])
    for what in ("train_json", "returned", "cost"):
        assert result[what]["pinned"] is False and result[what]["cpu_capability"] not in ("AVX2", "AVX512"), what
        assert result[what]["numerics"] == "pinned"  # asked for, and the record says it did not take
    assert result["logits"] == [5, 10] and result["finite"]
    notes = [line for line in run.stderr.splitlines() if line.startswith("numerics: ")]
    assert len(notes) == 1, run.stderr[-2000:]
    assert "has no AVX2 and FMA" in notes[0] and "judges this run's numbers by their noise" in notes[0]


def test_ci_runs_the_matrix_of_cpu_kinds_and_setup_installs_the_emulator():
    """.ci/run: this machine's fingerprint, then the emulated Intel with AVX-512 with the pipeline's per-layer
    operations, and an AVX2-only Intel and an AVX2-only AMD with the tool's operations in the pipeline's mode (CI's
    time: issue 53 keeps .ci/run within 45 minutes); scripts/setup.sh test installs Debian's qemu-user for them."""
    ci = (ROOT / ".ci" / "run").read_text()
    steps = [line.strip() for line in ci.splitlines() if line.startswith("python -m benchmark reproduce fingerprint")]
    assert steps == [
        "python -m benchmark reproduce fingerprint",
        "python -m benchmark reproduce fingerprint --emulate Icelake-Server --all-modes",
        "python -m benchmark reproduce fingerprint --emulate Skylake-Client --no-pipeline",
        "python -m benchmark reproduce fingerprint --emulate EPYC-Milan --no-pipeline",
    ]
    assert "set -euo pipefail" in ci  # a failing step fails CI
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    test_part = setup[setup.index('if [ "$what" = test ]') : setup.index("else")]
    assert "qemu-user" in test_part and "command -v qemu-x86_64" in test_part


@needs_qemu
def test_the_scratch_runs_python_is_the_emulated_cpu_without_qemus_warnings(tmp_path):
    from benchmark.reproduce import rerun

    shim = rerun._shim(tmp_path / "bin", "Icelake-Server")
    code = (
        "import sys; from benchmark.config import numerics; print(numerics.cpu()['kind']); sys.stderr.write('a\\rb\\n')"
    )
    out = subprocess.run([str(shim), "-c", code], cwd=ROOT, capture_output=True, timeout=600, env=_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().strip() == "GenuineIntel-f6-m134"  # what the emulated CPU's CPUID says, not the host
    assert out.stderr == b"a\rb\n"  # the child's own output, tqdm's carriage returns included; QEMU's warnings gone


@pytest.mark.slow
def test_a_stage_rerun_in_a_scratch_copy_is_compared_with_the_committed_lock(capsys):
    """`reproduce stage data` here: the data stage again in a scratch copy, its output byte-identical to the
    committed dvc.lock's (the embedded suite's data do not depend on the CPU)."""
    from benchmark.cli.main import main

    assert main(["reproduce", "stage", "data"]) == 0
    out = capsys.readouterr().out
    assert "data results/data: identical" in out and "1 of 1 compared outputs byte-identical" in out


def test_the_stage_command_fails_on_a_differing_output_and_records_the_emulated_kind(tmp_path, monkeypatch, capsys):
    from benchmark.cli.main import main
    from benchmark.reproduce import cross_cpu, rerun

    machine = {
        "kind": "QEMU-Icelake-Server",
        "cpu": "Intel Xeon Processor (Icelake)",
        "emulated": True,
        "stands_for": "GenuineIntel-f6-m134",
        "host": {"kind": "AuthenticAMD-f25-m17", "cpu": "AMD EPYC"},
        "qemu": "7.2.22",
    }
    outputs = [
        {
            "stage": "train@m",
            "path": "results/checkpoints/m",
            "committed": "a",
            "fresh": "b",
            "status": "different",
            "measured": "",
        }
    ]
    counts = {
        "identical": 0,
        "different": 1,
        "measured": 0,
        "missing": 0,
        "extra": 0,
        "stale": 0,
        "compared": 1,
        "failing_stages": ["train@m"],
    }
    monkeypatch.setattr(
        rerun,
        "run",
        lambda stages, **k: {
            "stages": stages,
            "outputs": outputs,
            "counts": counts,
            "seconds": 12.0,
            "machine": machine,
            "commit": "c0ffee",
            "dirty": False,
        },
    )
    record = tmp_path / "cross_cpu.json"
    assert main(["reproduce", "stage", "train@m", "--emulate", "Icelake-Server", "--record", str(record)]) == 1
    out = capsys.readouterr().out
    assert "train@m results/checkpoints/m: different" in out and "0 of 1 compared outputs byte-identical" in out
    (entry,) = cross_cpu.load(record)
    assert entry["scope"] == "stages" and entry["emulated"] and entry["stands_for"] == "GenuineIntel-f6-m134"
    assert entry["byte_identical"] is False and entry["stages"] == ["train@m"] and entry["commit"] == "c0ffee"
