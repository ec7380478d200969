"""The paper suites: loaders for the datasets of the papers in their official layouts, suites as data.

Entry points: :func:`load_suite` (``suites/<name>.yaml`` -> :class:`SuiteSpec`),
``SuiteSpec.load_splits`` / ``SuiteSpec.torch_dataset``, the per-dataset loaders in
:data:`LOADERS`, and :func:`eval_transform` (a model's own timm transform).
"""
from benchmark.data.paper.common import DatasetLayoutError, SampleSplit, seeded_split
from benchmark.data.paper.suites import LOADERS, SuiteError, SuiteSpec, list_suites, load_suite
from benchmark.data.paper.transforms import SplitDataset, data_config, eval_transform, train_transform

__all__ = [
    "LOADERS",
    "DatasetLayoutError",
    "SampleSplit",
    "SplitDataset",
    "SuiteError",
    "SuiteSpec",
    "data_config",
    "eval_transform",
    "list_suites",
    "load_suite",
    "seeded_split",
    "train_transform",
]
