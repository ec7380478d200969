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
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.config.typed import check, parse_config
from benchmark.models.recipe import Recipe
from benchmark.stages.stage_config import read_params

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "gloo", "nccl")  # params distributed.backend
AMP = (
    "bfloat16",
    "float16",
)  # params logits.amp: null/false (off) or one of these (dtypes: benchmark.models.infer.amp_dtype)
OTHER_BLOCKS = ("evaluate", "report", "sve", "baselines", "cluster")  # params.yaml blocks no model stage reads


@dataclass(frozen=True)
class LogitsParams:
    """``logits``: the batch size of the logits forward passes, optional autocast (``amp``)."""

    batch_size: int = field(metadata=check(minimum=1))
    amp: typing.Any = None  # null/false (off), bfloat16 or float16 (AMP)

    def validate(self) -> None:
        """``amp`` names an autocast dtype the logits stage knows (:func:`check_amp`)."""
        check_amp(self.amp, "amp")


def check_amp(value, where: str = "params 'logits': amp"):
    """``value`` (params ``logits.amp``) when it is null/false (off) or one of :data:`AMP`; ``ValueError`` naming
    ``where`` else."""
    if value is None or value is False or value in AMP:
        return value
    raise ValueError(f"{where} must be null (off), bfloat16 or float16, got {value!r}")


@dataclass(frozen=True)
class CostParams:
    """``cost``: images per timed forward and timed forwards after one warm-up."""

    throughput_batch: int = field(metadata=check(minimum=1))
    throughput_iters: int = field(metadata=check(minimum=1))


def _int(value, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return value


@dataclass(frozen=True)
class DistConfig:
    """params ``distributed``: processes per node, nodes, this node's rank (null: from ``$NODE_RANK`` or
    ``$SLURM_NODEID``), the rendezvous host and port of node 0 (several nodes only; one node picks a free
    local port) and the backend (``auto``: nccl for CUDA, gloo for the CPU)."""

    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int | None = None
    master_addr: str | None = "127.0.0.1"  # null: $MASTER_ADDR (what a `cluster submit` job sets: its first node)
    master_port: int = 29500
    backend: str = "auto"

    def __post_init__(self):
        _int(self.nproc_per_node, "nproc_per_node", 1)
        _int(self.nnodes, "nnodes", 1)
        if self.node_rank is not None:
            _int(self.node_rank, "node_rank", 0, self.nnodes - 1)
        if self.master_addr is not None and (not isinstance(self.master_addr, str) or not self.master_addr):
            raise ValueError(
                f"master_addr must be a host name or address (or null: $MASTER_ADDR), got {self.master_addr!r}"
            )
        _int(self.master_port, "master_port", 1, 65535)
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")

    @property
    def world_size(self) -> int:
        """The processes of a run: per node times nodes."""
        return self.nproc_per_node * self.nnodes

    def backend_for(self, device) -> str:
        """The backend for ``device`` (a ``torch.device``): ``auto`` picks nccl for CUDA, gloo for the CPU."""
        if self.backend == "nccl" and device.type != "cuda":
            raise ValueError(
                f"params 'distributed': backend nccl needs CUDA, but the device is {device.type}; use auto or gloo"
            )
        return self.backend if self.backend != "auto" else ("nccl" if device.type == "cuda" else "gloo")

    def this_node_rank(self) -> int:
        """``node_rank``, else ``$NODE_RANK``/``$SLURM_NODEID``; 0 on a single node."""
        if self.nnodes == 1:
            return 0
        if self.node_rank is not None:
            return self.node_rank
        for var in ("NODE_RANK", "SLURM_NODEID"):
            if os.environ.get(var, "").isdigit():
                return _int(int(os.environ[var]), f"node rank from ${var}", 0, self.nnodes - 1)
        raise ValueError(
            f"params 'distributed': node_rank is null and neither $NODE_RANK nor $SLURM_NODEID is set; "
            f"set it on each of the {self.nnodes} nodes (0 on the node at master_addr)"
        )

    def rendezvous_host(self) -> str:
        """``master_addr``, else ``$MASTER_ADDR`` (set by a ``cluster submit`` job to its allocation's first node)."""
        host = self.master_addr or os.environ.get("MASTER_ADDR", "")
        if not host:
            raise ValueError(
                "params 'distributed': master_addr is null and $MASTER_ADDR is not set; set either to "
                "the address of node 0 (a `cluster submit` job sets $MASTER_ADDR itself)"
            )
        return host

    def torchrun_args(self, script: str, argv) -> list[str]:
        """The ``torchrun`` arguments that run ``python script argv`` as this node's share of the workers."""
        args = ["--nproc_per_node", str(self.nproc_per_node), "--nnodes", str(self.nnodes)]
        if self.nnodes == 1:
            args.append("--standalone")
        else:
            args += [
                "--node_rank",
                str(self.this_node_rank()),
                "--master_addr",
                self.rendezvous_host(),
                "--master_port",
                str(self.master_port),
            ]
        return [*args, str(script), *argv]


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
            raise ValueError(
                f"must have 'spec: <suite file>' (a paper suite) or 'suite: embedded', got suite {self.suite!r}"
            )


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

    sve: dict | None = field(
        default=None, kw_only=True
    )  # Singular Value Ensembles (benchmark.methods.sve_stage.SveConfig)
    baselines: dict | None = field(
        default=None, kw_only=True
    )  # baselines.<kind>.<key>: one entry per method stage (benchmark.methods.registry)


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
