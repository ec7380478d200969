"""Evaluation: the tidy rows of each unit (a model, a duo, an ensemble, a method), running units in worker
processes, the evaluate stage, its sweep benchmark."""
