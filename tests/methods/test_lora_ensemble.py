"""LoRA-Ensemble: the batched member arithmetic against dense per-member layers, init, FLOPs, bad input."""
import copy

import pytest
import timm
import torch
import torch.nn.functional as F

from benchmark.cost import count_flops
from benchmark.methods.lora_ensemble import LoRAEnsemble, LoRAEnsembleLinear

M, R = 3, 2


@pytest.fixture(scope="module")
def vit():
    torch.manual_seed(0)
    return timm.create_model("test_vit", num_classes=4).eval()


def _x(n=2):
    return torch.randn(n, 3, 160, 160, generator=torch.Generator().manual_seed(0))


def test_lora_layer_rows_use_their_members_dense_weight():
    base = torch.nn.Linear(6, 5)
    layer = LoRAEnsembleLinear(base, M, R, alpha=4.0, gen=torch.Generator().manual_seed(0))
    with torch.no_grad():
        layer.lora_b.normal_()
    x = torch.randn(M * 2, 7, 6)  # member-major: rows [2m, 2m + 2) belong to member m
    with torch.no_grad():
        out = layer(x)
        for m in range(M):
            w = base.weight + (4.0 / R) * (layer.lora_a[m] @ layer.lora_b[m]).T  # W + (alpha / r) B_m A_m
            assert torch.allclose(out[2 * m : 2 * m + 2], F.linear(x[2 * m : 2 * m + 2], w, base.bias), atol=1e-5)


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


def test_only_adapters_and_heads_train(vit):
    ens = LoRAEnsemble(copy.deepcopy(vit), members=M, rank=R, model_name="vit")
    layers = [m for m in ens.modules() if isinstance(m, LoRAEnsembleLinear)]
    assert len(layers) == 2 * len(vit.blocks)  # qkv and proj of every block
    adapters = sum(M * R * (m.base.in_features + m.base.out_features) for m in layers)
    heads = M * (vit.num_features * 4 + 4)
    assert sum(p.numel() for p in ens.trainable_parameters()) == adapters + heads


def test_flops_are_members_times_one_forward_plus_adapters(vit):
    ens = LoRAEnsemble(copy.deepcopy(vit), members=M, rank=R, model_name="vit")
    tokens = vit.patch_embed.num_patches + vit.num_prefix_tokens
    dims = [(b.attn.qkv.in_features, b.attn.qkv.out_features) for b in vit.blocks] + \
           [(b.attn.proj.in_features, b.attn.proj.out_features) for b in vit.blocks]
    assert ens.adapter_macs(tokens) == tokens * sum(R * (i + o) for i, o in dims)
    assert count_flops(ens, 160) == pytest.approx(M * (count_flops(vit, 160) + ens.adapter_macs(tokens) / 1e9), rel=1e-9)


def test_lora_ensemble_on_a_cnn_names_method_and_model():
    cnn = timm.create_model("test_efficientnet", num_classes=4)
    with pytest.raises(ValueError, match=r"LoRA-Ensemble does not apply to model 'eff-s0' \(EfficientNet\).*needs a ViT"):
        LoRAEnsemble(cnn, members=2, rank=2, model_name="eff-s0")


@pytest.mark.parametrize("kw, match", [({"members": 0}, "members must be an integer >= 1"),
                                       ({"rank": 1.5}, "rank must be an integer >= 1"),
                                       ({"alpha": -1.0}, "alpha must be a finite number > 0")])
def test_bad_adapter_settings(vit, kw, match):
    with pytest.raises(ValueError, match=rf"LoRA-Ensemble of model 'vit': {match}"):
        LoRAEnsemble(vit, **{"members": 2, "rank": 2, **kw}, model_name="vit")
