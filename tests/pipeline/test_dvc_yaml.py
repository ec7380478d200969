"""Every YAML file DVC reads here parses alike with both of ruamel.yaml's safe loaders: the pure-Python one (ruamel.yaml
0.19 without extras) and the libyaml one (``ruamel.yaml.clib``, installed with every ruamel.yaml before 0.19, and in the
test environment). libyaml rejects a plain value holding ``:`` inside a flow mapping (``{init: timm:ra_in1k}``), so the
paper suites' zoo files, which ``dvc.yaml`` reads under ``vars:``, failed every DVC command where clib was installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _dvc_yaml_files() -> list[str]:
    """The committed files DVC parses: the root pipeline and lock, params, zoos and suite files (``vars:``, params)."""
    out = subprocess.run(
        [
            "git",
            "ls-files",
            "dvc.yaml",
            "dvc.lock",
            "params.yaml",
            "zoo/*.yaml",
            "suites/*.yaml",
            "suites/*/params.yaml",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "zoo/caltech256.yaml" in out and "dvc.lock" in out, out
    return out


def test_dvc_in_the_tests_reads_yaml_with_libyaml():
    from ruamel.yaml import YAML

    assert YAML(typ="safe").Parser.__name__ == "CParser"  # ruamel.yaml.parser.Parser without ruamel.yaml.clib


@pytest.mark.parametrize("name", _dvc_yaml_files())
def test_both_loaders_read_the_file_alike(name):
    from ruamel.yaml import YAML

    text = (ROOT / name).read_text(encoding="utf-8")
    assert YAML(typ="safe").load(text) == YAML(typ="safe", pure=True).load(text)


def test_validate_zoo_names_a_value_dvc_cannot_read(tmp_path, capsys):
    from benchmark.cli.main import main

    zoo = tmp_path / "zoo.yaml"
    line = "  m: {arch: test_resnet, init: timm:r160_in1k, img_size: 32, seed: 0, recipe: r}"
    zoo.write_text(f"models:\n{line}\n")
    column = line.index("timm:") + len("timm") + 1  # 1-based: the ':' after timm
    args = [
        "validate-zoo",
        str(zoo),
        "--no-flops",
        "--suites-dir",
        str(tmp_path / "none"),
        "--params",
        str(tmp_path / "none.yaml"),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"error: {zoo}: DVC cannot read this file (line 2, column {column}): found unexpected ':'" in err
    assert "quote a value that holds ':' inside { }, e.g. init: \"timm:ra_in1k\"" in err
    zoo.write_text('models:\n  m: {arch: test_resnet, init: "timm:r160_in1k", img_size: 32, seed: 0, recipe: r}\n')
    assert main(args) == 0, capsys.readouterr().err


def test_every_output_travels_through_the_remote_or_git():
    """Issue 50 item 1: a clone that pulls recomputes nothing only if every output a stage has is DVC-cached (the
    remote carries it) or one that git may commit (not git-ignored: results/summary.json). An output with `cache:
    false` that git ignores (as the cost records were) is in neither: its stage runs again in every fresh clone.
    The root dvc.yaml (regenerated) and the template every suite's dvc.yaml is rendered from."""
    import yaml

    outs = []
    for stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].values():
        body = stage.get("do", stage)
        for out in body.get("outs", []) + [m for m in body.get("metrics", []) if isinstance(m, dict)]:
            path, flags = (out, {}) if isinstance(out, str) else next(iter(out.items()))
            outs.append((path.replace("${key}", "m").replace("${item}", "1"), flags or {}))
    uncached = [p for p, flags in outs if flags.get("cache") is False]
    assert len(outs) > 10 and uncached == ["results/summary.json"]
    committed = ["results/summary.json", "suites/caltech256/results/summary.json"]  # as the suites' dvc.yaml names it
    template = (ROOT / "benchmark" / "dvcgen" / "templates" / "pipeline.dvc.yaml.j2").read_text()
    assert [line.strip() for line in template.splitlines() if "cache: false" in line] == ["cache: false"] * 2
    lines = template.splitlines()
    assert ["results/summary.json" in lines[i - 1] for i, line in enumerate(lines) if "cache: false" in line] == [
        True
    ] * 2
    ignored = subprocess.run(
        ["git", "check-ignore", *committed], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert ignored == [], f"outputs DVC does not cache and git ignores: nothing carries them to a clone: {ignored}"
    probe = subprocess.run(
        ["git", "check-ignore", "results/cost/m.json", "suites/caltech256/results/cost/m.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert len(probe) == 2, "the check can fail: a cost record is git-ignored"
