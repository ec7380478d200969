"""Every package module a stage script imports is a dependency of its DVC stage (no stale dvc.lock after a code change)."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]

PROBE = r"""
import os, runpy, sys
script = sys.argv[1]
sys.argv = [script, "--help"]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit:
    pass
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f and os.path.relpath(f).startswith("benchmark" + os.sep):
        print("@@" + os.path.relpath(f))
"""


def _stage_body(stage: dict) -> dict:
    return stage.get("do", stage)


def _script(stage: dict) -> str:
    return _stage_body(stage)["cmd"].split()[1]


def _covered(module: str, deps: list) -> bool:
    paths = [d if isinstance(d, str) else next(iter(d)) for d in deps]
    return any(module == p or module.startswith(p.rstrip("/") + "/") for p in paths)


@pytest.mark.parametrize("name", sorted(STAGES))
def test_stage_depends_on_every_module_its_script_imports(name):
    stage = STAGES[name]
    script = _script(stage)
    out = subprocess.run([sys.executable, "-c", PROBE, script], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    modules = sorted({m[2:].replace("\\", "/") for m in out.split() if m.startswith("@@")} - {"benchmark/__init__.py"})
    assert modules, f"{script} imports no package module?"
    missing = [m for m in modules if not _covered(m, _stage_body(stage)["deps"])]
    assert not missing, f"dvc.yaml stage {name!r} does not depend on {missing} (imported by {script}); add them to its deps"
