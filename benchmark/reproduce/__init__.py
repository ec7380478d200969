"""Reproducibility of the embedded default: the gate that compares a fresh run with
the committed results (:mod:`.gate`), per-stage timings of ``dvc repro``
(:mod:`.timing`) and the README's result tables generated from committed files
(:mod:`.readme`)."""
