"""ImageNet, ImageNet-V2 and Caltech-256 loaders on tiny fixtures in the official layouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paper_layouts import WNIDS, label_of, write_caltech256, write_imagenet, write_imagenet_v2

from benchmark.data.paper.caltech import load_caltech256
from benchmark.data.paper.common import DatasetLayoutError, seeded_split
from benchmark.data.paper.imagenet import IMAGENET_V2_ID_OFFSET, load_imagenet, load_imagenet_v2


@pytest.fixture(scope="module")
def imagenet_root(tmp_path_factory):
    return write_imagenet(tmp_path_factory.mktemp("imagenet"))


def test_published_imagenet_rule_at_full_size():
    """50,000 validation images -> 2,500 / 47,500, the first 2,500 of torch.randperm(50000) with seed 42."""
    n = 50_000
    val, test = seeded_split(n, [int(0.05 * n), n - int(0.05 * n)], 42)
    assert (len(val), len(test)) == (2500, 47500)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(42)).numpy()
    assert np.array_equal(val, perm[:2500]) and np.array_equal(test, perm[2500:])


def test_imagenet_splits_labels_and_order(imagenet_root):
    splits = load_imagenet(imagenet_root)
    n = 14 + 15 + 13
    assert sorted(splits) == ["test", "val"]
    assert (len(splits["val"]), len(splits["test"])) == (int(0.05 * n), n - int(0.05 * n))
    # positions are random_split's: the seeded permutation of the ImageFolder order
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(42)).numpy()
    assert np.array_equal(np.concatenate([splits["val"].index, splits["test"].index]), perm)
    # ImageFolder order = sorted wnid folders, then sorted file names; labels = folder rank
    files = sorted((WNIDS.index(p.parent.name), p.parent.name, p.name) for p in (imagenet_root / "val").rglob("*.JPEG"))
    expected_labels = np.array([c for c, _, _ in files])
    for s in splits.values():
        assert np.array_equal(s.labels, expected_labels[s.index]) and np.array_equal(s.ids, s.index)
        for k in range(len(s)):
            assert label_of(s.image(k), 3) == s.labels[k]
    assert not set(splits["val"].ids) & set(splits["test"].ids)


def test_imagenet_is_deterministic_and_seeded(imagenet_root):
    a, b = load_imagenet(imagenet_root), load_imagenet(imagenet_root)
    assert all(np.array_equal(a[k].ids, b[k].ids) and np.array_equal(a[k].labels, b[k].labels) for k in a)
    c = load_imagenet(imagenet_root, seed=7)
    assert not np.array_equal(a["test"].ids, c["test"].ids)


def test_imagenet_v2_labels_are_folder_numbers(tmp_path):
    root = write_imagenet_v2(tmp_path / "v2", classes=(0, 1, 2, 10))
    s = load_imagenet_v2(root)["test"]
    assert len(s) == 8
    assert s.labels.tolist() == [0, 0, 1, 1, 2, 2, 10, 10]  # folder "10" is class 10, not the 2nd in string order
    assert s.ids.min() == IMAGENET_V2_ID_OFFSET
    assert [label_of(s.image(k), 20) for k in range(len(s))] == s.labels.tolist()
    assert np.array_equal(load_imagenet_v2(root)["test"].ids, s.ids)


def test_caltech256_split_sizes_labels_and_seed(tmp_path):
    root = write_caltech256(tmp_path, counts=(5, 7, 8))
    splits = load_caltech256(root)
    n = 20
    sizes = [int(0.7 * n), int(0.15 * n)]
    assert [len(splits[k]) for k in ("train", "val", "test")] == [*sizes, n - sum(sizes)]
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(42)).numpy()
    assert np.array_equal(np.concatenate([splits[k].index for k in ("train", "val", "test")]), perm)
    expected = np.repeat([0, 1, 2], [5, 7, 8])
    for s in splits.values():
        assert np.array_equal(s.labels, expected[s.index])
        assert all(label_of(s.image(k), 3) == s.labels[k] for k in range(len(s)))
    again = load_caltech256(root)
    assert all(np.array_equal(splits[k].ids, again[k].ids) for k in splits)


def test_caltech256_numbering_gap_is_a_layout_error(tmp_path):
    root = write_caltech256(tmp_path, counts=(3, 3, 3))
    folder = root / "caltech256" / "256_ObjectCategories" / "002.american-flag"
    (folder / "002_0002.jpg").rename(folder / "002_0009.jpg")
    with pytest.raises(
        DatasetLayoutError, match=r"caltech256: .*002\.american-flag has 3 \.jpg files but not '002_0002\.jpg'"
    ):
        load_caltech256(root)


@pytest.mark.parametrize(
    "loader, dataset, sketch_line",
    [
        (load_imagenet, "imagenet", "val/<wnid>/*.JPEG"),
        (load_imagenet_v2, "imagenet_v2", "folders 0..999"),
        (load_caltech256, "caltech256", "256_ObjectCategories/001.ak47/001_0001.jpg"),
    ],
)
def test_missing_root_says_where_and_what(tmp_path, loader, dataset, sketch_line):
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetLayoutError) as e:
        loader(missing)
    msg = str(e.value)
    assert msg.startswith(f"{dataset}: ") and str(missing) in msg and sketch_line in msg and "laid out as" in msg
    assert isinstance(e.value, FileNotFoundError)


def test_flat_imagenet_val_folder_is_a_layout_error(tmp_path):
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "ILSVRC2012_val_00000001.JPEG").write_bytes(b"")
    with pytest.raises(DatasetLayoutError, match=r"(?s)imagenet: .*val is not an image-folder tree .*laid out as"):
        load_imagenet(tmp_path)


def test_imagenet_v2_with_named_folders_is_a_layout_error(tmp_path):
    root = write_imagenet_v2(tmp_path / "v2", classes=(0, 1))
    (root / "n01440764").mkdir()
    with pytest.raises(DatasetLayoutError, match="class folders must be named 0..999"):
        load_imagenet_v2(root)
