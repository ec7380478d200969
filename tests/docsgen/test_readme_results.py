"""The README's result blocks agree with the committed results, and those results have the papers' setting."""

import functools
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark.core import noise
from benchmark.docsgen import readme, results_tables
from benchmark.dvcutil.lockfile import committed_text

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def committed():
    from benchmark.reproduce.gate import committed_bundle

    return committed_bundle(ROOT)


def _copy(tmp_path):
    """The files with generated blocks copied, the committed results and settings linked; the files of ``results/``
    as committed (HEAD: ``timings.json``, ...), never the working tree's, which a user's own run rewrites (``bash
    scripts/measure-main-job.sh``, ``dvc repro``)."""
    for f in readme.FILES:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text((ROOT / f).read_text(encoding="utf-8"), encoding="utf-8")
    for d in ("leaderboard", "params.yaml"):
        (tmp_path / d).symlink_to(ROOT / d)
    tracked = subprocess.run(
        ["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for f in tracked:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(committed_text(f, ROOT), encoding="utf-8")
    return tmp_path


def test_readme_blocks_are_generated_from_the_committed_results(tmp_path):
    stale = readme.stale(root=_copy(tmp_path))
    assert not stale, (
        f"generated blocks {stale} differ from the committed results: run `python -m benchmark reproduce readme "
        "--write`"
    )


def test_update_rewrites_a_stale_block_in_any_file_and_refuses_unknown_or_missing_blocks(tmp_path, monkeypatch):
    root = _copy(tmp_path)
    # the blocks of this copy's results, made once (2 CPU s each time; the pages change below, the results do not)
    monkeypatch.setattr(readme, "blocks", functools.lru_cache(maxsize=None)(readme.blocks))
    page = root / "docs" / "results.md"
    text = page.read_text(encoding="utf-8")
    body = text.split("<!-- generated:duos -->\n", 1)[1].split("<!-- /generated:duos -->", 1)[0]
    page.write_text(text.replace(body, "| stale | table |\n"), encoding="utf-8")
    assert readme.stale(root=root) == ["docs/results.md: duos"]
    assert readme.update(root=root) == ["docs/results.md: duos"]
    assert page.read_text(encoding="utf-8") == text and readme.stale(root=root) == []
    page.write_text(text.replace("generated:duos", "generated:nothing"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"docs/results.md: generated blocks \['nothing'\] are not generated"):
        readme.stale(root=root)
    page.write_text(
        text.replace("<!-- generated:duos -->\n" + body + "<!-- /generated:duos -->\n", ""), encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"no generated block for \['duos'\]"):
        readme.stale(root=root)


def test_every_base_beats_every_sidekick_and_stays_under_98_percent(committed):
    zoo = committed.manifest["zoo"]
    acc = results_tables._view(committed.rows)
    acc = acc[(acc["family"] == "single") & (acc["metric"] == "accuracy")].set_index("base")["value"].astype(float)
    bases = [n for n, e in zoo.items() if e.get("role") == "base"]
    sides = [n for n, e in zoo.items() if e.get("role") == "sidekick"]
    assert bases and sides
    for b in bases:
        assert acc[b] < 0.98, f"base {b}: test accuracy {acc[b]} is not under 98%"
        for s in sides:
            assert acc[b] > acc[s], f"sidekick {s} ({acc[s]}) is as accurate as base {b} ({acc[b]})"


def _row(base, metric, value, family="single", method="ts", side="", balance=math.nan):
    return dict(
        suite="embedded",
        split="test",
        family=family,
        method=method,
        base=base,
        sidekick=side,
        members=base if not side else f"{base}+{side}",
        fit="converged",
        confidence="max",
        metric=metric,
        value=value,
        ci_low=math.nan,
        ci_high=math.nan,
        gflops=0.5,
        balance=balance,
    )


def _paired(base, side, metric, diff, half):
    return dict(
        split="test",
        fit="converged",
        method="weighted",
        base=base,
        sidekick=side,
        metric=metric,
        diff=diff,
        ci_low=diff - half,
        ci_high=diff + half,
    )


# a seed group b0, b1, b2 and a base x of no group; AURC differences of the duos with s (seed sd 0.001, the largest:
# the fallback) and t (sd 0.0003)
ZOO = {
    "b0": {"arch": "b", "seed": 0},
    "b1": {"arch": "b", "seed": 1},
    "b2": {"arch": "b", "seed": 2},
    "x": {"arch": "x", "seed": 0},
    "s": {"arch": "s", "seed": 0},
    "t": {"arch": "t", "seed": 0},
}
ALONE = {"b0": 0.020, "b1": 0.022, "b2": 0.024, "x": 0.030}
DIFF = {
    ("b0", "s"): -0.006,
    ("b1", "s"): -0.004,
    ("b2", "s"): -0.005,
    ("b0", "t"): 0.0002,
    ("b1", "t"): -0.0004,
    ("b2", "t"): -0.0001,
    ("x", "s"): -0.003,
    ("x", "t"): -0.0005,
}


def _duo_rows():
    rows = [_row(b, "aurc", v) for b, v in ALONE.items()]
    rows += [_row(b, "aurc", ALONE[b] + d, "duo", "weighted", k, 0.1) for (b, k), d in DIFF.items()]
    return pd.DataFrame(rows)


def test_duo_table_marks_a_finding_only_outside_the_seed_noise():
    sd = float(np.std([-0.006, -0.004, -0.005], ddof=1))
    assert sd == pytest.approx(0.001)
    paired = pd.DataFrame(
        [_paired(b, k, "aurc", d, 0.0003) for (b, k), d in DIFF.items()]
    )  # every interval but b*+t's excludes 0
    table = results_tables.duos_table(_duo_rows(), paired, zoo=ZOO)
    line = {ln.split(" | ")[0][2:]: ln for ln in table.splitlines() if ln.startswith("| ")}
    assert "0.03 → 0.027 (−0.003 [−0.0033, −0.0027]) ✱" in line["x + s"]  # 3 sd of the fallback: a finding
    assert "0.03 → 0.0295 (−0.0005 [−0.0008, −0.0002]) ≈" in line["x + t"]  # 0.5 sd: within noise, interval or not
    assert "✱" not in line["x + t"] and line["b0 + s"].endswith("✱ | — → — |")  # own group: 6 sd
    # the seed-robust statement: over the group's bases with each sidekick
    assert "| b0 / b1 / b2 + s | 0.10 | −0.005 ± 0.001 (3/3 seeds improve) | — |" in table
    assert "| b0 / b1 / b2 + t | 0.10 | −0.0001 ± 0.0003 (2/3 seeds improve) | — |" in table
    # a noise-dominated (split, metric) says so in its column
    verdict = pd.DataFrame(
        [dict(split="test", metric="aurc", dominated=True), dict(split="shift", metric="nll", dominated=True)]
    )
    head = results_tables.duos_table(_duo_rows(), paired, zoo=ZOO, verdict=verdict).splitlines()[0]
    assert "AURC (noise-dominated): base → duo" in head and "NLL: base → duo" in head
    # without a seed group nothing is measured: no difference is a finding
    assert "✱" not in results_tables.duos_table(_duo_rows(), paired, zoo={}).split("\n\n")[0]


def test_duo_table_by_hand():
    rows = pd.DataFrame(
        [
            _row("b", "aurc", 0.02),
            _row("b", "nll", 0.30),
            _row("b", "aurc", 0.015, "duo", "weighted", "s", 0.1),
            _row("b", "nll", 0.25, "duo", "weighted", "s", 0.1),
        ]
    )
    paired = pd.DataFrame([_paired("b", "s", "aurc", -0.005, 0.002), _paired("b", "s", "nll", -0.05, 0.06)])
    table = results_tables.duos_table(rows, paired)
    line = next(ln for ln in table.splitlines() if ln.startswith("| b + s"))
    assert "0.02 → 0.015 (−0.005 [−0.007, −0.003])" in line  # interval excludes 0, but no seed noise measured: no ✱
    assert "0.300 → 0.250 (−0.05 [−0.110, +0.01])" in line and line.count("✱") == 0


def test_seed_groups_and_spread_per_split_with_the_noise_verdict():
    zoo = {
        "a-s0": {"arch": "x", "seed": 0, "role": "base"},
        "a-s1": {"arch": "x", "seed": 1, "role": "b"},
        "c": {"arch": "y", "seed": 0},
    }
    assert [(g.label, g.names) for g in noise.seed_groups(zoo)] == [
        ("x (2 seeds)", ("a-s0", "a-s1"))
    ]  # role is free text
    rows = pd.DataFrame([_row("a-s0", "accuracy", 0.9), _row("a-s1", "accuracy", 0.8), _row("c", "accuracy", 0.5)])
    shift = rows.assign(split="shift", value=rows["value"] - 0.3)
    verdict = pd.DataFrame(
        [
            dict(split="shift", metric="accuracy", sd=0.07, n=2, median=0.01, entries=3, dominated=True),
            dict(split="test", metric="accuracy", sd=0.07, n=2, median=0.5, entries=3, dominated=False),
        ]
    )
    lines = results_tables.seeds_table(pd.concat([rows, shift]), zoo, verdict, splits=["test", "shift"]).splitlines()
    assert lines[2] == "| test | a-s0 / a-s1 | Accuracy | 0.850 | 0.0707 | 0.800 | 0.900 | 0.500 | ranked |"
    assert (
        lines[3] == "| shift | a-s0 / a-s1 | Accuracy | 0.550 | 0.0707 | 0.500 | 0.600 | 0.01 | **noise-dominated** |"
    )
    assert results_tables.seeds_table(rows, zoo).splitlines()[2].endswith("| — | — |")  # no verdict given


def test_the_seed_block_covers_the_plotted_splits_and_the_headline_split():
    from benchmark.config.report_config import ReportConfig

    rows = pd.DataFrame({"split": ["test", "shift", "ood", "val", "corrupt-all-3", "corrupt-all-1"]})
    cfg = ReportConfig(plot_splits=("shift", "corrupt-*-3"), headline_split="val")
    assert results_tables.shown_splits(rows, cfg) == ["shift", "val", "corrupt-all-3"]
