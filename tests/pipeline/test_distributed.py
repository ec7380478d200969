"""Stages under torchrun on the CPU (gloo): 2 processes = 1 process, a killed rank, bad params.

Run as a script under torchrun (``python -m torch.distributed.run ... test_distributed.py OUT``)
this module is the worker of :func:`test_fine_tune_and_predict_two_processes_equal_one`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file
from torch import nn

from benchmark.models import distributed
from benchmark.models.train import Recipe, fine_tune
from benchmark.stages.model_params import DistConfig
from benchmark.storage import store

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))
from baseline_tree import SIZES, make_tree, params  # noqa: E402

RECIPE = Recipe(epochs=2, batch_size=8, lr=0.01, weight_decay=1e-4, warmup_epochs=0.5, shift_pixels=1)


class _Items(torch.utils.data.Dataset):
    """(x, label, id) items with a ``labels`` attribute, like the paper suites' datasets."""

    def __init__(self, x, y):
        self.x, self.y, self.labels = x, y, y.numpy()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i], i


class _Members(nn.Module):
    """Three linear heads on flattened inputs: (B, 3, 4, 4) -> (3, B, 2)."""

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(48, 2) for _ in range(3))

    def forward(self, x):
        return torch.stack([h(x.flatten(1)) for h in self.heads])


def _data(n, seed, size=8):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, size, size, generator=g)
    return x, (x[:, 0].mean((1, 2)) > 0).long()


def _model():
    torch.manual_seed(0)  # no BatchNorm, no dropout: DDP's gradient is exactly the one-process gradient
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 64, 2))


def _fine_tunes(out: Path) -> dict[str, dict]:
    """Training runs with uneven last batches: 37 = 4x8 + 5 (split 2/3), 33 = 2x16 + 1 (a rank with no row);
    "resumed" stops after epoch 0, then a zeroed model resumes from the checkpoint."""
    val = _data(12, 9)
    runs = {
        "odd": (_data(37, 1), RECIPE),
        "one": (_data(33, 2), Recipe(epochs=1, batch_size=16, lr=0.01)),
        "dataset": (_Items(*_data(37, 1)), RECIPE),
    }
    records = {
        name: fine_tune(
            _model(),
            train,
            val if name != "dataset" else _Items(*val),
            recipe,
            seed=3,
            folder=out / name,
            fingerprint="fp",
            progress=False,
        )
        for name, (train, recipe) in runs.items()
    }
    fine_tune(
        _model(),
        _data(37, 1),
        val,
        RECIPE,
        seed=3,
        folder=out / "resumed",
        fingerprint="fp",
        progress=False,
        stop_after_epoch=0,
    )
    zeroed = _model()
    nn.init.zeros_(zeroed[0].weight)
    records["resumed"] = fine_tune(
        zeroed, _data(37, 1), val, RECIPE, seed=3, folder=out / "resumed", fingerprint="fp", progress=False
    )
    return records


def _predictions() -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    conv, members = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(2 * 36, 4)), _Members()
    x7, x1, xm = _data(7, 4)[0], _data(1, 5)[0], _data(5, 6, size=4)[0]
    return {
        "tensor": distributed.predict_logits(conv, x7, batch_size=2),
        "one_row": distributed.predict_logits(conv, x1, batch_size=2),
        "dataset": distributed.predict_logits(conv, _Items(x7, torch.zeros(7, dtype=torch.long)), batch_size=3),
        "members": distributed.predict_logits(members, xm, batch_size=2),
    }


def _worker(out: Path) -> None:
    """torchrun worker: fine-tunes and predictions; rank 0 saves the records; each rank logs what it wrote."""
    import benchmark.models.train as train_module

    torch.set_num_threads(1)
    distributed.init(DistConfig(), torch.device("cpu"))
    writes = []
    for module, fn in ((train_module, "save_weights"), (train_module.store, "write_json")):
        original = getattr(module, fn)
        setattr(module, fn, lambda path, *a, _f=original: (writes.append(str(path)), _f(path, *a))[1])
    records = _fine_tunes(out)
    preds = _predictions()
    (out / f"writes-{distributed.rank()}.txt").write_text("\n".join(writes))
    if distributed.is_main():
        torch.save({"records": records, "preds": preds}, out / "two.pt")
    distributed.shutdown()


def _run(cmd, cwd, **env):
    """``cmd`` (``python`` is the tests' warm one: tests/warm_python.py) in the tests' environment; torchrun gives
    each rank ``OMP_NUM_THREADS=1`` itself (with more than one process per node), as without the tests."""
    full = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", distributed.FAIL_RANK_ENV)}
    full.update(HF_HUB_OFFLINE="1", TQDM_DISABLE="1", PYTHONUNBUFFERED="1", **env)
    return subprocess.run(cmd, cwd=cwd, env=full, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # torchrun: two ranks
def test_fine_tune_and_predict_two_processes_equal_one(tmp_path):
    proc = _run(
        [
            "python",
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(HERE),
            str(tmp_path / "two"),
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    two = torch.load(tmp_path / "two" / "two.pt", weights_only=True)
    one_records = _fine_tunes(tmp_path / "one")
    assert set(one_records) == {"odd", "one", "dataset", "resumed"}
    for name, rec in one_records.items():
        other = two["records"][name]
        assert other["best_epoch"] == rec["best_epoch"]
        for h1, h2 in zip(rec["history"], other["history"], strict=True):
            assert h2["val_accuracy"] == h1["val_accuracy"]
            assert h2["train_loss"] == pytest.approx(h1["train_loss"], rel=1e-5)
        a, b = (
            load_file(str(tmp_path / "one" / name / "model.safetensors")),
            load_file(str(tmp_path / "two" / name / "model.safetensors")),
        )
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(b[k], a[k], rtol=1e-5, atol=1e-6, msg=f"{name}: weight {k}")
        assert sorted(p.name for p in (tmp_path / "two" / name).iterdir()) == ["model.safetensors", "train.json"]
    assert (tmp_path / "two" / "writes-1.txt").read_text() == ""  # rank 1 wrote nothing
    assert "train.json" in (tmp_path / "two" / "writes-0.txt").read_text()
    for name, z in _predictions().items():
        assert two["preds"][name].shape == z.shape
        torch.testing.assert_close(two["preds"][name], z, rtol=1e-5, atol=1e-6, msg=name)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    p = params(root)
    (root / "one.yaml").write_text(yaml.safe_dump(p))
    (root / "two.yaml").write_text(yaml.safe_dump(dict(p, distributed={"nproc_per_node": 2, "backend": "gloo"})))
    return root


def _logits_stage(root: Path, params_file: str, **env):
    return _run(
        ["python", str(ROOT / "pipelines" / "logits.py"), "--model", "t-s0", "--params", params_file, "--no-progress"],
        root,
        **env,
    )


@pytest.mark.slow  # torchrun: two ranks
def test_logits_stage_two_processes_write_the_one_process_files(tree, monkeypatch):
    from benchmark.stages.logits_stage import logits_and_cost
    from benchmark.stages.params_config import load_params
    from benchmark.stages.per_model import model_stage

    monkeypatch.chdir(tree)
    logits_and_cost(model_stage(load_params(tree / "one.yaml"), "t-s0"), with_cost=False, progress=False)
    out = tree / "results" / "logits" / "t-s0"
    one = {p.name: store.load_logits_file(p) for p in out.glob("*.safetensors")}
    proc = _logits_stage(tree, "two.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    two = {p.name: store.load_logits_file(p) for p in out.glob("*.safetensors")}
    assert sorted(two) == sorted(one) == sorted(f"{s}.safetensors" for s in SIZES if s != "train")
    for name, a in one.items():
        b = two[name]
        assert torch.equal(b.labels, a.labels) and torch.equal(b.ids, a.ids) and b.meta == a.meta
        torch.testing.assert_close(b.logits, a.logits, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.slow  # torchrun: two ranks
def test_a_killed_rank_fails_the_run_and_writes_no_logits(tree):
    folder = tree / "results" / "logits"
    shutil.rmtree(folder / "t-s0", ignore_errors=True)
    # the ranks start cold (UQBENCH_WARM=0), as outside the tests: a rank killed in a fresh interpreter is seen dead by
    # torchrun at once; one served by the tests' warm python (tests/warm_python.py) dies a relay later, through its
    # shim, and rank 0's own exit (its gather failed) may reach torchrun first
    proc = _logits_stage(tree, "two.yaml", **{distributed.FAIL_RANK_ENV: "1", "UQBENCH_WARM": "0"})
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: stage logits@t-s0 failed with 2 processes: rank 1 stopped first (killed by SIGKILL)")
    assert "no logits were written" in last
    assert "Traceback" not in proc.stderr, (
        proc.stderr
    )  # rank 0 either says its gathering failed or is stopped by torchrun first
    assert not [p.name for p in folder.iterdir() if "t-s0" in p.name]  # neither the folder nor a temporary one


def test_bad_distributed_params_are_named(tree, capsys):
    from benchmark.stages.per_model import model_stage_main

    for block, message in [
        ({"nproc_per_node": 0}, "nproc_per_node must be an integer >= 1, got 0"),
        ({"backend": "mpi"}, "backend must be one of auto, gloo, nccl, got 'mpi'"),
        ({"nprocs": 2}, "unknown keys ['nprocs']"),
        ({"nnodes": 2, "node_rank": 2}, "node_rank must be an integer in [0, 1], got 2"),
        ({"nproc_per_node": 2, "backend": "nccl"}, "backend nccl needs CUDA"),
    ]:
        bad = tree / "bad.yaml"
        bad.write_text(yaml.safe_dump(dict(params(tree), device="cpu", distributed=block)))
        assert (
            model_stage_main(
                "logits", lambda *a, **k: None, ["--params", str(bad), "--model", "t-s0"], script="logits.py"
            )
            == 2
        )
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err  # one line naming the file and the field
        assert message in err and err.startswith(
            f"error: {bad}: distributed: " if "needs CUDA" not in message else "error: params 'distributed': "
        )
    assert distributed.config(DistConfig(), "cpu") == DistConfig()  # no block: one process


def test_shards_and_torchrun_arguments(monkeypatch):
    # 7 rows over 3 ranks: 7//3 boundaries 0, 2, 4, 7 (contiguous, sizes differ by at most one)
    assert [distributed.shard_bounds(7, 3, r) for r in range(3)] == [(0, 2), (2, 4), (4, 7)]
    assert [distributed.shard_bounds(1, 2, r) for r in range(2)] == [(0, 0), (0, 1)]
    assert distributed.shard_bounds(5) == (0, 5)  # no process group: everything
    one_node = DistConfig(nproc_per_node=4)
    assert one_node.torchrun_args("s.py", ["--model", "m"]) == [
        "--nproc_per_node",
        "4",
        "--nnodes",
        "1",
        "--standalone",
        "s.py",
        "--model",
        "m",
    ]
    two_nodes = DistConfig(nproc_per_node=2, nnodes=2, master_addr="10.0.0.1", master_port=1234)
    monkeypatch.delenv("NODE_RANK", raising=False)
    monkeypatch.delenv("SLURM_NODEID", raising=False)
    with pytest.raises(ValueError, match="node_rank is null and neither"):
        two_nodes.torchrun_args("s.py", [])
    monkeypatch.setenv("SLURM_NODEID", "1")
    assert two_nodes.torchrun_args("s.py", []) == [
        "--nproc_per_node",
        "2",
        "--nnodes",
        "2",
        "--node_rank",
        "1",
        "--master_addr",
        "10.0.0.1",
        "--master_port",
        "1234",
        "s.py",
    ]
    # master_addr null: $MASTER_ADDR, the first node of a `cluster submit` job's allocation
    from_env = DistConfig(nproc_per_node=2, nnodes=2, master_addr=None)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="master_addr is null and .MASTER_ADDR is not set"):
        from_env.torchrun_args("s.py", [])
    monkeypatch.setenv("MASTER_ADDR", "node-a7")
    assert from_env.torchrun_args("s.py", [])[6:8] == ["--master_addr", "node-a7"]


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))


SIGTERM_SCRIPT = """
import os, signal, sys, threading, time
from benchmark.models import distributed
signal.signal(signal.SIGTERM, distributed._terminate)  # as init() installs it in a torchrun worker
if sys.argv[1] == "during":  # torchrun stops a worker while its stage runs: it unwinds (finally blocks, temp files)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    finally:
        print("unwound", flush=True)
else:  # ... or after its code ended, while the interpreter waits for a non-daemon thread (threading's shutdown)
    def late():
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    threading.Thread(target=late).start()
    print("main code done", flush=True)
"""


@pytest.mark.parametrize("when", ["during", "after"])
def test_sigterm_unwinds_the_stage_and_ends_quietly_after_it(tmp_path, when):
    script = tmp_path / "worker.py"
    script.write_text(SIGTERM_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), when],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if when == "during":
        assert proc.returncode == 128 + 15 and proc.stdout == "unwound\n"
    else:  # ended by the signal itself, as with no handler: no traceback from inside threading's shutdown
        assert proc.returncode == -15 and proc.stdout == "main code done\n", (proc.returncode, proc.stderr)


def test_the_sigterm_handler_decides_by_where_the_signal_lands(monkeypatch):
    """In-process (the real-process test above cannot report coverage for a process that a signal ends): inside
    threading's shutdown the handler restores the default action and sends the signal again; elsewhere it unwinds."""
    import signal
    import threading
    from types import SimpleNamespace

    calls = []
    monkeypatch.setattr(distributed.signal, "signal", lambda sig, action: calls.append(("signal", sig, action)))
    monkeypatch.setattr(distributed.os, "kill", lambda pid, sig: calls.append(("kill", pid, sig)))
    shutdown = SimpleNamespace(f_code=threading._shutdown.__code__, f_back=None)
    inner = SimpleNamespace(f_code=(lambda: None).__code__, f_back=shutdown)  # e.g. a lock wait called by it
    assert distributed._in_thread_shutdown(inner) and not distributed._in_thread_shutdown(sys._getframe())
    assert distributed._terminate(signal.SIGTERM, inner) is None
    assert calls == [("signal", signal.SIGTERM, signal.SIG_DFL), ("kill", os.getpid(), signal.SIGTERM)]
    calls.clear()
    with pytest.raises(SystemExit) as e:
        distributed._terminate(signal.SIGTERM, sys._getframe())
    assert e.value.code == 128 + signal.SIGTERM and calls == [("signal", signal.SIGTERM, signal.SIG_IGN)]


def test_a_rank_failure_is_one_error_line_and_exit_1(tree, capsys, monkeypatch):
    """What rank 0 prints when its collective fails because another rank stopped (in the kill test above that is a
    race with torchrun's SIGTERM, so checked here on its own)."""
    from benchmark.stages.per_model import model_stage_main

    monkeypatch.chdir(tree)

    def fails(stage, args):
        raise distributed.RankFailure("rank 0: gathering the logits failed (connection closed)")

    assert (
        model_stage_main(
            "logits", fails, ["--params", "one.yaml", "--model", "t-s0", "--no-progress"], script="logits.py"
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err == "error: rank 0: gathering the logits failed (connection closed)\n"


def test_a_failed_collective_becomes_one_rank_failure(monkeypatch):
    """In-process (in the kill test, whether rank 0's gather fails first or torchrun's SIGTERM lands first is a race):
    with several processes a collective's RuntimeError becomes a RankFailure saying what was going on, its first line
    without the C++ source location; a RankFailure passes as it is; in one process the error is the caller's."""
    with pytest.raises(RuntimeError, match="^boom$"):  # one process: nothing to blame on another rank
        with distributed.guard("gathering results"):
            raise RuntimeError("boom")
    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    monkeypatch.setattr(distributed, "rank", lambda: 0)
    with pytest.raises(distributed.RankFailure) as e:
        with distributed.guard("gathering results"):
            raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer\nmore")
    assert str(e.value) == (
        "rank 0: gathering results failed (Connection closed by peer); if another rank stopped, its "
        "message is the cause"
    )
    first = distributed.RankFailure("rank 1: summing the batch loss failed (x)")
    with pytest.raises(distributed.RankFailure) as e:
        with distributed.guard("gathering results"):
            raise first
    assert e.value is first
