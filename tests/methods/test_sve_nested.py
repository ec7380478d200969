"""Nested SVE: one run of the largest size gives, member for member, what separate smaller runs train.

Member m of an SVE has its own noise stream (``member_generator``), its own parameters
and its own loss term (``summed_member_cross_entropy``), sees the same batches and is
updated by AdamW elementwise, so the first M members of a larger run are, in exact
arithmetic, an M-member run. In floats they agree to rounding only: the frozen backbone
runs all members as one batch of M B rows, and CPU kernels block their sums by batch size
(measured: parameters within 2.3e-5, logits within 2.1e-7 after training). Checked on the
trained parameters and on the written logits; the untrained init is bit-equal.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import timm
import torch
from safetensors.torch import load_file

from benchmark.methods import sve_stage as stage
from benchmark.methods.sve import SingularValueEnsemble
from benchmark.stages import method_stage
from benchmark.stages.params_config import parse_params
from benchmark.storage import store
from tests.methods.test_sve_stage import _ctx, _params, _setup, _train_sve


def _train_sves(params: dict) -> list[dict]:
    """Stage sve-train, then stage sve, which writes every M of params ``sve.members`` (in this process)."""
    ctx, cfg = _ctx(params)
    stage.train_nested(ctx, cfg)
    written = method_stage.run(parse_params(params), "sve", list(cfg.members), progress=False)
    return [written[f"sve-m{m}"] for m in sorted(cfg.members)]


def _run(root, monkeypatch, sizes):
    _setup(root)
    monkeypatch.chdir(root)
    params = _params(members=sizes)
    return _train_sves(params) if len(sizes) > 1 else [_train_sve(params, sizes[0])]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A nested run of sizes [1, 2, 3] and separate runs of sizes 1 and 2, each in its own project."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        for key, sizes in (("nested", [3, 1, 2]), ("m1", [1]), ("m2", [2])):
            root = tmp_path_factory.mktemp(f"sve_{key}")
            out[key] = root, _run(root, mp, sizes)
    return out


def _logits(root, name, split):
    return torch.as_tensor(
        np.asarray(store.load_logits_file(root / "results" / "methods" / name / f"{split}.safetensors").logits)
    )


def test_nested_run_writes_one_output_per_size_from_one_training(runs):
    root, records = runs["nested"]
    assert [r["members"] for r in records] == [1, 2, 3]
    assert sorted(p.name for p in (root / "results" / "methods").iterdir()) == ["sve-m1", "sve-m2", "sve-m3"]
    assert sorted(p.name for p in (root / "results" / "method_checkpoints" / "sve").iterdir()) == ["m3"]  # trained once
    for r in records:
        assert r == store.read_json(root / "results" / "methods" / f"sve-m{r['members']}" / "cost.json")
        assert r["trained_members"] == 3 and r["gflops"] == pytest.approx(
            r["members"] * r["gflops_one_forward"], rel=1e-12
        )
    outputs = root / "results" / "method_checkpoints" / "sve" / "m3" / stage.OUTPUTS  # sve-train's one forward
    assert sorted(store.read_json(outputs / "sizes.json")["sizes"]) == ["1", "2", "3"]
    for split in ("val", "test", "ood"):  # each size is the first M members of that forward, sliced
        members = store.load_logits_file(outputs / f"{split}.safetensors").logits
        assert members.shape[0] == 3
        for m in (1, 2, 3):
            assert torch.equal(_logits(root, f"sve-m{m}", split), members[:m]), (split, m)
    one = records[0]
    for r in records[1:]:  # per-member counts scale with M
        assert r["trainable_params"] == r["members"] * one["trainable_params"]
        assert r["backbone_params"] == one["backbone_params"]


@pytest.mark.parametrize("size", [1, 2])
def test_first_members_of_the_nested_run_equal_a_separate_run(runs, size):
    nested_root, nested = runs["nested"]
    root, (record,) = runs[f"m{size}"]
    big = load_file(str(nested_root / "results" / "method_checkpoints" / "sve" / "m3" / "model.safetensors"))
    alone = load_file(str(root / "results" / "method_checkpoints" / f"sve-m{size}" / "model.safetensors"))
    assert set(big) == set(alone)
    trained = 0
    for k, v in alone.items():
        if v.shape != big[k].shape:  # per-member tensors: (M, ...)
            assert torch.allclose(big[k][:size], v, rtol=0, atol=2e-4), k
            trained += 1
        else:
            assert torch.equal(big[k], v), k
    assert trained > 10
    for split in ("val", "test", "ood"):
        z, ref = _logits(nested_root, f"sve-m{size}", split), _logits(root, f"sve-m{size}", split)
        assert torch.allclose(z, ref, rtol=0, atol=1e-5), split
        assert (z.softmax(-1).mean(0).argmax(-1) == ref.softmax(-1).mean(0).argmax(-1)).all(), split
    mine = nested[size - 1]
    skip = ("throughput", "trained_members", "val_score")
    assert {k: v for k, v in mine.items() if k not in skip} == {k: v for k, v in record.items() if k not in skip}
    assert mine["val_score"] == pytest.approx(record["val_score"], abs=1 / 9)  # 9 val images: at most one flips


def test_larger_members_are_not_clones_of_the_first(runs):
    root, _ = runs["nested"]
    z = _logits(root, "sve-m3", "test")
    assert torch.equal(z[:2], _logits(root, "sve-m2", "test"))
    assert not torch.allclose(z[0], z[2], atol=1e-3) and not torch.allclose(z[1], z[2], atol=1e-3)


def test_member_init_does_not_depend_on_the_ensemble_size():
    base = timm.create_model("test_vit", pretrained=False, img_size=32)
    small, big = (
        SingularValueEnsemble(
            copy.deepcopy(base),
            members=m,
            num_classes=4,
            pretrained=False,
            allow_random_init=True,
            sigma_init=0.05,
            seed=7,
        )
        for m in (2, 5)
    )
    sub = big.first_members(2)
    assert sub.members == 2 and big.members == 5
    for (name, a), (_, b) in zip(small.state_dict().items(), sub.state_dict().items()):
        assert torch.equal(a, b), name
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(big(x)[:2], sub(x), atol=1e-6)
        assert torch.equal(sub(x), small(x))
    other = SingularValueEnsemble(
        copy.deepcopy(base), members=2, num_classes=4, pretrained=False, allow_random_init=True, sigma_init=0.05, seed=8
    )
    assert not torch.equal(other.head_weight, small.head_weight)  # the seed still matters
    with pytest.raises(ValueError, match=r"members must be an integer in \[1, 5\]"):
        big.first_members(6)


def test_summed_loss_gives_each_member_its_own_gradient():
    z = torch.randn(3, 4, 5, requires_grad=True)
    y = torch.tensor([0, 1, 2, 3])
    stage.summed_member_cross_entropy(z, y).backward()
    alone = z[:1].detach().clone().requires_grad_(True)
    stage.summed_member_cross_entropy(alone, y).backward()
    assert torch.equal(z.grad[:1], alone.grad)
    ref = sum(torch.nn.functional.cross_entropy(z[m], y) for m in range(3))
    assert torch.allclose(stage.summed_member_cross_entropy(z, y), ref)


def test_root_dvc_yaml_trains_once_and_writes_each_size_from_that_checkpoint():
    import yaml

    from tests.methods.test_sve_stage import ROOT

    all_stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    train, out = all_stages["sve-train"], all_stages["sve"]
    assert train["cmd"] == "python pipelines/sve.py --train"
    assert [next(iter(o)) for o in train["outs"]] == [f"results/method_checkpoints/{stage.NESTED}"]
    members = sorted(yaml.safe_load((ROOT / "params.yaml").read_text())["sve"]["members"])
    assert "foreach" not in out and out["cmd"] == f"python pipelines/sve.py --members {' '.join(map(str, members))}"
    assert f"results/method_checkpoints/{stage.NESTED}" in out["deps"]
    assert out["outs"] == [f"results/methods/sve-m{m}" for m in members]  # one stage, one output per size


def test_output_without_the_nested_training_is_refused_with_one_line(tmp_path, monkeypatch):
    _setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        store.StoreError, match=r"no finished SVE training for the current params; run `dvc repro sve-train`"
    ):
        method_stage.run(parse_params(_params(members=[1, 2])), "sve", [1, 2], progress=False)
    with pytest.raises(ValueError, match=r"--members 4 is not in params.yaml sve.members \[1, 2\]"):
        method_stage.run(parse_params(_params(members=[1, 2])), "sve", [1, 2, 4], progress=False)
    # a dvc.yaml older than params.yaml (a size added): its stage lists fewer sizes than params, refused
    with pytest.raises(
        ValueError, match=r"--members 1 leaves out \[2\] of params.yaml sve.members \[1, 2\].*regenerate"
    ):
        method_stage.run(parse_params(_params(members=[1, 2])), "sve", [1], progress=False)
    assert not (tmp_path / "results" / "methods").exists()


def test_stage_script_needs_train_or_members(tmp_path):
    import subprocess

    import yaml

    from tests.methods.test_sve_stage import ROOT

    _setup(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(_params()))
    proc = subprocess.run(["python", str(ROOT / "pipelines" / "sve.py")], cwd=tmp_path, capture_output=True, text=True)
    assert (
        proc.returncode == 2 and "give --train or --members M [M ...]" in proc.stderr and "Traceback" not in proc.stderr
    )


def test_not_nested_trains_every_size_with_the_former_draws(tmp_path, monkeypatch):
    """``sve.nested: false``: sve-train trains each size by itself, as separate runs did before nesting."""
    _setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    params = _params(members=[1, 2], nested=False)
    assert stage.trained_sizes(_ctx(params)[1]) == [1, 2]
    records = _train_sves(params)
    assert sorted(p.name for p in (tmp_path / "results" / "method_checkpoints" / "sve").iterdir()) == ["m1", "m2"]
    assert [r["trained_members"] for r in records] == [1, 2]
    # the former init: one generator for all members, layer by layer, then the heads
    ctx, cfg = _ctx(params)
    entry, _, _ = stage.check(ctx, cfg, 2)
    model = stage.build(entry, cfg, 2, 3)
    gen = torch.Generator().manual_seed(0)
    first = model.sve_layers()[0]
    eps = torch.randn(2, first.singular_values.shape[1], generator=gen) * 0.05
    s = first.singular_values.detach() / (1 + eps)
    assert torch.allclose(s[0], s[1], rtol=1e-5)  # both members scale the same pretrained singular values
    # the mean member loss (not the sum): the M=2 output equals an M=2 run by itself
    alone = tmp_path / "alone"
    alone.mkdir()
    _setup(alone)
    monkeypatch.chdir(alone)
    rec = _train_sve(params, 2)
    for split in ("val", "test", "ood"):
        assert torch.equal(_logits(tmp_path, "sve-m2", split), _logits(alone, "sve-m2", split)), split
    assert {k: v for k, v in rec.items() if k != "throughput"} == {
        k: v for k, v in records[1].items() if k != "throughput"
    }
    with pytest.raises(ValueError, match="params.yaml sve: nested must be true or false"):
        _ctx(_params(nested="yes"))
