"""Published reference numbers (``published.yaml``) matched against our results."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmark.core.metric_info import METRICS
from benchmark.report.tables import member_names, method_label
from benchmark.storage.store import StoreError

DEFAULT_PATH = Path(__file__).with_name("published.yaml")
_REQUIRED = ("suite", "split", "family", "base", "metric", "value", "source")
_OPTIONAL = ("method", "sidekick", "n_members", "confidence", "note")


def norm(name: str) -> str:
    """Match key of a model or suite name: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


@dataclass(frozen=True)
class PublishedCell:
    suite: str
    split: str
    family: str
    base: str
    metric: str
    value: float
    source: str
    method: str | None = None
    sidekick: str | None = None
    n_members: int | None = None
    confidence: tuple[str, ...] = ("published", "max")
    note: str = ""


@dataclass(frozen=True)
class Published:
    cells: tuple[PublishedCell, ...]
    sources: dict[str, str]
    aliases: dict[str, frozenset[str]]  # norm(canonical) -> norms of every name

    def names(self, model: str) -> frozenset[str]:
        """The names a model goes by in the published numbers (its aliases, normalised)."""
        key = norm(model)
        return self.aliases.get(key, frozenset({key}))


def parse_published(data, *, source: str = "published.yaml") -> Published:
    """Validate the parsed YAML; ``ValueError`` names the source and the cell."""
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ValueError(f"{source}: expected a mapping with a 'cells' list")
    sources = data.get("sources") or {}
    if not isinstance(sources, dict):
        raise ValueError(f"{source}: 'sources' must be a mapping key -> citation")
    aliases = {}
    for canon, names in (data.get("aliases") or {}).items():
        if not isinstance(names, list):
            raise ValueError(f"{source}: aliases of {canon!r} must be a list")
        aliases[norm(canon)] = frozenset({norm(canon), *map(norm, names)})
    cells = []
    for i, c in enumerate(data["cells"]):
        where = f"{source}: cell {i}"
        if not isinstance(c, dict):
            raise ValueError(f"{where}: must be a mapping")
        missing = [k for k in _REQUIRED if k not in c]
        unknown = sorted(set(c) - set(_REQUIRED) - set(_OPTIONAL))
        if missing or unknown:
            raise ValueError(f"{where}: missing keys {missing}, unknown keys {unknown}")
        if c["metric"] not in METRICS:
            raise ValueError(f"{where}: unknown metric {c['metric']!r}")
        if c["source"] not in sources:
            raise ValueError(f"{where}: source {c['source']!r} not in 'sources' {sorted(sources)}")
        value = c["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{where}: value must be a finite number, got {value!r}")
        conf = c.get("confidence", ["published", "max"])
        conf = [conf] if isinstance(conf, str) else conf
        n_members = c.get("n_members")
        if n_members is not None and (not isinstance(n_members, int) or n_members < 1):
            raise ValueError(f"{where}: n_members must be a positive integer, got {n_members!r}")
        cells.append(
            PublishedCell(
                suite=str(c["suite"]),
                split=str(c["split"]),
                family=str(c["family"]),
                base=str(c["base"]),
                metric=c["metric"],
                value=float(value),
                source=c["source"],
                method=None if c.get("method") is None else str(c["method"]),
                sidekick=None if c.get("sidekick") is None else str(c["sidekick"]),
                n_members=n_members,
                confidence=tuple(map(str, conf)),
                note=str(c.get("note", "")),
            )
        )
    return Published(cells=tuple(cells), sources={str(k): str(v) for k, v in sources.items()}, aliases=aliases)


def load_published(path=DEFAULT_PATH) -> Published:
    """The published numbers of ``path`` (:func:`parse_published`); :class:`StoreError` when the file is missing."""
    from benchmark.report.inputs import read_yaml

    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: published numbers file not found")
    return parse_published(read_yaml(path), source=str(path))


def _candidates(pub: Published, cell: PublishedCell, wide: pd.DataFrame, fit: str) -> pd.DataFrame:
    w = wide[
        (wide["suite"].map(norm) == norm(cell.suite))
        & (wide["split"] == cell.split)
        & (wide["family"] == cell.family)
        & (wide["fit"] == fit)
    ]
    w = w[w["base"].map(norm).isin(pub.names(cell.base))]
    if cell.method is not None:
        w = w[w["method"] == cell.method]
    if cell.sidekick is not None:
        w = w[w["sidekick"].map(norm).isin(pub.names(cell.sidekick))] if cell.sidekick else w[w["sidekick"] == ""]
    if cell.n_members is not None:
        sizes = pd.Series(
            [len(member_names(r.members, r.base, r.sidekick)) for r in w.itertuples()], index=w.index, dtype=int
        )
        w = w[sizes == cell.n_members]
    for conf in cell.confidence:
        if (w["confidence"] == conf).any():
            return w[w["confidence"] == conf]
    return w.iloc[0:0]


def _models_text(cell: PublishedCell) -> str:
    if cell.sidekick:
        return f"{cell.base} + {cell.sidekick}"
    if cell.n_members:
        return f"{cell.n_members} x {cell.base}"
    return cell.base


def reproduction_rows(pub: Published, wide: pd.DataFrame, fits) -> list[dict]:
    """One dict per published cell: the cell, and per fit mode our value and the difference.

    ``ours[fit]`` is ``{"value", "diff", "better", "detail"}`` or ``{"status": ...}``
    with "not run" when the suite has no results at all, "no matching row"
    otherwise. Several matches: the best by the metric's direction, said in detail.
    """
    suites_run = set(wide["suite"].map(norm)) if len(wide) else set()
    rows = []
    for cell in pub.cells:
        hib = METRICS[cell.metric].higher_is_better
        ours = {}
        for fit in fits:
            if norm(cell.suite) not in suites_run:
                ours[fit] = {"status": "not run"}
                continue
            cand = _candidates(pub, cell, wide, fit) if cell.metric in wide.columns else wide.iloc[0:0]
            cand = cand[cand[cell.metric].notna()] if len(cand) else cand
            if cand.empty:
                ours[fit] = {"status": "no matching row"}
                continue
            best = cand.sort_values(cell.metric, ascending=not hib).iloc[0]
            detail = (
                f"{method_label(best['family'], best['method'])}, {best['members'] or best['base']}, confidence "
                f"{best['confidence']}"
            )
            if len(cand) > 1:
                detail = f"best of {len(cand)}: " + detail
            v = float(best[cell.metric])
            diff = v - cell.value
            ours[fit] = {"value": v, "diff": diff, "better": (diff > 0) == hib if diff else None, "detail": detail}
        rows.append(
            {
                "cell": cell,
                "label": method_label(cell.family, cell.method or ""),
                "ours": ours,
                "models": _models_text(cell),
                "source": pub.sources[cell.source],
            }
        )
    return rows
