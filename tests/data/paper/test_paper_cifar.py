"""CIFAR-100, CIFAR-10 and CIFAR-100-C loaders on fixtures in the official pickle / .npy formats."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from paper_layouts import write_cifar10, write_cifar100, write_cifar100_c

from benchmark.data.paper.cifar import (
    CIFAR10_TEST_ID_OFFSET,
    CIFAR100_TEST_ID_OFFSET,
    load_cifar10,
    load_cifar100,
    load_cifar100_c,
)
from benchmark.data.paper.common import DatasetLayoutError
from benchmark.data.safe_pickle import UnsafePickleError


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cifar")
    write_cifar100(root, n_train=40, n_test=12)
    write_cifar10(root, per_batch=4, n_test=6)
    return root


def _torchvision(cls, root, train, monkeypatch):
    import torchvision.datasets.cifar as tv

    monkeypatch.setattr(tv, "check_integrity", lambda *a, **k: True)  # the fixture cannot match the official MD5s
    return cls(str(root), train=train, download=False)


def test_cifar100_matches_torchvision(root, monkeypatch):
    from torchvision.datasets import CIFAR100

    splits = load_cifar100(root, val_fraction=0.1)
    for train in (True, False):
        ref = _torchvision(CIFAR100, root, train, monkeypatch)
        parts = [splits["train"], splits["val"]] if train else [splits["test"]]
        for s in parts:
            assert np.array_equal(s.labels, np.asarray(ref.targets)[s.index])
            for k in (0, len(s) - 1):
                assert np.array_equal(np.asarray(s.image(k)), ref.data[s.index[k]])


def test_cifar100_split_sizes_order_and_ids(root):
    splits = load_cifar100(root, val_fraction=0.1)
    assert [len(splits[k]) for k in ("train", "val", "test")] == [36, 4, 12]
    perm = torch.randperm(40, generator=torch.Generator().manual_seed(42)).numpy()
    assert np.array_equal(np.concatenate([splits["train"].index, splits["val"].index]), perm)
    assert np.array_equal(splits["test"].ids, CIFAR100_TEST_ID_OFFSET + np.arange(12))
    img = np.asarray(splits["test"].image(5))  # red = 100 + k, green = label, blue = 8 * column
    assert img.shape == (32, 32, 3) and img[0, 0, 0] == 105 and img[0, 0, 1] == splits["test"].labels[5]
    assert img[3, :, 2].tolist() == [8 * c for c in range(32)]
    again = load_cifar100(root, val_fraction=0.1)
    assert all(np.array_equal(again[k].ids, splits[k].ids) for k in splits)


def test_cifar10_labels_and_disjoint_ids(root, monkeypatch):
    from torchvision.datasets import CIFAR10

    splits = load_cifar10(root)
    ref = _torchvision(CIFAR10, root, False, monkeypatch)
    assert np.array_equal(splits["test"].labels, np.asarray(ref.targets))
    assert len(splits["train"]) == 20 and splits["test"].ids[0] == CIFAR10_TEST_ID_OFFSET
    c100 = load_cifar100(root, val_fraction=0.1)
    assert not set(splits["test"].ids) & set().union(*(set(s.ids) for s in c100.values()))


def test_cifar100_c_severity_blocks_and_paired_ids(root):
    test = load_cifar100(root, val_fraction=0.1)["test"]
    write_cifar100_c(root, test.labels, corruptions=("gaussian_noise", "frost"))
    splits = load_cifar100_c(root, corruptions=("gaussian_noise", "frost"))
    assert sorted(splits) == sorted(f"corrupt-{c}-{s}" for c in ("gaussian_noise", "frost") for s in range(1, 6))
    for name, s in splits.items():
        sev = int(name.rsplit("-", 1)[1])
        assert np.array_equal(s.ids, test.ids) and np.array_equal(s.labels, test.labels)
        img = np.asarray(s.image(7))  # red = severity, green = test index, blue = corruption
        assert (img[0, 0, 0], img[0, 0, 1], img[0, 0, 2]) == (sev, 7, 0 if "gaussian" in name else 1)
    only = load_cifar100_c(root, corruptions=("frost",), severities=(3,))
    assert list(only) == ["corrupt-frost-3"]


def test_cifar100_c_inconsistent_labels_and_unknown_corruption(tmp_path):
    write_cifar100_c(tmp_path, np.arange(6), corruptions=("frost",))
    labels = np.load(tmp_path / "CIFAR-100-C" / "labels.npy")
    labels[-1] += 1
    np.save(tmp_path / "CIFAR-100-C" / "labels.npy", labels)
    with pytest.raises(DatasetLayoutError, match="labels.npy must repeat the test labels once per severity"):
        load_cifar100_c(tmp_path, corruptions=("frost",))
    with pytest.raises(ValueError, match="corruptions must be among"):
        load_cifar100_c(tmp_path, corruptions=("rain",))
    fresh = write_cifar100_c(tmp_path / "fresh", np.arange(6), corruptions=("frost",))
    with pytest.raises(
        DatasetLayoutError, match=r"(?s)file '.*gaussian_noise.npy' not found.*CIFAR-100-C/<corruption>.npy"
    ):
        load_cifar100_c(fresh, corruptions=("gaussian_noise",))


def test_malicious_pickle_is_refused(tmp_path):
    write_cifar100(tmp_path, n_train=4, n_test=2)

    class Evil:
        def __reduce__(self):
            import os

            return (os.system, ("echo pwned",))

    (tmp_path / "cifar-100-python" / "train").write_bytes(pickle.dumps({b"data": Evil()}))
    with pytest.raises(UnsafePickleError, match="refusing to unpickle global"):
        load_cifar100(tmp_path, val_fraction=0.25)


def test_missing_cifar_files_say_where(tmp_path):
    with pytest.raises(DatasetLayoutError, match=r"(?s)cifar100: root folder .* not found.*cifar-100-python/train"):
        load_cifar100(tmp_path / "none")
    write_cifar10(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DatasetLayoutError, match=r"cifar10: file '.*data_batch_3' not found"):
        load_cifar10(tmp_path)
