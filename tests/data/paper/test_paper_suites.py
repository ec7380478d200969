"""The shipped suite files: validation, their zoos, and their splits on a fixture data root."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from paper_layouts import (
    write_caltech256,
    write_cifar10,
    write_cifar100,
    write_cifar100_c,
    write_dtd,
    write_flowers102,
    write_imagenet,
    write_imagenet_v2,
    write_iwildcam,
    write_pets,
)

from benchmark.data.paper.cifar import CIFAR_C_CORRUPTIONS
from benchmark.data.paper.common import DatasetLayoutError
from benchmark.data.paper.suites import SuiteError, list_suites, load_suite
from benchmark.data.paper.transforms import SplitDataset

REPO = Path(__file__).resolve().parents[3]
SUITES = REPO / "suites"
PAPER_SUITES = ("caltech256", "cifar100", "dtd", "flowers102", "imagenet", "iwildcam", "pets")


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    """One data root holding every paper dataset, as a user's would."""
    root = tmp_path_factory.mktemp("datasets")
    write_imagenet(root / "imagenet")
    write_imagenet_v2(root / "imagenetv2-matched-frequency-format-val")
    write_caltech256(root)
    write_iwildcam(root)
    write_cifar100(root, n_train=40, n_test=12)
    write_cifar10(root)
    write_cifar100_c(root, np.asarray([(k * 7 + 100) % 100 for k in range(12)]), corruptions=CIFAR_C_CORRUPTIONS)
    write_flowers102(root)
    write_dtd(root)
    write_pets(root)
    return root


def test_every_paper_suite_is_shipped_and_its_zoo_validates(monkeypatch):
    monkeypatch.chdir(REPO)
    assert list_suites(SUITES) == sorted(PAPER_SUITES)
    for name in PAPER_SUITES:
        spec = load_suite(name, suites_dir=SUITES)
        zoo = spec.zoo_entries(
            check_arch=True
        )  # archs exist, tags in timm.list_pretrained / torchvision, recipes defined
        assert zoo and all(e.init_kind in ("timm", "torchvision") for e in zoo.values()), name
    assert load_suite("iwildcam", suites_dir=SUITES).select_by == "macro_f1"
    assert load_suite("caltech256", suites_dir=SUITES).select_by == "accuracy"


def test_paper_zoos_hold_the_papers_models(monkeypatch):
    monkeypatch.chdir(REPO)
    imagenet = load_suite("imagenet", suites_dir=SUITES).zoo_entries()
    archs = {e.arch for e in imagenet.values()}
    for needed in (
        "resnet50",
        "efficientnet_b0",
        "convnext_tiny",
        "convnext_small",
        "convnext_base",
        "convnext_large",
        "vit_base_patch16_clip_224",
        "efficientnet_v2_l",
        "resnet18",
        "mnasnet1_0",
        "swin_v2_b",
        "mobilenet_v3_large",
        "mobilenet_v3_small",
    ):
        assert needed in archs
    assert any(a.startswith("regnet") for a in archs)
    # the published numbers come from torchvision's weights: every model torchvision has uses them
    assert [n for n, e in imagenet.items() if e.init_kind != "torchvision"] == ["clip_vit_b16"]
    sve = {e.arch for e in load_suite("cifar100", suites_dir=SUITES).zoo_entries().values()}
    assert {"vit_base_patch16_224", "vit_base_patch14_dinov2"} <= sve


EXPECTED = {
    "imagenet": {"val": 2, "test": 40, "shift": 8},
    "caltech256": {"train": 14, "val": 3, "test": 3},
    "iwildcam": {"train": 8, "val": 3, "test": 3, "shift": 4},
    "flowers102": {"train": 5, "val": 5, "test": 8},
    "dtd": {"train": 6, "val": 6, "test": 6},
    "pets": {"train": 19, "val": 2, "test": 9},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_suite_splits_on_fixture_data(name, data_root):
    spec = load_suite(name, suites_dir=SUITES)
    splits = spec.load_splits(data_root)
    assert {k: len(s) for k, s in splits.items()} == EXPECTED[name]
    assert all(s.name == k and s.labels.min() >= 0 for k, s in splits.items())
    again = spec.load_splits(data_root)
    assert all(np.array_equal(again[k].ids, s.ids) for k, s in splits.items())


def test_cifar100_suite_has_ood_and_95_corruptions(data_root):
    spec = load_suite("cifar100", suites_dir=SUITES)
    splits = spec.load_splits(data_root)
    corrupt = [k for k in splits if k.startswith("corrupt-")]
    assert len(corrupt) == 19 * 5 and "corrupt-saturate-5" in corrupt
    assert (splits["ood"].labels == -1).all() and splits["ood"].dataset == "cifar10" and len(splits["ood"]) == 6
    assert all(np.array_equal(splits[k].ids, splits["test"].ids) for k in corrupt)
    assert not set(splits["ood"].ids) & set(splits["test"].ids)
    only = spec.load_splits(data_root, only=["val", "corrupt-fog-2"])
    assert sorted(only) == ["corrupt-fog-2", "val"]


def test_data_root_from_environment_and_missing(data_root, monkeypatch):
    spec = load_suite("caltech256", suites_dir=SUITES)
    monkeypatch.setenv("UQBENCH_DATA", str(data_root))
    assert len(spec.load_splits()["test"]) == 3
    monkeypatch.delenv("UQBENCH_DATA")
    with pytest.raises(
        DatasetLayoutError,
        match=r"(?s)suite 'caltech256' dataset 'caltech256': no data root is set.*UQBENCH_DATA"
        r".*256_ObjectCategories/001.ak47",
    ):
        spec.load_splits()


def test_wrong_data_root_names_suite_dataset_and_layout(tmp_path):
    spec = load_suite("imagenet", suites_dir=SUITES)
    with pytest.raises(DatasetLayoutError) as e:
        spec.load_splits(tmp_path)
    msg = str(e.value)
    assert msg.startswith("suite 'imagenet': imagenet: root folder") and str(tmp_path / "imagenet") in msg
    assert "val/<wnid>/*.JPEG" in msg


def test_torch_dataset_yields_tensor_label_id(data_root, monkeypatch):
    monkeypatch.chdir(REPO)
    spec = load_suite("caltech256", suites_dir=SUITES)
    entry = spec.zoo_entries()["resnet18"]
    ds = spec.torch_dataset("val", entry, data_root=data_root)
    assert isinstance(ds, SplitDataset) and len(ds) == 3
    x, y, i = next(iter(torch.utils.data.DataLoader(ds, batch_size=3)))
    assert x.shape == (3, 3, entry.img_size, entry.img_size) and x.dtype == torch.float32
    split = spec.load_splits(data_root, only=["val"])["val"]
    assert y.dtype == torch.int64 and y.tolist() == split.labels.tolist() and i.tolist() == split.ids.tolist()
    assert (
        spec.recipe("finetune").select_by == "accuracy"
        and load_suite("imagenet", suites_dir=SUITES).recipe("none") is None
    )
    assert load_suite("iwildcam", suites_dir=SUITES).recipe("finetune").select_by == "macro_f1"


def test_labels_beyond_num_classes_are_refused(data_root, tmp_path):
    text = (SUITES / "caltech256.yaml").read_text().replace("num_classes: 257", "num_classes: 2")
    (tmp_path / "small.yaml").write_text(text)
    with pytest.raises(SuiteError, match=r"suite 'small': split 'train' \(caltech256\) has label 2 >= num_classes 2"):
        load_suite(tmp_path / "small.yaml").load_splits(data_root)


BASE = (SUITES / "caltech256.yaml").read_text()


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("num_classes: 257", "num_classes: 257\ncolour: red", r"unknown keys \['colour'\]"),
        ("  val: caltech256/val", "  valid: caltech256/val", "split name 'valid' must be train, val, test"),
        ("  val: caltech256/val", "  shift: caltech256/val", r"splits must include \['val', 'test', 'train'\]"),
        ("  caltech256:\n    root", "  caltech256:\n    loader: caltech101\n    root", "unknown loader 'caltech101'"),
        (
            "{fractions: [0.7, 0.15], seed: 42}",
            "{seed: 42, shuffle: true}",
            r"unknown options \['shuffle'\] for loader 'caltech256'",
        ),
        ("  test: caltech256/test", "  test: imagenet/test", "must be '<dataset>/<split>'"),
        (
            "warmup_start_factor: 0.1}",
            "warmup_start_factor: 0.1, select_by: macro_f1}",
            "selects by 'macro_f1' but the suite by 'accuracy'",
        ),
        (
            "finetune: {epochs: 10,",
            "finetune: {epochs: 0,",
            "recipe 'finetune': epochs 0 means no training; it takes no other keys",
        ),
        (
            "select_by: accuracy",
            "select_by: auroc",
            r"select_by must be text \(one of \['accuracy', 'macro_f1'\]\), got 'auroc'",
        ),
        ("num_classes: 257", "num_classes: 257.0", r"num_classes must be an integer >= 2, got 257.0"),
        ("  caltech256:\n    root: .", "  caltech256:\n    root: 7", r"datasets.caltech256: root must be text, got 7"),
        (
            "finetune: {epochs: 10, batch_size: 64, lr: 1.0e-4",
            "finetune: {epochs: 10, batch_size: 64, lr: 1e-4",
            r"recipe 'finetune': lr must be a number, got the string '1e-4': YAML 1.1",
        ),
    ],
)
def test_malformed_suite_names_file_and_problem(tmp_path, old, new, message):
    assert old in BASE
    path = tmp_path / "broken.yaml"
    path.write_text(BASE.replace(old, new, 1))
    with pytest.raises(SuiteError, match=message) as e:
        load_suite(path)
    assert str(path) in str(e.value)


def test_unknown_suite_lists_known(tmp_path):
    with pytest.raises(
        SuiteError, match=r"suite 'imagenet21k': .* not found; known suites: \['caltech256', 'cifar100'"
    ):
        load_suite("imagenet21k", suites_dir=SUITES)
