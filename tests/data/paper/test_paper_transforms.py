"""A model's own timm eval transform and the Dataset adapter."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as TF
from PIL import Image

from benchmark.data.paper.common import ArrayImages, SampleSplit
from benchmark.data.paper.transforms import SplitDataset, eval_transform, train_transform
from benchmark.models.factory import timm_kwargs
from benchmark.models.preprocess import data_config
from benchmark.models.zoo import parse_entry

ENTRY = {"img_size": 224, "seed": 0, "recipe": "none"}


def _photo(w=300, h=200) -> Image.Image:
    g = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
    return Image.fromarray(g)


def test_eval_transform_is_resize_crop_normalise_by_hand():
    """resnet50.tv2_in1k at its test size 224: resize the short side to 224 / test_crop_pct (bilinear), crop,
    normalise."""
    import timm

    cfg = timm.get_pretrained_cfg("resnet50.tv2_in1k")
    entry = parse_entry("r", {**ENTRY, "arch": "resnet50", "init": "timm:tv2_in1k"})
    x = eval_transform(entry)(_photo())
    short = int(np.floor(224 / cfg.test_crop_pct))
    ref = TF.center_crop(TF.resize(_photo(), short, interpolation=TF.InterpolationMode.BILINEAR), 224)
    ref = TF.normalize(TF.to_tensor(ref), cfg.mean, cfg.std)
    assert x.shape == (3, 224, 224)
    assert torch.allclose(x, ref, atol=1e-5)


def test_model_config_matches_timms_own_resolution():
    """For a built model, the config is timm's resolve_data_config({}, model=model) (the published code's call)."""
    import timm
    from timm.data import resolve_data_config

    model = timm.create_model("efficientnet_b0.ra_in1k", pretrained=False)
    assert data_config(model) == resolve_data_config({}, model=model)
    assert data_config("efficientnet_b0.ra_in1k") == resolve_data_config({}, model=model)
    cfg = data_config("efficientnet_b0.ra_in1k", 160)
    assert cfg["input_size"] == (3, 160, 160) and cfg["interpolation"] == "bicubic"


def test_vit_at_a_non_native_size_builds_and_runs():
    import timm

    entry = parse_entry("d", {**ENTRY, "arch": "vit_small_patch14_dinov2", "init": "timm:lvd142m"})
    assert timm_kwargs(entry.arch, 224) == {"img_size": 224} and timm_kwargs("resnet18", 160) == {}
    m = timm.create_model(entry.arch, pretrained=False, num_classes=3, **timm_kwargs(entry.arch, 224)).eval()
    x = eval_transform(entry)(_photo())[None]
    with torch.no_grad():
        assert m(x).shape == (1, 3)


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown timm architecture 'resnet5000'"):
        eval_transform("resnet5000")
    with pytest.raises(ValueError, match="Invalid pretrained tag"):
        eval_transform("resnet50.nope_in1k")


def test_split_dataset_and_train_transform():
    arr = np.stack([np.full((32, 32, 3), 10 * k, np.uint8) for k in range(5)])
    split = SampleSplit(
        name="test",
        dataset="toy",
        source=ArrayImages(arr),
        index=np.array([4, 0, 2]),
        labels=np.array([1, 0, 1]),
        ids=np.array([40, 0, 20]),
    )
    ds = SplitDataset(split, eval_transform("resnet18", 64))
    x, y, i = next(iter(torch.utils.data.DataLoader(ds, batch_size=3)))
    assert x.shape == (3, 3, 64, 64) and y.tolist() == [1, 0, 1] and i.tolist() == [40, 0, 20]
    mean, std = torch.tensor((0.485, 0.456, 0.406)), torch.tensor((0.229, 0.224, 0.225))
    assert torch.allclose(x[0, :, 5, 5], (40 / 255 - mean) / std, atol=1e-5)  # image 4 (value 40) comes first
    aug = train_transform("resnet18", 64)
    assert aug(split.image(0)).shape == (3, 64, 64)
    with pytest.raises(TypeError, match="expected a SampleSplit"):
        SplitDataset(arr, aug)


def test_sample_split_validates():
    src = ArrayImages(np.zeros((3, 4, 4, 3), np.uint8))
    good = {
        "name": "s",
        "dataset": "toy",
        "source": src,
        "index": np.array([0, 1]),
        "labels": np.array([0, 1]),
        "ids": np.array([5, 6]),
    }
    with pytest.raises(ValueError, match="toy split 's': ids are not unique"):
        SampleSplit(**{**good, "ids": np.array([5, 5])})
    with pytest.raises(ValueError, match="index outside the 3 images"):
        SampleSplit(**{**good, "index": np.array([0, 3])})
    with pytest.raises(ValueError, match="labels must be an int64 array of shape"):
        SampleSplit(**{**good, "labels": np.array([0.0, 1.0])})
    assert (SampleSplit(**good).renamed("ood", ood=True).labels == -1).all()


def test_memory_mapped_source_pickles_as_a_path(tmp_path):
    import pickle

    arr = np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3)
    np.save(tmp_path / "a.npy", arr)
    src = ArrayImages(path=tmp_path / "a.npy")
    blob = pickle.dumps(src)
    assert arr[1].tobytes() not in blob  # the pixels are not in the pickle, only the path
    copy = pickle.loads(blob)
    assert copy._array is None and np.array_equal(np.asarray(copy.image(1)), arr[1])
