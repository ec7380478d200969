"""Reproducibility of the embedded default: the gate that compares a fresh run with
the committed results (:mod:`.gate`, read and printed by :mod:`.check`; stage outputs
by :mod:`.lockfile`, the runs' numerics by :mod:`.provenance`), a second CPU kind
simulated on demand (:mod:`.simulate`), per-stage timings of ``dvc repro``
(:mod:`.timing`) and the README's result tables generated from committed files
(:mod:`.readme`)."""
