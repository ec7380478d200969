import numpy as np
import pytest
import torch
from PIL import Image

from benchmark.stages.embedded_source import to_model_input

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture
def images():
    return np.random.default_rng(0).integers(0, 256, size=(5, 28, 28), dtype=np.uint8)


def _pil_resize(images, size):
    return np.stack(
        [np.asarray(Image.fromarray(im.astype(np.float32) / 255).resize((size, size), Image.BILINEAR)) for im in images]
    )


def test_same_size_is_direct_normalisation(images):
    out = to_model_input(images, 28, MEAN, STD)
    assert out.shape == (5, 3, 28, 28) and out.dtype == torch.float32 and out.is_contiguous()
    for c in range(3):
        expected = (images.astype(np.float64) / 255 - MEAN[c]) / STD[c]
        np.testing.assert_allclose(out[:, c].numpy(), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("size", [64, 20])  # up- and downsampling
def test_resize_matches_pil_bilinear(images, size):
    out = to_model_input(images, size, MEAN, STD)
    assert out.shape == (5, 3, size, size)
    ref = _pil_resize(images, size)
    for c in range(3):
        np.testing.assert_allclose(out[:, c].numpy() * STD[c] + MEAN[c], ref, rtol=0, atol=1e-5)


def test_tensor_input_equals_numpy_input(images):
    torch.testing.assert_close(
        to_model_input(torch.from_numpy(images), 32, MEAN, STD), to_model_input(images, 32, MEAN, STD)
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"images": np.zeros((2, 28, 28), np.float32)}, "uint8"),
        ({"images": np.zeros((2, 1, 28, 28), np.uint8)}, "uint8"),
        ({"img_size": 0}, "img_size"),
        ({"img_size": 224.0}, "img_size"),
        ({"mean": (0.5, 0.5)}, "mean"),
        ({"std": (0.2, 0.0, 0.2)}, "std"),
    ],
)
def test_bad_input_refused(kwargs, match):
    args = {"images": np.zeros((2, 28, 28), np.uint8), "img_size": 32, "mean": MEAN, "std": STD, **kwargs}
    with pytest.raises(ValueError, match=match):
        to_model_input(**args)
