"""params ``cluster``: the Slurm resources of each stage's job, as data.

A stage's job gets, field by field, the first value given in: params
``cluster.resources.<stage>`` (``train@lite1``), ``cluster.resources.<kind>`` (the
name before ``@``: ``train``), ``cluster.resources.default``, the block's own
``partition``/``account``, then the built-in defaults of its kind
(:func:`builtin`)::

    cluster:
      partition: gpu
      account: lab-x
      resources:
        default: {mem: 16G}
        train: {time: "12:00:00", gpus: 1}
        "train@vit-b16": {gpus: 4}

A stage of a kind that runs under torchrun (``train``, ``logits``) whose params
``distributed`` ask for several processes gets one task per node on
``distributed.nnodes`` nodes, each with the GPUs (``device`` not cpu) and CPUs of
``nproc_per_node`` processes (:func:`job_spec`). ``cluster`` is not a stage
parameter: changing it reruns nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from functools import cache

from benchmark.config.typed import check, parse_config

TORCHRUN_KINDS = (
    "train",
    "logits",
)  # the stages that relaunch themselves under torchrun (benchmark.models.distributed)
CPU_KINDS = ("data", "sve", "evaluate", "report")  # stages that never run a model; every other kind (train, logits,
# sve-train and the weight-based methods' stages) gets the GPUs of its processes when params `device` is not cpu
TRAINING_KINDS = ("train", "sve-train")  # the pipeline's training stages; with every method stage that trains (trains)
TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")  # minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S (sbatch --time)
MEM = re.compile(r"^\d+[KMGT]?$")  # sbatch --mem: a number, megabytes unless a K/M/G/T suffix
NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")  # a partition or account name
OWN_OPTIONS = (
    "--job-name",
    "--output",
    "--error",
    "--chdir",
    "--dependency",
    "--kill-on-invalid-dep",
    "--hold",
    "--parsable",
    "--wrap",
    "--array",
    "--requeue",
    "--no-requeue",
    "--nodes",
    "--ntasks-per-node",
)
DEFAULT_MEM, DEFAULT_TIME, TRAIN_TIME = "8G", "2:00:00", "12:00:00"
COLLECT = "collect"  # the run's final job (benchmark.cluster.job.collect): its resources are params resources.collect


@dataclass(frozen=True)
class Resources:
    """One job's Slurm resources; a null field is inherited (stage entry, kind, ``default``, built-in)."""

    cpus: int | None = field(default=None, metadata=check(minimum=1))  # --cpus-per-task, per node (one task a node)
    gpus: int | None = field(default=None, metadata=check(minimum=0))  # --gpus-per-node (0: none asked for)
    mem: str | None = None  # --mem, per node: 16G, 4000M (a number alone: megabytes)
    time: str | None = None  # --time: minutes, H:MM:SS or D-HH:MM:SS
    partition: str | None = None  # --partition (null: the cluster's default)
    account: str | None = None  # --account (null: the user's default)
    extra: list[str] | None = None  # more sbatch options, each one "--name=value" (e.g. --qos=high, --constraint=a100)

    def validate(self) -> None:
        """The checks across fields: ``mem`` and ``time`` as sbatch reads them, Slurm names, ``extra`` options written
        ``--name=value`` and none that ``cluster submit`` sets itself."""
        if self.mem is not None and not MEM.match(self.mem):
            raise ValueError(f"mem must be a number with an optional K/M/G/T suffix (sbatch --mem), got {self.mem!r}")
        if self.time is not None and not TIME.match(self.time):
            raise ValueError(f"time must be minutes, H:MM:SS or D-HH:MM:SS (sbatch --time), got {self.time!r}")
        for key in ("partition", "account"):
            value = getattr(self, key)
            if value is not None and not NAME.match(value):
                raise ValueError(f"{key} must be a Slurm name (letters, digits, _ . + -), got {value!r}")
        for opt in self.extra or ():
            name = opt.split("=", 1)[0]
            if not re.match(r"^--[a-z][a-z0-9-]*=\S+$", opt):
                raise ValueError(f"extra: each entry must be one sbatch option written --name=value, got {opt!r}")
            if name in OWN_OPTIONS:
                raise ValueError(f"extra: {name} is set by `cluster submit` itself (per stage), not by params")

    def over(self, base: Resources) -> Resources:
        """These values where given, ``base``'s elsewhere."""
        return replace(
            base, **{f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        )


@dataclass(frozen=True)
class ClusterConfig:
    """``cluster``: ``python -m benchmark cluster submit`` runs each stage as its own Slurm job with these
    resources (docs/how-to/cluster.md); a key of ``resources`` is ``default``, a kind of stage (``train``) or a
    stage (``train@lite1``)."""

    partition: str | None = None  # every job's partition unless resources say otherwise (null: the cluster's default)
    account: str | None = None  # every job's account unless resources say otherwise (null: the user's default)
    resources: dict[str, Resources] = field(
        default_factory=dict
    )  # by `default`, kind or stage (stage wins); unset: built-in

    def validate(self) -> None:
        """The block's own ``partition`` and ``account`` checked as a job's resources are."""
        Resources(partition=self.partition, account=self.account).validate()


def parse(raw, where: str = "params.yaml") -> ClusterConfig:
    """params ``cluster`` (null or absent: every built-in default) as :class:`ClusterConfig`; ``ValueError``
    naming ``where`` and the field."""
    return ClusterConfig() if raw is None else parse_config(ClusterConfig, raw, f"{where}: cluster")


def kind(stage: str) -> str:
    """``train@lite1`` -> ``train``; ``evaluate`` -> ``evaluate``."""
    return stage.split("@", 1)[0]


@cache
def _method_training_stages() -> frozenset[str]:
    """The stage names of the methods that declare a training of their own (the method registry's ``training``)."""
    from benchmark.methods import registry  # imports every method module (torch): only when a job's time is asked

    methods = map(registry.get_method, registry.list_methods("stage"))
    return frozenset(m.stage for m in methods if m.training is not None)


def trains(stage_kind: str) -> bool:
    """Whether stages of ``stage_kind`` train a model (the built-in time limit :data:`TRAIN_TIME`): the zoo's
    fine-tunes, SVE's training and the stage of every method that declares its own training (shallow and LoRA
    ensembles, ...: the method registry says which)."""
    return stage_kind in TRAINING_KINDS or stage_kind in _method_training_stages()


def builtin(stage_kind: str, *, device: str, threads: int | None, num_workers: int, procs: int) -> Resources:
    """The built-in resources of a ``stage_kind`` job whose node runs ``procs`` processes: per process params
    ``threads`` (null: 4) CPUs plus ``num_workers`` data loaders, and one GPU unless ``device`` is cpu or the kind
    never runs a model; 8G; a time limit of 12 h for training kinds, 2 h for the others. The final job
    (``collect``): 1 CPU, 2G, 30 minutes."""
    if stage_kind == COLLECT:
        return Resources(cpus=1, gpus=0, mem="2G", time="30:00")
    gpus = 0 if device == "cpu" or stage_kind in CPU_KINDS else procs
    cpus = procs * ((threads or 4) + num_workers)
    return Resources(cpus=cpus, gpus=gpus, mem=DEFAULT_MEM, time=TRAIN_TIME if trains(stage_kind) else DEFAULT_TIME)


@dataclass(frozen=True)
class JobSpec:
    """What one stage's job asks Slurm for: ``nodes`` nodes with one task each (its stage command runs on every
    node through ``srun`` when ``nodes > 1``) and ``resources`` per node."""

    stage: str
    nodes: int
    resources: Resources

    def sbatch_options(self) -> list[str]:
        """The sbatch options of these resources, one argument each (never a shell string)."""
        r = self.resources
        opts = [
            f"--nodes={self.nodes}",
            "--ntasks-per-node=1",
            f"--cpus-per-task={r.cpus}",
            f"--mem={r.mem}",
            f"--time={r.time}",
        ]
        if r.gpus:
            opts.append(f"--gpus-per-node={r.gpus}")
        if r.partition:
            opts.append(f"--partition={r.partition}")
        if r.account:
            opts.append(f"--account={r.account}")
        return opts + list(r.extra or ())


def job_spec(
    stage: str,
    cfg: ClusterConfig,
    *,
    device: str = "cpu",
    threads: int | None = None,
    num_workers: int = 0,
    nproc_per_node: int = 1,
    nnodes: int = 1,
) -> JobSpec:
    """The job of ``stage`` under ``cfg`` and the run's params (``device``, ``threads``, ``num_workers``,
    ``distributed``: only the torchrun kinds use more than one process or node)."""
    k = kind(stage)
    torchrun = k in TORCHRUN_KINDS and nproc_per_node * nnodes > 1
    procs, nodes = (nproc_per_node, nnodes) if torchrun else (1, 1)
    r = builtin(k, device=device, threads=threads, num_workers=num_workers, procs=procs)
    r = Resources(partition=cfg.partition, account=cfg.account).over(r)
    for key in ("default", k, stage):
        if key in cfg.resources:
            r = cfg.resources[key].over(r)
    return JobSpec(stage, nodes, r)
