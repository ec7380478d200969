"""params.yaml as typed objects: one frozen dataclass per block, parsed once by :func:`parse_params`.

Every block goes through :func:`benchmark.config.typed.parse_config` (the helpers of method configs, recipes, zoo
entries and suite files): a wrong type, an unknown or a missing key is one ``ValueError`` naming the file and the
field (``params.yaml: evaluate: workers must be an integer >= 1, got 'two' (str)``; a number written ``1e-3`` gets
YAML 1.1's hint). :func:`benchmark.stages.stage_config.load_params` reads the file once per process (cached on the
resolved path, modification time and size) and hangs the :class:`Params` on the mapping it returns
(:func:`benchmark.stages.stage_config.typed`).

Typed here: ``logits``, ``cost``, ``evaluate``, ``distributed``, ``recipes``, ``sve`` (:class:`SveParams`),
``report`` (:class:`benchmark.config.report_config.ReportConfig`), ``reproduce``. ``data`` stays a mapping at this
level because its shape depends on the suite: the embedded suite's block is typed by
:class:`benchmark.data.embedded.EmbeddedData`, a paper suite's by its suite file (:mod:`benchmark.data.paper.suites`);
``baselines`` is checked entry by entry against the method registry's typed configs
(:func:`benchmark.stages.registry.check_baselines`).
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field

from benchmark.config.report_config import ReportConfig
from benchmark.config.typed import check, parse_config
from benchmark.methods.sve import SIGMA_INIT
from benchmark.models.distributed import DistConfig
from benchmark.models.train import Recipe

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class LogitsParams:
    """``logits``: the batch size of the logits forward passes, optional autocast (``amp``)."""

    batch_size: int = field(metadata=check(minimum=1))
    amp: typing.Any = None  # null/false (off), bfloat16 or float16 (benchmark.models.infer.amp_dtype)

    def validate(self) -> None:
        from benchmark.models.infer import amp_dtype

        amp_dtype(self.amp, "amp")


@dataclass(frozen=True)
class CostParams:
    """``cost``: images per timed forward and timed forwards after one warm-up."""

    throughput_batch: int = field(metadata=check(minimum=1))
    throughput_iters: int = field(metadata=check(minimum=1))


@dataclass(frozen=True)
class EvaluateParams:
    """``evaluate`` (defaults: those of :class:`benchmark.evaluation.rows.EvalConfig`)."""

    fits: tuple[str, ...] = field(default=("converged", "paper-exact"), metadata=check(min_len=1, unique=True))
    n_bootstrap: int = field(default=1000, metadata=check(minimum=0))
    bootstrap_splits: tuple[str, ...] = ("test",)
    deep_ensembles: tuple[int, ...] = field(default=(), metadata=check(minimum=2, unique=True))
    bootstrap_level: float = field(default=0.95, metadata=check(above=0, maximum=1))
    seed: int = field(default=0, metadata=check(minimum=0))
    ece_bins: int = field(default=15, metadata=check(minimum=1))
    sac_threshold: float = field(default=0.98, metadata=check(above=0, maximum=1))
    balance_range: tuple[float, ...] | None = field(default=None, metadata=check(minimum=0))
    main_fit: str = "converged"
    workers: int = field(default=1, metadata=check(minimum=1))  # worker processes for the units; results do not depend on it

    def validate(self) -> None:
        if self.balance_range is not None and (len(self.balance_range) != 2 or self.balance_range[0] > self.balance_range[1]):
            raise ValueError(f"balance_range must be null or [low, high] with low <= high, got {list(self.balance_range)}")
        if self.main_fit not in self.fits:
            raise ValueError(f"main_fit {self.main_fit!r} must be one of fits {list(self.fits)}")


@dataclass(frozen=True)
class SveParams:
    """``sve``: Singular Value Ensembles (the fields: :mod:`benchmark.methods.sve_stage`)."""

    base: str  # zoo entry whose arch, pretrained init and img_size SVE starts from
    members: tuple[int, ...] = field(metadata=check(minimum=1, unique=True))  # the ensemble sizes M ([] = no SVE)
    recipe: str  # a recipe of params.yaml recipes (checked against them by the SVE stage)
    sigma_init: float = field(default=SIGMA_INIT, metadata=check(minimum=0))  # the authors' released init_std
    seed: int = field(default=0, metadata=check(minimum=0))
    patterns: tuple[str, ...] | None = field(default=None, metadata=check(min_len=1))  # null: the default layers
    train_subset: int | None = field(default=None, metadata=check(minimum=1))  # null: the whole train split
    splits: tuple[str, ...] | None = field(default=None, metadata=check(min_len=1))  # null: every split but train
    nested: bool = True  # train the largest size once; sve-m<M> = its first M members


@dataclass(frozen=True)
class ToleranceParams:
    """One ``reproduce.tolerance`` entry: ``|fresh - committed| <= atol + rtol * |committed|``."""

    atol: float = field(metadata=check(minimum=0))
    rtol: float = field(default=0.0, metadata=check(minimum=0))


@dataclass(frozen=True)
class ReproduceParams:
    """``reproduce``: the tolerances of the from-scratch gate, per metric (``default`` required)."""

    tolerance: dict[str, ToleranceParams]

    def validate(self) -> None:
        if "default" not in self.tolerance:
            raise ValueError("tolerance needs a 'default' entry {atol, rtol}")


@dataclass(frozen=True)
class Params:
    """The whole params file (the embedded default's ``params.yaml`` or a suite's ``suites/<name>/params.yaml``)."""

    zoo: str
    data: dict
    recipes: dict[str, Recipe]
    logits: LogitsParams
    cost: CostParams
    evaluate: EvaluateParams
    suite: str = "embedded"
    threads: int | None = field(default=None, metadata=check(minimum=1))  # torch threads per stage (null: all cores)
    device: str = field(default="cpu", metadata=check(choices=DEVICES))
    data_root: str | None = None
    num_workers: int = field(default=0, metadata=check(minimum=0))  # DataLoader processes (paper suites)
    distributed: DistConfig = field(default_factory=DistConfig)
    sve: SveParams | None = None
    baselines: dict | None = None
    report: ReportConfig | None = None
    reproduce: ReproduceParams | None = None

    def validate(self) -> None:
        from benchmark.stages.registry import check_baselines

        check_baselines(self.baselines)  # each entry parsed by its method's typed config


PARSES = {"count": 0}
"""How many times a params mapping was parsed in this process (a test checks that a file is parsed once)."""


def parse_params(raw, where: str = "params.yaml") -> Params:
    """``raw`` (the data of a params file) as :class:`Params`; ``ValueError`` naming ``where`` and the field."""
    PARSES["count"] += 1
    return parse_config(Params, raw, where)
