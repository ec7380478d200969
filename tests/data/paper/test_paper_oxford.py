"""Flowers102, DTD and Oxford-IIIT Pets loaders against torchvision's classes on official-layout fixtures."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paper_layouts import DTD_CLASSES, label_of, write_dtd, write_flowers102, write_pets

from benchmark.data.paper.common import DatasetLayoutError
from benchmark.data.paper.oxford import load_dtd, load_flowers102, load_pets


def test_flowers102_matches_torchvision(tmp_path, monkeypatch):
    from torchvision.datasets import Flowers102

    root, labels = write_flowers102(tmp_path, n_images=18)
    splits = load_flowers102(root)
    assert [len(splits[k]) for k in ("train", "val", "test")] == [5, 5, 8]
    monkeypatch.setattr(Flowers102, "_check_integrity", lambda self: True)  # the fixture cannot match the official MD5s
    for name, s in splits.items():
        ref = Flowers102(str(root), split=name, download=False)
        assert [str(p) for p in ref._image_files] == list(s.source.paths)
        assert s.labels.tolist() == [ref[i][1] for i in range(len(ref))]
        assert np.array_equal(s.labels, labels[s.ids - 1].astype(np.int64) - 1)  # id = official image number
        assert [label_of(s.image(k), 5) for k in range(len(s))] == s.labels.tolist()
    assert len(set().union(*(set(s.ids) for s in splits.values()))) == 18


def test_flowers102_missing_mat_file(tmp_path):
    root, _ = write_flowers102(tmp_path)
    (root / "flowers-102" / "setid.mat").unlink()
    with pytest.raises(
        DatasetLayoutError, match=r"(?s)flowers102: file '.*setid.mat' not found.*'trnid', 'valid', 'tstid'"
    ):
        load_flowers102(root)


@pytest.mark.parametrize("partition", [1, 2])
def test_dtd_matches_torchvision(tmp_path, partition):
    from torchvision.datasets import DTD

    root = write_dtd(tmp_path, per_class=6)
    splits = load_dtd(root, partition=partition)
    assert [len(splits[k]) for k in ("train", "val", "test")] == [6, 6, 6]
    for name, s in splits.items():
        ref = DTD(str(root), split=name, partition=partition, download=False)
        assert s.labels.tolist() == [ref[i][1] for i in range(len(ref))]
        assert [label_of(s.image(k), 3) for k in range(len(s))] == s.labels.tolist()
        assert ref.classes == list(DTD_CLASSES)
    all_ids = np.concatenate([s.ids for s in splits.values()])
    assert sorted(all_ids.tolist()) == list(range(18))  # a partition covers every image once
    other = load_dtd(root, partition=3 - partition)
    by_id = {i: lab for s in other.values() for i, lab in zip(s.ids, s.labels)}
    assert all(
        by_id[i] == lab for s in splits.values() for i, lab in zip(s.ids, s.labels)
    )  # ids independent of partition


def test_dtd_missing_partition_file(tmp_path):
    root = write_dtd(tmp_path, partitions=(1,))
    with pytest.raises(
        DatasetLayoutError, match=r"(?s)dtd: file '.*labels/train2.txt' not found.*<root>/dtd/dtd/images"
    ):
        load_dtd(root, partition=2)


def test_dtd_does_not_need_torchvision_dtd(tmp_path, monkeypatch):
    """The list files are read directly: a torchvision without DTD(loader=...) (< 0.22) changes nothing."""
    import torchvision.datasets

    root = write_dtd(tmp_path, per_class=6)
    want = {k: (s.labels.tolist(), s.ids.tolist(), s.source.paths) for k, s in load_dtd(root).items()}

    def old_dtd(*args, loader=None, **kwargs):  # pragma: no cover - must not be called
        raise TypeError("DTD.__init__() got an unexpected keyword argument 'loader'")

    monkeypatch.setattr(torchvision.datasets, "DTD", old_dtd)
    got = {k: (s.labels.tolist(), s.ids.tolist(), s.source.paths) for k, s in load_dtd(root).items()}
    assert got == want


@pytest.mark.parametrize(
    "content, message",
    [
        (
            "banded/banded_0001.jpg\nnot-a-class-path.jpg\n",
            r"train1.txt line 2: expected '<class>/<file>.jpg', got 'not-a-class-path.jpg'",
        ),
        ("a/b/c.jpg\n", r"train1.txt line 1: expected '<class>/<file>.jpg'"),
        ("\n\n", r"train1.txt lists no images"),
        (b"\xff\xfe\x00garbage", r"cannot read .*train1.txt \(UnicodeDecodeError"),
        ("dotted/dotted_0001.jpg\n", r"train/val/test1.txt must cover the same classes"),
        (
            "blotchy/blotchy_0001.jpg\nbanded/banded_9999.jpg\nzigzagged/zigzagged_0001.jpg\n",
            r"image '.*banded_9999.jpg' listed in train1.txt not found",
        ),
    ],
)
def test_dtd_bad_list_file_is_a_layout_error(tmp_path, content, message):
    root = write_dtd(tmp_path, per_class=6, partitions=(1,))
    path = root / "dtd" / "dtd" / "labels" / "train1.txt"
    if "dotted" in str(content):  # a class the other lists lack
        (root / "dtd" / "dtd" / "images" / "dotted").mkdir()
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    with pytest.raises(DatasetLayoutError, match=message):
        load_dtd(root)


def test_pets_matches_torchvision_and_holds_out_val(tmp_path):
    from torchvision.datasets import OxfordIIITPet

    root = write_pets(tmp_path, trainval_per=7, test_per=3)
    splits = load_pets(root, val_fraction=0.2)
    assert [len(splits[k]) for k in ("trainval", "train", "val", "test")] == [21, 21 - 4, 4, 9]
    for name in ("trainval", "test"):
        ref = OxfordIIITPet(str(root), split=name, download=False)
        assert splits[name].labels.tolist() == [ref[i][1] for i in range(len(ref))]
    tv = splits["trainval"]
    perm = torch.randperm(21, generator=torch.Generator().manual_seed(42)).numpy()
    assert np.array_equal(np.concatenate([splits["train"].ids, splits["val"].ids]), tv.ids[perm])
    for s in splits.values():
        assert [label_of(s.image(k), 3) for k in range(len(s))] == s.labels.tolist()
    assert not set(splits["train"].ids) & set(splits["val"].ids) and not set(tv.ids) & set(splits["test"].ids)
    assert np.array_equal(load_pets(root, val_fraction=0.2)["val"].ids, splits["val"].ids)


def test_pets_bad_annotation_line(tmp_path):
    root = write_pets(tmp_path)
    path = root / "oxford-iiit-pet" / "annotations" / "test.txt"
    path.write_text(path.read_text() + "Bengal_99 cat\n")
    with pytest.raises(DatasetLayoutError, match=r"test.txt line 10: expected '<image> <class id 1..37>"):
        load_pets(root)
