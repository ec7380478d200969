"""Kills and leftovers (issue 13.1, 13.2): a SIGKILL at every write boundary of training, logits, a method
stage and evaluation, then a rerun, gives byte-identical outputs; leftovers of killed writes are never read
as results and are removed by the next write; a corrupted cached unit is recomputed.

The stages run as their scripts (``pipelines/*.py``) in child processes forked from a fork server that has
imported the package once; ``UQBENCH_TEST_KILL_AT=k`` makes a child SIGKILL itself at its k-th write
boundary (:func:`benchmark.storage.atomic.write_boundary`): nothing of it runs after that, as after a real kill.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import runpy
import shutil
import sys
import tempfile
from contextlib import chdir
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipeline"))
from baseline_tree import ZOO, make_tree, params  # noqa: E402

from benchmark.evaluation import stage as evaluate
from benchmark.stages import method_stage  # noqa: E402
from benchmark.stages.logits_stage import cost, logits_and_cost  # noqa: E402
from benchmark.stages.params_config import load_params  # noqa: E402
from benchmark.stages.per_model import model_stage, train  # noqa: E402
from benchmark.storage import store  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {  # stage -> (script, arguments, what it writes)
    "train": ("train.py", ["--model", "r"], ["results/checkpoints/r"]),
    "logits": ("logits.py", ["--model", "r"], ["results/logits/r"]),
    "mc_dropout": ("method.py", ["--kind", "mc_dropout", "--key", "mcd-t"], ["results/methods/mcd-t"]),
    "evaluate": (
        "evaluate.py",
        [],
        ["results/metrics.csv", "results/paired.csv", "results/models.csv", "results/summary.json", "results/units"],
    ),
}
RUN_LOGS = {"results/units/last_run.json"}  # how many units this run computed: differs after a resume by design
MEASURED = {"results/methods/mcd-t/cost.json": "throughput"}  # a timing, measured on every run


def _tree(root: Path) -> dict:
    """The baseline test tree with two models (``r`` untrained), an MC dropout entry and params.yaml."""
    make_tree(root, zoo={"t-s0": ZOO["t-s0"], "r": ZOO["r"]}, checkpoints=("t-s0",))
    p = params(root, mc_dropout={"mcd-t": {"model": "t-s0", "samples": 2, "p": 0.3, "seed": 1, "variant": "post-hoc"}})
    p["zoo"] = "zoo.yaml"
    p["recipes"]["scratch"]["epochs"] = 2  # two epochs: a resume between epochs
    p["evaluate"]["deep_ensembles"] = []
    (root / "params.yaml").write_text(yaml.safe_dump(p))
    return p


def _child(script: str, argv: list, cwd: str, env: dict) -> None:
    os.chdir(cwd)
    os.environ.update(env)
    sys.argv = [script, "--params", "params.yaml", "--no-progress", *argv]
    runpy.run_path(script, run_name="__main__")


_CTX = None


def _context():
    global _CTX
    if _CTX is None:
        _CTX = multiprocessing.get_context("forkserver")
        # what the four stage scripts import (so each of the ~130 children imports nothing more): the stages, their
        # entry and the suites' data modules, fvcore (the methods' cost), and the writers' own lazy imports
        _CTX.set_forkserver_preload(
            [
                "benchmark.stages.entry",
                "benchmark.stages.per_model",
                "benchmark.stages.logits_stage",
                "benchmark.stages.method_stage",
                "benchmark.stages.embedded_source",
                "benchmark.methods.mc_dropout",
                "benchmark.evaluation.stage",
                "benchmark.data.embedded",
                "timm",
                "fvcore.nn",
                "pandas",
                "pandas.io.formats.csvs",
                "pyarrow.pandas_compat",
                "safetensors.numpy",
                "sklearn.metrics",
            ]
        )
    return _CTX


def run_stage(root: Path, stage: str, *, kill_at: int | None = None, log: Path | None = None) -> int:
    """Exit code of the stage script run in ``root`` (-9: it was killed)."""
    script, argv, _ = SCRIPTS[stage]
    env = {"OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1"}
    if kill_at is not None:
        env["UQBENCH_TEST_KILL_AT"] = str(kill_at)
    if log is not None:
        env["UQBENCH_TEST_BOUNDARY_LOG"] = str(log)
    proc = _context().Process(target=_child, args=(str(ROOT / "pipelines" / script), argv, str(root), env))
    proc.start()
    proc.join(300)
    if proc.is_alive():
        proc.kill()
        raise AssertionError(f"stage {stage} hung in {root}")
    return proc.exitcode


def snapshot(root: Path, stage: str) -> dict[str, bytes]:
    """Every file (hidden ones included) the stage writes, by path; run logs left out, timings blanked."""
    out = {}
    for rel in SCRIPTS[stage][2]:
        path = root / rel
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            key = f.relative_to(root).as_posix()
            if key in RUN_LOGS:
                continue
            data = f.read_bytes()
            if key in MEASURED:
                data = json.dumps({**json.loads(data), MEASURED[key]: None}, sort_keys=True).encode()
            out[key] = data
    return out


@pytest.fixture(scope="module")
def scratch():
    """A private temporary folder: pytest's basetemp is pruned by other pytest sessions of the same user
    when they start, and this module's tests run for minutes."""
    folder = Path(tempfile.mkdtemp(prefix="uqbench-kill-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def base(scratch):
    root = scratch / "base"
    _tree(root)
    return root


@pytest.mark.slow
def test_a_kill_at_every_write_boundary_resumes_to_identical_outputs(base, scratch):
    tmp_path = scratch / "every"
    tmp_path.mkdir()
    before = base
    for stage in SCRIPTS:
        ref = tmp_path / f"{stage}-ref"
        shutil.copytree(before, ref)
        log = tmp_path / f"{stage}.log"
        assert run_stage(ref, stage, log=log) == 0, f"{stage}: the uninterrupted run failed"
        boundaries = log.read_text().splitlines()
        expected = snapshot(ref, stage)
        assert expected and len(boundaries) >= 3, (stage, boundaries)
        for k, label in enumerate(boundaries, 1):
            work = tmp_path / f"{stage}-{k}"
            shutil.copytree(before, work)
            assert run_stage(work, stage, kill_at=k) == -9, f"{stage}: no kill at boundary {label}"
            assert run_stage(work, stage) == 0, f"{stage}: the rerun after a kill at {label} failed"
            got = snapshot(work, stage)
            assert sorted(got) == sorted(expected), (
                f"{stage}, killed at {label}: other files {sorted(set(got) ^ set(expected))}"
            )
            changed = [f for f in expected if got[f] != expected[f]]
            assert not changed, f"{stage}, killed at {label}: {changed} differ from an uninterrupted run" + "".join(
                f"\n{got[f][:2000]!r}\n{expected[f][:2000]!r}" for f in changed
            )
            shutil.rmtree(work)
        if stage == "logits":  # the other model's logits and both costs are inputs of the later stages
            with chdir(ref):
                p = load_params("params.yaml")
                logits_and_cost(model_stage(p, "t-s0"), with_cost=False, progress=False)
                for name in ("t-s0", "r"):
                    cost(model_stage(p, name))
        before = ref


@pytest.fixture(scope="module")
def evaluated(base, scratch):
    """The tree with every stage run once (in this process) and its evaluate outputs."""
    root = scratch / "evaluated"
    shutil.copytree(base, root)
    with chdir(root):
        p = load_params("params.yaml")
        train(model_stage(p, "r"), progress=False)
        for name in ("t-s0", "r"):
            logits_and_cost(model_stage(p, name), progress=False)
        method_stage.run(p, "mc_dropout", "mcd-t", progress=False)
        evaluate.run(p, progress=False)
    return root, p, {name: (root / "results" / name).read_bytes() for name in ("metrics.csv", "paired.csv")}


def test_leftovers_of_killed_writes_are_never_read_as_results(evaluated):
    root, p, expected = evaluated
    methods, logits = root / "results" / "methods", root / "results" / "logits" / "r"
    leftovers = [methods / ".mcd-t.k3x_9a2b", methods / ".mcd-t.old-4242", methods / ".mcd-t.q1w2e3r4"]
    for d in leftovers[:2]:
        shutil.copytree(methods / "mcd-t", d)  # complete copies: as a kill after the folder was written leaves them
    leftovers[2].mkdir()
    (leftovers[2] / "cost.json").write_text("{not json")  # half written
    stray = logits / ".test.safetensors.a1b2c3d4.safetensors"
    shutil.copy(logits / "test.safetensors", stray)
    shutil.copy(logits / "val.safetensors", logits / ".val.safetensors.zzzzzzzz.safetensors")
    with chdir(root):
        stats = evaluate.run(p, progress=False)
    res = pd.read_csv(root / "results" / "metrics.csv", keep_default_na=False)
    keys = ["family", "method", "members", "base", "sidekick", "split", "fit", "confidence", "metric"]
    assert not res.duplicated(keys).any()
    assert (res["family"] == "mc_dropout").any() and stats["units"] == 4  # 2 singles, 1 duo, 1 method
    assert (root / "results" / "metrics.csv").read_bytes() == expected["metrics.csv"]
    with chdir(root):  # the next write of the method output and of the logits folder removes them
        method_stage.run(p, "mc_dropout", "mcd-t", progress=False)
        logits_and_cost(model_stage(p, "r"), with_cost=False, progress=False)
    assert sorted(p.name for p in methods.iterdir()) == ["mcd-t"]
    assert not [f for f in logits.iterdir() if f.name.startswith(".")]


def test_clean_leftovers_removes_only_those_of_its_target(tmp_path):
    target = tmp_path / "a.csv"
    mine = [tmp_path / ".a.csv.abcd_123.csv", tmp_path / ".a.csv.old-77"]
    others = [
        tmp_path / ".a.csvx.abcd1234.csv",
        tmp_path / ".b.csv.abcd1234.csv",
        tmp_path / ".a.csv.old-x",
        tmp_path / "a.csv.abcd1234.csv",
        tmp_path / ".a.csv.short.csv",
    ]
    for f in mine + others:
        f.write_text("x")
    with store.atomic_path(target) as tmp:
        assert not any(f.exists() for f in mine), "cleaned when the write starts"
        tmp.write_text("new")
    assert target.read_text() == "new" and all(f.exists() for f in others)
    assert store.listing(tmp_path, "*.csv") == [target, tmp_path / "a.csv.abcd1234.csv"]


def test_corrupted_cached_unit_is_recomputed_not_used(evaluated):
    root, p, _ = evaluated
    units = root / "results" / "units"
    with chdir(root):
        evaluate.run(p, progress=False)  # (an earlier test may have rewritten the method output: a new throughput)
    expected = {"metrics.csv": (root / "results" / "metrics.csv").read_bytes()}
    rows = sorted(units.glob("*.paired.csv"))[0].name.split(".")[0]
    for f in units.glob(f"{rows}.*"):  # edit the cached rows of one unit; its other files stay
        if f.name == f"{rows}.csv":
            text = f.read_text()
            f.write_text(text.replace(",0.", ",0.9", 1))
            assert f.read_text() != text
    with chdir(root):
        stats = evaluate.run(p, progress=False)
    assert stats["computed"] == 1 and stats["reused"] == stats["units"] - 1
    assert (root / "results" / "metrics.csv").read_bytes() == expected["metrics.csv"]
    (units / f"{rows}.sha256").write_text("{}")  # a manifest that does not match is not trusted either
    with chdir(root):
        assert evaluate.run(p, progress=False)["computed"] == 1
    (units / f"{rows}.sha256").unlink()  # nor a unit without one (e.g. killed before it was written)
    with chdir(root):
        assert evaluate.run(p, progress=False)["computed"] == 1
    assert (root / "results" / "metrics.csv").read_bytes() == expected["metrics.csv"]
