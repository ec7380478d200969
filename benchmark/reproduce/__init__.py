"""Reproducibility of the embedded default: the gate that compares a fresh run with the committed results
(:mod:`.gate`; the runs' numerics by :mod:`.provenance`), the kernel fingerprints of each CPU kind
(:mod:`.fingerprint`) and what was checked on which (:mod:`.cross_cpu`), per-stage timings of ``dvc repro``
(:mod:`.timing`), the test command timed (:mod:`.testrun`) and what pinning the CPU kernels costs
(:mod:`.pinning_cost`). The ``reproduce check`` command that reads the files and prints the gate's verdict is
:mod:`benchmark.cli.reproduce_check`; the README and docs blocks generated from these records are
:mod:`benchmark.docsgen`'s."""
