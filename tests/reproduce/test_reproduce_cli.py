"""``python -m benchmark reproduce timings|tune|pinning-cost|readme``: what each prints, writes and exits with.

``timings`` runs a real ``dvc repro`` of a one-stage project. The others are given the records their back ends
return (the back ends have their own tests: test_tune, test_pinning_cost, test_readme_results), so
that the lines a user reads, and the exit codes scripts read, are checked against those records.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.cli.main import main
from benchmark.docsgen import readme
from benchmark.models import tune
from benchmark.reproduce import pinning_cost, timing

STAGE = (
    'import benchmark, pathlib, sys\npathlib.Path("out.txt").write_text("made")\nsys.exit(int(sys.argv[1]))\n'  # timed
)


def _project(root: Path, code: int) -> Path:
    (root / "pipelines").mkdir(parents=True)
    (root / "pipelines" / "train.py").write_text(STAGE)
    (root / "dvc.yaml").write_text(
        f"stages:\n  train:\n    cmd: python pipelines/train.py {code} --model m\n"
        "    deps: [pipelines/train.py]\n    outs: [out.txt]\n"
    )
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q", "--no-scm"], cwd=root, check=True)
    return root


def test_timings_runs_dvc_repro_and_records_each_stage_process(tmp_path, monkeypatch, capsys):
    root = _project(tmp_path / "ok", 0)
    monkeypatch.chdir(root)
    assert main(["reproduce", "timings", "--out", "t.json", "--install-seconds", "12.34"]) == 0
    rec = timing.load(root / "t.json")
    # DVC's own name for the stage it ran (its command line alone would read train@m)
    assert [s["stage"] for s in rec["stages"]] == ["train"] and (root / "out.txt").read_text() == "made"
    assert rec["install_s"] == 12.3 and rec["command"] == "dvc repro"
    assert rec["stages"][0]["wall_s"] > 0 and rec["stages_wall_s"] <= rec["repro_wall_s"]  # the sum rounds to 0.1 s
    assert rec["dvc_overhead_s"] == pytest.approx(rec["repro_wall_s"] - rec["stages_wall_s"], abs=0.11)
    out = capsys.readouterr().out
    assert (
        f"dvc repro: {rec['repro_wall_s']} s wall ({rec['stages_wall_s']} s in 1 stage processes; "
        f"{rec['floor_ratio']}x the compute floor of {rec['compute_floor_s']} s); wrote t.json" in out
    )


def test_timings_of_a_failing_repro_write_nothing(tmp_path, monkeypatch, capsys):
    root = _project(tmp_path / "bad", 3)
    monkeypatch.chdir(root)
    assert main(["reproduce", "timings", "--out", "t.json"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: `dvc repro` failed with exit code ") and err.endswith("; no timings written\n")
    assert not (root / "t.json").exists()


def _tuning(params_lr: float) -> dict:
    grid = [
        {"lr": 0.01, "select_by": "accuracy", "val_score": 0.5, "best_epoch": 1, "wall_s": 2.0},
        {"lr": 0.1, "select_by": "accuracy", "val_score": 0.75, "best_epoch": 2, "wall_s": 3.0},
    ]
    return {"stage": "train@m", "recipe": "finetune", "set": {}, "budget": {}, "grid": grid, "params_lr": params_lr}


@pytest.mark.parametrize("params_lr, code", [(0.1, 0), (0.01, 1)])
def test_tune_prints_the_grid_writes_the_record_and_says_when_params_lr_is_not_the_best(
    tmp_path, monkeypatch, capsys, params_lr, code
):
    monkeypatch.setattr(tune, "tune", lambda stage, recipe, lrs, sets: _tuning(params_lr))
    out_file = tmp_path / "tuning.json"
    assert (
        main(
            [
                "reproduce",
                "tune",
                "--stage",
                "train@m",
                "--recipe",
                "finetune",
                "--lr",
                "0.01",
                "0.1",
                "--out",
                str(out_file),
            ]
        )
        == code
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        "lr 0.01: validation accuracy 0.5000 (epoch 1, 2 s)",
        "lr 0.1: validation accuracy 0.7500 (epoch 2, 3 s)",
    ]
    assert json.loads(out_file.read_text())["finetune"]["params_lr"] == params_lr
    expected = (
        "params.yaml's lr 0.1 is the best of the grid"
        if code == 0
        else "recipes.finetune.lr = 0.01 in params.yaml, but lr 0.1 scored best on validation (0.7500)"
    )
    assert lines[2] == f"wrote {out_file}; {expected}"


def test_tune_bad_assignment_exits_2(capsys):
    assert main(["reproduce", "tune", "--stage", "train@m", "--recipe", "r", "--lr", "0.1", "--set", "no-equals"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_pinning_cost_prints_the_medians_and_their_ratio(tmp_path, monkeypatch, capsys):
    record = {
        "median": {"pinned": {"wall_s": 12.0, "cpu_s": 20.0}, "native": {"wall_s": 10.0, "cpu_s": 16.0}},
        "ratio": {"wall_s": 1.2, "cpu_s": 1.25},
    }
    monkeypatch.setattr(pinning_cost, "measure", lambda stage, repeats: dict(record, stage=stage, repeats=repeats))
    out_file = tmp_path / "numerics.json"
    assert main(["reproduce", "pinning-cost", "--stage", "train@m", "--repeats", "3", "--out", str(out_file)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"train@m: pinned 12.0 s wall / 20.0 s CPU, native 10.0 s / 16.0 s (pinned / native: 1.20 wall, 1.25 CPU); "
        f"wrote {out_file}"
    )
    assert json.loads(out_file.read_text())["repeats"] == 3
    monkeypatch.setattr(pinning_cost, "measure", lambda stage, repeats: (_ for _ in ()).throw(ValueError("no stage x")))
    assert main(["reproduce", "pinning-cost", "--stage", "x", "--out", str(out_file)]) == 2
    assert capsys.readouterr().err.strip() == "error: no stage x"


def test_readme_check_write_and_errors(monkeypatch, capsys):
    monkeypatch.setattr(readme, "stale", lambda files: ["timings"])
    assert main(["reproduce", "readme", "--check", "--file", "README.md"]) == 1
    assert (
        "generated blocks ['timings'] are stale; run `python -m benchmark reproduce readme --write`"
        in capsys.readouterr().err
    )
    monkeypatch.setattr(readme, "stale", lambda files: [])
    assert main(["reproduce", "readme", "--check", "--file", "README.md"]) == 0
    assert capsys.readouterr().out.strip() == "README.md: generated blocks up to date"
    monkeypatch.setattr(readme, "update", lambda files: ["README.md"])
    assert main(["reproduce", "readme", "--write", "--file", "README.md", "--file", "docs/results.md"]) == 0
    assert capsys.readouterr().out.strip() == "README.md, docs/results.md: rewrote README.md"
    monkeypatch.setattr(readme, "update", lambda files: [])
    assert main(["reproduce", "readme", "--write"]) == 0
    assert capsys.readouterr().out.strip().endswith(": up to date")
    monkeypatch.setattr(readme, "stale", lambda files: (_ for _ in ()).throw(FileNotFoundError("no README.md")))
    assert main(["reproduce", "readme", "--check"]) == 2
    assert capsys.readouterr().err.strip() == "error: no README.md"


def test_timings_refuse_fewer_than_one_stage_at_a_time(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "timings", "--jobs", "0", "--compare-jobs", "-1", "--out", "t.json"]) == 2
    assert capsys.readouterr().err == (
        "error: --jobs must be at least 1, got 0; --compare-jobs must be at least 1, got -1\n"
    )
    assert not (tmp_path / "t.json").exists()
