"""params.yaml as typed objects: one frozen dataclass per block, parsed once by :func:`parse_params`.

Every block goes through :func:`benchmark.config.typed.parse_config` (the helpers of method configs, recipes, zoo
entries and suite files): a wrong type, an unknown or a missing key is one ``ValueError`` naming the file and the
field (``params.yaml: evaluate: workers must be an integer >= 1, got 'two' (str)``; a number written ``1e-3`` gets
YAML 1.1's hint). A stage parses the file once, at its entry (:func:`benchmark.stages.stage_config.load_params`,
cached per process on the file's bytes), and hands the :class:`Params` down; no function below it sees the mapping.

Typed here: ``logits``, ``cost``, ``evaluate`` (:class:`benchmark.config.evaluate.EvalConfig`), ``distributed``,
``recipes``, ``report`` (:class:`benchmark.config.report_config.ReportConfig`). ``data`` stays a
mapping at this level because its shape depends on the suite: the embedded suite's block is typed by
:class:`benchmark.data.embedded.EmbeddedData`, a paper suite's by its suite file (:mod:`benchmark.data.paper.suites`).
``sve`` and ``baselines`` hold the methods' entries, parsed with each method's own typed config where they are used:
by the method's stage (:mod:`benchmark.stages.method_stage`) and by the pipeline generator, never by the stages that
do not run a method. ``cluster`` (Slurm resources per stage) is typed by :mod:`benchmark.cluster.config`
where ``cluster submit`` reads it; no stage does.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

from benchmark.config.evaluate import EvalConfig
from benchmark.config.report_config import ReportConfig
from benchmark.config.typed import check, parse_config
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
class Params:
    """The whole params file (the embedded default's ``params.yaml`` or a suite's ``suites/<name>/params.yaml``)."""

    zoo: str
    data: dict
    recipes: dict[str, Recipe]
    logits: LogitsParams
    cost: CostParams
    evaluate: EvalConfig
    suite: str = "embedded"
    threads: int | None = field(default=None, metadata=check(minimum=1))  # torch threads per stage (null: all cores)
    device: str = field(default="cpu", metadata=check(choices=DEVICES))
    data_root: str | None = None
    num_workers: int = field(default=0, metadata=check(minimum=0))  # DataLoader processes (paper suites)
    distributed: DistConfig = field(default_factory=DistConfig)
    sve: dict | None = None  # Singular Value Ensembles (benchmark.methods.sve_stage.SveConfig)
    baselines: dict | None = None  # baselines.<kind>.<key>: one entry per method stage (benchmark.methods.registry)
    report: ReportConfig | None = None
    cluster: dict | None = None  # Slurm resources per stage (benchmark.cluster.config.ClusterConfig); no stage reads it

    def __post_init__(self):
        if isinstance(self.evaluate, EvalConfig) and self.evaluate.suite != self.suite:  # the rows are labelled with it
            object.__setattr__(self, "evaluate", dataclasses.replace(self.evaluate, suite=self.suite))


def parse_params(raw, where: str = "params.yaml") -> Params:
    """``raw`` (the data of a params file) as :class:`Params`; ``ValueError`` naming ``where`` and the field."""
    return parse_config(Params, raw, where)
