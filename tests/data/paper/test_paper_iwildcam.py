"""iWildCam-WILDS loader: same splits, labels and groups as the wilds package's own class."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from paper_layouts import label_of, write_iwildcam

from benchmark.data.paper.common import DatasetLayoutError
from benchmark.data.paper.iwildcam import WILDS_SPLITS, load_iwildcam


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_iwildcam(tmp_path_factory.mktemp("wilds"))


def test_splits_match_the_wilds_class(root):
    from wilds.datasets.iwildcam_dataset import IWildCamDataset

    ref = IWildCamDataset(root_dir=str(root), download=False)
    splits = load_iwildcam(root)
    assert sorted(splits) == sorted(WILDS_SPLITS)
    for name, s in splits.items():
        sub = ref.get_subset(name)
        assert np.array_equal(s.ids, np.asarray(sub.indices)), name
        assert np.array_equal(s.labels, ref.y_array[sub.indices].numpy()), name
        location = ref.metadata_fields.index("location")
        assert np.array_equal(s.groups, ref.metadata_array[sub.indices, location].numpy()), name
    assert [len(splits[k]) for k in WILDS_SPLITS] == [8, 3, 3, 2, 4]


def test_images_labels_and_determinism(root):
    splits = load_iwildcam(root)
    df = pd.read_csv(root / "iwildcam_v2.0" / "metadata.csv")
    for s in splits.values():
        assert all(s.source.paths[i].endswith(df["filename"][i]) for i in s.index)
        assert [label_of(s.image(k), 4) for k in range(len(s))] == s.labels.tolist()
    again = load_iwildcam(root)
    assert all(np.array_equal(splits[k].ids, again[k].ids) for k in splits)
    ood_traps = set(splits["test"].groups) | set(splits["val"].groups)
    assert not ood_traps & set(splits["train"].groups)  # the fixture keeps WILDS' trap split


def test_missing_photo_is_named(tmp_path):
    root = write_iwildcam(tmp_path)
    victim = sorted((root / "iwildcam_v2.0" / "train").iterdir())[0]
    victim.unlink()
    with pytest.raises(DatasetLayoutError, match=f"photo '.*{victim.name}' listed in metadata.csv not found"):
        load_iwildcam(root)


def test_missing_column_and_missing_root(tmp_path):
    root = write_iwildcam(tmp_path / "a")
    csv = root / "iwildcam_v2.0" / "metadata.csv"
    pd.read_csv(csv).drop(columns=["location_remapped"]).to_csv(csv, index=False)
    with pytest.raises(DatasetLayoutError, match=r"lacks columns \['location_remapped'\]"):
        load_iwildcam(root)
    with pytest.raises(DatasetLayoutError, match=r"(?s)iwildcam: folder '.*iwildcam_v2.0' not found.*metadata.csv"):
        load_iwildcam(tmp_path)


def test_both_macro_f1_names_on_every_split_against_wilds_and_sklearn(root):
    """``macro_f1_wilds`` is what ``IWildCamDataset.eval`` reports (F1-macro_all) and ``macro_f1``
    scikit-learn's default (the published code), on every split alike."""
    import torch
    from sklearn.metrics import f1_score
    from wilds.datasets.iwildcam_dataset import IWildCamDataset

    from benchmark.core.metrics import compute_metrics

    ref = IWildCamDataset(root_dir=str(root), download=False)
    differ = 0
    for name, s in load_iwildcam(root).items():
        y = s.labels
        pred = np.where(np.arange(len(y)) % 2 == 0, y, (y + 1) % 6)  # half wrong, some into classes 4, 5 absent here
        probs = np.full((len(y), 6), 0.02)
        probs[np.arange(len(y)), pred] = 0.9
        m = compute_metrics(torch.as_tensor(probs), torch.as_tensor(y))
        sub = ref.get_subset(name)
        wilds, _ = ref.eval(torch.as_tensor(pred), ref.y_array[sub.indices], ref.metadata_array[sub.indices])
        assert m["macro_f1_wilds"] == pytest.approx(wilds["F1-macro_all"], abs=1e-6), name
        assert m["macro_f1"] == pytest.approx(f1_score(y, pred, average="macro"), abs=1e-12), name
        differ += abs(m["macro_f1"] - m["macro_f1_wilds"]) > 1e-3
    assert differ >= 2  # the fixture tells the two conventions apart
