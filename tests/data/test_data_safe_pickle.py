import gzip
import os
import pickle

import numpy as np
import pytest

from benchmark.data.safe_pickle import UnsafePickleError, load_numpy_pickle, loads_numpy_pickle


class _Evil:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def test_refuses_pickle_that_calls_os_system(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Evil(f"touch {marker}"))
    path = tmp_path / "evil.gz"
    path.write_bytes(gzip.compress(payload))
    with pytest.raises(UnsafePickleError, match=r"evil\.gz: refusing to unpickle global (posix|nt|os)\.system"):
        load_numpy_pickle(path)
    assert not marker.exists()
    pickle.loads(payload)  # the same bytes really do run the command with the stock unpickler
    assert marker.exists()


@pytest.mark.parametrize("protocol", [3, 4])  # animal-mnist ships protocol 4
def test_round_trips_numpy_arrays(protocol):
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    out = loads_numpy_pickle(pickle.dumps(a, protocol=protocol))
    np.testing.assert_array_equal(out, a)
    assert out.dtype == a.dtype


def test_refuses_non_arrays_and_object_arrays():
    with pytest.raises(UnsafePickleError, match="expected a pickled numpy array, got dict"):
        loads_numpy_pickle(pickle.dumps({"a": 1}))
    with pytest.raises(UnsafePickleError):
        loads_numpy_pickle(pickle.dumps(np.array([{"x": 1}], dtype=object)))


def test_unreadable_file_names_it(tmp_path):
    with pytest.raises(ValueError, match="nothere.gz"):
        load_numpy_pickle(tmp_path / "nothere.gz")
