"""Settings of the report stage: the ``report:`` block of ``params.yaml``, typed (:mod:`benchmark.config.typed`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmark.config.typed import check, parse_config
from benchmark.core.metric_info import METRICS

_MAIN_METRICS = ("accuracy", "auroc", "aurc", "sac98", "ece", "nll", "brier")
_FORMATS = ("png", "svg", "pdf")
_METRIC_NAMES = tuple(sorted(METRICS))


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
    ``formats`` are the static figures' file types (``[]``: none; the page draws its own
    charts, and ``dvc plots`` reads ``plots/data/``, written either way).
    """

    title: str = "Cheap uncertainty quantification: leaderboard"
    fit: str = "converged"
    confidence: str = "max"
    metrics: tuple[str, ...] = field(default=_MAIN_METRICS, metadata=check(choices=_METRIC_NAMES))
    plot_metrics: tuple[str, ...] = field(default=(*_MAIN_METRICS, "ood_auroc"), metadata=check(choices=_METRIC_NAMES))
    plot_splits: tuple[str, ...] = ("test", "shift", "ood")
    table_splits: tuple[str, ...] = ("test", "shift", "ood", "val", "corrupt-*-3")
    reference_family: str = "single"
    reproduction_fits: tuple[str, ...] = ("paper-exact", "converged")
    logits_stages: tuple[str, ...] = ("logits",)
    formats: tuple[str, ...] = field(
        default=("png", "svg"), metadata=check(choices=_FORMATS, unique=True)
    )  # [] = no image
    dpi: int = field(default=110, metadata=check(minimum=1))
    headline_metric: str = "aurc"
    headline_metrics: tuple[str, ...] = field(
        default=("accuracy", "aurc", "auroc", "nll", "ece", "sac98"), metadata=check(choices=_METRIC_NAMES, min_len=1)
    )
    headline_balance: float = field(default=0.2, metadata=check(minimum=0))
    headline_split: str = "test"
    workers: int = field(
        default=1, metadata=check(minimum=1)
    )  # processes drawing the Pareto figures (forked; same files)

    def validate(self) -> None:
        """Checks across fields (after the field checks of :func:`benchmark.config.typed.parse_config`)."""
        if self.headline_metric not in self.headline_metrics:
            raise ValueError(
                f"headline_metric {self.headline_metric!r} must be one of headline_metrics "
                f"{list(self.headline_metrics)}"
            )

    @classmethod
    def from_params(cls, params: dict | None, *, source: str = "params.yaml") -> ReportConfig:
        """Build from a whole params mapping (its ``report`` block, parsed by
        :func:`benchmark.config.typed.parse_config`; absent = the defaults). Raises ``ValueError`` naming ``source``
        and the offending field or value."""
        block = (params or {}).get("report")
        return cls() if block is None else parse_config(cls, block, f"{source}: report")
