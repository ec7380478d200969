import numpy as np
import pytest

from benchmark.data.corruptions import CORRUPTIONS, SEVERITIES, SEVERITY_PARAMS, corrupt

NAMES = sorted(CORRUPTIONS)
RANDOM = {"gaussian_noise", "shot_noise", "impulse_noise", "motion_blur", "rotate"}


def test_registry_and_params_table():
    assert len(CORRUPTIONS) >= 4 and set(SEVERITY_PARAMS) == set(CORRUPTIONS)
    assert all(len(p) == 5 for p in SEVERITY_PARAMS.values())
    assert RANDOM < set(CORRUPTIONS)


@pytest.mark.parametrize("name", NAMES)
def test_dtype_shape_and_registry_call(name, digits100):
    for sev in SEVERITIES:
        out = corrupt(digits100, name, sev, seed=0)
        assert out.dtype == np.uint8 and out.shape == digits100.shape
        assert not np.shares_memory(out, digits100)
    np.testing.assert_array_equal(CORRUPTIONS[name](digits100, 3, 7), corrupt(digits100, name, 3, 7))
    assert corrupt(digits100[:0], name, 2, 0).shape == (0, 28, 28)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sev", [0, 6, -1, 2.0, True])
def test_severity_outside_1_to_5_refused(name, sev, digits100):
    with pytest.raises(ValueError, match="severity"):
        corrupt(digits100, name, sev, 0)


def test_bad_name_and_images_refused(digits100):
    with pytest.raises(ValueError, match="unknown corruption 'fog'"):
        corrupt(digits100, "fog", 1, 0)
    with pytest.raises(ValueError, match="uint8"):
        corrupt(digits100.astype(np.float32), "contrast", 1, 0)
    with pytest.raises(ValueError, match="seed"):
        corrupt(digits100, "contrast", 1, -3)


@pytest.mark.parametrize("name", NAMES)
def test_distance_to_clean_grows_with_severity(name, digits100):
    clean = digits100.astype(float)
    dist = [np.abs(corrupt(digits100, name, s, 0).astype(float) - clean).mean() for s in SEVERITIES]
    assert dist[0] > 0
    assert all(a < b for a, b in zip(dist, dist[1:])), dist


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_pixels_independent_of_batch_order(name, digits100):
    out = corrupt(digits100, name, 4, seed=11)
    np.testing.assert_array_equal(out, corrupt(digits100, name, 4, seed=11))
    perm = np.random.default_rng(0).permutation(len(digits100))
    np.testing.assert_array_equal(corrupt(digits100[perm], name, 4, seed=11), out[perm])
    np.testing.assert_array_equal(corrupt(digits100[7:9], name, 4, seed=11), out[7:9])
    if name in RANDOM:
        assert not np.array_equal(corrupt(digits100, name, 4, seed=12), out)


def _grey_batch(n=50):
    """Mid-grey images (no clipping at low noise), made distinct by pixel [0, 0]: the noise is seeded per image
    content."""
    grey = np.full((n, 28, 28), 128, np.uint8)
    grey[:, 0, 0] = np.arange(n)
    return grey


def test_identical_images_get_identical_noise():
    twins = np.full((2, 28, 28), 128, np.uint8)
    out = corrupt(twins, "gaussian_noise", 3, 0)
    np.testing.assert_array_equal(out[0], out[1])


def test_gaussian_noise_std_matches_table():
    out = corrupt(_grey_batch(), "gaussian_noise", 1, 0).astype(float).reshape(50, -1)[:, 1:]
    assert out.std() / 255 == pytest.approx(SEVERITY_PARAMS["gaussian_noise"][0], rel=0.02)
    assert out.mean() == pytest.approx(128, abs=0.5)


def test_impulse_noise_fraction_matches_table():
    out = corrupt(_grey_batch(), "impulse_noise", 5, 0).reshape(50, -1)[:, 1:]
    amount = SEVERITY_PARAMS["impulse_noise"][4]
    assert np.mean(out != 128) == pytest.approx(amount, rel=0.05)
    assert set(np.unique(out)) == {0, 128, 255}
    assert np.mean(out == 255) == pytest.approx(amount / 2, rel=0.1)


def test_contrast_matches_formula(digits100):
    c = SEVERITY_PARAMS["contrast"][2]
    x = digits100.astype(float) / 255
    mean = x.mean(axis=(1, 2), keepdims=True)
    expected = np.clip(np.rint(((x - mean) * c + mean) * 255), 0, 255)
    np.testing.assert_array_equal(corrupt(digits100, "contrast", 3, 0), expected)


def test_pixelate_severity_1_is_2x2_block_mean(digits100):
    assert SEVERITY_PARAMS["pixelate"][0] == 14  # 28 -> 14: exact 2x2 blocks
    blocks = digits100.astype(float).reshape(-1, 14, 2, 14, 2).mean(axis=(2, 4))
    means = np.repeat(np.repeat(blocks, 2, axis=1), 2, axis=2)  # multiples of 1/4
    out = corrupt(digits100, "pixelate", 1, 0).astype(float)
    tie = means % 1 == 0.5  # either rounding is right at an exact .5
    np.testing.assert_array_equal(out[~tie], np.rint(means[~tie]))
    assert np.all(np.abs(out[tie] - means[tie]) == 0.5)


def test_rotate_keeps_ink_mass(digits100):
    out = corrupt(digits100, "rotate", 2, 0).astype(float)
    # rotation about the centre keeps the total ink up to interpolation/cropping losses
    ratio = out.sum(axis=(1, 2)) / digits100.astype(float).sum(axis=(1, 2))
    assert np.all((ratio > 0.85) & (ratio < 1.05))
