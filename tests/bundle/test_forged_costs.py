"""Costs are recomputed too: GFLOPs and parameters of each zoo entry with fvcore, the balance and a method output's
cost record with the method's own cost function, and models.csv; any edit is a mismatch naming the row and column."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from helpers import manifest, read_rows, rehash, write_manifest, write_rows

from benchmark.cli.main import main
from benchmark.methods import registry


def verify(capsys, *args):
    rc = main(["verify", *map(str, args), "--quiet"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _edit_costs(bundle, select, column, value):
    rows = read_rows(bundle)
    sel = select(rows)
    assert sel.any()
    rows.loc[sel, column] = value
    write_rows(bundle, rows)
    return rows[sel].iloc[0]


SELECT = {
    "single": lambda r: (r.family == "single") & (r.base == "res"),
    "duo": lambda r: r.family == "duo",
    "method": lambda r: r.family == "laplace",
}


@pytest.mark.parametrize(
    "unit, column, value",
    [
        ("single", "gflops", "1e-06"),
        ("single", "params", "12"),
        ("duo", "gflops", "0.0001"),
        ("duo", "balance", "0.15"),
        ("duo", "params", "1"),
        ("method", "gflops", "1e-06"),
        ("method", "params", "3"),
        ("method", "overhead_percent", "0.1"),
        ("method", "extra_params_percent", "0.0"),
        ("single", "balance", "0.5"),
        ("single", "train_images", "1"),
        ("single", "train_params", "12"),
        ("duo", "train_images", "0"),
        ("duo", "train_params", "1"),
        ("method", "train_images", "0"),
        ("method", "train_params", "3"),
        ("single", "train_images", ""),
        ("method", "train_params", ""),  # a budget left out (NaN) is no budget either
    ],
)
def test_an_edited_cost_is_a_mismatch(bundle, results, capsys, unit, column, value):
    r = _edit_costs(bundle, SELECT[unit], column, value)
    rc, out, err = verify(capsys, bundle, "--logits", results)
    assert rc == 1, out + err
    bad = [line for line in err.splitlines() if line.startswith("mismatch:")]
    assert bad and all(f"{column}: bundle" in line for line in bad), err
    assert f"family={r.family}" in bad[0] and f"base={r.base}" in bad[0]


def test_the_recomputed_costs_are_fvcore_counts_of_the_zoo_entries(bundle, results):
    """Independent check: build each zoo entry with timm and count with fvcore directly."""
    import timm
    import torch
    from fvcore.nn import FlopCountAnalysis

    from benchmark.models.cost import IGNORED_OPS, _no_flops

    m = manifest(bundle)
    rows = read_rows(bundle)
    classes = 0
    from benchmark.storage.store import mmap_logits_file

    classes = int(mmap_logits_file(results / "logits" / "res" / "test.safetensors").logits.shape[-1])
    for name, entry in m["zoo"].items():
        model = timm.create_model(entry["arch"], pretrained=False, num_classes=classes).eval()
        fca = FlopCountAnalysis(model, torch.zeros(1, 3, entry["img_size"], entry["img_size"]))
        fca.unsupported_ops_warnings(False)
        fca.set_op_handle(**{op: _no_flops for op in IGNORED_OPS})
        single = rows[(rows.family == "single") & (rows.base == name)]
        assert math.isclose(float(single["gflops"].iloc[0]), fca.total() / 1e9, rel_tol=1e-9)
        assert int(single["params"].iloc[0]) == sum(p.numel() for p in model.parameters())


def test_edited_models_csv_is_a_mismatch(bundle, results, capsys):
    models = pd.read_csv(bundle / "models.csv", dtype=str, keep_default_na=False)
    models.loc[0, "gflops"] = "0.000001"
    models.to_csv(bundle / "models.csv", index=False)
    rehash(bundle, "models")
    rc, _, err = verify(capsys, bundle, "--logits", results)
    assert rc == 1 and f"models.csv: model '{models.loc[0, 'name']}': gflops: bundle" in err


def test_edited_throughput_in_models_csv_is_not_checked(bundle, results, capsys):
    models = pd.read_csv(bundle / "models.csv", dtype=str, keep_default_na=False)
    models["throughput"] = "1e9"
    models.to_csv(bundle / "models.csv", index=False)
    rehash(bundle, "models")
    rc, out, _ = verify(capsys, bundle, "--logits", results)
    assert rc == 0 and "verified" in out


@pytest.mark.parametrize("forge", [{"predictive": "mc", "samples": 8}, {"hessian": "full"}, {"base": "eff"}])
def test_a_method_record_that_does_not_fit_its_logits_is_not_verified(bundle, results, capsys, forge):
    m = manifest(bundle)
    u = next(u for u in m["units"] if u["kind"] == "method")
    u["info"] |= forge
    write_manifest(bundle, m)
    rc, out, err = verify(capsys, bundle, "--logits", results, "--strict")
    assert rc == 1 and "Traceback" not in err
    assert "not verified" in err or "mismatch" in err


def test_every_method_that_writes_outputs_has_a_cost_function():
    """A new weight-based method cannot leave its rows' costs unverifiable by accident."""
    families = {
        registry.get_method(k).family for k in registry.list_methods() if registry.get_method(k).run is not None
    }  # every method whose stage writes outputs
    assert families and {f for f in families if registry.output_cost(f) is None} == set()


def test_the_budgets_are_recomputed_from_the_recipes_and_the_train_split(bundle, results):
    """Independent check: a zoo model's budget is its recipe's epochs x the train split x its parameters; a method
    built on a fine-tune (the fixture's last-layer Laplace of 'res') carries that fine-tune's budget, no more."""
    import numpy as np

    m = manifest(bundle)
    rows = read_rows(bundle)
    with np.load(results / "data" / "train.npz", allow_pickle=False) as z:
        n = len(z["ids"])
    assert m["train_size"] == n
    for name, entry in m["zoo"].items():
        epochs = m["params"]["recipes"][entry["recipe"]]["epochs"]
        single = rows[(rows.family == "single") & (rows.base == name)]
        assert float(single["train_images"].iloc[0]) == epochs * n
        assert float(single["train_params"].iloc[0]) == (float(single["params"].iloc[0]) if epochs else 0)
    la = rows[rows.family == "laplace"]
    res = rows[(rows.family == "single") & (rows.base == "res")].iloc[0]
    assert set(la["train_images"].astype(float)) == {float(res["train_images"])}
    assert set(la["train_params"].astype(float)) == {float(res["train_params"])}


def test_a_forged_train_size_is_a_mismatch(bundle, results, capsys):
    m = manifest(bundle)
    m["train_size"] += 1
    write_manifest(bundle, m)
    rc, _, err = verify(capsys, bundle, "--logits", results)
    assert rc == 1 and "train_images: bundle" in err


def test_a_method_record_claiming_no_training_does_not_lower_its_rows_budget(bundle, results, capsys):
    """The claimed own budget and builds_on of a cost record are recomputed, never trusted: a record and rows that say
    the Laplace output cost nothing are a mismatch."""
    m = manifest(bundle)
    u = next(u for u in m["units"] if u["kind"] == "method")
    u["info"] |= {"builds_on": [], "own_train_images": 0, "own_train_params": 0}
    write_manifest(bundle, m)
    rows = read_rows(bundle)
    rows.loc[rows.family == "laplace", ["train_images", "train_params"]] = "0"
    write_rows(bundle, rows)
    rc, _, err = verify(capsys, bundle, "--logits", results)
    assert rc == 1 and "train_images: bundle 0.0" in err and "family=laplace" in err


def test_a_bundle_without_budgets_claims_none(bundle, results, capsys):
    """A bundle made before budgets (no train_size, no budget columns) stays verifiable; one that drops train_size
    but keeps its rows' budgets is a mismatch (they cannot be recomputed)."""
    m = manifest(bundle)
    del m["train_size"]
    write_manifest(bundle, m)
    rc, _, err = verify(capsys, bundle, "--logits", results)
    assert rc == 1 and "train_images: bundle" in err and "recomputed nan" in err
    rows = read_rows(bundle).drop(columns=["train_images", "train_params"])
    write_rows(bundle, rows)
    rc, out, err = verify(capsys, bundle, "--logits", results)
    assert rc == 0 and "verified" in out, err
