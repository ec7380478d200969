"""Benchmark and reproduction suite for cheap uncertainty quantification.

The package has one data flow (see README): datasets -> zoo entry -> fine-tune ->
checkpoint -> logits store -> method -> prediction record -> metrics -> results
table -> report. ``benchmark.core`` is the pure numeric core (no I/O).
"""

__version__ = "0.1.0"
