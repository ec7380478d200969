"""Pure numeric core: metrics, temperature fits, combiners, pairs, Pareto.

Everything here is a pure function on tensors/arrays: no file I/O, no globals. It is also the library API, typed
(``benchmark/py.typed``; ``mypy`` checks it): :func:`~benchmark.core.combine.single_prediction` and
:func:`~benchmark.core.combine.duo_prediction` make a :class:`~benchmark.core.combine.Prediction` from logits,
:func:`~benchmark.core.temperature.fit_temperature` and :func:`~benchmark.core.temperature.fit_duo` fit its
temperatures on validation data, :func:`~benchmark.core.evaluate.evaluate` and
:func:`~benchmark.core.evaluate.paired_difference` give every metric with its bootstrap interval. Import them from
their modules: this file imports none of them, so a stage depends only on the core modules it uses.
"""
