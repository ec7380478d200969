"""``python -m benchmark run --jobs N`` (the cluster runner's local executor, benchmark/cluster/parallel.py) on the toy
pipeline (tests/cluster/toy.py): independent stages at the same time, a failure stops what depends on it, and a
second run ends in the dvc.lock and cache of a serial ``dvc repro``, byte for byte. No Slurm needed. Then
``reproduce dvc-share`` (benchmark/reproduce/dvc_share.py) on the finished toy run: every stage replaced by a copy of
its outputs, ``dvc repro`` and the local run timed from a clean copy, leaving the same lock."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
import yaml
from toy import BY, until

from benchmark.cli.main import main as cli_main
from benchmark.cluster.check import max_overlap
from benchmark.cluster.runs import Run
from benchmark.dvcutil.scratch import ScratchError
from benchmark.reproduce import dvc_share

pytestmark = pytest.mark.slow  # a DVC process per stage: a second or two each


def _lock_status_cache(repo: Path) -> tuple[str, str, set[str]]:
    status = subprocess.run(["python", "-m", "dvc", "status"], cwd=repo, capture_output=True, text=True).stdout
    cache = {p.relative_to(repo).as_posix() for p in (repo / ".dvc" / "cache").rglob("*") if p.is_file()}
    return (repo / "dvc.lock").read_text(), status.strip(), cache


def _state(run: Run, stage: str) -> str | None:
    return (run.state(stage) or {}).get("status")


def test_two_at_a_time_a_failure_and_a_second_run_give_the_serial_dvc_lock_and_cache(
    toy_repo, toy_serial, monkeypatch, capsys
):
    monkeypatch.chdir(toy_repo)
    (toy_repo / "hold-b-x").touch()  # b@x ends after b@Y: its dvc.lock entry is written last, then put in run order
    (toy_repo / "fail-c").touch()
    result = {}
    runner = threading.Thread(target=lambda: result.update(rc=cli_main(["run", "--jobs", "2"])))
    runner.start()
    run = until(lambda: Run.latest(toy_repo, "dvc.yaml"), 60, "the run's folder")
    until(lambda: _state(run, BY) == "done" and (toy_repo / "started-b-x").exists(), 120, "b@Y done while b@x runs")
    (toy_repo / "hold-b-x").unlink()
    runner.join(180)
    assert result == {"rc": 1}  # c failed: not complete
    assert [s["name"] for s in run.stages] == ["a", "b@x", BY, "c", "d"] and run.manifest["executor"] == "local"
    assert {s: _state(run, s) for s in ("a", "b@x", BY, "c", "d")} == {
        "a": "done",
        "b@x": "done",
        BY: "done",
        "c": "failed",
        "d": "cancelled",
    }
    assert max_overlap([(run.state(s)["started"], run.state(s)["ended"]) for s in ("b@x", BY)]) == 2  # both at once
    assert run.state("d")["message"] == "upstream stage c failed" and not (toy_repo / "d.txt").exists()
    assert "gate: c fails" in run.log("c").read_text()
    assert f"stage c failed: log {run.log('c')}" in capsys.readouterr().out
    assert not list(toy_repo.parent.rglob("pwned"))  # stage names reach the jobs as arguments, never through a shell
    assert run.summary()["not_up_to_date"] == ["c", "d"]

    (toy_repo / "fail-c").unlink()
    assert cli_main(["run", "-j", "3"]) == 0
    second = Run.latest(toy_repo, "dvc.yaml")
    assert [s["name"] for s in second.stages] == ["c", "d"] and second.summary()["complete"]  # what was left
    lock, status, cache = _lock_status_cache(toy_repo)
    assert (lock, status, cache) == _lock_status_cache(toy_serial) and "up to date" in status  # byte for byte
    capsys.readouterr()
    assert cli_main(["run"]) == 0 and "nothing to do" in capsys.readouterr().out

    # DVC's share, on this finished run: the stages replaced by copies of their outputs, both runners, the same lock
    copy = dvc_share.replay_copy(toy_repo, toy_repo.parent / "replay")
    cmd = yaml.safe_load((copy / "dvc.yaml").read_text())["stages"]["c"]["cmd"]
    assert cmd == f'mkdir -p "$(dirname c.txt)" && cp -a {toy_repo}/c.txt c.txt'  # no gate, no work: a copy
    rec = dvc_share.measure(toy_repo, jobs=(2,), repeats=1, workdir=toy_repo.parent)
    assert rec["stages"] == 5 and rec["lock_bytes"] > 0  # the runners left the same dvc.lock (else RuntimeError)
    assert [(r["runner"], r["jobs"]) for r in rec["runs"]] == [("dvc repro", 1), ("benchmark run", 2)]
    assert all(r["wall_s"] > 0 and r["cpu_s"] > 0 for r in rec["runs"])
    table = dvc_share.table(rec)
    assert "| `dvc repro` |" in table and "| `python -m benchmark run --jobs 2` |" in table and "5 stages" in table
    assert not (toy_repo.parent / "dvc-share").exists()  # the scratch copy is removed


def test_bad_jobs_and_a_path_that_is_no_pipeline_are_one_line(toy_repo, monkeypatch, capsys):
    with pytest.raises(ScratchError, match=r"no a.txt \(stage a\); run the pipeline first"):
        dvc_share.replay_copy(toy_repo, toy_repo.parent / "early")  # nothing to replay before a run
    monkeypatch.chdir(toy_repo)
    assert cli_main(["run", "--jobs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --jobs must be at least 1, got 0"
    assert cli_main(["run", "nowhere/dvc.yaml"]) == 2
    assert "not a pipeline file" in capsys.readouterr().err


def test_the_main_job_measure_compares_the_other_runner_in_a_clean_copy(toy_repo, toy_serial):
    """``reproduce timings --jobs 2 --compare-jobs 1`` (scripts/measure-main-job.sh): the README's runner, then
    ``dvc repro`` in a clean copy of the checkout, whose outputs must be the first run's; a copy that gives other
    outputs fails."""
    from benchmark.reproduce import timing

    rec = timing.run_repro(toy_repo / "first.json", cwd=toy_repo, jobs=2)
    assert rec["command"] == "python -m benchmark run --jobs 2"
    assert 0 < rec["dvc_jobs_cpu_s"] <= rec["dvc_cpu_s"]  # the 5 stages' jobs (DVC's work), within all the run's
    timing.compare_run(rec, toy_repo, toy_repo.parent / "second", jobs=1)
    serial = rec["serial"]
    assert serial["command"] == "dvc repro" and serial["jobs"] == 1 and serial["repro_wall_s"] > 0
    assert serial["outputs"]["identical"] == 5 and not serial["outputs"]["failing_stages"]
    assert _lock_status_cache(toy_repo.parent / "second")[0] == _lock_status_cache(toy_serial)[0]

    (toy_repo / "fail-c").write_text("")  # the copy's stage c fails: no comparison, a clear error
    with pytest.raises(RuntimeError, match="failed with exit code"):
        timing.compare_run(rec, toy_repo, toy_repo.parent / "third", jobs=1)


def test_a_stage_whose_inputs_changed_runs_again_and_never_takes_its_old_outputs(toy_repo, monkeypatch):
    """A second run after an edit upstream: every stage below it runs on the new inputs (or takes DVC's run cache's
    outputs of exactly those inputs), never dvc.lock's outputs of the old ones. Before the fix, b@x, b@<Y>, c and d
    kept their old outputs ("restored from DVC's run cache") and dvc.lock recorded them with the new inputs, so that
    `dvc status` called the stale files up to date."""
    monkeypatch.chdir(toy_repo)
    assert cli_main(["run"]) == 0
    assert (toy_repo / "d.txt").read_text().splitlines()[
        0
    ] == f"seed {yaml.safe_load(Path('params.yaml').read_text())['data']['seed']}"
    params = yaml.safe_load((toy_repo / "params.yaml").read_text())
    params["data"]["seed"] += 1
    (toy_repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert cli_main(["run"]) == 0
    second = Run.latest(toy_repo, "dvc.yaml")
    assert [s["name"] for s in second.stages] == ["a", "b@x", BY, "c", "d"]
    new = f"seed {params['data']['seed']}"
    for out in ("a.txt", "b-x.txt", "b-y.txt", "c.txt", "d.txt"):
        assert (toy_repo / out).read_text().splitlines()[0] == new, out
    assert not [s for s in ("b@x", BY, "c", "d") if second.state(s)["message"]]  # each ran: nothing restored
    status = subprocess.run(["python", "-m", "dvc", "status"], cwd=toy_repo, capture_output=True, text=True).stdout
    assert "up to date" in status

    (toy_repo / "a.txt").unlink()  # outputs gone, inputs as dvc.lock records them: DVC's cache gives them back
    (toy_repo / "d.txt").unlink()
    assert cli_main(["run"]) == 0
    third = Run.latest(toy_repo, "dvc.yaml")
    messages = {s["name"]: third.state(s["name"])["message"] for s in third.stages}
    assert messages == {
        "a": "restored from the run cache",
        "b@x": "up to date",
        BY: "up to date",
        "c": "up to date",
        "d": "restored from the run cache",
    }
    assert (toy_repo / "a.txt").read_text().splitlines()[0] == new == (toy_repo / "d.txt").read_text().splitlines()[0]


def test_a_missing_input_fails_its_stage_in_one_line_and_keeps_its_outputs(toy_repo, monkeypatch, capsys):
    monkeypatch.chdir(toy_repo)
    pipeline = yaml.safe_load((toy_repo / "dvc.yaml").read_text())
    pipeline["stages"]["e"] = {"cmd": "cat input.txt > e.txt", "deps": ["input.txt"], "outs": ["e.txt"]}
    (toy_repo / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    (toy_repo / "input.txt").write_text("one\n")
    assert cli_main(["run"]) == 0
    (toy_repo / "input.txt").unlink()
    capsys.readouterr()
    assert cli_main(["run"]) == 1
    run = Run.latest(toy_repo, "dvc.yaml")
    assert run.state("e")["status"] == "failed"
    assert run.state("e")["message"] == "a dependency is missing (dependency input.txt does not exist)"
    assert (toy_repo / "e.txt").read_text() == "one\n"  # nothing removed for a stage that could not start
