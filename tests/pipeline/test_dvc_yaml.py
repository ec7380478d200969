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
    out = subprocess.run(["git", "ls-files", "dvc.yaml", "dvc.lock", "params.yaml", "zoo/*.yaml", "suites/*.yaml",
                          "suites/*/params.yaml"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
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
    args = ["validate-zoo", str(zoo), "--no-flops", "--suites-dir", str(tmp_path / "none"), "--params", str(tmp_path / "none.yaml")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"error: {zoo}: DVC cannot read this file (line 2, column {column}): found unexpected ':'" in err
    assert 'quote a value that holds \':\' inside { }, e.g. init: "timm:ra_in1k"' in err
    zoo.write_text("models:\n  m: {arch: test_resnet, init: \"timm:r160_in1k\", img_size: 32, seed: 0, recipe: r}\n")
    assert main(args) == 0, capsys.readouterr().err
