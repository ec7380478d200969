import pytest
import torch
from torch import nn

from benchmark.cli.zoo_flops import arch_flops  # what `python -m benchmark flops` counts
from benchmark.models.cost import count_flops, measure_throughput, static_cost, unweighted_cost


@pytest.mark.parametrize(
    "arch, published", [("resnet50", 4.1), ("efficientnet_b0", 0.39), ("vit_base_patch16_224", 17.6)]
)
def test_flops_match_published_gmacs_within_2_percent(arch, published):
    assert arch_flops(arch, 224)["gflops"] == pytest.approx(published, rel=0.02)


def test_flops_of_a_linear_layer_by_hand():
    # Conv 3->8, 3x3, padding 1 on 16x16: 16*16*8*3*3*3 MACs; then Linear 8*16*16 -> 10
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.Flatten(), nn.Linear(8 * 16 * 16, 10))
    assert count_flops(m, 16) * 1e9 == pytest.approx(16 * 16 * 8 * 27 + 8 * 16 * 16 * 10)


def test_vit_attention_is_counted_even_with_fused_attention_on():
    import timm

    m = timm.create_model("test_vit", pretrained=False)
    flags = [mod.fused_attn for mod in m.modules() if hasattr(mod, "fused_attn")]
    g = count_flops(m, m.pretrained_cfg["input_size"][-1])
    assert [mod.fused_attn for mod in m.modules() if hasattr(mod, "fused_attn")] == flags  # restored
    for mod in m.modules():
        if hasattr(mod, "fused_attn"):
            mod.fused_attn = False
    from fvcore.nn import FlopCountAnalysis

    s = m.pretrained_cfg["input_size"][-1]
    fca = FlopCountAnalysis(m.eval(), torch.zeros(1, 3, s, s))
    fca.unsupported_ops_warnings(False)
    ops = fca.by_operator()
    assert ops["matmul"] > 0  # q @ k^T and attn @ v
    assert g == pytest.approx(sum(v for k, v in ops.items() if k in ("conv", "linear", "matmul")) / 1e9)


@pytest.mark.parametrize("arch", ["test_vit", "test_resnet", "test_efficientnet", "test_convnext"])
def test_counting_without_weights_counts_as_the_initialised_model(arch):
    import timm

    def build():
        return timm.create_model(arch, pretrained=False, num_classes=7)

    size = build().pretrained_cfg["input_size"][-1]
    assert unweighted_cost(build, size) == static_cost(build(), size)


def test_counting_without_weights_tied_weights_once_and_tensor_computing_builders():
    def tied():
        m = nn.Sequential(nn.Conv2d(3, 3, 1), nn.Conv2d(3, 3, 1))
        m[1].weight = m[0].weight
        return m

    assert unweighted_cost(tied, 8) == static_cost(tied(), 8) == {"gflops": 2 * 8 * 8 * 9 / 1e9, "params": 9 + 3 + 3}

    def computed():  # a width computed with tensors (torchvision's RegNets): cannot be built on the meta device
        return nn.Conv2d(3, int(torch.tensor(4).item()), 1)

    assert unweighted_cost(computed, 8) == static_cost(computed(), 8) == {"gflops": 8 * 8 * 4 * 3 / 1e9, "params": 16}


def test_unknown_arch_is_named():
    with pytest.raises(ValueError, match="unknown timm architecture 'resnet5000'"):
        arch_flops("resnet5000", 224)


def test_throughput_is_positive():
    assert measure_throughput(nn.Conv2d(3, 4, 3), 8, batch_size=4, iters=2) > 0


def test_importing_fvcore_prints_no_torch_jit_warning():
    """Issue 50 item 5: importing fvcore.nn scripts its focal loss with torch.jit.script, a FutureWarning (deprecated)
    the user can do nothing about; flops, validate-zoo, submit and the logits stage import it through count_flops,
    which silences that warning (and only it). Imported afresh here, once bare (the warning: the test can fail) and once
    as count_flops does."""
    import sys
    import warnings

    from benchmark.models import cost

    def fresh_import(through_count_flops: bool) -> list[str]:
        gone = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "fvcore.nn" or k.startswith("fvcore.nn.")}
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                if through_count_flops:
                    assert cost.count_flops(nn.Conv2d(3, 2, 3), 8) > 0
                else:
                    import fvcore.nn  # noqa: F401
            return [str(w.message) for w in seen if issubclass(w.category, FutureWarning)]
        finally:
            sys.modules.update(gone)
            if "fvcore.nn" in gone:
                sys.modules["fvcore"].nn = gone[
                    "fvcore.nn"
                ]  # the package's attribute too: later imports see the old one

    assert any("torch.jit.script" in m for m in fresh_import(False))
    assert fresh_import(True) == []
