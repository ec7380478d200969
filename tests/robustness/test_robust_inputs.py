"""Every unreadable input is one line naming the file and the problem, exit code 2, no traceback (issue 13.4)."""

import json
import shutil
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from benchmark.cli.main import main as cli_main
from benchmark.data.paper.suites import SuiteError, load_suite
from benchmark.models.train import Recipe, fine_tune, load_weights, save_weights
from benchmark.models.zoo import ZooError, load_zoo
from benchmark.stages import stage_config
from benchmark.stages.entry import stage_main
from benchmark.stages.params_config import load_params
from benchmark.stages.stage_config import ConfigError
from benchmark.storage.store import StoreError

ROOT = Path(__file__).resolve().parents[2]

BAD_YAML = {  # bytes -> what the one-line message must say
    "not-utf8": (b"models:\n  a: \xff\xfe caf\xe9\n", r"is not UTF-8 text \(byte 13: invalid start byte\)"),
    "empty": (b"", "is empty"),
    "comments-only": (b"# nothing here\n", "is empty"),
    "not-a-mapping": (b"- a\n- b\n", "must be a mapping .* got list"),
    "scalar": (b"just text\n", "must be a mapping .* got str"),
    "syntax": (
        b"models:\n  a: [1, 2\n  b: 3\n",
        r"line 3, column 4: not valid YAML \(while parsing a flow sequence: expected ',' or ']'",
    ),
    "python-tag": (
        b"models: !!python/object/apply:os.system ['echo pwned']\n",
        r"line 1, column 9: tag !!python/object/apply:os.system is not allowed",
    ),
    "python-name": (b"a: !!python/name:os.system\n", "tag !!python/name:os.system is not allowed"),
    "duplicate": (b"a: 1\na: 2\n", "duplicate key 'a' at line 2"),
}


def _params(zoo="zoo.yaml", **recipe) -> dict:
    return {
        "zoo": str(zoo),
        "data": {"suite": "embedded"},
        "logits": {"batch_size": 8},
        "cost": {"throughput_batch": 2, "throughput_iters": 1},
        "evaluate": {},
        "recipes": {"r": {"epochs": 1, "batch_size": 16, "lr": 0.01, **recipe}},
    }


def _one_line(err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def _stage(argv, capsys, run=lambda params, args: None) -> tuple[int, str]:
    rc = stage_main("test stage", run, argv=argv)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("case", sorted(BAD_YAML))
def test_bad_zoo_file(tmp_path, capsys, case):
    raw, message = BAD_YAML[case]
    zoo = tmp_path / "zoo.yaml"
    zoo.write_bytes(raw)
    with pytest.raises(ZooError, match=message) as e:
        load_zoo(zoo)
    assert str(e.value).startswith(f"{zoo}: ") and "\n" not in str(e.value)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_params(zoo)))
    rc, err = _stage(["--params", str(params)], capsys, run=lambda p, a: stage_config.zoo(p))
    assert rc == 2
    _one_line(err, f"error: {zoo}: ")


@pytest.mark.parametrize("case", sorted(BAD_YAML))
def test_bad_params_file(tmp_path, capsys, case):
    raw, message = BAD_YAML[case]
    params = tmp_path / "params.yaml"
    params.write_bytes(raw)
    with pytest.raises(ConfigError, match=message):
        load_params(params)
    ran = []
    rc, err = _stage(["--params", str(params)], capsys, run=lambda p, a: ran.append(1))
    assert rc == 2 and not ran
    _one_line(err, f"error: {params}: ")


@pytest.mark.parametrize("case", sorted(BAD_YAML))
def test_bad_suite_file(tmp_path, capsys, case):
    raw, message = BAD_YAML[case]
    (tmp_path / "suites").mkdir()
    suite = tmp_path / "suites" / "broken.yaml"
    suite.write_bytes(raw)
    with pytest.raises(SuiteError, match=message):
        load_suite(suite)
    rc = cli_main(["suite-pipeline", "--root", str(tmp_path), "broken"])
    assert rc == 2
    _one_line(capsys.readouterr().err, f"error: {suite}: ")
    assert not (tmp_path / "suites" / "broken").exists()


@pytest.mark.parametrize(
    "recipe, message",
    [
        ({"batch_size": 16.5}, "recipe 'r': batch_size must be an integer, got 16.5 (float)"),
        ({"batch_size": True}, "recipe 'r': batch_size must be an integer, got True (bool)"),
        ({"epochs": 2.0}, "recipe 'r': epochs must be an integer >= 0, got 2.0 (float)"),
        ({"lr": "1e-3"}, "recipe 'r': lr must be a number, got the string '1e-3': YAML 1.1 reads"),
        ({"lr": "fast"}, "recipe 'r': lr must be a finite number, got 'fast' (str)"),
        ({"weight_decay": "1e-6"}, "recipe 'r': weight_decay must be a number, got the string '1e-6'"),
        ({"warmup_epochs": -1}, "recipe 'r': warmup_epochs must be >= 0, got -1"),
        ({"label_smoothing": 1.5}, "recipe 'r': label_smoothing must be <= 1, got 1.5"),
        ({"shift_pixels": 0.5}, "recipe 'r': shift_pixels must be an integer >= 0, got 0.5 (float)"),
    ],
)
def test_recipe_fields_are_type_checked_before_anything_runs(tmp_path, capsys, recipe, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        Recipe.from_params("r", {"epochs": 1, "batch_size": 16, "lr": 0.01, **recipe})
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_params(**recipe)))
    ran = []
    rc, err = _stage(["--params", str(params)], capsys, run=lambda p, a: ran.append(1))
    assert rc == 2 and not ran
    in_file = message.replace("recipe 'r'", "recipes.r")  # the field's path in the params file
    _one_line(err, f"error: {params}: {in_file}")


def test_yaml_1_1_reads_exponent_without_dot_as_a_string(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_params()).replace("lr: 0.01", "lr: 1e-3"))
    assert load_params.__module__ and yaml.safe_load(params.read_text())["recipes"]["r"]["lr"] == "1e-3"
    rc, err = _stage(["--params", str(params)], capsys)
    assert rc == 2
    _one_line(err, "lr must be a number, got the string '1e-3'", "YAML 1.1", "1.0e-3")
    params.write_text(yaml.safe_dump(_params()).replace("lr: 0.01", "lr: 1.0e-3"))
    assert load_params(params).recipes["r"].lr == pytest.approx(1e-3)


def test_suite_recipe_fields_are_type_checked(tmp_path):
    text = (ROOT / "suites" / "caltech256.yaml").read_text(encoding="utf-8")
    suite = tmp_path / "c.yaml"
    suite.write_text(text.replace("batch_size: 64", "batch_size: 64.5", 1), encoding="utf-8")
    with pytest.raises(SuiteError, match=r"c\.yaml: recipe 'finetune': batch_size must be an integer, got 64\.5"):
        load_suite(suite)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 2))


@pytest.mark.parametrize(
    "content, message",
    [
        (b"this is not a safetensors file at all", "not a valid safetensors checkpoint"),
        (b"", "not a valid safetensors checkpoint"),
        (b"\x10\x00\x00\x00\x00\x00\x00\x00[1, 2, 3, 4, 5, 6]", "not a valid safetensors checkpoint"),
    ],
)
def test_checkpoint_that_is_not_safetensors(tmp_path, capsys, content, message):
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(StoreError, match=message) as e:
        load_weights(path, _model())
    assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_params()))
    rc, err = _stage(["--params", str(params)], capsys, run=lambda p, a: load_weights(path, _model()))
    assert rc == 2
    _one_line(err, f"error: {path}: not a valid safetensors checkpoint")


def test_truncated_checkpoint_and_wrong_model(tmp_path):
    path = tmp_path / "model.safetensors"
    save_weights(path, _model())
    full = path.read_bytes()
    path.write_bytes(full[: len(full) - 7])
    with pytest.raises(StoreError, match="not a valid safetensors checkpoint"):
        load_weights(path, _model())
    path.write_bytes(full)
    with pytest.raises(StoreError, match="checkpoint does not fit the model"):
        load_weights(path, nn.Sequential(nn.Flatten(), nn.Linear(12, 3)))


def test_unreadable_resume_checkpoint_is_an_error_not_silently_skipped(tmp_path):
    x, y = torch.randn(8, 3, 2, 2), torch.arange(8) % 2
    (tmp_path / "resume.safetensors").write_bytes(b"garbage")
    with pytest.raises(StoreError, match=r"resume\.safetensors: not a valid safetensors resume checkpoint"):
        fine_tune(
            _model(),
            (x, y),
            (x, y),
            Recipe(epochs=1, batch_size=4, lr=0.01),
            seed=0,
            folder=tmp_path,
            fingerprint="fp",
            progress=False,
        )
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(1)}, str(tmp_path / "resume.safetensors"), metadata={"resume": "[1]"})
    with pytest.raises(StoreError, match="resume checkpoint without a valid 'resume' state"):
        fine_tune(
            _model(),
            (x, y),
            (x, y),
            Recipe(epochs=1, batch_size=4, lr=0.01),
            seed=0,
            folder=tmp_path,
            fingerprint="fp",
            progress=False,
        )


def _npz(path, **arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _safetensors_with_meta(path, meta: str):
    from safetensors.numpy import save_file

    save_file(
        {"logits": np.zeros((3, 2), np.float32), "labels": np.array([0, 1, 0])}, str(path), metadata={"benchmark": meta}
    )


def _member_not_npy(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("logits", b"\x00" * 24)
        buf = __import__("io").BytesIO()
        np.save(buf, np.array([0, 1, 0]))
        z.writestr("labels.npy", buf.getvalue())


LOGITS = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5]])
BAD_LOGITS = {
    "member-not-npy": (lambda p: _member_not_npy(p), ".npz", "member 'logits' is not a numpy array (.npy) but bytes"),
    "string-ids": (
        lambda p: _npz(p, logits=LOGITS, labels=np.array([0, 1, 0]), ids=np.array(["a", "b", "c"])),
        ".npz",
        "'ids' must be integers, got <U1",
    ),
    "float-ids": (
        lambda p: _npz(p, logits=LOGITS, labels=np.array([0, 1, 0]), ids=np.array([1.0, 2.5, 3.0])),
        ".npz",
        "'ids' must be integers, got float64 (non-integer ids are refused, not truncated)",
    ),
    "meta-list": (
        lambda p: _safetensors_with_meta(p, "[1, 2]"),
        ".safetensors",
        "its 'benchmark' metadata is list JSON, not a JSON object",
    ),
    "meta-number": (
        lambda p: _safetensors_with_meta(p, "3"),
        ".safetensors",
        "metadata is int JSON, not a JSON object",
    ),
    "meta-not-json": (lambda p: _safetensors_with_meta(p, "{nope"), ".safetensors", "bad 'benchmark' metadata"),
    "beyond-float32": (
        lambda p: _npz(p, logits=LOGITS * 1e300, labels=np.array([0, 1, 0])),
        ".npz",
        "'logits' (float64) hold values up to 2e+300, beyond the float32 range",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_LOGITS))
def test_bad_logits_file(tmp_path, capsys, case):
    make, suffix, message = BAD_LOGITS[case]
    path = tmp_path / f"bad{suffix}"
    make(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warnings on the way
        rc = cli_main(["metrics", str(path)])
    assert rc == 2
    _one_line(capsys.readouterr().err, f"error: {path}: ", message)
    if suffix == ".safetensors":  # the memory-mapped reader of the evaluate stage says the same
        from benchmark.storage.store import mmap_logits_file

        with pytest.raises(StoreError, match="metadata"):
            mmap_logits_file(path)


def test_float64_logits_within_float32_range_still_load(tmp_path, capsys):
    path = tmp_path / "ok.npz"
    _npz(path, logits=LOGITS * 1e30, labels=np.array([0, 1, 0]), ids=np.array([4, 5, 6], np.int32))
    assert cli_main(["metrics", str(path)]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["metrics", "x.npz", "--seed", "-1"],
        ["metrics", "x.npz", "--seed", "1.5"],
        ["metrics", "x.npz", "--bootstrap", "-3"],
    ],
)
def test_negative_or_non_integer_seed_is_a_usage_error(argv, capsys):
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("must be an integer >= 0" in err or "is not an integer" in err)


def test_sweep_bench_refuses_a_negative_seed(capsys):
    from benchmark.evaluation.sweep_bench import main

    with pytest.raises(SystemExit) as e:
        main(["--seed", "-1"])
    assert e.value.code == 2 and "--seed: must be an integer >= 0, got -1" in capsys.readouterr().err


def test_suite_description_with_newline_keeps_the_generated_dvc_yaml_valid(tmp_path):
    from benchmark.dvcgen.suite_pipeline import render

    (tmp_path / "suites").mkdir()
    shutil.copytree(ROOT / "zoo", tmp_path / "zoo")
    for code in ("pipelines", "benchmark"):  # the stage deps are derived from the stage scripts' imports
        (tmp_path / code).symlink_to(ROOT / code, target_is_directory=True)
    text = (ROOT / "suites" / "caltech256.yaml").read_text(encoding="utf-8")
    (tmp_path / "suites" / "plain.yaml").write_text(text, encoding="utf-8")
    hostile = json.dumps("two\nlines: {x: [1}\n\tstages: {evil: {cmd: rm -rf /}}\r\n# \x07bell")
    broken = text.replace(text.split("\n")[2], f"description: {hostile}")
    (tmp_path / "suites" / "plain2.yaml").write_text(broken, encoding="utf-8")
    assert "\n" in load_suite(tmp_path / "suites" / "plain2.yaml").description
    plain, hostile_out = render("plain", tmp_path)["dvc.yaml"], render("plain2", tmp_path)["dvc.yaml"]
    parsed = yaml.safe_load(hostile_out)
    assert parsed == yaml.safe_load(
        plain.replace("suites/plain", "suites/plain2")
        .replace("plain.yaml", "plain2.yaml")
        .replace("plain paper", "plain2 paper")
    )
    assert set(parsed["stages"]) == set(yaml.safe_load(plain)["stages"]) and "evil" not in parsed["stages"]
    line = next(s for s in hostile_out.splitlines() if "plain2 paper suite" in s)
    assert line == "# The plain2 paper suite (two lines: {x: [1} stages: {evil: {cmd: rm -rf /}} # bell)."


def test_split_file_member_that_is_not_npy(tmp_path):
    from benchmark.data.splits_io import load_split
    from benchmark.stages.suite_source import read_index

    path = tmp_path / "val.npz"
    with zipfile.ZipFile(path, "w") as z:
        for key, arr in (
            ("images", np.zeros((2, 28, 28), np.uint8)),
            ("labels", np.array([0, 1])),
            ("ids", np.array([3, 4])),
        ):
            buf = __import__("io").BytesIO()
            np.save(buf, arr)
            z.writestr(f"{key}.npy", buf.getvalue())
        z.writestr("name", b"val")
    for read in (lambda: load_split(path, "val"), lambda: read_index(path, "val")):
        with pytest.raises(StoreError, match=r"val\.npz: member 'name' is not a numpy array \(\.npy\) but bytes"):
            read()
