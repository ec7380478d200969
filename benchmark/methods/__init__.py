"""The benchmark's methods, one module each, registered in :mod:`benchmark.methods.registry` (a leaf).

* evaluated per unit inside the evaluate stage from the zoo's cached logits: :mod:`~benchmark.methods.single`,
  :mod:`~benchmark.methods.duo` (Asymmetric Duos), :mod:`~benchmark.methods.deep_ensemble`; their rows:
  :mod:`~benchmark.methods.rows`;
* methods with stages of their own, which write logits like any model: :mod:`~benchmark.methods.sve_stage`
  (Singular Value Ensembles, arXiv 2601.22068; the model: :mod:`~benchmark.methods.sve`), soups, MC dropout,
  last-layer Laplace, shallow ensembles, LoRA-Ensemble.

This package module imports nothing: importing one method does not import the others (each stage depends on
exactly the methods it runs).
"""
