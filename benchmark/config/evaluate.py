"""Settings of the evaluate stage: the ``evaluate:`` block of ``params.yaml``, typed (:mod:`benchmark.config.typed`).

One config for the stage, its units and the bundle check: parsed with the params file
(:class:`benchmark.stages.params_config.Params`), completed by the evaluate stage with the suite's name and the data
index's groups, and handed down to every unit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from benchmark.config.typed import check, derived, parse_config

TEST = "test"
# the knobs that change a unit's rows (the unit cache key); the others choose units or run them
UNIT_SETTINGS = (
    "suite",
    "fits",
    "n_bootstrap",
    "bootstrap_splits",
    "bootstrap_level",
    "seed",
    "ece_bins",
    "sac_threshold",
)


@dataclass(frozen=True)
class EvalConfig:
    """params.yaml ``evaluate`` (plus ``suite`` and ``groups``, set by the evaluate stage, not keys of the block).

    ``fits``: temperature fit modes; ``n_bootstrap`` resamples on ``bootstrap_splits`` at ``bootstrap_level``;
    ``deep_ensembles``: ensemble sizes over zoo entries that differ only in their seed; ``balance_range``: keep only
    duos with GFLOPs(sidekick) / GFLOPs(base) in ``[low, high]``; ``main_fit``: the fit of the metrics summary;
    ``workers``: processes for the units (results do not depend on it)."""

    fits: tuple[str, ...] = field(default=("converged", "paper-exact"), metadata=check(min_len=1, unique=True))
    n_bootstrap: int = field(default=1000, metadata=check(minimum=0))
    bootstrap_splits: tuple[str, ...] = (TEST,)
    deep_ensembles: tuple[int, ...] = field(default=(), metadata=check(minimum=2, unique=True))
    bootstrap_level: float = field(default=0.95, metadata=check(above=0, maximum=1))
    seed: int = field(default=0, metadata=check(minimum=0))
    ece_bins: int = field(default=15, metadata=check(minimum=1))
    sac_threshold: float = field(default=0.98, metadata=check(above=0, maximum=1))
    balance_range: tuple[float, ...] | None = field(default=None, metadata=check(minimum=0))
    main_fit: str = "converged"
    workers: int = field(default=1, metadata=check(minimum=1))
    suite: str = field(default="embedded", metadata=derived())
    # split -> (N,) group id per sample (iWildCam locations): adds group-aware rows. Derived from
    # the data index, which the logits' ids already identify, so it is not part of the settings hash.
    groups: dict = field(default_factory=dict, compare=False, repr=False, metadata=derived())

    def validate(self) -> None:
        """The checks across fields: ``balance_range`` null or ``[low, high]`` with low <= high; ``main_fit`` one of
        ``fits``."""
        if self.balance_range is not None and (
            len(self.balance_range) != 2 or self.balance_range[0] > self.balance_range[1]
        ):
            raise ValueError(
                f"balance_range must be null or [low, high] with low <= high, got {list(self.balance_range)}"
            )
        if self.main_fit not in self.fits:
            raise ValueError(f"main_fit {self.main_fit!r} must be one of fits {list(self.fits)}")

    @classmethod
    def from_params(cls, suite: str, raw: dict | None, where: str = "params evaluate") -> EvalConfig:
        """The block ``raw`` of a params file (e.g. a bundle manifest's) for suite ``suite``; ``ValueError`` naming
        ``where`` and the field."""
        return dataclasses.replace(parse_config(cls, raw or {}, where), suite=suite)

    def settings(self) -> dict:
        """The knobs that change results (what the unit cache is keyed on)."""
        return {k: getattr(self, k) for k in UNIT_SETTINGS}

    def n_boot(self, split: str) -> int:
        """Bootstrap resamples on ``split``: ``n_bootstrap`` on the ``bootstrap_splits``, else 0."""
        return self.n_bootstrap if split in self.bootstrap_splits else 0
