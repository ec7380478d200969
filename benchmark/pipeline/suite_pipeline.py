"""Each paper suite's DVC pipeline folder, generated from one template.

DVC cannot pick a ``foreach`` by a parameter value, so every paper suite
``suites/<name>.yaml`` gets its own pipeline folder ``suites/<name>/``:

* ``dvc.yaml``: rendered from ``templates/suite.dvc.yaml.j2`` (the single source of
  the stage definitions); regenerated, never edited by hand;
* ``params.yaml``: rendered from ``templates/suite.params.yaml.j2`` when absent, then
  the user's (data root, device, recipes, evaluate and report settings).

* ``.dvc/config``, ``.dvc/.gitignore``: the folder is its own DVC project (a DVC
  sub-repository), so that ``dvc status``, ``dvc metrics show`` and ``dvc plots
  show`` at the root concern the embedded default only.

The stages run in the folder (results in ``suites/<name>/results``, the
leaderboard in ``suites/<name>/reports``); ``dvc --cd suites/<name> repro``
runs one suite and a plain ``dvc repro`` at the root runs only the embedded suite.

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
REQUIRED_PARAMS = ("sve", "baselines")  # params.yaml keys the generated dvc.yaml interpolates
# The files that make a suite folder a DVC sub-repository: the root project's `dvc status`, `dvc metrics show`
# and `dvc plots show` then skip it; run it with `dvc --cd suites/<name> repro`.
SUBREPO_FILES = {
    ".dvc/config": "# This suite folder is its own DVC project (a DVC sub-repository): DVC commands at the\n"
                   "# repository root see only the embedded default. Run this suite with\n"
                   "#     dvc --cd suites/{name} repro        (or: cd suites/{name} && dvc repro)\n",
    ".dvc/.gitignore": "/config.local\n/tmp\n/cache\n",
}
EVAL_SPLITS = ("test", "shift", "ood")
SVE_MEMBERS = [1, 2, 4, 8, 16]  # the default sweep where the suite file has an `sve` recipe
_TRAIN = ["../../benchmark/models.py", "../../benchmark/train.py", "../../benchmark/data/paper/transforms.py"]
_CHECKPOINT = "results/checkpoints/${item.model}"
_OUT = ["results/methods/${key}"]
BASELINE_STAGES = {  # stage name -> how the template renders it (see templates/suite.dvc.yaml.j2)
    "soup": dict(section="soups", script="soup", comment="uniform and greedy soups of seeded fine-tunes",
                 deps=["../../benchmark/methods/soups.py", "../../benchmark/data/paper/transforms.py"],
                 checkpoint="results/checkpoints", outs=["results/methods/${key}-uniform", "results/methods/${key}-greedy"]),
    "mc_dropout": dict(section="mc_dropout", script="mc_dropout", comment="MC dropout, T masks",
                       deps=["../../benchmark/methods/mc_dropout.py", "../../benchmark/methods/last_layer.py",
                             "../../benchmark/data/paper/transforms.py"], checkpoint=_CHECKPOINT, outs=_OUT),
    "laplace": dict(section="laplace", script="laplace", comment="last-layer Laplace",
                    deps=["../../benchmark/methods/laplace.py", "../../benchmark/methods/last_layer.py",
                          "../../benchmark/data/paper/transforms.py"], checkpoint=_CHECKPOINT, outs=_OUT),
    "shallow": dict(section="shallow", script="shallow", comment="one backbone, M heads (joint: from the init)",
                    deps=["../../benchmark/methods/shallow.py", "../../benchmark/methods/last_layer.py", *_TRAIN],
                    checkpoint=_CHECKPOINT, recipe=True, zoo_entry=True, persist=True, outs=_OUT),
    "lora_ensemble": dict(section="lora_ensemble", script="lora_ensemble", comment="M rank-r adapters (ViTs)",
                          deps=["../../benchmark/methods/lora_ensemble.py", *_TRAIN], recipe=True, zoo_entry=True,
                          persist=True, outs=_OUT),
}


def _flow(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000).strip()


def _comment(text) -> str:
    """``text`` as the rest of one YAML comment line: whitespace runs (newlines included) become one
    space and other control characters are dropped, so free text cannot end the comment."""
    return " ".join("".join(c for c in str(text) if c.isprintable() or c.isspace()).split())


def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)  # noqa: S701 (YAML, not HTML)
    env.filters["flow"] = _flow
    env.filters["comment"] = _comment
    return env


def _context(name: str, root: Path) -> dict:
    """Template values of suite ``name`` (the suite file is validated, its zoo against its recipes)."""
    from benchmark.data.paper.suites import load_suite
    from benchmark.zoo import load_zoo

    spec = load_suite(name, suites_dir=root / "suites")
    zoo_file = spec.zoo if spec.zoo.is_absolute() else root / spec.zoo
    zoo = load_zoo(zoo_file, recipes=spec.recipes, check_arch=False)
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
        "baseline_stages": {k: {"recipe": False, "zoo_entry": False, "persist": False, "checkpoint": None, **v}
                            for k, v in BASELINE_STAGES.items()},
        **_method_defaults(zoo, spec.recipes),
    }


def _method_defaults(zoo: dict, recipes: dict) -> dict:
    """Defaults of params.yaml ``sve``, ``baselines`` and ``evaluate.deep_ensembles`` derived from the zoo.

    SVE runs by default (``SVE_MEMBERS``) only where the suite file has an ``sve``
    recipe; its base is the first pretrained base-role entry (ViTs first). The
    baselines start unselected, with commented examples naming real zoo entries.
    """
    from benchmark.zoo import seed_groups

    pretrained = [e for e in zoo.values() if e.pretrained]
    bases = [e for e in pretrained if e.role == "base"] or pretrained or list(zoo.values())
    base = ([e for e in bases if e.arch.startswith("vit")] or bases)[0]
    groups = seed_groups(zoo)
    group = groups[0] if groups else []
    any_vit = next((e.name for e in pretrained if e.arch.startswith("vit")), None)
    train_recipe = next((r for r, v in recipes.items() if v.get("epochs")), "finetune")
    return {
        "sve": {"base": base.name, "members": SVE_MEMBERS if "sve" in recipes else [],
                "recipe": "sve" if "sve" in recipes else None},
        "deep_ensembles": [m for m in (2, 5, 8) if groups and m <= min(map(len, groups))],
        "examples": {
            "soups": f"soup-{base.name}: {{models: {_flow(group)}}}" if group else None,
            "mc_dropout": f"mcdrop-{base.name}: {{model: {base.name}, samples: 8, p: 0.1}}",
            "laplace": f"laplace-{base.name}: {{model: {base.name}, hessian: kron, predictive: probit, "
                       "prior_precisions: [1.0e-2, 1.0, 100.0, 1.0e+4]}",
            "shallow": f"shallow-{base.name}: {{model: {base.name}, members: 5, recipe: {train_recipe}}}",
            "lora_ensemble": f"lora-{any_vit}: {{model: {any_vit}, members: 4, rank: 8, recipe: {train_recipe}}}"
                             if any_vit else None,
        },
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
    for file, text in {**render(name, root), **{f: t.format(name=name) for f, t in SUBREPO_FILES.items()}}.items():
        path = folder / file
        if file in ("params.yaml", ".dvc/config") and path.exists():
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
    for file in SUBREPO_FILES:
        if not (folder / file).is_file():
            problems.append(f"{folder / file}: missing (the suite folder must be its own DVC project)")
    if not params_file.is_file():
        problems.append(f"{params_file}: missing")
    else:
        have, want = yaml.safe_load(params_file.read_text(encoding="utf-8")) or {}, yaml.safe_load(expected["params.yaml"])
        keys = [k for k in DERIVED_PARAMS if have.get(k) != want[k]]
        if keys:
            problems.append(f"{params_file}: {keys} differ from the suite file (expected {({k: want[k] for k in keys})})")
        absent = [k for k in REQUIRED_PARAMS if not isinstance(have.get(k), dict)]
        if absent:
            problems.append(f"{params_file}: no {absent} section(s), which the generated dvc.yaml reads "
                            f"(copy them from the generator: {({k: want[k] for k in absent})})")
    return problems


def add_suite_pipeline_command(subparsers) -> None:
    p = subparsers.add_parser(
        "suite-pipeline", help="generate a paper suite's DVC pipeline folder suites/<NAME>/",
        description="Write suites/<NAME>/dvc.yaml from the package's template, and suites/<NAME>/params.yaml when it "
                    "does not exist yet, and .dvc/ (the folder is its own DVC project). Run from the repository root. "
                    "Then: dvc --cd suites/<NAME> repro")
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
