"""What the checks of the GPU path share (:mod:`benchmark.gpu.check` and the modules of its checks): the repository,
the targets, a row of the table and the run's context."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file: benchmark/gpu/common.py)
STATUSES = ("pass", "fail", "info", "skipped")
SOFTMAX_TOL, AGREE_MIN, SPEED_MIN = 1e-3, 0.995, 0.9

CALTECH_LABEL = "e Caltech-256 fixture suite through DVC"  # check e's row, run or skipped (:func:`skipped_caltech`)


@dataclass
class Row:
    check: str
    value: str
    target: str
    status: str
    note: str = ""

    def __post_init__(self):
        assert self.status in STATUSES, self.status


@dataclass
class Ctx:
    """Where and how big: ``gpu`` = CUDA is there; else the CPU sizes (``small``)."""

    device: object  # torch.device
    work: Path
    deadline: float
    cpu_full: bool = False
    amp: str = "bfloat16"
    rows: list = field(default_factory=list)
    embedded: Path | None = None  # check a's repository copy (data, checkpoints), reused by check c

    @property
    def gpu(self) -> bool:
        """Whether the checks run on a CUDA device."""
        return self.device.type == "cuda"

    def left(self) -> float:
        """Seconds of the budget left (a GPU run's limit; a CPU run is a harness check on a machine of unknown load)."""
        return self.deadline - time.monotonic() if self.gpu else 3600.0

    def add(self, *rows: Row) -> None:
        """Add ``rows`` to the table and print each as it comes."""
        for r in rows:
            self.rows.append(r)
            print(f"  {r.status:<7} {r.check}: {r.value}" + (f"  ({r.note})" if r.note else ""), flush=True)


def skipped_caltech(why: str) -> Row:
    """Check e's row when it does not run, saying ``why``."""
    return Row(CALTECH_LABEL, "-", "runs", "skipped", why)
