import numpy as np
import pytest

from benchmark.data.splits_io import Split, load_split, save_split
from benchmark.storage.store import StoreError


@pytest.fixture
def split():
    rng = np.random.default_rng(0)
    return Split(
        images=rng.integers(0, 256, (6, 28, 28), dtype=np.uint8),
        labels=np.array([0, 1, 2, 3, -1, 9], dtype=np.int64),
        ids=np.array([5, 1, 9, 200000, 3, 7], dtype=np.int64),
        name="corrupt-contrast-2",
    )


def test_round_trip_is_exact_and_atomic(tmp_path, split):
    path = tmp_path / "splits" / "s.npz"
    save_split(path, split)
    assert [p.name for p in path.parent.iterdir()] == ["s.npz"]  # no temp file left behind
    back = load_split(path, name="corrupt-contrast-2")
    assert back.name == split.name
    for attr in ("images", "labels", "ids"):
        a, b = getattr(back, attr), getattr(split, attr)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_errors_name_the_file(tmp_path, split):
    with pytest.raises(StoreError, match="missing.npz: split file not found"):
        load_split(tmp_path / "missing.npz")
    path = tmp_path / "s.npz"
    save_split(path, split)
    with pytest.raises(StoreError, match="s.npz: holds split 'corrupt-contrast-2', expected 'test'"):
        load_split(path, name="test")
    bad = tmp_path / "bad.npz"
    np.savez(bad, images=split.images, labels=split.labels, name=np.array("x"))
    with pytest.raises(StoreError, match=r"bad.npz: missing array\(s\) \['ids'\]"):
        load_split(bad)
    np.savez(bad, images=split.images.astype(np.float32), labels=split.labels, ids=split.ids, name=np.array("x"))
    with pytest.raises(StoreError, match="bad.npz: Split 'x': images must be a uint8"):
        load_split(bad)
    np.savez(bad, images=split.images, labels=split.labels, ids=np.zeros(6, np.int64), name=np.array("x"))
    with pytest.raises(StoreError, match="bad.npz: Split 'x': ids are not unique"):
        load_split(bad)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(StoreError, match="garbage.npz: cannot read split file"):
        load_split(garbage)
    with pytest.raises(StoreError, match=r"\.npz"):
        save_split(tmp_path / "s.pkl", split)
