"""Reproducibility of the embedded default: the gate that compares a fresh run with
the committed results (:mod:`.gate`, read and printed by :mod:`.check`; stage outputs
by :mod:`.lockfile`, the runs' numerics by :mod:`.provenance`), the kernel fingerprints
of each CPU kind (:mod:`.fingerprint`) and what was checked on which (:mod:`.cross_cpu`),
per-stage timings of ``dvc repro`` (:mod:`.timing`) and the README's result tables
generated from committed files (:mod:`.readme`)."""
