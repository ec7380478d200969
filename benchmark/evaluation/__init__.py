"""Evaluation: the evaluate stage (every unit's rows, cached per unit; the rows themselves come from the methods,
:mod:`benchmark.methods.rows`), running units in worker processes, its sweep benchmark."""
