"""Benchmark and reproduction suite for cheap uncertainty quantification.

The package has one data flow (see README): datasets -> zoo entry -> fine-tune ->
checkpoint -> logits store -> method -> prediction record -> metrics -> results
table -> report. ``benchmark.core`` is the pure numeric core (no I/O).

Importing the package tunes the process once (:mod:`benchmark.config.runtime`): glibc's
allocator keeps freed memory for reuse instead of returning it to the OS (fewer
page faults), and ``UQ_TIMINGS`` records the process's time and memory at exit.
"""

__version__ = "0.1.0"

from benchmark.config import runtime as _runtime

_runtime.setup()
