"""Evaluation units against direct computations."""

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, log_loss

from benchmark.config.evaluate import EvalConfig
from benchmark.methods.deep_ensemble import ensemble_unit
from benchmark.methods.duo import duo_unit
from benchmark.methods.single import single_unit


def _logits(seed, n=60, c=4, signal=2.0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    z = torch.randn(n, c, generator=g) + signal * torch.nn.functional.one_hot(y, c)
    return z, y


def _model(seed):
    out = {}
    for i, split in enumerate(("val", "test", "shift")):
        z, y = _logits(100 + i)  # same labels for every model
        out[split] = (z + torch.randn(z.shape, generator=torch.Generator().manual_seed(seed * 10 + i)), y)
    out["ood"] = (torch.randn(30, 4, generator=torch.Generator().manual_seed(seed)), torch.full((30,), -1))
    return out


CFG = EvalConfig(suite="t", fits=("converged",), n_bootstrap=0)


def _rows(rows, **kw):
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


def test_single_unit_matches_direct_temperature_scaled_metrics():
    m = _model(1)
    rows = single_unit(CFG, "a", m)
    t = _rows(rows, split="test", metric="accuracy")[0]["temperature_base"]
    z, y = m["test"]
    p = torch.softmax(z / t, 1).numpy()
    assert _rows(rows, split="test", metric="accuracy")[0]["value"] == pytest.approx(accuracy_score(y, p.argmax(1)))
    assert _rows(rows, split="test", metric="nll")[0]["value"] == pytest.approx(
        log_loss(y, p, labels=range(4)), rel=1e-5
    )
    assert {r["metric"] for r in _rows(rows, split="ood")} == {"ood_auroc", "ood_aupr", "ood_fpr95"}
    assert all(math.isnan(r["ci_low"]) for r in rows)  # no bootstrap asked


def test_duo_unit_reports_all_variants_and_published_temperatures():
    rows, paired = duo_unit(
        EvalConfig(suite="t", fits=("converged",), n_bootstrap=50, bootstrap_splits=("test",)),
        "a",
        "b",
        _model(1),
        _model(2),
    )
    assert {(r["method"], r["confidence"]) for r in rows} == {
        ("weighted", "max"),
        ("weighted", "published"),
        ("unweighted", "max"),
        ("uq_only", "published"),
    }
    w = _rows(rows, method="weighted", confidence="max", split="test", metric="accuracy")[0]
    assert w["weight_base"] == pytest.approx(1 / (2 * w["temperature_base"]))
    assert {p["metric"] for p in paired} >= {"accuracy", "nll", "aurc"} and all(p["split"] == "test" for p in paired)


def test_ensemble_of_identical_members_equals_the_member():
    m = _model(3)
    ens = ensemble_unit(CFG, ["a", "a2"], [m, m])
    single = single_unit(EvalConfig(suite="t", fits=("converged",), n_bootstrap=0), "a", m)
    z, y = m["test"]
    acc = accuracy_score(y, z.argmax(1))
    for method in ("m2", "m2_logit"):
        assert _rows(ens, method=method, split="test", metric="accuracy")[0]["value"] == pytest.approx(acc)
    assert single  # the member alone is evaluated too


def test_group_metrics_rows_match_a_direct_computation():
    m = _model(4)
    groups = torch.arange(60) % 3
    cfg = EvalConfig(suite="t", fits=("converged",), n_bootstrap=0, groups={"test": groups})
    rows = single_unit(cfg, "a", m)
    z, y = m["test"]
    pred = z.argmax(1)  # temperature scaling does not change the argmax
    accs = [accuracy_score(y[groups == g], pred[groups == g]) for g in range(3)]
    assert _rows(rows, split="test", metric="worst_group_accuracy")[0]["value"] == pytest.approx(min(accs))
    assert _rows(rows, split="test", metric="mean_group_accuracy")[0]["value"] == pytest.approx(np.mean(accs))
    assert not _rows(rows, split="shift", metric="worst_group_accuracy")
    assert "groups" not in cfg.settings()


def test_member_confidences_rank_by_mutual_information():
    from sklearn.metrics import roc_auc_score

    from benchmark.core.members import member_uncertainty
    from benchmark.methods.rows import multi_member_unit

    g = torch.Generator().manual_seed(5)
    m = {}
    for split, n in (("val", 40), ("test", 50), ("ood", 30)):
        y = torch.randint(0, 3, (n,), generator=g) if split != "ood" else torch.full((n,), -1)
        m[split] = (torch.randn(4, n, 3, generator=g) * 2, y)
    rows = multi_member_unit(CFG, {"family": "sve", "method": "m4", "base": "b", "members": "b"}, m)
    assert {r["confidence"] for r in rows} == {"max", "mutual_info", "entropy", "agreement"}
    mi = torch.cat(
        [member_uncertainty(m["test"][0])["mutual_information"], member_uncertainty(m["ood"][0])["mutual_information"]]
    )
    is_id = np.r_[np.ones(50), np.zeros(30)]
    expected = roc_auc_score(is_id, -mi.numpy())
    got = _rows(rows, confidence="mutual_info", split="ood", metric="ood_auroc")[0]["value"]
    assert got == pytest.approx(expected)
