"""Datasets of the benchmark: the embedded default suite, corruptions, model-input transforms."""
from benchmark.data.corruptions import CORRUPTIONS, SEVERITY_PARAMS, corrupt
from benchmark.data.embedded import DEFAULT_CONFIG, TINY_CONFIG, Split, build_embedded_suite, split_names
from benchmark.data.model_input import to_model_input
from benchmark.data.splits_io import load_split, save_split

__all__ = [
    "CORRUPTIONS",
    "DEFAULT_CONFIG",
    "SEVERITY_PARAMS",
    "TINY_CONFIG",
    "Split",
    "build_embedded_suite",
    "corrupt",
    "load_split",
    "save_split",
    "split_names",
    "to_model_input",
]
