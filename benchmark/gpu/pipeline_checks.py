"""The pipeline checks of :mod:`benchmark.gpu.check`: stages through DVC and torchrun in temporary repository copies.

* :func:`check_embedded` (a): train + logits of two embedded zoo entries on the check's device through DVC,
  then the logits stage again with ``device: cpu`` from the same checkpoints; the logits must agree.
* :func:`benchmark.gpu.torchrun_check.check_torchrun` (c): the train stage (one step) and the logits stage under
  torchrun (NCCL on CUDA, gloo on the CPU), and a DDP + SyncBatchNorm step
  (``python -m benchmark.gpu.torchrun_check ddp-step``).
* :func:`benchmark.gpu.caltech_check.check_caltech` (e): the Caltech-256 fixture suite through DVC.

This module holds check (a) and what the three share: running a command, copying the repository, ``dvc init``,
comparing logits. Without DVC installed, (a) runs the same stage scripts one after the other (what ``dvc repro``
would run); (e) is skipped. A check whose Python packages are missing is skipped and names them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmark.gpu.common import AGREE_MIN, ROOT, SOFTMAX_TOL, Ctx, Row

MODELS = ("mnv3s050", "resnet-test")  # models trained from scratch: no weight package needed
# the embedded zoo's scratch sidekick, and timm's test ResNet (BatchNorm, seconds to train) defined here
EXTRA = {
    "resnet-test": {
        "arch": "test_resnet",
        "init": "scratch",
        "img_size": 32,
        "seed": 0,
        "recipe": "scratch",
        "role": "sidekick",
    }
}
DDP_MODEL = "ddp-bn"  # a copy of resnet-test (BatchNorm) trained one step under torchrun
EMBEDDED_NEEDS = ("mlxtend", "sklearn", "animal_mnist", "timm", "safetensors")
IGNORE = shutil.ignore_patterns("__pycache__", "results", "reports", "dvc.lock", "cache", "tmp", "config.local")


def missing(*modules: str) -> list[str]:
    """The modules of ``modules`` that cannot be imported here."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def run(cmd, cwd: Path, timeout: float) -> tuple[int, str, float]:
    """(exit status, last lines of the output, seconds) of ``cmd``; ``python`` on PATH is this interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "UQBENCH_DATA"}
    env.update(
        HF_HUB_OFFLINE="1",
        TQDM_DISABLE="1",
        PYTHONUNBUFFERED="1",
        DVC_NO_ANALYTICS="1",  # no DVC daemon in the folder
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
    )
    t = time.monotonic()
    try:
        proc = subprocess.run(
            [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=max(1.0, timeout)
        )
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f} s", time.monotonic() - t
    out = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-60:])
    if proc.returncode:  # the end of a failing command's output, for the log of the run
        print(
            f"    $ {' '.join(map(str, cmd))}  (in {cwd}) exited with {proc.returncode}:\n"
            + "\n".join("    | " + ln for ln in out.splitlines()[-25:]),
            flush=True,
        )
    return proc.returncode, out, time.monotonic() - t


def last_error(out: str) -> str:
    """The most telling line of a failed command's output: a stage's ``error:`` line, else the last exception."""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("error:")]
    raised = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Interrupt)\b", ln)]
    return (ours or raised or lines or ["no output"])[-1][:200]


def copy_repo(dst: Path, suites=()) -> Path:
    """What the stages need: code, stage scripts, zoos; the embedded pipeline's dvc.yaml, or else the named suite files
    and folders (DVC parses every dvc.yaml of a project, and the embedded one's params.yaml is not copied)."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("benchmark", "pipelines", "zoo"):
        shutil.copytree(ROOT / name, dst / name, ignore=IGNORE)
    if not suites:
        shutil.copy(ROOT / "dvc.yaml", dst / "dvc.yaml")
    (dst / "suites").mkdir()
    for s in suites:
        shutil.copy(ROOT / "suites" / f"{s}.yaml", dst / "suites")
        shutil.copytree(ROOT / "suites" / s, dst / "suites" / s, ignore=IGNORE)
    return dst


def dvc_init(root: Path) -> None:
    """``dvc init`` in a git repository (``--no-scm`` where git is missing); suite folders are plain folders of it."""
    git = shutil.which("git") is not None
    cmds = (
        [["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]]
        if git
        else [[sys.executable, "-m", "dvc", "init", "-q", "--no-scm"]]
    )
    for cmd in cmds:
        code, out, _ = run(cmd, root, 60)
        if code:
            raise RuntimeError(f"{' '.join(map(str, cmd[-3:]))} failed: {last_error(out)}")


# -- (a) embedded models on the device vs the CPU -----------------------------------------------------------


def embedded_params(ctx: Ctx, device: str) -> dict:
    """params.yaml shrunk: few images, one epoch, no method stages; a one-step recipe for the torchrun check."""
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    big = ctx.gpu
    p["data"].update(
        train=512 if big else 200,
        val=200 if big else 100,
        test=1000 if big else 200,
        shift=300 if big else 100,
        ood=200 if big else 100,
        corruption_subset=100,
        corruptions=["gaussian_noise", "contrast"] if big else ["contrast"],
        severities=[1, 5] if big else [5],
    )
    for r in p["recipes"].values():
        r["epochs"] = 1
    p["recipes"]["onestep"] = {"epochs": 1, "batch_size": p["data"]["train"], "lr": 0.001}
    p.update(device=device, threads=min(8, os.cpu_count() or 1) if big else 1)
    p["sve"].update(base=MODELS[0], members=[1])
    from benchmark.methods import registry

    p["baselines"].update({kind: {} for kind in registry.list_methods("stage")})  # no method stages
    return p


def embedded_project(ctx: Ctx) -> Path:
    """A copy of the repository whose embedded zoo holds the checks' models, with a recipe of one step for the DDP
    model."""
    root = copy_repo(ctx.work / "embedded")
    zoo = yaml.safe_load((ROOT / "zoo" / "embedded.yaml").read_text())["models"]
    zoo = {**zoo, **EXTRA}
    models = {m: zoo[m] for m in MODELS}
    models[DDP_MODEL] = dict(EXTRA["resnet-test"], recipe="onestep")
    (root / "zoo" / "embedded.yaml").write_text(yaml.safe_dump({"models": models}))
    (root / "params.yaml").write_text(yaml.safe_dump(embedded_params(ctx, ctx.device.type)))
    (root / "params-cpu.yaml").write_text(yaml.safe_dump(embedded_params(ctx, "cpu")))
    return root


def compare_logits(a: Path, b: Path) -> tuple[float, float, int]:
    """(max |softmax difference|, argmax agreement, rows) over the splits of two logits folders (same ids required)."""
    from benchmark.storage import store

    diff, agree, n = 0.0, 0, 0
    files = [p.name for p in store.listing(a, "*.safetensors")]
    if not files or files != [p.name for p in store.listing(b, "*.safetensors")]:
        raise RuntimeError(f"{a} and {b} hold different splits")
    for name in files:
        x, y = store.load_logits_file(a / name), store.load_logits_file(b / name)
        if not (x.ids.tolist() == y.ids.tolist() and x.logits.shape == y.logits.shape):
            raise RuntimeError(f"{name}: ids or shapes differ between {a} and {b}")
        px, py = x.logits.double().softmax(-1), y.logits.double().softmax(-1)
        diff = max(diff, (px - py).abs().max().item())
        agree += (px.argmax(-1) == py.argmax(-1)).sum().item()
        n += px[..., 0].numel()
    return diff, agree / n, n


def agreement_rows(label: str, diff: float, agree: float, n: int) -> list[Row]:
    """The two rows of an agreement of logits: the max softmax difference and the argmax agreement, judged."""
    return [
        Row(
            f"{label}: max |Δ softmax|",
            f"{diff:.1e} ({n} rows)",
            f"< {SOFTMAX_TOL:g}",
            "pass" if diff < SOFTMAX_TOL else "fail",
        ),
        Row(
            f"{label}: argmax agreement",
            f"{100 * agree:.2f} %",
            f"> {100 * AGREE_MIN:g} %",
            "pass" if agree > AGREE_MIN else "fail",
        ),
    ]


def check_embedded(ctx: Ctx) -> None:
    """Check ``a``: the train and logits stages of the embedded zoo's check models on the device (through ``dvc repro``
    where DVC is installed), then a logits stage on the CPU from each device checkpoint."""
    lost = missing(*EMBEDDED_NEEDS)
    if lost:
        ctx.add(
            Row(
                "a embedded train + logits",
                "-",
                "runs",
                "skipped",
                f"missing Python packages: {', '.join(lost)} (carry them)",
            )
        )
        return
    dev = ctx.device.type
    if not ctx.gpu:
        ctx.add(
            Row(
                "a train + logits with device cuda vs the CPU",
                "-",
                "agree",
                "skipped",
                "no CUDA device: the same steps ran with device cpu (harness only)",
            )
        )
    root = ctx.embedded = embedded_project(ctx)
    if _embedded_on_device(ctx, root, dev):
        _embedded_cpu_logits(ctx, root, dev)


def _embedded_on_device(ctx: Ctx, root: Path, dev: str) -> bool:
    """Check ``a``'s train and logits stages of :data:`MODELS` in ``root`` on the device (through ``dvc repro`` where
    DVC is installed), adding its row; whether they ran."""
    stages = [s for m in MODELS for s in (f"train@{m}", f"logits@{m}")]
    if missing("dvc"):
        how = "stage scripts (dvc not installed)"
        cmds = [[sys.executable, "pipelines/data.py"]] + [
            [sys.executable, f"pipelines/{s.split('@')[0]}.py", "--model", s.split("@")[1]] for s in stages
        ]
    else:
        how = "dvc repro"
        dvc_init(root)
        cmds = [[sys.executable, "-m", "dvc", "repro", *stages]]
    took = 0.0
    for cmd in cmds:
        code, out, t = run(cmd, root, ctx.left())
        took += t
        if code:
            ctx.add(
                Row(
                    f"a train + logits of {', '.join(MODELS)} ({how}, device {dev})",
                    f"exit {code}",
                    "exit 0",
                    "fail",
                    last_error(out),
                )
            )
            return False
    ctx.add(Row(f"a train + logits of {', '.join(MODELS)} ({how}, device {dev})", f"{took:.0f} s", "exit 0", "pass"))
    return True


def _embedded_cpu_logits(ctx: Ctx, root: Path, dev: str) -> None:
    """Check ``a``'s logits stage on the CPU from each device checkpoint in ``root``: their agreement rows."""
    on_device = root / "results" / f"logits-{dev}"
    shutil.move(root / "results" / "logits", on_device)
    diffs = []
    for m in MODELS:
        code, out, _ = run(
            [sys.executable, "pipelines/logits.py", "--model", m, "--params", "params-cpu.yaml", "--no-progress"],
            root,
            ctx.left(),
        )
        if code:
            ctx.add(
                Row(
                    f"a logits stage on the CPU from the {dev} checkpoint of {m}",
                    f"exit {code}",
                    "exit 0",
                    "fail",
                    last_error(out),
                )
            )
            return
        diffs.append(compare_logits(on_device / m, root / "results" / "logits" / m))
    n = sum(d[2] for d in diffs)
    ctx.add(
        *agreement_rows(
            f"a logits {dev} vs cpu, same checkpoints", max(d[0] for d in diffs), sum(d[1] * d[2] for d in diffs) / n, n
        )
    )
