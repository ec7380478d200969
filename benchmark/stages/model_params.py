"""The blocks of params.yaml that the model stages (``data``, ``train@``, ``logits@``) read, as typed objects; with
the methods' entries, what a method's stage reads.

A model stage parses these blocks, and only these, at its entry (:func:`load_model_params`, cached per process on the
file's bytes) and hands the :class:`ModelParams` down; a method's stage also the methods' entries
(:class:`MethodParams`); the other blocks (:data:`OTHER_BLOCKS`: ``evaluate``, ``report``; ``cluster`` is ``cluster
submit``'s) are the evaluate and report stages' (:mod:`benchmark.stages.params_config` parses the whole file), so
neither their settings nor the code that types them is a dependency of a stage that does not read them. A key that is
no block of the file is still an error here.

``data`` is typed by :class:`DataRef`: which suite's data the stages read (``spec``: a paper suite's file; else the
embedded suite). The embedded suite's other keys are the data stage's settings, typed where that stage builds the
splits (:class:`benchmark.data.embedded.EmbeddedData`).
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.config.typed import check, parse_config
from benchmark.models.distributed import DistConfig
from benchmark.models.recipe import Recipe
from benchmark.stages.stage_config import read_params

DEVICES = ("auto", "cpu", "cuda")
OTHER_BLOCKS = ("evaluate", "report", "sve", "baselines", "cluster")  # params.yaml blocks no model stage reads


@dataclass(frozen=True)
class LogitsParams:
    """``logits``: the batch size of the logits forward passes, optional autocast (``amp``)."""

    batch_size: int = field(metadata=check(minimum=1))
    amp: typing.Any = None  # null/false (off), bfloat16 or float16 (benchmark.models.infer.amp_dtype)

    def validate(self) -> None:
        """``amp`` names an autocast dtype the logits stage knows."""
        from benchmark.models.infer import amp_dtype

        amp_dtype(self.amp, "amp")


@dataclass(frozen=True)
class CostParams:
    """``cost``: images per timed forward and timed forwards after one warm-up."""

    throughput_batch: int = field(metadata=check(minimum=1))
    throughput_iters: int = field(metadata=check(minimum=1))


@dataclass(frozen=True)
class DataRef:
    """``data`` as the stages that read a suite see it: a paper suite's file (``spec``), else ``suite: embedded``."""

    suite: str = "embedded"
    spec: str | None = None

    @property
    def kind(self) -> str:
        """``paper`` (a suite file) or ``embedded``."""
        return "paper" if self.spec else "embedded"

    def validate(self) -> None:
        """A paper suite names its suite file (``spec``); only the embedded default does without."""
        if not self.spec and self.suite != "embedded":
            raise ValueError(f"must have 'spec: <suite file>' (a paper suite) or 'suite: embedded', got suite {self.suite!r}")


@dataclass(frozen=True)
class ModelParams:
    """The model stages' blocks of a params file (the embedded default's ``params.yaml`` or
    ``suites/<name>/params.yaml``)."""

    zoo: str
    data: DataRef
    recipes: dict[str, Recipe]
    logits: LogitsParams
    cost: CostParams
    suite: str = "embedded"
    threads: int | None = field(default=None, metadata=check(minimum=1))  # torch threads per stage (null: all cores)
    device: str = field(default="cpu", metadata=check(choices=DEVICES))
    data_root: str | None = None
    num_workers: int = field(default=0, metadata=check(minimum=0))  # DataLoader processes (paper suites)
    distributed: DistConfig = field(default_factory=DistConfig)


@dataclass(frozen=True)
class MethodParams(ModelParams):
    """The model stages' blocks and the methods' entries: what a method's stage reads (``pipelines/method.py``,
    ``pipelines/sve.py``; each entry parsed by its method's typed config, :mod:`benchmark.stages.method_stage`)."""

    sve: dict | None = field(default=None, kw_only=True)  # Singular Value Ensembles (benchmark.methods.sve_stage.SveConfig)
    baselines: dict | None = field(default=None, kw_only=True)  # baselines.<kind>.<key>: one entry per method stage (benchmark.methods.registry)


def data_ref(raw) -> dict:
    """The keys of a ``data`` block that :class:`DataRef` types (the rest: the embedded data stage's settings)."""
    return {k: v for k, v in raw.items() if k in ("suite", "spec")} if isinstance(raw, dict) else raw


def parse_model_params(raw, where: str = "params.yaml", cls=ModelParams):
    """``raw`` (the data of a params file) as ``cls`` (:class:`ModelParams`, or a subclass that types more blocks);
    ``ValueError`` naming ``where`` and the field. The blocks of :data:`OTHER_BLOCKS` that ``cls`` has no field for
    are left out, not read."""
    if isinstance(raw, dict):
        names = {f.name for f in dataclasses.fields(cls)}
        raw = {k: data_ref(v) if k == "data" else v for k, v in raw.items() if k in names or k not in OTHER_BLOCKS}
    return parse_config(cls, raw, where)


def parse_method_params(raw, where: str = "params.yaml") -> MethodParams:
    """``raw`` as :class:`MethodParams` (:func:`parse_model_params`)."""
    return parse_model_params(raw, where, MethodParams)


def load_method_params(path="params.yaml") -> MethodParams:
    """The blocks of params file ``path`` that a method's stage reads (read and parsed once per process)."""
    return read_params(Path(path), parse_method_params)


def load_model_params(path="params.yaml") -> ModelParams:
    """The model stages' blocks of params file ``path`` (:func:`benchmark.stages.stage_config.read_params`: read and
    parsed once per process)."""
    return read_params(Path(path), parse_model_params)

