"""The paper suites: loaders for the datasets of the papers in their official layouts, suites as data.

Entry points: :func:`~benchmark.data.paper.suites.load_suite` (``suites/<name>.yaml`` ->
:class:`~benchmark.data.paper.suites.SuiteSpec`), ``SuiteSpec.load_splits`` / ``SuiteSpec.torch_dataset``, the
per-dataset loaders (:data:`benchmark.data.paper.suites.LOADERS`: one module per family of datasets, imported when a
suite uses it), :mod:`~benchmark.data.paper.common` (``SampleSplit``, ``DatasetLayoutError``, ``seeded_split``) and
:mod:`~benchmark.data.paper.transforms` (a model's own timm transform).

This package module imports nothing: a stage of one suite imports (and depends on) no other suite's loader.
"""
