"""Settings of the report stage: the ``report:`` block of ``params.yaml``, validated."""
from __future__ import annotations

from dataclasses import dataclass, fields

from benchmark.core.metric_info import METRICS

_MAIN_METRICS = ("accuracy", "auroc", "aurc", "sac98", "ece", "nll", "brier")
_FORMATS = ("png", "svg", "pdf")


@dataclass(frozen=True)
class ReportConfig:
    """What the leaderboard shows and plots.

    ``fit``/``confidence`` are the default filters of the main tables (the other
    values stay reachable through the filters). ``metrics`` are the table columns
    in order (metrics found in the results but not listed are appended).
    ``plot_splits`` and ``table_splits`` are fnmatch patterns over split names.
    ``reference_family`` is the family whose rows are "the base model alone".
    ``reproduction_fits`` are the fit modes compared to the published numbers.
    ``logits_stages`` are the ``dvc.lock`` stage names (before ``@``) whose
    outputs are a model's logits. The headline table ranks by ``headline_metric``
    (the reader can switch among ``headline_metrics``); "cheap" duos have a FLOPs
    balance of at most ``headline_balance``; ``headline_split`` is the split of
    the compact headline that ``dvc metrics show`` prints. ``workers`` processes
    draw the Pareto figures (where the platform can fork; the output is the same).
    """

    title: str = "Cheap uncertainty quantification: leaderboard"
    fit: str = "converged"
    confidence: str = "max"
    metrics: tuple[str, ...] = _MAIN_METRICS
    plot_metrics: tuple[str, ...] = (*_MAIN_METRICS, "ood_auroc")
    plot_splits: tuple[str, ...] = ("test", "shift", "ood")
    table_splits: tuple[str, ...] = ("test", "shift", "ood", "val", "corrupt-*-3")
    reference_family: str = "single"
    reproduction_fits: tuple[str, ...] = ("paper-exact", "converged")
    logits_stages: tuple[str, ...] = ("logits",)
    formats: tuple[str, ...] = ("png", "svg")
    dpi: int = 110
    headline_metric: str = "aurc"
    headline_metrics: tuple[str, ...] = ("accuracy", "aurc", "auroc", "nll", "ece", "sac98")
    headline_balance: float = 0.2
    headline_split: str = "test"
    workers: int = 1  # processes drawing the Pareto figures (forked; the files do not depend on it)

    @classmethod
    def from_params(cls, params: dict | None, *, source: str = "params.yaml") -> "ReportConfig":
        """Build from a whole params mapping (uses its ``report`` key; absent = defaults).

        Raises ``ValueError`` naming ``source`` and the offending key or value.
        """
        block = (params or {}).get("report")
        if block is None:
            return cls()
        where = f"{source}: report"
        if not isinstance(block, dict):
            raise ValueError(f"{where} must be a mapping, got {type(block).__name__}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(block) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}; known: {sorted(known)}")
        kw = {}
        for key, value in block.items():
            default = getattr(cls, key)
            if isinstance(default, tuple):
                if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                    raise ValueError(f"{where}.{key} must be a list of non-empty strings, got {value!r}")
                kw[key] = tuple(value)
            elif isinstance(default, float):
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                    raise ValueError(f"{where}.{key} must be a non-negative number, got {value!r}")
                kw[key] = float(value)
            elif isinstance(default, int):
                if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                    raise ValueError(f"{where}.{key} must be a positive integer, got {value!r}")
                kw[key] = value
            else:
                if not isinstance(value, str) or not value:
                    raise ValueError(f"{where}.{key} must be a non-empty string, got {value!r}")
                kw[key] = value
        cfg = cls(**kw)
        for key in ("metrics", "plot_metrics", "headline_metrics"):
            bad = [m for m in getattr(cfg, key) if m not in METRICS]
            if bad:
                raise ValueError(f"{where}.{key}: unknown metrics {bad}; known: {sorted(METRICS)}")
        if cfg.headline_metric not in cfg.headline_metrics:
            raise ValueError(f"{where}.headline_metric: {cfg.headline_metric!r} must be one of headline_metrics "
                             f"{list(cfg.headline_metrics)}")
        bad = [f for f in cfg.formats if f not in _FORMATS]
        if bad or not cfg.formats:
            raise ValueError(f"{where}.formats: {list(cfg.formats)} must be a non-empty subset of {list(_FORMATS)}")
        return cfg
