"""iWildCam2020-WILDS (v2.0, 182 classes): camera-trap photos, split by camera trap.

The release folder ``iwildcam_v2.0/`` holds ``metadata.csv`` (one row per photo:
``split``, ``filename``, label ``y``, camera trap ``location_remapped``, ...) and
the photos under ``train/``. We read ``metadata.csv`` with pandas instead of
``wilds.get_dataset``: the wilds class also needs the release marker file and
refuses a metadata file missing any class, and its splits are exactly the rows
of the ``split`` column, which is what we take (the tests check both agree on
the same files). ``wilds`` is therefore a test dependency only (the reference for
these splits and for WILDS' macro F1, ``macro_f1_wilds``); its evaluation
imports ``torch_scatter`` lazily, only for group averages. Loader splits (WILDS names):

* ``train`` (129,809), ``id_val`` (7,314), ``id_test`` (8,154): training traps;
* ``val`` (14,961), ``test`` (42,791): traps never seen in training (OOD).

The paper uses train; id_val -> val; id_test -> test; WILDS test -> OOD test,
and selects models by validation macro F1. Inside a split, samples keep the
row order of ``metadata.csv`` (as ``WILDSDataset.get_subset``); the id of a
sample is its row index (the WILDS dataset index) and its group is its
camera trap (``location_remapped``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmark.data.paper.common import FileImages, Loader, layout_error, make_split, require_dir, require_file

WILDS_SPLITS = ("train", "id_val", "id_test", "val", "test")
REQUIRED_COLUMNS = ("split", "filename", "y", "location_remapped")

IWILDCAM_SKETCH = """
<root>/iwildcam_v2.0/metadata.csv   (columns split, filename, y, location_remapped, ...;
                                     split in train, id_val, id_test, val, test)
<root>/iwildcam_v2.0/train/<filename>.jpg   (every photo, whatever its split)
    (the WILDS release: wilds.get_dataset("iwildcam", root_dir=<root>, download=True))
"""


def load_iwildcam(root, *, check_files: bool = True) -> dict:
    """Splits ``train``, ``id_val``, ``id_test``, ``val``, ``test`` (WILDS names, see the module docstring).

    ``check_files`` verifies that every photo listed in ``metadata.csv`` exists.
    """
    import pandas as pd

    root = Path(root)
    require_dir(root, "iwildcam", root, IWILDCAM_SKETCH)
    base = require_dir(root / "iwildcam_v2.0", "iwildcam", root, IWILDCAM_SKETCH)
    csv = require_file(base / "metadata.csv", "iwildcam", root, IWILDCAM_SKETCH)
    images = require_dir(base / "train", "iwildcam", root, IWILDCAM_SKETCH)
    try:
        df = pd.read_csv(csv)
    except Exception as e:  # empty, binary, malformed
        raise layout_error(
            "iwildcam", root, f"cannot read {csv} as CSV ({type(e).__name__}: {e})", IWILDCAM_SKETCH
        ) from None
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise layout_error(
            "iwildcam", root, f"{csv} lacks columns {missing} (has {list(df.columns)[:10]})", IWILDCAM_SKETCH
        )
    unknown = sorted(set(df["split"].astype(str)) - set(WILDS_SPLITS))
    if unknown:
        raise layout_error("iwildcam", root, f"{csv} has unknown split values {unknown[:5]}", IWILDCAM_SKETCH)
    for col in ("y", "location_remapped"):
        if not pd.api.types.is_integer_dtype(df[col]) or (df[col] < 0).any():
            raise layout_error(
                "iwildcam", root, f"{csv}: column {col!r} must hold non-negative integers", IWILDCAM_SKETCH
            )
    paths = [str(images / f) for f in df["filename"].astype(str)]
    if check_files:
        absent = next((p for p in paths if not Path(p).is_file()), None)
        if absent is not None:
            raise layout_error("iwildcam", root, f"photo {absent!r} listed in metadata.csv not found", IWILDCAM_SKETCH)
    source = FileImages(paths)
    labels = df["y"].to_numpy(dtype=np.int64)
    groups = df["location_remapped"].to_numpy(dtype=np.int64)
    ids = np.arange(len(df), dtype=np.int64)
    split = df["split"].astype(str).to_numpy()
    return {
        name: make_split(name, "iwildcam", source, np.flatnonzero(split == name), labels, ids, groups)
        for name in WILDS_SPLITS
    }


LOADERS = {  # the loaders of this module, by the name a suite file gives (benchmark.data.paper.suites.LOADERS)
    "iwildcam": Loader(load_iwildcam, IWILDCAM_SKETCH),
}
