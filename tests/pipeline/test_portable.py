"""The portable CPU route (benchmark/models/portable.py): training and logits without MKL, checked against
independent definitions: a float64 product for the linear layer, an IEEE float32 emulation in NumPy for the fused
AdamW update (bit for bit: no vendor library in it), PyTorch's own profiler for the operators that run."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from benchmark.config import numerics
from benchmark.models import infer, portable
from benchmark.reproduce import fingerprint


def test_the_portable_linear_layer_is_the_linear_map_and_its_gradients():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(37, 1280, generator=g).requires_grad_()
    w = (0.03 * torch.randn(10, 1280, generator=g)).requires_grad_()
    b = torch.randn(10, generator=g).requires_grad_()
    gy = torch.randn(37, 10, generator=g)
    y = portable.linear(x, w, b)
    y.backward(gy)
    x64, w64 = x.detach().double(), w.detach().double()
    assert torch.allclose(y.double(), x64 @ w64.T + b.detach().double(), rtol=0, atol=2e-5)
    assert torch.allclose(x.grad.double(), gy.double() @ w64, rtol=0, atol=2e-5)
    assert torch.allclose(w.grad.double(), gy.double().T @ x64, rtol=0, atol=2e-4)
    assert torch.allclose(b.grad, gy.sum(0), rtol=0, atol=1e-5)


def test_chunks_of_rows_give_the_rows_bytes_of_one_product(monkeypatch):
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(2, 50, 64, generator=g), torch.randn(10, 64, generator=g), torch.randn(10, generator=g)
    whole = portable.linear(x, w, b)
    monkeypatch.setattr(portable, "MAX_PRODUCT", 10 * 64 * 7)  # 7 rows per product: 15 chunks
    chunked = portable.linear(x, w, b)
    assert chunked.shape == (2, 50, 10) and torch.equal(chunked, whole)


def test_make_portable_swaps_plain_linear_layers_in_place_and_keeps_the_state_dict():
    import timm

    model = timm.create_model("mobilenetv3_small_050", num_classes=10)  # its classifier is timm's Linear
    extra = nn.Bilinear(3, 3, 2)  # another kind of layer: left alone
    model.extra = extra
    params, state = list(model.parameters()), {k: v.clone() for k, v in model.state_dict().items()}
    portable.make_portable(model)
    assert type(model.classifier) is portable.Linear and type(model.extra) is nn.Bilinear
    assert all(a is b for a, b in zip(params, model.parameters()))  # the optimizer's tensors are the model's
    assert (
        all(torch.equal(state[k], v) for k, v in model.state_dict().items())
        and state.keys() == model.state_dict().keys()
    )
    x = torch.randn(4, 1024)
    assert torch.allclose(model.classifier(x), F.linear(x, model.classifier.weight, model.classifier.bias), atol=1e-5)


def test_native_numerics_and_tracing_keep_the_usual_linear(monkeypatch):
    layer = portable.make_portable(nn.Sequential(nn.Linear(8, 3)))[0]
    x = torch.randn(5, 8)
    assert portable.active(x)
    traced = torch.jit.trace(layer, x)  # fvcore counts FLOPs on a trace: it must see addmm
    assert "aten::linear" in str(traced.graph) or "aten::addmm" in str(traced.graph)
    monkeypatch.setenv(numerics.ENV, "native")
    assert not portable.active(x)


def test_the_fused_adamw_update_is_ieee_float32_arithmetic_bit_for_bit():
    """One step from zero moments, emulated in NumPy float32 (IEEE, correctly rounded sqrt) in the fused kernel's
    order: p (1 - lr wd); m = (1 - b1) g; v = ((1 - b2) g) g; p + (-lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)."""
    lr, wd, b1, b2, eps = 2e-3, 1e-5, 0.9, 0.999, 1e-8
    g = torch.Generator().manual_seed(2)
    p0, grad = torch.randn(50_003, generator=g), torch.randn(50_003, generator=g)
    p = nn.Parameter(p0.clone())
    opt = portable.adamw([p], lr=lr, weight_decay=wd)
    assert opt.defaults["fused"] is True
    p.grad = grad.clone()
    opt.step()
    f = np.float32
    pn, gn = p0.numpy() * f(1 - lr * wd), grad.numpy()
    m, v = f(1 - b1) * gn, (f(1 - b2) * gn) * gn
    want = pn + (f(-lr / (1 - b1)) * m) / (np.sqrt(v) / f((1 - b2) ** 0.5) + f(eps))
    assert np.array_equal(p.detach().numpy(), want)
    # torch.sqrt on the same moments is MKL's vector math: not the correctly rounded root everywhere (on the machines
    # seen); the fused update does not depend on it either way
    assert np.array_equal(np.sqrt(v), np.sqrt(v.astype(np.float64)).astype(np.float32))


def test_adamw_is_fused_only_for_cpu_float_parameters():
    assert portable.adamw([nn.Parameter(torch.ones(3))], lr=0.1, weight_decay=0.0).defaults["fused"] is True
    assert (
        portable.adamw([{"params": [nn.Parameter(torch.ones(3))]}], lr=0.1, weight_decay=0.0).defaults["fused"] is True
    )
    assert (
        portable.adamw([nn.Parameter(torch.ones(3, device="meta"))], lr=0.1, weight_decay=0.0).defaults["fused"] is None
    )


def test_a_one_image_batch_runs_as_two_and_returns_that_images_logits():
    torch.manual_seed(0)
    model = portable.make_portable(nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))).eval()
    seen = []
    model[0].register_forward_hook(lambda m, i, o: seen.append(i[0].shape[0]))
    x = torch.randn(1, 3, 8, 8)
    z = infer.predict_logits(model, x, batch_size=4)
    assert seen == [2] and z.shape == (1, 5)
    assert torch.allclose(z, model(torch.cat([x, x]))[:1], rtol=0, atol=0)


def test_a_training_step_and_the_logits_pass_call_no_mkl_routed_operator():
    """The pipeline's own code (factory, channels-last, fused AdamW, predict_logits) on the two kinds of
    architecture of the embedded zoo, at a small size; batches of 64, 5 and 1 images."""
    from benchmark.models.train import Recipe
    from benchmark.models.zoo import parse_entry

    class P:
        recipes = {"r": Recipe(epochs=1, batch_size=64, lr=0.01, drop_rate=0.2)}
        threads = 2  # the embedded default's params.yaml
        logits = type("Logits", (), {"batch_size": 256})

    zoo = {
        n: parse_entry(n, {"arch": a, "init": "scratch", "img_size": 24, "seed": 0, "recipe": "r"}, check_arch=False)
        for n, a in (("lite", "tf_efficientnet_lite0"), ("mnv3", "mobilenetv3_small_050"))
    }
    before = torch.get_num_threads()
    assert fingerprint.mkl_ops_in(P, zoo) == {"lite": [], "mnv3": []}
    # one thread: ATen computes some convolutions with its MKL-backed slow_conv2d (the portable route needs two)
    P.threads = 1
    assert "aten::_slow_conv2d_forward" in fingerprint.mkl_ops_in(P, {"mnv3": zoo["mnv3"]})["mnv3"]
    assert torch.get_num_threads() == before  # the measurement leaves the process's threads as they were


def test_the_mkl_operator_list_sees_what_the_usual_route_calls():  # the negative control of the test above
    p = nn.Parameter(torch.rand(8))
    with fingerprint.cpu_profile() as prof:
        F.linear(torch.randn(4, 8), torch.randn(3, 8))
        opt = torch.optim.AdamW([p], lr=0.1)
        p.grad = torch.ones(8)
        opt.step()
    names = {e.name for e in prof.events()} & fingerprint.MKL_OPS
    assert {"aten::addmm", "aten::sqrt"} <= names or {"aten::mm", "aten::sqrt"} <= names


def test_a_resumed_fused_adamw_continues_a_channels_last_model_byte_for_byte(tmp_path):
    """The resume checkpoint stores the moments contiguous; restored, each takes its parameter's (channels-last)
    layout, which the fused kernel needs (it walks parameter and moments as flat memory)."""
    from benchmark.models import checkpoint

    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 4 * 4, 2)).to(
            memory_format=torch.channels_last
        )

    def step(model, opt, seed):
        x = torch.randn(3, 3, 6, 6, generator=torch.Generator().manual_seed(seed)).contiguous(
            memory_format=torch.channels_last
        )
        opt.zero_grad()
        model(x).square().sum().backward()
        opt.step()

    a = make()
    opt_a = portable.adamw(a.parameters(), lr=0.05, weight_decay=0.01)
    for s in range(2):
        step(a, opt_a, s)
    assert not a[0].weight.is_contiguous()  # the case: a channels-last weight
    checkpoint.save_resume(tmp_path, a, opt_a, {"fingerprint": "f", "epoch": 0, "record": {}})
    b = make()
    opt_b = portable.adamw(b.parameters(), lr=0.05, weight_decay=0.01)
    tensors, _ = checkpoint.read_resume(tmp_path, "f")
    checkpoint.apply_resume(tensors, b, opt_b)
    step(a, opt_a, 7)
    step(b, opt_b, 7)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(pa, pb), name
