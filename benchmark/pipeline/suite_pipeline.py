"""Each paper suite's DVC pipeline folder, generated from one template.

DVC cannot pick a ``foreach`` by a parameter value, so every paper suite
``suites/<name>.yaml`` gets its own pipeline folder ``suites/<name>/``:

* ``dvc.yaml``: rendered from ``templates/suite.dvc.yaml.j2`` (the single source of
  the stage definitions); regenerated, never edited by hand;
* ``params.yaml``: rendered from ``templates/suite.params.yaml.j2`` when absent, then
  the user's (data root, device, recipes, evaluate and report settings).

The stages run in the folder (results in ``suites/<name>/results``, the
leaderboard in ``suites/<name>/reports``); ``dvc repro suites/<name>/dvc.yaml``
runs one suite and a plain ``dvc repro`` still runs only the embedded suite.

Command (registered in :mod:`benchmark.cli`)::

    python -m benchmark suite-pipeline caltech256     # write suites/caltech256/dvc.yaml (+ params.yaml)
    python -m benchmark suite-pipeline --all --check  # exit 2 when a folder differs from the generator
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

TEMPLATES = Path(__file__).parent / "templates"
DERIVED_PARAMS = ("suite", "zoo", "data", "recipes")  # params.yaml keys that follow the suite file
EVAL_SPLITS = ("test", "shift", "ood")


def _flow(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000).strip()


def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)  # noqa: S701 (YAML, not HTML)
    env.filters["flow"] = _flow
    return env


def _context(name: str, root: Path) -> dict:
    """Template values of suite ``name`` (the suite file is validated, its zoo against its recipes)."""
    from benchmark.data.paper.suites import load_suite
    from benchmark.zoo import load_zoo

    spec = load_suite(name, suites_dir=root / "suites")
    zoo_file = spec.zoo if spec.zoo.is_absolute() else root / spec.zoo
    load_zoo(zoo_file, recipes=spec.recipes, check_arch=False)
    folder = root / "suites" / name
    splits = list(spec.splits)
    return {
        "name": name,
        "description": spec.description,
        "spec": Path(os.path.relpath(spec.path, folder)).as_posix(),
        "spec_from_root": Path(os.path.relpath(spec.path, root)).as_posix(),
        "zoo": Path(os.path.relpath(zoo_file, folder)).as_posix(),
        "zoo_from_root": Path(os.path.relpath(zoo_file, root)).as_posix(),
        "train_deps": ["train", "val"] if "train" in splits else [],
        "recipes": spec.recipes,
        "eval_splits": [s for s in EVAL_SPLITS if s in splits],
        "table_splits": [s for s in EVAL_SPLITS if s in splits] + ["val"] + (["corrupt-*-3"] if "corrupt-*" in splits else []),
        "plot_metrics": ["accuracy", "auroc", "aurc", "sac98", "ece", "nll", "brier"] + (["ood_auroc"] if "ood" in splits else []),
    }


def render(name: str, root=".") -> dict[str, str]:
    """``{"dvc.yaml": text, "params.yaml": text}`` of suite ``name`` in repository ``root``."""
    env, ctx = _environment(), _context(name, Path(root))
    return {"dvc.yaml": env.get_template("suite.dvc.yaml.j2").render(ctx),
            "params.yaml": env.get_template("suite.params.yaml.j2").render(ctx)}


def write(name: str, root=".") -> list[Path]:
    """Write ``suites/<name>/dvc.yaml`` (always) and ``params.yaml`` (when absent); the paths written."""
    from benchmark import store

    folder = Path(root) / "suites" / name
    written = []
    for file, text in render(name, root).items():
        path = folder / file
        if file == "params.yaml" and path.exists():
            continue
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            store.write_text(path, text)
            written.append(path)
    return written


def check(name: str, root=".") -> list[str]:
    """Differences between ``suites/<name>/`` and the generator: dvc.yaml whole, params.yaml's derived keys."""
    folder = Path(root) / "suites" / name
    expected = render(name, root)
    problems = []
    dvc_file, params_file = folder / "dvc.yaml", folder / "params.yaml"
    if not dvc_file.is_file() or dvc_file.read_text(encoding="utf-8") != expected["dvc.yaml"]:
        problems.append(f"{dvc_file}: {'missing' if not dvc_file.is_file() else 'differs from the generator'}")
    if not params_file.is_file():
        problems.append(f"{params_file}: missing")
    else:
        have, want = yaml.safe_load(params_file.read_text(encoding="utf-8")) or {}, yaml.safe_load(expected["params.yaml"])
        keys = [k for k in DERIVED_PARAMS if have.get(k) != want[k]]
        if keys:
            problems.append(f"{params_file}: {keys} differ from the suite file (expected {({k: want[k] for k in keys})})")
    return problems


def add_suite_pipeline_command(subparsers) -> None:
    p = subparsers.add_parser(
        "suite-pipeline", help="generate a paper suite's DVC pipeline folder suites/<NAME>/",
        description="Write suites/<NAME>/dvc.yaml from the package's template, and suites/<NAME>/params.yaml when it "
                    "does not exist yet. Run from the repository root. Then: dvc repro suites/<NAME>/dvc.yaml")
    p.add_argument("names", nargs="*", metavar="NAME", help="suite names (suites/<NAME>.yaml)")
    p.add_argument("--all", action="store_true", help="every suite in suites/")
    p.add_argument("--check", action="store_true", help="write nothing; exit 2 when a folder differs from the generator")
    p.add_argument("--root", default=".", metavar="DIR", help="repository root (default: the current folder)")
    p.set_defaults(handler=run_suite_pipeline)


def run_suite_pipeline(args) -> int:
    from benchmark.data.paper.suites import SuiteError, list_suites
    from benchmark.zoo import ZooError

    root = Path(args.root)
    names = list_suites(root / "suites") if args.all else args.names
    if not names or (args.all and args.names):
        print("error: give suite names or --all (not both)", file=sys.stderr)
        return 2
    problems = []
    for name in names:
        try:
            if args.check:
                problems += check(name, root)
            else:
                for path in write(name, root):
                    print(f"wrote {path}")
        except (SuiteError, ZooError, OSError) as e:
            problems.append(str(e))
    for msg in problems:
        print(f"error: {msg}", file=sys.stderr)
    if args.check and problems:
        print(f"regenerate with: python -m benchmark suite-pipeline {' '.join(names)} (params.yaml is kept when it "
              "exists: fix the keys named above, or delete it first)", file=sys.stderr)
    return 2 if problems else 0
