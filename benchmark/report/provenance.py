"""Where each model's numbers come from: zoo entry, model-table row, dvc.lock hashes."""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

import pandas as pd
import yaml


def anchor(kind: str, name: str) -> str:
    """A safe, unique HTML id for ``name``: readable slug plus a short hash."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:40] or "x"
    return f"{kind}-{slug}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def file_slug(name: str) -> str:
    """A safe file-name part for a suite, split or metric name (hash-suffixed if it had to change)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return slug if slug == name else f"{slug or 'x'}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def logits_outputs(lock: dict | None, model: str, stages) -> list[dict]:
    """``dvc.lock`` outputs of ``model``'s logits stages.

    A stage counts when its name before ``@`` is in ``stages`` and either its
    name after ``@`` is ``model`` or ``model`` is a component or the stem of one
    of its output paths. Returns ``{"stage", "path", "md5"}`` dicts.
    """
    found = []
    for stage, body in ((lock or {}).get("stages") or {}).items():
        head, _, tail = str(stage).partition("@")
        if head not in stages or not isinstance(body, dict):
            continue
        outs = [o for o in body.get("outs") or [] if isinstance(o, dict) and "path" in o]
        for o in outs:
            p = PurePosixPath(str(o["path"]))
            if tail == model or model in p.parts or p.stem == model:
                found.append({"stage": str(stage), "path": str(o["path"]), "md5": str(o.get("md5", o.get("etag", "")))})
    return found


def model_provenance(names, zoo: dict, models: pd.DataFrame | None, lock: dict | None, stages) -> list[dict]:
    """One record per model name: anchor, zoo entry as YAML text, model-table row, logits hashes."""
    rows = {}
    if models is not None:
        rows = {r["name"]: {k: v for k, v in r.items() if k != "name"} for r in models.to_dict("records")}
    out = []
    for name in sorted(names):
        entry = zoo.get(name)
        out.append(
            {
                "name": name,
                "anchor": anchor("model", name),
                "zoo_yaml": None
                if entry is None
                else yaml.safe_dump({name: entry}, sort_keys=False, allow_unicode=True),
                "model_row": rows.get(name),
                "logits": logits_outputs(lock, name, stages),
            }
        )
    return out
