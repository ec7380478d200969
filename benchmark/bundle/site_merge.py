"""How ``publish`` merges one suite's bundles (:mod:`benchmark.bundle.site`): the rows, with their conflicts, and the
models, paired differences and DVC stages behind them.

Merge rule (also on the site's index page): rows are keyed by (suite, split, family, method, base, sidekick, members,
fit, confidence, metric). For a key given by several bundles the row shown comes from a verified bundle before a
self-reported one, then from the newest bundle (manifest ``created``, a checked UTC time that cannot be in the future),
then from the bundle id first in sort order. Two bundles of the same status whose values for a key differ by more than
:data:`benchmark.bundle.verify.TOLERANCE` are a *conflict*: the chosen row is shown and both are listed in
``conflicts``.
"""

from __future__ import annotations

import pandas as pd

from benchmark.bundle.schema import KEY
from benchmark.bundle.verify import TOLERANCE, VERIFIED


def merge(bundles: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Merged rows of one suite's bundles (see the module doc) and the conflicts table."""
    frames = [b.rows.assign(bundle=b.name, status=b.status, created=b.manifest["created"]) for b in bundles]
    allrows = pd.concat(frames, ignore_index=True)
    allrows["_rank"] = (allrows["status"] != VERIFIED).astype(int)
    order = allrows.sort_values(["_rank", "created", "bundle"], ascending=[True, False, True], kind="mergesort")
    chosen = order.drop_duplicates(KEY, keep="first")
    others = order[order.duplicated(KEY, keep="first")][KEY + ["bundle", "value", "status"]]
    pairs = others.merge(chosen[KEY + ["bundle", "value", "status"]], on=KEY, suffixes=("_other", "_shown"))
    a, b = pairs["value_shown"].astype(float), pairs["value_other"].astype(float)
    differ = ~(a.isna() & b.isna()) & ~((a - b).abs() <= TOLERANCE)
    pairs = pairs[(pairs["status_other"] == pairs["status_shown"]) & differ]
    conflicts = pd.DataFrame(
        {
            **{k: pairs[k] for k in KEY},
            "shown_bundle": pairs["bundle_shown"],
            "shown_value": pairs["value_shown"],
            "other_bundle": pairs["bundle_other"],
            "other_value": pairs["value_other"],
            "status": pairs["status_other"],
        }
    )
    conflicts = conflicts.sort_values(KEY + ["other_bundle"], kind="mergesort").reset_index(drop=True)
    merged = chosen.drop(columns=["_rank"]).sort_values(KEY, kind="mergesort").reset_index(drop=True)
    return merged, conflicts


def merged_lock(bundles) -> dict | None:
    """The bundles' ``dvc.lock`` stages in one lock, the first bundle (in merge priority) winning for a stage."""
    stages: dict = {}
    for b in bundles:  # bundles in priority order: the first one's stage wins
        for name, s in ((b.lock or {}).get("stages") or {}).items():
            stages.setdefault(name, s)
    return {"schema": "2.0", "stages": stages} if stages else None


def merged_models(bundles) -> pd.DataFrame | None:
    """The bundles' ``models.csv`` rows, the first bundle (in merge priority) winning for a model name."""
    frames = [b.models for b in bundles if b.models is not None and "name" in b.models.columns]
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True).drop_duplicates("name", keep="first").reset_index(drop=True)


def merged_paired(bundles) -> pd.DataFrame | None:
    """Paired differences of the bundles, the first bundle (in merge priority) winning for a key."""
    from benchmark.bundle.verify import PAIRED_KEY

    frames = [b.paired for b in bundles if b.paired is not None]
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True).drop_duplicates(PAIRED_KEY, keep="first").reset_index(drop=True)
