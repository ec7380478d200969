"""``python -m benchmark cluster`` without a Slurm: params ``cluster``, each stage's job, the lock's order, bad
input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from toy import BY

from benchmark.cli.main import main as cli_main
from benchmark.cluster import config
from benchmark.cluster.check import max_overlap, set_cpus
from benchmark.cluster.runs import RUNS, safe_name
from benchmark.dvcutil import lockfile


def test_resources_resolve_stage_over_kind_over_default_over_builtin():
    cfg = config.parse(
        {
            "partition": "cpu",
            "account": "lab",
            "resources": {
                "default": {"mem": "16G"},
                "train": {"time": "1-00:00:00", "partition": "gpu"},
                "train@big": {"gpus": 4, "extra": ["--qos=high"]},
            },
        }
    )
    big = config.job_spec("train@big", cfg, device="cuda", threads=2, num_workers=1)
    small = config.job_spec("train@small", cfg, device="cuda", threads=2, num_workers=1)
    ev = config.job_spec("evaluate", cfg, device="cuda", threads=2)
    assert big.sbatch_options() == [
        "--nodes=1",
        "--ntasks-per-node=1",
        "--cpus-per-task=3",
        "--mem=16G",
        "--time=1-00:00:00",
        "--gpus-per-node=4",
        "--partition=gpu",
        "--account=lab",
        "--qos=high",
    ]
    assert (
        small.resources.gpus == 1 and small.resources.partition == "gpu"
    )  # a model stage: 1 GPU when device is not cpu
    assert (ev.resources.gpus, ev.resources.partition, ev.resources.time) == (0, "cpu", config.DEFAULT_TIME)
    assert config.job_spec("train@x", config.parse(None), device="cpu").resources.gpus == 0
    assert config.job_spec("collect", cfg, device="cuda").resources.cpus == 1


def test_training_stages_get_the_training_time_limit_from_the_method_registry():
    """The methods that declare their own training (the registry's metadata, not a list of names here) get the
    12-hour limit; a method that trains nothing (MC dropout, soups) and the evaluate stage get 2 hours."""
    from benchmark.methods import registry

    declared = {
        registry.get_method(k).stage
        for k in registry.list_methods("stage")
        if registry.get_method(k).training is not None
    }
    assert {"shallow", "lora_ensemble"} <= declared
    cfg = config.parse(None)
    for stage in ("train@m", "sve-train", *(f"{s}@k" for s in declared)):
        assert config.job_spec(stage, cfg).resources.time == config.TRAIN_TIME, stage
    for stage in ("mc_dropout@k", "soup@k", "laplace@k", "evaluate", "sve@2"):
        assert config.job_spec(stage, cfg).resources.time == config.DEFAULT_TIME, stage


def test_distributed_stages_ask_for_their_nodes_processes_and_gpus():
    cfg = config.parse({"resources": {}})
    kw = dict(device="cuda", threads=2, num_workers=0, nproc_per_node=4, nnodes=2)
    train = config.job_spec("train@m", cfg, **kw)
    assert (train.nodes, train.resources.gpus, train.resources.cpus) == (2, 4, 8)
    assert "--nodes=2" in train.sbatch_options() and "--gpus-per-node=4" in train.sbatch_options()
    sve = config.job_spec("sve-train", cfg, **kw)  # not a torchrun stage: one process on one node
    assert (sve.nodes, sve.resources.gpus, sve.resources.cpus) == (1, 1, 2)


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"resources": {"train": {"mem": "lots"}}}, "mem must be a number"),
        ({"resources": {"train": {"time": "2h"}}}, "time must be minutes"),
        ({"resources": {"default": {"cpus": 0}}}, "cpus must be an integer >= 1"),
        ({"resources": {"train": {"extra": ["--qos high"]}}}, "one sbatch option written --name=value"),
        ({"resources": {"train": {"extra": ["--output=/etc/x"]}}}, "--output is set by `cluster submit` itself"),
        ({"partition": "gpu; rm -rf /"}, "partition must be a Slurm name"),
        ({"queue": "gpu"}, "unknown keys ['queue']"),
    ],
)
def test_bad_cluster_params_name_the_field(raw, message):
    with pytest.raises(ValueError, match="params.yaml: cluster") as e:
        config.parse(raw)
    assert message in str(e.value)


def test_safe_names_and_overlap():
    assert safe_name(3, "train@lite0-s1") == "03-train@lite0-s1"
    assert safe_name(12, "x/../y z") == "12-x_.._y_z"  # no folder separators: stays in the run's folders
    assert max_overlap([(0, 5), (1, 2), (3, 6), (6, 7)]) == 2
    assert max_overlap([(0, 1), (1, 2)]) == 1


LOCK = """schema: '2.0'
stages:
  data:
    cmd: d
  train@b:
    cmd: tb
  train@a:
    cmd: ta
"""


def test_reorder_puts_new_entries_in_run_order_after_the_kept_ones(tmp_path):
    lock = tmp_path / "dvc.lock"
    lock.write_text(LOCK)
    # a run that started from a lock with `data` only; train@b finished (and was written) before train@a
    assert lockfile.reorder(lock, ["data"], ["data", "train@a", "train@b"])
    assert list(yaml.safe_load(lock.read_text())["stages"]) == ["data", "train@a", "train@b"]
    assert lock.read_text() == LOCK.replace("  train@b:\n    cmd: tb\n", "") + "  train@b:\n    cmd: tb\n"
    before = lock.stat().st_mtime_ns
    assert not lockfile.reorder(lock, ["data"], ["data", "train@a", "train@b"])  # in order: not rewritten
    assert lock.stat().st_mtime_ns == before
    lock.write_text(LOCK)  # entries the run found keep their place, even out of run order
    assert not lockfile.reorder(lock, ["data", "train@b", "train@a"], ["data", "train@a", "train@b"])


def test_set_cpus_keeps_the_rest_of_params(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("threads: 2   # a comment\ncluster:\n  partition: gpu\n")
    set_cpus(p, 1)
    assert "# a comment" in p.read_text()
    assert yaml.safe_load(p.read_text())["cluster"] == {"partition": "gpu", "resources": {"default": {"cpus": 1}}}


def test_submit_bad_input_is_one_line_and_exit_2(toy_repo, monkeypatch, capsys):
    monkeypatch.chdir(toy_repo)
    # no sbatch on PATH: nothing submitted, no run folder
    monkeypatch.setenv("PATH", str(Path(os.sys.executable).parent))
    assert cli_main(["cluster", "submit"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: sbatch not found on PATH") and "\n" not in err
    assert not (toy_repo / RUNS).exists()
    # what would be submitted (no Slurm needed): one job per stage, in run order, with its upstream stages
    assert cli_main(["cluster", "submit", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": --")[0] for line in out] == ["a", "b@x", BY, "c", "d"]
    assert out[3].endswith(f"(after b@x, {BY})") and "--cpus-per-task=1" in out[0]
    # bad params, a file that is no pipeline, an unknown run: one line each
    params = toy_repo / "params.yaml"
    params.write_text(params.read_text().replace("cpus: 1", "{cpus: 1, mem: lots}").replace("default:\n", "default: "))
    assert cli_main(["cluster", "submit", "--dry-run"]) == 2
    assert "params.yaml: cluster: resources.default" in capsys.readouterr().err
    params.write_text(params.read_text() + "cluster: {}\n")  # a duplicate key: DVC's own error, one line too
    assert cli_main(["cluster", "submit", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "params.yaml" in err and "\n" not in err
    assert cli_main(["cluster", "submit", "params.yaml"]) == 2
    assert "params.yaml: not a pipeline file" in capsys.readouterr().err
    assert cli_main(["cluster", "status"]) == 2
    assert "no cluster run yet" in capsys.readouterr().err
    assert cli_main(["cluster", "status", "--run", "../x"]) == 2
    assert not list((toy_repo / RUNS).glob("*/run.json"))  # no run (only the lock the stages' status was read under)


def test_the_local_checks_scratch_copy_holds_the_pipeline_and_its_lock(tmp_path):
    """`cluster local-check` (in .ci/run) starts from this copy: the checkout's files without outputs, and the
    pipeline's dvc.yaml, params.yaml and dvc.lock byte for byte (so every stage runs, in the serial lock's order)."""
    from benchmark.dvcutil.scratch import copy_checkout

    root = Path(__file__).resolve().parents[2]
    dest = tmp_path / "copy"
    copy_checkout(root, "dvc.yaml", dest)
    for name in ("dvc.yaml", "params.yaml", "dvc.lock", "benchmark/cluster/check.py"):
        assert (dest / name).read_bytes() == (root / name).read_bytes(), name
    assert not (dest / "results" / "checkpoints").exists() and not (dest / ".dvc" / "cache").exists()


def test_the_check_s_jobs_wait_passively_when_they_share_the_cores():
    """Two jobs on this machine's cores: OpenMP threads sleep when they wait (OMP_WAIT_POLICY=PASSIVE), unless the
    caller set a policy; one job at a time, or the caller's own environment, is left as it is."""
    from benchmark.cluster.check import job_env

    assert job_env(2, None, {}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert job_env(2, {"X": "1"}, {}) == {"OMP_WAIT_POLICY": "PASSIVE", "X": "1"}
    assert job_env(1, None, {}) == {}
    assert job_env(2, None, {"OMP_WAIT_POLICY": "ACTIVE"}) == {}
    assert job_env(2, {"OMP_WAIT_POLICY": "ACTIVE"}, {}) == {"OMP_WAIT_POLICY": "ACTIVE"}
