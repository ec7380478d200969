"""The generated DVC pipelines: the root ``dvc.yaml`` and each paper suite's, rendered from one template over the
method registry; stage dependencies derived from imports."""
