"""params.yaml as typed objects: one frozen dataclass per block, parsed once by :func:`load_params`.

Every block goes through :func:`benchmark.config.typed.parse_config` (the helpers of method configs, recipes, zoo
entries and suite files): a wrong type, an unknown or a missing key is one ``ValueError`` naming the file and the
field (``params.yaml: evaluate: workers must be an integer >= 1, got 'two' (str)``; a number written ``1e-3`` gets
YAML 1.1's hint). A stage parses the file once, at its entry (:func:`benchmark.stages.stage_config.read_params`,
cached per process on the file's bytes), and hands the typed objects down; no function below it sees the mapping.

:class:`Params` is the whole file: the model stages' blocks (:class:`benchmark.stages.model_params.ModelParams`:
``zoo``, ``data``, ``recipes``, ``logits``, ``cost``, ``distributed``, ...; what ``data``, ``train@`` and ``logits@``
parse, and all they parse), ``sve`` and ``baselines`` (:class:`~benchmark.stages.model_params.MethodParams`: the
methods' entries, parsed with each method's own typed config where they are used: by the method's stage,
:mod:`benchmark.stages.method_stage`, and by the pipeline generator) and the blocks of the stages after them:
``evaluate`` (:class:`benchmark.config.evaluate.EvalConfig`) and ``report``
(:class:`benchmark.config.report_config.ReportConfig`). The evaluate stage and the pipeline generator parse it.
``cluster`` (Slurm resources per stage) is typed by :mod:`benchmark.cluster.config` where ``cluster submit``
reads it; no stage does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from benchmark.config.evaluate import EvalConfig
from benchmark.config.report_config import ReportConfig
from benchmark.stages.model_params import MethodParams, parse_model_params
from benchmark.stages.stage_config import read_params


@dataclass(frozen=True)
class Params(MethodParams):
    """The whole params file (the embedded default's ``params.yaml`` or a suite's ``suites/<name>/params.yaml``)."""

    evaluate: EvalConfig = field(kw_only=True)
    report: ReportConfig | None = field(default=None, kw_only=True)
    cluster: dict | None = field(
        default=None, kw_only=True
    )  # Slurm resources (benchmark.cluster.config); no stage reads it

    def __post_init__(self):
        if isinstance(self.evaluate, EvalConfig) and self.evaluate.suite != self.suite:  # the rows are labelled with it
            object.__setattr__(self, "evaluate", dataclasses.replace(self.evaluate, suite=self.suite))


def parse_params(raw, where: str = "params.yaml") -> Params:
    """``raw`` (the data of a params file) as :class:`Params`; ``ValueError`` naming ``where`` and the field."""
    return parse_model_params(raw, where, Params)


def load_params(path="params.yaml") -> Params:
    """Read and parse a whole params file (every block typed) before any stage does work; once per process (cached on
    the resolved path and a hash of the file's bytes). ``ConfigError`` naming the file and the field."""
    return read_params(path, parse_params)
