import numpy as np
import pytest
import torch

from benchmark.storage import store
from benchmark.storage.store import StoreError, check_aligned, load_logits_file, save_logits_file


def test_atomic_write_failure_keeps_old_file(tmp_path):
    p = tmp_path / "x.json"
    store.write_json(p, {"a": 1})
    with pytest.raises(RuntimeError):
        with store.atomic_path(p) as tmp:
            tmp.write_text("garbage")
            raise RuntimeError("killed")
    assert store.read_json(p) == {"a": 1}
    assert [f.name for f in tmp_path.iterdir()] == ["x.json"]


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_logits_round_trip(tmp_path, suffix):
    z, y, ids = torch.randn(5, 3), torch.tensor([0, 1, 2, 1, 0]), torch.arange(10, 15)
    save_logits_file(tmp_path / f"a{suffix}", z, y, ids, meta={"model": "m"})
    f = load_logits_file(tmp_path / f"a{suffix}")
    assert torch.equal(f.logits, z) and torch.equal(f.labels, y) and torch.equal(f.ids, ids)


def test_tampered_labels_are_detected(tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    p = tmp_path / "a.safetensors"
    save_logits_file(p, torch.randn(4, 3), torch.tensor([0, 1, 2, 0]), torch.arange(4))
    arrays = load_file(str(p))
    with safe_open(str(p), framework="numpy") as f:
        meta = f.metadata()
    arrays["labels"] = np.array([0, 1, 2, 1])
    save_file(arrays, str(p), metadata=meta)
    with pytest.raises(StoreError, match="labels do not match the labels_hash"):
        load_logits_file(p)


def test_misaligned_files_are_refused(tmp_path):
    save_logits_file(tmp_path / "a.safetensors", torch.randn(3, 2), torch.tensor([0, 1, 0]), torch.tensor([1, 2, 3]))
    save_logits_file(tmp_path / "b.safetensors", torch.randn(3, 2), torch.tensor([0, 1, 0]), torch.tensor([1, 3, 2]))
    with pytest.raises(StoreError, match="not aligned"):
        check_aligned(load_logits_file(tmp_path / "a.safetensors"), load_logits_file(tmp_path / "b.safetensors"))


@pytest.mark.parametrize(
    "arrays, message",
    [
        ({"labels": np.zeros(3, int)}, "missing array 'logits'"),
        ({"logits": np.zeros((3, 2)), "labels": np.zeros(4, int)}, "has N=3 rows but 'labels' has 4"),
        ({"logits": np.zeros(3), "labels": np.zeros(3, int)}, "must be \\(N, C\\)"),
        ({"logits": np.zeros((3, 2)), "labels": np.zeros(3)}, "1-D integer array"),
    ],
)
def test_bad_files_name_file_and_problem(tmp_path, arrays, message):
    p = tmp_path / "bad.npz"
    np.savez(p, **arrays)
    with pytest.raises(StoreError, match=message) as e:
        load_logits_file(p)
    assert str(p) in str(e.value)


def test_unreadable_and_missing(tmp_path):
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(StoreError, match="cannot read logits file"):
        load_logits_file(tmp_path / "x.npz")
    with pytest.raises(StoreError, match="file not found"):
        load_logits_file(tmp_path / "nope.npz")
    with pytest.raises(StoreError, match="unknown logits file type"):
        (tmp_path / "x.txt").write_text("1")
        load_logits_file(tmp_path / "x.txt")


@pytest.mark.slow  # fresh interpreters
def test_logits_files_are_byte_reproducible_across_processes(tmp_path):
    import subprocess
    import sys

    code = (
        "import torch; from benchmark.storage.store import save_logits_file; "
        "save_logits_file(__import__('sys').argv[1], torch.arange(6.).reshape(3, 2), torch.tensor([0, 1, 0]), "
        "torch.arange(3), meta={'model': 'm', 'split': 's', 'family': 'f', 'arch': 'a'})"
    )
    for name in ("a", "b", "c"):
        subprocess.run([sys.executable, "-c", code, str(tmp_path / f"{name}.safetensors")], check=True)
    blobs = {(tmp_path / f"{n}.safetensors").read_bytes() for n in "abc"}
    assert len(blobs) == 1
    assert load_logits_file(tmp_path / "a.safetensors").meta["model"] == "m"


def test_written_files_get_the_usual_mode_not_the_temp_files_0600(tmp_path):
    import os
    import stat

    mask = os.umask(0o022)
    try:
        save_logits_file(
            tmp_path / "a.safetensors", torch.zeros(2, 3), torch.tensor([0, 1])
        )  # safetensors recreates the file
        save_logits_file(tmp_path / "a.npz", torch.zeros(2, 3), torch.tensor([0, 1]))
    finally:
        os.umask(mask)
    for name in ("a.safetensors", "a.npz"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_ctrl_c_in_the_set_up_leaves_no_temporary(tmp_path, monkeypatch, kind):
    """A KeyboardInterrupt right after the temporary is made (in the mode fix-up or the fd close) removes it."""
    import os

    from benchmark.storage import atomic

    target = tmp_path / ("x.json" if kind == "file" else "site")
    real = os.chmod if kind == "folder" else os.close

    def interrupted(*args):
        real(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "chmod" if kind == "folder" else "close", interrupted)
    manager = atomic.atomic_dir(target) if kind == "folder" else atomic.atomic_path(target)
    with pytest.raises(KeyboardInterrupt):
        with manager:
            pytest.fail("the body must not run")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
