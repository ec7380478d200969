"""The README's result blocks agree with the committed results, and those results have the papers' setting."""
import math
from pathlib import Path

import pandas as pd
import pytest

from benchmark.core import noise
from benchmark.reproduce import readme

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def committed():
    from benchmark.bundle.schema import load_bundle
    from benchmark.reproduce.gate import latest_bundle

    return load_bundle(latest_bundle(ROOT / "leaderboard" / "embedded"), check_arch=False)


def test_readme_blocks_are_generated_from_the_committed_results():
    stale = readme.stale(root=ROOT)
    assert not stale, f"generated blocks {stale} differ from the committed results: run `python -m benchmark reproduce readme --write`"


def _copy(tmp_path):
    """The files with generated blocks copied, the committed results linked."""
    for f in readme.FILES:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text((ROOT / f).read_text(encoding="utf-8"), encoding="utf-8")
    for d in ("leaderboard", "results"):
        (tmp_path / d).symlink_to(ROOT / d)
    return tmp_path


def test_update_rewrites_a_stale_block_in_any_file_and_refuses_unknown_or_missing_blocks(tmp_path):
    root = _copy(tmp_path)
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
    page.write_text(text.replace("<!-- generated:duos -->\n" + body + "<!-- /generated:duos -->\n", ""), encoding="utf-8")
    with pytest.raises(ValueError, match=r"no generated block for \['duos'\]"):
        readme.stale(root=root)


def test_every_base_beats_every_sidekick_and_stays_under_98_percent(committed):
    zoo = committed.manifest["zoo"]
    acc = readme._view(committed.rows)
    acc = acc[(acc["family"] == "single") & (acc["metric"] == "accuracy")].set_index("base")["value"].astype(float)
    bases = [n for n, e in zoo.items() if e.get("role") == "base"]
    sides = [n for n, e in zoo.items() if e.get("role") == "sidekick"]
    assert bases and sides
    for b in bases:
        assert acc[b] < 0.98, f"base {b}: test accuracy {acc[b]} is not under 98%"
        for s in sides:
            assert acc[b] > acc[s], f"sidekick {s} ({acc[s]}) is as accurate as base {b} ({acc[b]})"


def _row(base, metric, value, family="single", method="ts", side="", balance=math.nan):
    return dict(suite="embedded", split="test", family=family, method=method, base=base, sidekick=side,
                members=base if not side else f"{base}+{side}", fit="converged", confidence="max", metric=metric,
                value=value, ci_low=math.nan, ci_high=math.nan, gflops=0.5, balance=balance)


def test_duo_table_by_hand():
    rows = pd.DataFrame([_row("b", "aurc", 0.02), _row("b", "nll", 0.30),
                         _row("b", "aurc", 0.015, "duo", "weighted", "s", 0.1), _row("b", "nll", 0.25, "duo", "weighted", "s", 0.1)])
    paired = pd.DataFrame([dict(split="test", fit="converged", method="weighted", base="b", sidekick="s", metric="aurc",
                                diff=-0.005, ci_low=-0.007, ci_high=-0.003),
                           dict(split="test", fit="converged", method="weighted", base="b", sidekick="s", metric="nll",
                                diff=-0.05, ci_low=-0.1, ci_high=0.01)])
    table = readme.duos_table(rows, paired)
    line = next(ln for ln in table.splitlines() if ln.startswith("| b + s"))
    assert "0.02 → 0.015 (−0.005 [−0.007, −0.003]) ✱" in line  # interval excludes 0: marked
    assert "0.300 → 0.250 (−0.05 [−0.100, +0.01])" in line and line.count("✱") == 1


def test_seed_groups_and_spread():
    zoo = {"a-s0": {"arch": "x", "seed": 0, "role": "base"}, "a-s1": {"arch": "x", "seed": 1, "role": "b"},
           "c": {"arch": "y", "seed": 0}}
    assert [(g.label, g.names) for g in noise.seed_groups(zoo)] == [("x (2 seeds)", ("a-s0", "a-s1"))]  # role is free text
    rows = pd.DataFrame([_row("a-s0", "accuracy", 0.9), _row("a-s1", "accuracy", 0.8), _row("c", "accuracy", 0.5)])
    line = next(ln for ln in readme.seeds_table(rows, zoo).splitlines() if "test acc" in ln)
    assert line == "| a-s0 / a-s1 | test acc | 0.850 | 0.0707 | 0.800 | 0.900 |"
