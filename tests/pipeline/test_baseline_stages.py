"""Baseline stages on a tiny fake tree: the method-output contract, cost formulas, evaluation, bad input."""

from contextlib import chdir
from pathlib import Path

import pandas as pd
import pytest
import torch
from baseline_tree import CLASSES, LEVIT, SIZES, VIT, ZOO, make_tree, params, run_method, typed

from benchmark.evaluation import stage as evaluate
from benchmark.models import factory
from benchmark.models.cost import count_flops, count_params
from benchmark.models.train import save_weights
from benchmark.models.zoo import parse_entry
from benchmark.stages.logits_stage import logits_and_cost
from benchmark.stages.per_model import model_stage
from benchmark.storage import store

BASELINES = {
    "soups": {"soup-t": {"models": ["t-s0", "t-s1", "t-s2"]}},
    "mc_dropout": {"mcd-t": {"model": "t-s0", "samples": 4, "p": 0.3, "seed": 1, "variant": "post-hoc"}},
    "laplace": {
        "la-t": {"model": "t-s1", "hessian": "kron", "predictive": "probit", "prior_precisions": [0.1, 10.0, 1000.0]},
        "la-mc": {
            "model": "t-s2",
            "hessian": "diag",
            "predictive": "mc",
            "samples": 3,
            "prior_precisions": [1.0],
            "splits": ["val", "te*"],
        },
    },
    "shallow": {
        "sh-t": {"model": "t-s0", "members": 3, "recipe": "heads", "seed": 2, "backbone": "frozen"},
        "sh-j": {"model": "t-s1", "members": 2, "recipe": "scratch", "seed": 1, "splits": ["val", "test"]},
    },
}


def _one_forward_gflops(name: str) -> float:
    return count_flops(factory.create(parse_entry(name, ZOO[name]), CLASSES, load_weights=False), 32)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    p = params(root, **BASELINES)
    with chdir(root):
        out = {
            "soup": run_method(p, "soups", "soup-t"),
            **run_method(p, "mc_dropout", "mcd-t"),
            **run_method(p, "laplace", "la-t"),
            **run_method(p, "laplace", "la-mc"),
            **run_method(p, "shallow", "sh-t"),
            **run_method(p, "shallow", "sh-j"),
        }
        p = typed(p)
        for name in ("t-s0", "t-s1", "t-s2", "r"):
            logits_and_cost(model_stage(p, name), progress=False)
    yield root, p, out


def test_method_outputs_follow_the_contract(run):
    root, _, out = run
    methods = root / "results" / "methods"
    assert sorted(p.name for p in methods.iterdir()) == [
        "la-mc",
        "la-t",
        "mcd-t",
        "sh-j",
        "sh-t",
        "soup-t-greedy",
        "soup-t-uniform",
    ]
    shapes = {
        "soup-t-uniform": (),
        "soup-t-greedy": (),
        "mcd-t": (4,),
        "la-t": (),
        "la-mc": (3,),
        "sh-t": (3,),
        "sh-j": (2,),
    }
    for name, lead in shapes.items():
        splits = ["test", "val"] if name in ("la-mc", "sh-j") else ["ood", "test", "val"]
        assert sorted(f.stem for f in (methods / name).glob("*.safetensors")) == splits
        for s in splits:
            lf = store.load_logits_file(methods / name / f"{s}.safetensors")
            assert tuple(lf.logits.shape) == (*lead, SIZES[s], CLASSES)
            assert torch.isfinite(lf.logits).all()
        info = store.read_json(methods / name / "cost.json")
        assert {"family", "method", "base", "gflops", "params", "throughput"} <= set(info)
    info = store.read_json(methods / "soup-t-greedy" / "cost.json")
    assert info["family"] == "soup" and info["method"] == "greedy" and info["base"] == info["ingredients"][0]
    assert info["rule"] == "strict improvement (released code)"
    mcd = store.read_json(methods / "mcd-t" / "cost.json")
    assert (mcd["method"], mcd["variant"], mcd["p"], mcd["trained_drop_rate"]) == ("T4-post-hoc", "post-hoc", 0.3, 0.0)
    assert info["val_score"] >= max(info["val_scores"].values())  # never worse than its best (first) ingredient
    assert set(out["soup"]) == {"soup-t-uniform", "soup-t-greedy"}


def test_joint_shallow_ensemble_trains_the_backbone_from_its_init(run):
    root, _, out = run
    from safetensors.torch import load_file

    saved = load_file(str(root / "results" / "method_checkpoints" / "sh-j" / "model.safetensors"))
    init = factory.create(parse_entry("t-s1", ZOO["t-s1"]), CLASSES).state_dict()  # the entry's initial weights
    trained = [k for k, v in init.items() if v.is_floating_point() and not torch.equal(saved[f"model.{k}"], v)]
    classifier = {f"{n}.{p}" for n in ("head.fc", "fc", "classifier", "head") for p in ("weight", "bias")}
    assert trained and set(trained) - classifier  # backbone tensors moved
    assert out["sh-j"]["backbone"] == "joint" and out["sh-j"]["method"] == "m2"
    assert out["sh-t"]["backbone"] == "frozen" and out["sh-t"]["method"] == "m3-frozen"


def test_cost_of_each_baseline_follows_its_formula(run):
    root, _, out = run
    one = _one_forward_gflops("t-s0")
    d = factory.create(parse_entry("t-s0", ZOO["t-s0"]), CLASSES, load_weights=False).num_features
    for name in ("soup-t-uniform", "soup-t-greedy"):
        assert out["soup"][name]["gflops"] == pytest.approx(one)  # a soup is one model
    assert out["mcd-t"]["gflops"] == pytest.approx(4 * one)  # T x one forward
    assert out["mcd-t"]["params"] == count_params(
        factory.create(parse_entry("t-s0", ZOO["t-s0"]), CLASSES, load_weights=False)
    )
    c = CLASSES
    assert out["la-t"]["gflops"] == pytest.approx(one + (d * (d + 1) + (d + 1) * c + c * c) / 1e9)  # kron probit head
    assert out["la-mc"]["gflops"] == pytest.approx(one + (3 - 1) * c * d / 1e9)  # 3 sampled heads replace 1
    assert out["la-t"]["prior_precision"] in (0.1, 10.0, 1000.0)
    assert out["sh-t"]["gflops"] == pytest.approx(one + (3 - 1) * c * d / 1e9)  # 3 heads replace 1
    assert out["sh-t"]["trainable_params"] == 3 * (c * d + c)
    backbone = count_params(factory.create(parse_entry("t-s1", ZOO["t-s1"]), CLASSES, load_weights=False)) - (c * d + c)
    assert out["sh-j"]["gflops"] == pytest.approx(_one_forward_gflops("t-s1") + (2 - 1) * c * d / 1e9)
    assert out["sh-j"]["trainable_params"] == backbone + 2 * (
        c * d + c
    )  # backbone + heads; the old classifier is unused
    nll = out["la-t"]["val_nll"]
    assert nll[str(out["la-t"]["prior_precision"])] == min(nll.values())


def test_evaluate_lists_the_baselines_and_deep_ensembles_cost_the_sum(run):
    root, p, _ = run
    with chdir(root):
        evaluate.run(p, progress=False)
        res = pd.read_csv(root / "results" / "metrics.csv", keep_default_na=False)
    costs = {n: store.read_json(root / "results" / "cost" / f"{n}.json") for n in ("t-s0", "t-s1", "t-s2")}
    test = res[(res["split"] == "test") & (res["metric"] == "accuracy")]
    assert {"soup", "mc_dropout", "laplace", "shallow_ensemble", "deep_ensemble", "single"} <= set(test["family"])
    de = test[test["family"] == "deep_ensemble"].set_index(["method", "members"])
    for members in (["t-s0", "t-s1"], ["t-s0", "t-s1", "t-s2"]):
        m = len(members)
        for method in (f"m{m}", f"m{m}_logit"):
            row = de.loc[(method, "+".join(members))]
            assert row["gflops"] == pytest.approx(sum(costs[n]["gflops"] for n in members))
            assert row["params"] == sum(costs[n]["params"] for n in members)
            assert row["fit"] == "none"
    mcd = test[test["family"] == "mc_dropout"].iloc[0]
    assert mcd["members"] == mcd["base"] == "t-s0" and mcd["gflops"] == pytest.approx(4 * costs["t-s0"]["gflops"])


def test_each_row_carries_its_training_budget_own_plus_the_fine_tunes_it_builds_on(run):
    """Hand-worked budgets: the tree's train split has 48 images; recipe scratch 1 epoch, heads 2 epochs."""
    root, p, out = run
    with chdir(root):
        evaluate.run(p, progress=False)
        res = pd.read_csv(root / "results" / "metrics.csv", keep_default_na=False)
    n = SIZES["train"]
    model = {
        name: count_params(factory.create(parse_entry(name, ZOO[name]), CLASSES, load_weights=False)) for name in ZOO
    }
    for name in ZOO:  # a zoo model's cost record: 1 epoch x 48 images, a full fine-tune of all its parameters
        cost = store.read_json(root / "results" / "cost" / f"{name}.json")
        assert (cost["train_images"], cost["train_params"]) == (1 * n, model[name])
    # what the method stages recorded: their own training and the zoo models they build on
    assert all(
        (out["soup"][k]["own_train_images"], out["soup"][k]["builds_on"]) == (0, ["t-s0", "t-s1", "t-s2"])
        for k in ("soup-t-uniform", "soup-t-greedy")
    )  # the greedy soup needs every ingredient trained
    assert (out["mcd-t"]["own_train_images"], out["mcd-t"]["builds_on"]) == (0, ["t-s0"])
    assert (out["la-mc"]["own_train_params"], out["la-mc"]["builds_on"]) == (0, ["t-s2"])
    d = factory.create(parse_entry("t-s0", ZOO["t-s0"]), CLASSES, load_weights=False).num_features
    heads = 3 * (CLASSES * d + CLASSES)  # the frozen backbone's 3 heads
    assert (out["sh-t"]["own_train_images"], out["sh-t"]["own_train_params"], out["sh-t"]["builds_on"]) == (
        2 * n,
        heads,
        ["t-s0"],
    )
    assert (out["sh-j"]["own_train_images"], out["sh-j"]["builds_on"]) == (1 * n, [])  # joint: from the init
    test = res[(res["split"] == "test") & (res["metric"] == "accuracy")]

    def budget(family, members):
        rows = test[(test["family"] == family) & (test["members"] == members)]
        assert len(rows) >= 1 and rows[["train_images", "train_params"]].nunique().max() == 1
        return tuple(float(v) for v in rows[["train_images", "train_params"]].iloc[0])

    assert budget("single", "r") == (n, model["r"])
    assert budget("deep_ensemble", "t-s0+t-s1+t-s2") == (3 * n, 3 * model["t-s0"])  # every member trained
    duo = test[test["family"] == "duo"].iloc[0]
    assert budget("duo", duo["members"]) == (2 * n, model[duo["base"]] + model[duo["sidekick"]])
    assert budget("soup", "t-s0+t-s1+t-s2") == (
        3 * n,
        3 * model["t-s0"],
    )  # the uniform soup: 3 fine-tunes, nothing more
    greedy = test[(test["family"] == "soup") & (test["method"] == "greedy")]
    assert (float(greedy["train_images"].iloc[0]), float(greedy["train_params"].iloc[0])) == (3 * n, 3 * model["t-s0"])
    assert budget("mc_dropout", "t-s0") == (n, model["t-s0"])
    assert budget("laplace", "t-s1") == (n, model["t-s1"])
    sh = test[test["family"] == "shallow_ensemble"].groupby("method")[["train_images", "train_params"]].first()
    assert tuple(sh.loc["m3-frozen"]) == (2 * n + n, heads + model["t-s0"])  # 2 epochs of heads on t-s0's fine-tune
    assert tuple(sh.loc["m2"]) == (
        n,
        out["sh-j"]["trainable_params"],
    )  # joint: 1 epoch from the init, nothing inherited


def test_lora_ensemble_stage_trains_adapters_and_writes_members(tmp_path):
    make_tree(tmp_path, zoo={**ZOO, **VIT}, checkpoints=())
    p = params(tmp_path, lora_ensemble={"lora-vit": {"model": "vit", "members": 2, "rank": 2, "recipe": "heads"}})
    with chdir(tmp_path):
        info = run_method(p, "lora_ensemble", "lora-vit")["lora-vit"]
        z = store.load_logits_file(Path("results/methods/lora-vit/test.safetensors")).logits
        vit = factory.create(parse_entry("vit", VIT["vit"]), CLASSES, load_weights=False)
    assert z.shape == (2, SIZES["test"], CLASSES) and not torch.equal(z[0], z[1])
    assert (tmp_path / "results" / "method_checkpoints" / "lora-vit" / "train.json").exists()
    assert (info["variant"], info["method"]) == ("published", "m2-r2-published")
    tokens = vit.patch_embed.num_patches + vit.num_prefix_tokens
    # published: q, k, v and the output projection, rank 2 each (A: in x r, B: r x out per block)
    adapters = sum(
        2 * (3 * b.attn.qkv.in_features + b.attn.qkv.out_features + b.attn.proj.in_features + b.attn.proj.out_features)
        for b in vit.blocks
    )
    assert info["gflops"] == pytest.approx(2 * (count_flops(vit, 160) + tokens * adapters / 1e9), rel=1e-9)
    assert info["trainable_params"] == 2 * adapters + 2 * (vit.num_features * CLASSES + CLASSES)


def _dropout_tree(root: Path, recorded: float) -> dict:
    """Tree with zoo model 'd' (recipe 'drop': drop_rate 0.2) whose train.json records ``recorded``."""
    zoo = {**ZOO, "d": {"arch": "test_efficientnet", "init": "scratch", "img_size": 32, "seed": 0, "recipe": "drop"}}
    make_tree(root, zoo=zoo, checkpoints=())
    p = params(root)
    p["recipes"]["drop"] = {"epochs": 1, "batch_size": 16, "lr": 0.01, "drop_rate": 0.2}
    model = factory.create(parse_entry("d", zoo["d"]), CLASSES, load_weights=False, drop_rate=0.2)
    folder = root / "results" / "checkpoints" / "d"
    save_weights(folder / "model.safetensors", model)
    store.write_json(folder / "train.json", {"seed": 0, "recipe": {**p["recipes"]["drop"], "drop_rate": recorded}})
    return p


def test_mc_dropout_samples_the_rate_the_model_was_fine_tuned_with(tmp_path):
    p = _dropout_tree(tmp_path, 0.2)
    p["baselines"]["mc_dropout"] = {
        "mcd-d": {"model": "d", "samples": 3},
        "mcd-x": {"model": "d", "samples": 3, "p": 0.5},
    }
    with chdir(tmp_path):
        info = run_method(p, "mc_dropout", "mcd-d")["mcd-d"]
        with pytest.raises(
            ValueError,
            match=r"MC dropout of model 'd': p=0.5 differs from the rate the model was trained "
            r"with \(drop_rate 0.2\)",
        ):
            run_method(p, "mc_dropout", "mcd-x")
    assert (info["method"], info["variant"], info["p"], info["trained_drop_rate"]) == (
        "T3-trained",
        "trained",
        0.2,
        0.2,
    )
    z = store.load_logits_file(tmp_path / "results" / "methods" / "mcd-d" / "test.safetensors").logits
    assert z.shape == (3, SIZES["test"], CLASSES) and not torch.equal(z[0], z[1])


def test_mc_dropout_trusts_the_checkpoint_record_over_the_recipe(tmp_path):
    """A checkpoint trained before the recipe got its drop_rate (train.json says 0) is refused, not sampled."""
    p = _dropout_tree(tmp_path, 0.0)
    p["baselines"]["mc_dropout"] = {"mcd-d": {"model": "d", "samples": 3}}
    with chdir(tmp_path), pytest.raises(ValueError, match=r"fine-tuned without dropout \(drop_rate 0\)"):
        run_method(p, "mc_dropout", "mcd-d")
    assert not (tmp_path / "results" / "methods" / "mcd-d").exists()


# --- bad input: a clear error naming the method and model, before anything runs ----------------


@pytest.fixture()
def bare(tmp_path):
    make_tree(
        tmp_path, zoo={**ZOO, **LEVIT}, checkpoints=()
    )  # no checkpoints: reaching them would raise "training ... has not finished"
    with chdir(tmp_path):
        yield tmp_path


@pytest.mark.parametrize(
    "kind, item, match",
    [
        ("soups", {"models": ["t-s0"]}, r"model soup needs a list of at least 2 distinct models"),
        ("soups", {"models": ["t-s0", "nope"]}, r"model soup of unknown model 'nope'"),
        (
            "soups",
            {"models": ["t-s0", "r"]},
            r"model soup ingredients must be fine-tunes of one architecture.*'r' has arch 'test_resnet'",
        ),
        (
            "soups",
            {"models": ["t-s0", "t-s1"], "splits": ["val"]},
            r"splits must include \['val', 'test'\]; missing \['test'\]",
        ),
        (
            "soups",
            {"models": ["t-s0", "t-s1"], "splits": ["val", "test", "corrupt-*"]},
            r"split 'corrupt-\*' matches none",
        ),
        (
            "mc_dropout",
            {"model": "t-s0", "samples": 0, "p": 0.2},
            r"MC dropout of model 't-s0': samples T must be an integer >= 1",
        ),
        ("mc_dropout", {"model": "nope", "samples": 4}, r"MC dropout of unknown model 'nope'"),
        (
            "mc_dropout",
            {"model": "t-s0", "samples": 4},
            r"MC dropout of model 't-s0': the model was fine-tuned without dropout",
        ),
        (
            "mc_dropout",
            {"model": "t-s0", "samples": 4, "p": 0.2},
            r"the model was fine-tuned without dropout.*variant: post-hoc",
        ),
        (
            "mc_dropout",
            {"model": "t-s0", "samples": 4, "p": 0.2, "variant": "x"},
            r"variant must be one of \['trained', 'post-hoc'\]",
        ),
        (
            "lora_ensemble",
            {"model": "t-s0", "members": 2, "rank": 2, "recipe": "heads", "variant": "fused"},
            r"LoRA-Ensemble of model 't-s0': variant must be one of \['published', 'fused-qkv'\]",
        ),
        (
            "mc_dropout",
            {"model": "levit", "samples": 4, "p": 0.2, "variant": "post-hoc"},
            r"MC dropout does not apply to model 'levit' \(LevitDistilled\): its classifier is tuple",
        ),
        (
            "mc_dropout",
            {"model": "t-s0", "samples": 4, "p": 0.2, "seed": "x"},
            r"baselines.mc_dropout.b: seed must be an integer >= 0",
        ),
        ("mc_dropout", {"model": "t-s0", "T": 4}, r"missing keys \['samples'\], unknown keys \['T'\]"),
        (
            "laplace",
            {"model": "levit", "prior_precisions": [1.0]},
            r"last-layer Laplace does not apply to model 'levit'",
        ),
        (
            "laplace",
            {"model": "t-s0", "prior_precisions": [0.0]},
            r"baselines.laplace.b: prior_precisions\[0\] must be > 0, got 0.0",
        ),
        (
            "laplace",
            {"model": "t-s0", "prior_precisions": [1.0], "hessian": "full"},
            r"last-layer Laplace of model 't-s0': hessian must be one of",
        ),
        (
            "shallow",
            {"model": "t-s0", "members": 1, "recipe": "heads"},
            r"shallow ensemble of model 't-s0': members must be an integer >= 2",
        ),
        (
            "shallow",
            {"model": "t-s0", "members": 2, "recipe": "nope"},
            r"shallow ensemble of model 't-s0': unknown recipe 'nope'",
        ),
        (
            "shallow",
            {"model": "t-s0", "members": 2, "recipe": "scratch", "backbone": "frozen"},
            r"with a frozen backbone the heads train on features, so recipe 'scratch' must have shift_pixels: 0",
        ),
        (
            "shallow",
            {"model": "t-s0", "members": 2, "recipe": "scratch", "backbone": "both"},
            r"shallow ensemble of model 't-s0': backbone must be one of \['joint', 'frozen'\]",
        ),
        (
            "shallow",
            {"model": "levit", "members": 2, "recipe": "heads"},
            r"shallow ensemble does not apply to model 'levit'",
        ),
        (
            "lora_ensemble",
            {"model": "t-s0", "members": 2, "rank": 2, "recipe": "heads"},
            r"LoRA-Ensemble does not apply to model 't-s0' \(EfficientNet\).*needs a ViT",
        ),
        (
            "lora_ensemble",
            {"model": "t-s0", "members": 2, "rank": 0, "recipe": "heads"},
            r"LoRA-Ensemble of model 't-s0': rank must be",
        ),
    ],
)
def test_bad_baseline_entries_fail_before_any_work(bare, kind, item, match):
    p = params(bare, **{kind: {"b": item}})
    with pytest.raises(ValueError, match=match):
        run_method(p, kind, "b")
    assert not (bare / "results" / "methods").exists()


def test_output_names_must_not_shadow_zoo_models(bare):
    p = params(bare, mc_dropout={"t-s1": {"model": "t-s0", "samples": 2, "p": 0.1}})
    with pytest.raises(
        ValueError, match=r"baselines.mc_dropout.t-s1: output name 't-s1' must .* differ from every zoo model"
    ):
        run_method(p, "mc_dropout", "t-s1")


def test_unknown_entry_is_named(bare):
    p = params(bare, laplace={"la": {"model": "t-s0", "prior_precisions": [1.0]}})
    with pytest.raises(ValueError, match=r"baselines.laplace.nope: no such last-layer Laplace entry .*\['la'\]"):
        run_method(p, "laplace", "nope")
