"""`python -m benchmark metrics` and `duo`: output, JSON keys, errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from benchmark.cli.main import main
from benchmark.core.combine import duo_prediction, single_prediction
from benchmark.core.metrics import compute_metrics
from benchmark.core.temperature import fit_duo, fit_temperature
from benchmark.storage.store import load_logits_file, save_logits_file

METRIC_KEYS = {"accuracy", "macro_f1", "brier", "nll", "ece", "auroc", "aurc", "eaurc", "augrc", "sac98"}


def _write(path, logits, labels):
    path = str(path)
    if path.endswith(".npz"):
        np.savez(path, logits=np.asarray(logits, dtype=np.float32), labels=np.asarray(labels))
    else:
        save_logits_file(path, torch.as_tensor(logits), torch.as_tensor(labels))
    return path


def _logits(seed, labels, c, signal):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(len(labels), c)).astype(np.float32)
    z[np.arange(len(labels)), labels] += signal
    return z


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("logits")
    rng = np.random.default_rng(0)
    out = {}
    for split, n in (("val", 300), ("test", 400)):
        y = rng.integers(0, 8, n)
        out[f"base_{split}"] = _write(d / f"base_{split}.npz", _logits(1 + n, y, 8, 2.5), y)
        out[f"side_{split}"] = _write(d / f"side_{split}.safetensors", _logits(2 + n, y, 8, 1.5), y)
    return out


def _run(capsys, argv):
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_metrics_json(files, capsys):
    code, out, _ = _run(capsys, ["metrics", files["base_test"], "--json"])
    assert code == 0
    res = json.loads(out)
    assert METRIC_KEYS <= set(res)
    with np.load(files["base_test"]) as z:
        ref = compute_metrics(torch.softmax(torch.from_numpy(z["logits"]), 1), torch.from_numpy(z["labels"]))
    for k in METRIC_KEYS:
        assert res[k] == pytest.approx(ref[k], rel=1e-6, abs=1e-9)  # float32 softmax: last-bit differences


def test_metrics_text_and_bootstrap(files, capsys):
    code, out, _ = _run(capsys, ["metrics", files["side_test"], "--bootstrap", "50"])
    assert code == 0 and "accuracy" in out and "sac98" in out and "[" in out
    code, out, _ = _run(capsys, ["metrics", files["side_test"], "--bootstrap", "50", "--json"])
    res = json.loads(out)
    lo, hi = res["ci"]["accuracy"]
    assert lo <= res["accuracy"] <= hi


@pytest.mark.parametrize(
    "fit, confidence", [("converged", "max"), ("converged", "published"), ("paper-exact", "published")]
)
def test_duo_json(files, capsys, fit, confidence):
    argv = [
        "duo",
        "--base-val",
        files["base_val"],
        "--side-val",
        files["side_val"],
        "--base-test",
        files["base_test"],
        "--side-test",
        files["side_test"],
        "--fit",
        fit,
        "--confidence",
        confidence,
        "--json",
    ]
    code, out, _ = _run(capsys, argv)
    assert code == 0
    res = json.loads(out)
    for key in ("base", "weighted", "unweighted", "uq_only"):
        assert METRIC_KEYS <= set(res[key])
    t, w = res["temperatures"], res["weights"]
    assert set(t) == set(w) == {"base", "sidekick"}
    assert w["base"] == pytest.approx(1 / (2 * t["base"])) and w["sidekick"] == pytest.approx(1 / (2 * t["sidekick"]))
    # the same numbers from the library
    bv, sv, bt, st = (load_logits_file(files[k]) for k in ("base_val", "side_val", "base_test", "side_test"))
    duo = fit_duo(bv.logits, sv.logits, bv.labels, mode=fit)
    assert t["base"] == pytest.approx(duo.t_base, rel=1e-12)
    t_single = (
        fit_temperature(bv.logits, bv.labels, mode=fit).temperature,
        fit_temperature(sv.logits, sv.labels, mode=fit).temperature,
    )
    base = compute_metrics(single_prediction(bt.logits, t_single[0]).probs, bt.labels)
    assert res["base"]["nll"] == pytest.approx(base["nll"], abs=1e-12)
    uq = duo_prediction(bt.logits, st.logits, variant="uq_only", fit=duo, confidence=confidence)
    ref = compute_metrics(uq.probs, bt.labels, confidence=uq.confidence, prediction=uq.prediction)
    assert res["uq_only"]["aurc"] == pytest.approx(ref["aurc"], abs=1e-12)
    assert res["uq_only"]["accuracy"] == pytest.approx(res["base"]["accuracy"])


def test_duo_text(files, capsys):
    argv = [
        "duo",
        "--base-val",
        files["base_val"],
        "--side-val",
        files["side_val"],
        "--base-test",
        files["base_test"],
        "--side-test",
        files["side_test"],
    ]
    code, out, _ = _run(capsys, argv)
    assert code == 0
    assert "duo temperatures" in out and "uq_only" in out and "weighted" in out


def _bad(tmp_path, kind):
    y = np.arange(20) % 4
    z = _logits(0, y, 4, 2.0)
    p = tmp_path / f"{kind}.npz"
    if kind == "nan":
        z[3, 1] = np.nan
        np.savez(p, logits=z, labels=y)
    elif kind == "inf":
        z[0, 0] = np.inf
        np.savez(p, logits=z, labels=y)
    elif kind == "range":
        np.savez(p, logits=z, labels=y + 1)
    elif kind == "empty":
        np.savez(p, logits=np.zeros((0, 4), np.float32), labels=np.zeros(0, np.int64))
    elif kind == "noarrays":
        np.savez(p, scores=z)
    elif kind == "shortlabels":
        np.savez(p, logits=z, labels=y[:-1])
    elif kind == "rank3":
        np.savez(p, logits=np.stack([z, z]), labels=y)
    elif kind == "text":
        p = tmp_path / "x.txt"
        p.write_text("hi")
    return str(p)


@pytest.mark.parametrize(
    "kind, message",
    [
        ("nan", "logits: contains NaN"),
        ("inf", "logits: contains Inf"),
        ("range", "labels: values must be in [0, 4)"),
        ("empty", "is empty"),
        ("noarrays", "missing array 'logits'"),
        ("shortlabels", "'labels' has 19"),
        ("rank3", "must be (N, C) for this command"),
        ("text", "unknown logits file type"),
    ],
)
def test_metrics_bad_file(tmp_path, capsys, kind, message):
    path = _bad(tmp_path, kind)
    code, out, err = _run(capsys, ["metrics", path])
    assert code == 2 and out == ""
    assert err.startswith("error: ") and path in err and message in err


def test_metrics_missing_file(tmp_path, capsys):
    code, _, err = _run(capsys, ["metrics", str(tmp_path / "nope.npz")])
    assert code == 2 and "file not found" in err


def test_duo_mismatches(files, tmp_path, capsys):
    y = np.arange(400) % 8
    other_n = _write(tmp_path / "n.npz", _logits(5, y[:350], 8, 2.0), y[:350])
    other_c = _write(tmp_path / "c.npz", _logits(5, y % 5, 5, 2.0), y % 5)
    nan = _bad(tmp_path, "nan")
    base = ["duo", "--base-val", files["base_val"], "--side-val", files["side_val"], "--base-test", files["base_test"]]
    code, _, err = _run(capsys, base + ["--side-test", other_n])
    assert code == 2 and "N=350" in err and other_n in err
    code, _, err = _run(capsys, base + ["--side-test", other_c])
    assert code == 2 and "C=5 classes" in err
    code, _, err = _run(capsys, base + ["--side-test", nan])
    assert code == 2 and nan in err and "NaN" in err
    code, _, err = _run(capsys, base + ["--side-test", files["side_test"], "--fit", "exact"])
    assert code == 2 and "invalid choice" in err


def test_help_and_usage(capsys):
    assert main(["--help"]) == 0
    assert "metrics" in capsys.readouterr().out
    for cmd in ("metrics", "duo"):
        assert main([cmd, "--help"]) == 0
        assert "--json" in capsys.readouterr().out
    assert main([]) == 2
    assert main(["nope"]) == 2


def test_module_entry_point(files):
    proc = subprocess.run(
        ["python", "-m", "benchmark", "metrics", files["base_test"], "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert METRIC_KEYS <= set(json.loads(proc.stdout))
    proc = subprocess.run(
        ["python", "-m", "benchmark", "metrics", "missing.npz"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: missing.npz")


def test_the_command_line_is_built_without_torch_and_its_other_errors_are_not_swallowed(monkeypatch):
    """``publish``, ``suite-pipeline``... start in a fresh interpreter without torch (the logits commands import it when
    they run); ``duo --help`` still lists the fits; an error that is not bad input still raises."""
    code = (
        "import sys; from benchmark.cli.main import build_parser; p = build_parser(); p.parse_args(['publish', "
        "'--out', 'x']);"
        "print(sorted(m for m in ('torch', 'pandas', 'benchmark.core.temperature') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["[]"], out.stderr
    help_text = subprocess.run(
        [sys.executable, "-m", "benchmark", "duo", "--help"], capture_output=True, text=True, timeout=120
    ).stdout
    assert "one of converged, paper-exact" in " ".join(help_text.split())
    from benchmark.cli import logits_commands

    monkeypatch.setattr(logits_commands, "_load", lambda path: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["metrics", "x.npz"])
