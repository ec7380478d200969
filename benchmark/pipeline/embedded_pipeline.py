"""The root ``dvc.yaml`` (the embedded default) rendered from the same template as every paper suite's.

The embedded default is one more project of :data:`benchmark.pipeline.suite_pipeline.TEMPLATE`:
stage scripts at ``pipelines/`` (no ``../../``), its data built in memory (``data`` params),
SVE as one nested stage whose outputs follow ``params.yaml`` ``sve.members``, the method stages
of the registered methods that ``params.yaml`` ``baselines`` has a section for, code
dependencies derived from the stage scripts' imports, and the root ``metrics:`` (the headline).

    python -m benchmark suite-pipeline embedded          # write the root dvc.yaml
    python -m benchmark suite-pipeline embedded --check  # exit 2 when it differs from the generator
"""
from __future__ import annotations

from pathlib import Path

NAME = "embedded"
SVE_SPLITS = ("train", "val", "test", "ood")  # the embedded splits the SVE stage reads


def context(root=".") -> dict:
    from benchmark.pipeline import suite_pipeline
    from benchmark.pipeline.config import load_params

    root = Path(root)
    params = load_params(root / "params.yaml")
    members = (params.get("sve") or {}).get("members") or []
    return {
        "name": NAME, "embedded": True, "up": "", "zoo": str(params["zoo"]),
        "train_deps": ["train", "val"],
        "sve_nested": True, "sve_members": sorted(set(members)),
        "sve_deps": [f"results/data/{s}.npz" for s in SVE_SPLITS], "sve_params": ["threads", "cost", "sve"],
        "baseline_stages": suite_pipeline.method_stages(params),
        "deps": suite_pipeline.stage_code(root),
    }


def render(root=".") -> str:
    from benchmark.pipeline import suite_pipeline

    return suite_pipeline._environment().get_template(suite_pipeline.TEMPLATE).render(context(root))


def write(root=".") -> list[Path]:
    from benchmark import store

    path, text = Path(root) / "dvc.yaml", render(root)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return []
    store.write_text(path, text)
    return [path]


def check(root=".") -> list[str]:
    path = Path(root) / "dvc.yaml"
    if not path.is_file() or path.read_text(encoding="utf-8") != render(root):
        return [f"{path}: {'missing' if not path.is_file() else 'differs from the generator'}"]
    return []
