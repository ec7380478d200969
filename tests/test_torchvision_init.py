"""``init: torchvision:<Weights enum>.<checkpoint>`` zoo entries, offline (random weights, no download).

Names resolve against torchvision itself, the eval transform is ``weights.transforms()``,
FLOPs are within 2% of torchvision's published ``_ops`` (GFLOPS = multiply-adds, as
fvcore counts), heads are replaced for a suite's class count, and the pretrained path
loads a checkpoint from torch's cache with ``weights_only=True``.
"""

from __future__ import annotations

import pickle
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.models as tvm
from PIL import Image
from torch import nn

from benchmark.data.paper.transforms import eval_transform, train_transform
from benchmark.models import factory, torchvision_zoo
from benchmark.models.preprocess import data_config
from benchmark.models.zoo import ZooError, load_zoo, parse_entry

REPO = Path(__file__).resolve().parents[1]
SMALL = {  # builder -> (checkpoint, dotted path of torchvision's own classifier layer)
    "mobilenet_v3_small": ("MobileNet_V3_Small_Weights.IMAGENET1K_V1", "classifier.3"),
    "shufflenet_v2_x0_5": ("ShuffleNet_V2_X0_5_Weights.IMAGENET1K_V1", "fc"),
    "mnasnet0_5": ("MNASNet0_5_Weights.IMAGENET1K_V1", "classifier.1"),
    "resnet18": ("ResNet18_Weights.IMAGENET1K_V1", "fc"),
}


def _entry(arch, weights=None, **kw):
    raw = {"arch": arch, "init": f"torchvision:{weights or SMALL[arch][0]}", "img_size": 224, "seed": 0, "recipe": "r"}
    return parse_entry(kw.pop("name", "tv"), {**raw, **kw})


def _photo(w=300, h=200) -> Image.Image:
    return Image.fromarray(np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8))


def test_every_torchvision_entry_of_the_imagenet_zoo_resolves_offline():
    zoo = load_zoo(REPO / "zoo" / "imagenet.yaml", recipes={"none": {}})
    tv = {n: e for n, e in zoo.items() if e.init_kind == "torchvision"}
    assert len(tv) >= 18 and {
        "convnext_base",
        "swin_v2_b",
        "mobilenet_v3_small",
        "mnasnet_100",
        "efficientnet_b0",
    } <= set(tv)
    for name, e in tv.items():
        w = torchvision_zoo.entry_weights(e)
        assert isinstance(w, tvm.get_model_weights(e.arch)) and f"{type(w).__name__}.{w.name}" == e.init_source, name
        assert e.img_size == w.transforms().crop_size[0], name  # evaluated at the weights' own crop
    assert torchvision_zoo.entry_weights(tv["convnext_base"]).meta["_metrics"]["ImageNet-1K"]["acc@1"] == pytest.approx(
        84.062
    )


@pytest.mark.parametrize(
    "arch, init, message",
    [
        (
            "resnet5000",
            "ResNet50_Weights.IMAGENET1K_V1",
            r"unknown torchvision classification model 'resnet5000'.*similar names: \[.*'resnet50'",
        ),
        (
            "resnet18",
            "ResNet50_Weights.IMAGENET1K_V1",
            r"torchvision model 'resnet18' takes ResNet18_Weights weights, not 'ResNet50_Weights'",
        ),
        (
            "resnet18",
            "ResNet18_Weights.IMAGENET1K_V9",
            r"ResNet18_Weights has no checkpoint 'IMAGENET1K_V9'; known: \['IMAGENET1K_V1'\]",
        ),
        ("resnet50", "ResNet50_Weights.DEFAULT", r"name the checkpoint instead of DEFAULT .*today it is IMAGENET1K_V2"),
        ("resnet18", "resnet18", r"malformed torchvision weights 'resnet18'.*ConvNeXt_Base_Weights.IMAGENET1K_V1"),
        (
            "googlenet",
            "GoogLeNet_Weights.IMAGENET1K_V1",
            r"torchvision model 'googlenet' is not supported: its pretrained model drops the auxiliary heads",
        ),
        (
            "fasterrcnn_resnet50_fpn",
            "FasterRCNN_ResNet50_FPN_Weights.COCO_V1",
            r"unknown torchvision classification model 'fasterrcnn_resnet50_fpn'",
        ),
    ],
)
def test_bad_names_are_refused_with_one_clear_line(arch, init, message):
    with pytest.raises(ZooError, match=rf"^zoo entry 'tv': {message}") as e:
        _entry(arch, init)
    assert "\n" not in str(e.value)


def test_validate_zoo_checks_torchvision_entries(tmp_path, capsys):
    from benchmark.cli.zoo_commands import run_validate_zoo

    zoo = tmp_path / "zoo.yaml"
    zoo.write_text(
        "models:\n"
        '  good: {arch: mobilenet_v3_small, init: "torchvision:MobileNet_V3_Small_Weights.IMAGENET1K_V1", '
        "img_size: 224, seed: 0, recipe: r}\n"
        '  enum: {arch: mobilenet_v3_small, init: "torchvision:MobileNet_V3_Large_Weights.IMAGENET1K_V1", '
        "img_size: 224, seed: 0, recipe: r}\n"
        '  builder: {arch: mobilenet_v9, init: "torchvision:MobileNet_V3_Small_Weights.IMAGENET1K_V1", '
        "img_size: 224, seed: 0, recipe: r}\n"
    )
    args = Namespace(
        files=[str(zoo)], suites_dir=str(tmp_path / "none"), params=str(tmp_path / "none.yaml"), no_flops=False
    )
    assert run_validate_zoo(args) == 2
    out, err = capsys.readouterr()
    line = next(x for x in out.splitlines() if " good " in x)
    gflops = float(line.split("GFLOPs")[0].split()[-1])
    assert gflops == pytest.approx(tvm.MobileNet_V3_Small_Weights.IMAGENET1K_V1.meta["_ops"], rel=0.02)
    assert (
        "zoo entry 'enum': torchvision model 'mobilenet_v3_small' takes MobileNet_V3_Small_Weights weights, not "
        "'MobileNet_V3_Large_Weights'"
    ) in err
    assert "zoo entry 'builder': unknown torchvision classification model 'mobilenet_v9'" in err
    assert "1 entries in 1 files valid; 2 error(s)" in err


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_fvcore_flops_within_2_percent_of_torchvisions_published_ops(arch):
    """torchvision's ``_ops`` are GFLOPS counted as multiply-adds, like fvcore's (cost.py)."""
    from benchmark.cli.zoo_flops import entry_flops

    entry = _entry(arch)
    w = torchvision_zoo.entry_weights(entry)
    res = entry_flops(entry)  # what validate-zoo reports: count_flops on the model models.create builds
    assert res["gflops"] == pytest.approx(w.meta["_ops"], rel=0.02) and res["published_gflops"] == w.meta["_ops"]
    assert (
        res["params"]
        == w.meta["num_params"]
        == sum(p.numel() for p in factory.create(entry, 1000, load_weights=False).parameters())
    )


@pytest.mark.parametrize("arch", ["mobilenet_v3_small", "resnet18"])
def test_eval_transform_is_the_weights_own(arch):
    entry = _entry(arch)
    w = torchvision_zoo.entry_weights(entry)
    img = _photo()
    ref = w.transforms()(img)
    assert torch.equal(eval_transform(entry)(img), ref) and ref.shape == (3, 224, 224)
    model = factory.create(entry, 5, load_weights=False)
    assert torch.equal(eval_transform(model)(img), ref)  # a built model carries its weights
    cfg = data_config(entry)
    t = w.transforms()
    assert cfg["mean"] == tuple(t.mean) and cfg["std"] == tuple(t.std) and cfg["input_size"] == (3, 224, 224)
    assert cfg["crop_pct"] == pytest.approx(t.crop_size[0] / t.resize_size[0])
    assert train_transform(entry)(img).shape == (3, 224, 224)


def test_eval_transform_at_another_size_scales_the_resize():
    entry = _entry("resnet18", img_size=112)
    t = eval_transform(entry)
    ref = tvm.ResNet18_Weights.IMAGENET1K_V1.transforms()
    assert (
        t.crop_size == [112] and t.resize_size == [128] and t.interpolation == ref.interpolation and t.mean == ref.mean
    )
    assert t(_photo()).shape == (3, 112, 112)


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_head_replacement_for_a_suites_class_count(arch):
    entry = _entry(arch)
    model = factory.create(entry, 7, load_weights=False).eval()
    original = tvm.get_model(arch, weights=None)
    old_head = original.get_submodule(SMALL[arch][1])
    assert isinstance(model.get_classifier(), nn.Linear) and model.get_classifier().out_features == 7
    assert model.num_features == old_head.in_features and model.num_classes == 7
    assert isinstance(model.body.get_submodule(SMALL[arch][1]), nn.Identity)
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(x)
        feats = model.forward_head(model.forward_features(x), pre_logits=True)
        assert logits.shape == (2, 7) and feats.shape == (2, model.num_features)
        assert torch.allclose(model.get_classifier()(feats), logits)
        model.reset_classifier(0)
        assert torch.allclose(model(x), feats)


def test_builds_are_deterministic_and_dropout_adds_no_weights():
    entry = _entry("mnasnet0_5")
    a, b = factory.create(entry, 10, load_weights=False), factory.create(entry, 10, load_weights=False, drop_rate=0.3)
    assert a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())
    assert b.head_drop.p == 0.3 and a.head_drop.p == 0.0
    other = factory.create(_entry("mnasnet0_5", seed=1), 10, load_weights=False)
    assert not torch.equal(other.head.weight, a.head.weight)


def _cache_checkpoint(tmp_path, monkeypatch, weights, state) -> Path:
    """``state`` saved where torchvision's loader finds the weights' file (torch's hub cache under TORCH_HOME)."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    path = torchvision_zoo.weight_file(weights)
    assert path.parent == tmp_path / "hub" / "checkpoints"
    path.parent.mkdir(parents=True)
    torch.save(state, path)
    return path


def test_pretrained_weights_load_from_torchs_cache_and_keep_the_body(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a missing file would be a plain error, never a download
    w = tvm.MobileNet_V3_Small_Weights.IMAGENET1K_V1
    torch.manual_seed(123)
    state = tvm.mobilenet_v3_small(weights=None).state_dict()
    _cache_checkpoint(tmp_path, monkeypatch, w, state)
    entry = _entry("mobilenet_v3_small")
    same = factory.create(entry, 1000)  # ImageNet: torchvision's own head
    assert torch.equal(same.head.weight, state["classifier.3.weight"])
    assert torch.equal(same.body.get_submodule("classifier.0").weight, state["classifier.0.weight"])
    tuned = factory.create(entry, 10)  # a suite's class count: a new head drawn with HEAD_SEED
    body = {k: v for k, v in tuned.body.state_dict().items()}
    assert all(torch.equal(body[k], v) for k, v in state.items() if not k.startswith("classifier.3."))
    assert tuned.head.out_features == 10 and torch.equal(tuned.head.weight, factory.create(entry, 10).head.weight)
    assert "TORCH_FORCE_WEIGHTS_ONLY_LOAD" not in __import__("os").environ  # restored after loading


class _Payload:
    def __reduce__(self):
        return (print, ("unpickled code ran",))


def test_checkpoints_are_read_with_weights_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    w = tvm.ResNet18_Weights.IMAGENET1K_V1
    path = _cache_checkpoint(tmp_path, monkeypatch, w, {"fc.weight": torch.zeros(1)})
    path.write_bytes(pickle.dumps({"fc.weight": _Payload()}))
    with pytest.raises(
        ZooError, match=r"zoo entry 'tv': cannot load torchvision weights ResNet18_Weights.IMAGENET1K_V1 \("
    ):
        factory.create(_entry("resnet18"), 10)
    assert "unpickled code ran" not in capsys.readouterr().out


def test_offline_without_cache_fails_at_once_and_plainly(tmp_path, monkeypatch):
    import socket

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    seen = []
    real = socket.socket.connect
    monkeypatch.setattr(socket.socket, "connect", lambda self, a: (seen.append(a), real(self, a))[1])
    with pytest.raises(
        ZooError,
        match=r"^zoo entry 'tv': cannot load torchvision weights ResNet18_Weights.IMAGENET1K_V1 "
        r"\(HF_HUB_OFFLINE is set and .*resnet18-f37072fd.pth is not in torch's cache\)",
    ):
        factory.create(_entry("resnet18"), 10)
    assert seen == []
