"""Datasets of the benchmark: the embedded default suite (:mod:`~benchmark.data.embedded`, built from
:mod:`~benchmark.data.sources` and :mod:`~benchmark.data.corruptions`), its split files
(:mod:`~benchmark.data.splits_io`; as model input: :func:`benchmark.stages.embedded_source.to_model_input`) and the
paper suites (:mod:`benchmark.data.paper`).

This package module imports nothing: a stage that reads split files does not import the code that builds them
(each stage depends on exactly the code it runs, :mod:`benchmark.dvcgen.stage_deps`)."""
