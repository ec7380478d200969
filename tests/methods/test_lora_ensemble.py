"""LoRA-Ensemble: the batched member arithmetic against LoRA's formula per q/k/v block, the published init, FLOPs, bad
input."""

import copy
import math

import pytest
import timm
import torch
import torch.nn.functional as F

from benchmark.methods.lora_ensemble import LoRAEnsemble, LoRAEnsembleLinear
from benchmark.models.cost import count_flops

M, R = 3, 2


@pytest.fixture(scope="module")
def vit():
    torch.manual_seed(0)
    return timm.create_model("test_vit", num_classes=4).eval()


def _x(n=2):
    return torch.randn(n, 3, 160, 160, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("chunks", [1, 3])
def test_lora_layer_rows_use_their_members_dense_weight(chunks):
    """Against LoRA's formula written out per block: W_j + (alpha / r) B_{m,j} A_{m,j} for q, k, v (or one block)."""
    base = torch.nn.Linear(6, 9)
    layer = LoRAEnsembleLinear(
        base, M, R, alpha=4.0, gen=torch.Generator().manual_seed(0), chunks=chunks, init="xavier", gain=10.0
    )
    with torch.no_grad():
        layer.lora_b.normal_()
    x = torch.randn(M * 2, 7, 6)  # member-major: rows [2m, 2m + 2) belong to member m
    with torch.no_grad():
        out = layer(x)
        for m in range(M):
            blocks = []
            for j, w_j in enumerate(base.weight.chunk(chunks, 0)):
                a = layer.lora_a[m, j].T  # A (r, in)
                b = layer.lora_b[m, j].T  # B (out / k, r)
                assert a.shape == (R, 6) and b.shape == (9 // chunks, R)
                blocks.append(w_j + (4.0 / R) * b @ a)
            w = torch.cat(blocks)
            assert torch.allclose(layer.delta_weight(m), w - base.weight, atol=1e-5)
            assert torch.allclose(out[2 * m : 2 * m + 2], F.linear(x[2 * m : 2 * m + 2], w, base.bias), atol=1e-4)


def test_split_qkv_adapters_equal_separate_q_k_v_projections():
    """Adapting the fused qkv as three blocks is adapting separate q, k, v layers (the authors' code)."""
    base = torch.nn.Linear(8, 24)
    layer = LoRAEnsembleLinear(
        base, 2, R, alpha=float(R), gen=torch.Generator().manual_seed(1), chunks=3, init="xavier", gain=10.0
    )
    with torch.no_grad():
        layer.lora_b.normal_()
        x = torch.randn(2 * 3, 5, 8)
        out = layer(x)
        for m in range(2):
            xm = x[3 * m : 3 * m + 3]
            parts = []
            for j, (w, b) in enumerate(zip(base.weight.chunk(3, 0), base.bias.chunk(3, 0))):  # q, k, v
                proj = F.linear(xm, w, b)
                parts.append(proj + F.linear(F.linear(xm, layer.lora_a[m, j].T), layer.lora_b[m, j].T))  # scale 1
            assert torch.allclose(out[3 * m : 3 * m + 3], torch.cat(parts, -1), atol=1e-4)


def test_published_init_is_xavier_uniform_gain_10_and_fused_is_peft_default():
    d, r = 768, 8  # ViT-B, the released rank
    base = torch.nn.Linear(d, 3 * d)
    pub = LoRAEnsembleLinear(
        base, 4, r, alpha=float(r), gen=torch.Generator().manual_seed(0), chunks=3, init="xavier", gain=10.0
    )
    ref = torch.empty(r, d)
    torch.nn.init.xavier_uniform_(ref, gain=10.0)  # torch's own Xavier on A (r, in), as models/lora.py does
    bound = 10.0 * math.sqrt(6 / (d + r))
    a = pub.lora_a.detach()
    assert a.abs().max() <= bound and a.abs().max() > 0.99 * bound
    assert a.std().item() == pytest.approx(ref.std().item(), rel=0.03)
    assert a.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    fused = LoRAEnsembleLinear(base, 4, r, alpha=float(r), gen=torch.Generator().manual_seed(0), init="kaiming")
    peft_like = torch.empty(r, d)
    torch.nn.init.kaiming_uniform_(peft_like, a=math.sqrt(5))  # peft's default for lora_A
    assert fused.lora_a.std().item() == pytest.approx(peft_like.std().item(), rel=0.05)
    assert a.std().item() / fused.lora_a.std().item() == pytest.approx(24.4, rel=0.05)  # the "about 24x"
    assert not torch.equal(a[0], a[1]) and not torch.equal(a[0, 0], a[0, 1])  # per member and per block
    assert torch.count_nonzero(pub.lora_b) == 0 and torch.count_nonzero(fused.lora_b) == 0


def test_members_start_as_the_pretrained_features_and_stay_independent(vit):
    model = copy.deepcopy(vit)
    ens = LoRAEnsemble(model, members=M, rank=R, seed=0, model_name="vit")
    ref = copy.deepcopy(vit)
    with torch.no_grad():  # identical heads + B = 0: every member is the single model
        ens.head_weight.copy_(vit.head.weight.T.expand(M, -1, -1))
        ens.head_bias.copy_(vit.head.bias.expand(M, 1, -1))
        x = _x()
        out = ens(x)
        assert out.shape == (M, 2, 4)
        for member in out:
            assert torch.allclose(member, ref(x), atol=1e-5)
        layer = next(m for m in ens.modules() if isinstance(m, LoRAEnsembleLinear))
        layer.lora_b[1].normal_()  # changing member 1 changes only member 1
        moved = ens(x)
    assert torch.allclose(moved[0], out[0], atol=1e-6) and torch.allclose(moved[2], out[2], atol=1e-6)
    assert not torch.allclose(moved[1], out[1], atol=1e-4)
    a = [m.lora_a for m in ens.modules() if isinstance(m, LoRAEnsembleLinear)][0]
    assert not torch.equal(a[0], a[1])  # members differ in their A initialisation


@pytest.mark.parametrize("variant", ["published", "fused-qkv"])
def test_only_adapters_and_heads_train(vit, variant):
    ens = LoRAEnsemble(copy.deepcopy(vit), members=M, rank=R, model_name="vit", variant=variant)
    layers = [m for m in ens.modules() if isinstance(m, LoRAEnsembleLinear)]
    assert len(layers) == 2 * len(vit.blocks)  # qkv and proj of every block
    d = vit.embed_dim
    # published: q, k, v (d -> d each) and proj (d -> d), rank r each: 4 r (d + d) per block and member
    per_block = 4 * R * 2 * d if variant == "published" else R * (d + 3 * d) + R * 2 * d
    heads = M * (vit.num_features * 4 + 4)
    assert sum(p.numel() for p in ens.trainable_parameters()) == M * len(vit.blocks) * per_block + heads
    assert ens.variant == variant
    assert [m.chunks for m in layers] == ([3, 1] if variant == "published" else [1, 1]) * len(vit.blocks)


@pytest.mark.parametrize("variant", ["published", "fused-qkv"])
def test_flops_are_members_times_one_forward_plus_adapters(vit, variant):
    ens = LoRAEnsemble(copy.deepcopy(vit), members=M, rank=R, model_name="vit", variant=variant)
    tokens = vit.patch_embed.num_patches + vit.num_prefix_tokens
    d = vit.embed_dim
    per_block = 4 * R * 2 * d if variant == "published" else R * (d + 3 * d) + R * 2 * d  # MACs = adapter weights
    assert ens.adapter_macs(tokens) == tokens * len(vit.blocks) * per_block
    assert count_flops(ens, 160) == pytest.approx(
        M * (count_flops(vit, 160) + ens.adapter_macs(tokens) / 1e9), rel=1e-9
    )


def test_lora_ensemble_on_a_cnn_names_method_and_model():
    cnn = timm.create_model("test_efficientnet", num_classes=4)
    with pytest.raises(
        ValueError, match=r"LoRA-Ensemble does not apply to model 'eff-s0' \(EfficientNet\).*needs a ViT"
    ):
        LoRAEnsemble(cnn, members=2, rank=2, model_name="eff-s0")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"members": 0}, "members must be an integer >= 1"),
        ({"rank": 1.5}, "rank must be an integer >= 1"),
        ({"alpha": -1.0}, "alpha must be a finite number > 0"),
        ({"variant": "peft"}, r"variant must be one of \['published', 'fused-qkv'\]"),
    ],
)
def test_bad_adapter_settings(vit, kw, match):
    with pytest.raises(ValueError, match=rf"LoRA-Ensemble of model 'vit': {match}"):
        LoRAEnsemble(vit, **{"members": 2, "rank": 2, **kw}, model_name="vit")
