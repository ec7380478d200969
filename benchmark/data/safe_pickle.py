"""A restricted unpickler for the numpy arrays that data packages ship as pickles.

A pickle can name any importable callable and call it while loading
(``os.system`` included). :func:`load_numpy_pickle` resolves only the few
globals needed to rebuild plain numpy arrays and refuses everything else.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle

import numpy as np
from numpy._core.multiarray import _reconstruct

# (module, name) -> object. numpy < 2 pickles name ``numpy.core``; numpy >= 2 ``numpy._core``.
ALLOWED_GLOBALS: dict[tuple[str, str], object] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asks for a global outside :data:`ALLOWED_GLOBALS`."""


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def __init__(self, file, source: str):
        super().__init__(file)
        self._source = source

    def find_class(self, module: str, name: str):
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"{self._source}: refusing to unpickle global {module}.{name}; only numpy array "
                f"reconstruction is allowed ({', '.join(f'{m}.{n}' for m, n in ALLOWED_GLOBALS)})"
            ) from None

    def persistent_load(self, pid):
        raise UnsafePickleError(f"{self._source}: refusing persistent id {pid!r} in pickle")


def loads_numpy_pickle(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Unpickle ``data`` that must hold one numpy array; raise :class:`UnsafePickleError` otherwise."""
    obj = _NumpyOnlyUnpickler(io.BytesIO(data), source).load()
    if not isinstance(obj, np.ndarray):
        raise UnsafePickleError(f"{source}: expected a pickled numpy array, got {type(obj).__name__}")
    if obj.dtype.hasobject:
        raise UnsafePickleError(f"{source}: pickled array has object dtype; refusing it")
    return obj


def load_numpy_pickle(path: str | os.PathLike) -> np.ndarray:
    """Read one numpy array from a pickle file (gzip'd if the name ends in ``.gz``)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"{path}: cannot read pickle file ({type(e).__name__}: {e})") from e
    return loads_numpy_pickle(data, source=str(path))
