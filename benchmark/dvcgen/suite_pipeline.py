"""Each paper suite's DVC pipeline, generated from one template when the suite is asked for.

DVC cannot pick a ``foreach`` by a parameter value, so every paper suite
``suites/<name>.yaml`` gets its own pipeline folder ``suites/<name>/``, a plain
folder of the root DVC project:

* ``params.yaml`` (committed): rendered from ``templates/suite.params.yaml.j2`` when
  absent, then the user's (data root, device, recipes, evaluate and report settings);
* ``dvc.yaml`` (not committed; not git-ignored either, as DVC refuses a git-ignored dvc.yaml): rendered from
  ``templates/pipeline.dvc.yaml.j2`` (the single source of the stage definitions, also
  of the root ``dvc.yaml``: :mod:`benchmark.dvcgen.embedded_pipeline`) by
  ``suite-pipeline <name>``; regenerated, never edited by hand;
* ``dvc.lock`` (written by ``dvc repro``, not ignored: commit it with a suite run you share).

A suite is asked for by materialising its ``dvc.yaml``: DVC commands at the root
(``dvc status``, ``dvc metrics show``, ``dvc plots show``) see the embedded default
and the materialised suites only, never an unasked one. The stages run in the folder
(results in ``suites/<name>/results``, the leaderboard in ``suites/<name>/reports``),
their outputs go to the root project's cache and remote::

    python -m benchmark suite-pipeline caltech256     # write suites/caltech256/dvc.yaml (+ params.yaml)
    dvc repro suites/caltech256/dvc.yaml              # run it (a plain `dvc repro` runs the embedded default)
    python -m benchmark suite-pipeline --all --check  # exit 2 when a committed file or a materialised
                                                      # dvc.yaml differs from the generator
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "pipeline.dvc.yaml.j2"  # every project's dvc.yaml: the root (embedded default) and each suites/<name>/
DERIVED_PARAMS = ("suite", "zoo", "data", "recipes")  # params.yaml keys that follow the suite file
REQUIRED_PARAMS = ("sve", "baselines")  # params.yaml keys the generated dvc.yaml interpolates
EVAL_SPLITS = ("test", "shift", "ood")
SVE_MEMBERS = [1, 2, 4, 8, 16]  # the default sweep where the suite file has an `sve` recipe
STAGE_SCRIPTS = {
    "data": "pipelines/data.py",
    "train": "pipelines/train.py",
    "logits": "pipelines/logits.py",
    "sve-train": "pipelines/sve.py",
    "sve": "pipelines/sve.py",
    "evaluate": "pipelines/evaluate.py",
    "report": "pipelines/report.py",
}  # the stages every project has (SVE: where sve.members lists sizes)


def method_stages(baselines: dict | None = None) -> dict[str, dict]:
    """stage name -> how the template renders the stage of each registered method with a stage per params entry
    (:mod:`benchmark.methods.registry`); with ``baselines`` (params.yaml's section), only the kinds it has a section
    for. What the stage reads follows the method's ``needs``: the outputs of the entry's ``model`` where its config has
    a ``model`` field, else of every model (DVC cannot expand a list of models)."""
    import dataclasses

    from benchmark.methods import registry

    out = {}
    for kind in registry.list_methods("stage"):
        m = registry.get_method(kind)
        if isinstance(baselines, dict) and kind not in baselines:
            continue
        needs = set(m.needs)
        one = m.config is not None and "model" in {f.name for f in dataclasses.fields(m.config)}
        reads = [
            *(["results/checkpoints"] if "checkpoints" in needs else []),
            *(["results/logits", "results/cost"] if "logits" in needs else []),
        ]
        model_deps = (
            [f"{r}/${{item.model}}" + (".json" if r == "results/cost" else "") for r in reads] if one else reads
        )
        out[m.stage] = dict(
            section=kind,
            script=m.script,
            module=m.module,
            comment=m.comment or m.title,
            deps=model_deps,
            every_model=bool(reads) and not one,
            runs_models=bool(needs & {"checkpoints", "base-model"}),
            recipe="base-model" in needs,
            zoo_entry="base-model" in needs,
            persist=m.persist,
            outs=[f"results/methods/{n}" for n in m.output_names("${key}")],
        )
    return out


OPEN_SOURCE = (
    "data",
    "train",
    "logits",
    "sve-train",
    "sve",
)  # stages that open the suite's data source (and every method stage)
BUILD_MODELS = (
    "train",
    "logits",
    "sve-train",
    "sve",
)  # stages that build or preprocess for zoo models (and every method stage)
LAUNCHED = ("train", "logits")  # stages that run under torchrun when params `distributed` asks for several processes


def run_time_modules(methods: dict[str, dict], data, dist, entries=()) -> dict[str, list[str]]:
    """stage name -> the dotted modules the stage imports at run time besides its script's imports, for a project whose
    params ``data`` is ``data`` (:class:`~benchmark.stages.model_params.DataRef`), ``distributed`` is ``dist`` and zoo
    holds ``entries`` (:class:`~benchmark.models.zoo.ZooEntry`): the data source of the suite's kind and its loaders
    (:func:`benchmark.stages.suite_source.source_modules`; the data stage's builder), the model families of the zoo's
    init kinds (:func:`benchmark.models.zoo.family_modules`: torchvision's, timm's hub), the torchrun launcher when
    ``dist`` asks for several processes (:func:`benchmark.stages.per_model.launch_modules`), a method stage's method,
    the evaluate stage's methods (the registered methods of group ``evaluate``, :mod:`benchmark.methods.registry`)."""
    from benchmark.methods import registry
    from benchmark.models.zoo import family_modules
    from benchmark.stages.per_model import launch_modules
    from benchmark.stages.suite_source import source_modules

    source, families = source_modules(data), family_modules(entries)
    out = {stage: list(source) for stage in OPEN_SOURCE}
    out["data"] = source_modules(data, data_stage=True)
    for stage in BUILD_MODELS:
        out[stage] += families
    for stage in LAUNCHED:
        out[stage] += launch_modules(dist)
    out["evaluate"] = [registry.get_method(k).module for k in registry.list_methods("evaluate")]
    for stage, info in methods.items():
        out[stage] = [info["module"], *source, *families]
    return out


def stage_code(root, methods: dict[str, dict], runs: dict[str, list[str]]) -> dict[str, list[str]]:
    """stage name -> its script and the package files the stage runs (derived from the imports,
    :mod:`benchmark.dvcgen.stage_deps`: its script's and those of the modules ``runs`` names for it, which it imports
    at run time: :func:`run_time_modules`)."""
    from benchmark.dvcgen.stage_deps import script_deps

    code = {stage: [script, *script_deps(script, root, runs.get(stage, ()))] for stage, script in STAGE_SCRIPTS.items()}
    for stage, info in methods.items():
        script = f"pipelines/{info['script']}.py"
        code[stage] = [script, *script_deps(script, root, runs.get(stage, ()))]
    return code


def check_methods(params_file: Path) -> None:
    """The method entries of ``params_file`` (``baselines``, ``sve``) parsed with their methods' typed configs
    (:func:`benchmark.stages.method_stage.check_entries`): the generator writes no pipeline for a bad entry."""
    from benchmark.stages.method_stage import check_entries
    from benchmark.stages.params_config import load_params

    check_entries(load_params(params_file), str(params_file))


def _flow(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000).strip()


def _comment(text) -> str:
    """``text`` as the rest of one YAML comment line: whitespace runs (newlines included) become one
    space and other control characters are dropped, so free text cannot end the comment."""
    return " ".join("".join(c for c in str(text) if c.isprintable() or c.isspace()).split())


def environment():
    """The Jinja environment of the pipeline templates (undefined names fail; the filters the templates use)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )  # noqa: S701 (YAML, not HTML)
    env.filters["flow"] = _flow
    env.filters["comment"] = _comment
    return env


def _context(name: str, root: Path) -> dict:
    """Template values of suite ``name`` (the suite file is validated, its zoo against its recipes)."""
    from benchmark.data.paper.suites import load_suite
    from benchmark.models.zoo import load_zoo
    from benchmark.stages.model_params import DataRef

    spec = load_suite(name, suites_dir=root / "suites")
    zoo_file = spec.zoo if spec.zoo.is_absolute() else root / spec.zoo
    zoo = load_zoo(zoo_file, recipes=spec.recipes, check_arch=False, recipes_in=f"{spec.path} 'recipes'")
    folder = root / "suites" / name
    splits = list(spec.splits)
    existing = _existing_params(folder)
    if existing is not None:
        check_methods(folder / "params.yaml")
    methods = method_stages((existing or {}).get("baselines") if existing is not None else None)
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
        "table_splits": [s for s in EVAL_SPLITS if s in splits]
        + ["val"]
        + (["corrupt-*-3"] if "corrupt-*" in splits else []),
        "plot_metrics": ["accuracy", "auroc", "aurc", "sac98", "ece", "nll", "brier"]
        + (["ood_auroc"] if "ood" in splits else []),
        "baseline_stages": methods,
        "deps": stage_code(
            root,
            methods,
            run_time_modules(
                methods, DataRef(suite=name, spec=str(spec.path)), _distributed(existing, folder), zoo.values()
            ),
        ),
        "up": "../../",
        "embedded": False,
        "sve_train_deps": ["results/data"],
        "sve_deps": ["results/data"],
        **(defaults := _method_defaults(zoo, spec.recipes)),
        "sve_members": _sve_members(_existing_params(folder), defaults["sve"]["members"]),
    }


def _distributed(params: dict | None, folder: Path):
    """The suite's params ``distributed`` (one process where its params.yaml does not exist yet), typed."""
    from benchmark.config.typed import parse_config
    from benchmark.stages.model_params import DistConfig

    raw = (params or {}).get("distributed") or {}
    return parse_config(DistConfig, raw, f"{folder / 'params.yaml'}: distributed")


def _sve_members(params: dict | None, default: list) -> list:
    """The SVE sizes of the suite's params.yaml (the generator's default before it exists), sorted: none, no SVE stages;
    else the outputs of stage ``sve``."""
    members = ((params or {}).get("sve") or {}).get("members", default) if params is not None else default
    members = members if isinstance(members, list) else default
    return sorted(set(members)) if all(isinstance(m, int) for m in members) else members


def _method_defaults(zoo: dict, recipes: dict) -> dict:
    """Defaults of params.yaml ``sve``, ``baselines`` and ``evaluate.deep_ensembles`` derived from the zoo.

    SVE runs by default (``SVE_MEMBERS``) only where the suite file has an ``sve``
    recipe; its base is the first pretrained base-role entry (ViTs first). The
    baselines start unselected, with commented examples naming real zoo entries.
    """
    from benchmark.core.noise import seed_groups

    pretrained = [e for e in zoo.values() if e.pretrained]
    bases = [e for e in pretrained if e.role == "base"] or pretrained or list(zoo.values())
    base = ([e for e in bases if e.arch.startswith("vit")] or bases)[0]
    groups = [list(g.names) for g in seed_groups(zoo)]
    group = groups[0] if groups else []
    any_vit = next((e.name for e in pretrained if e.arch.startswith("vit")), None)
    train_recipe = next((r for r, v in recipes.items() if v.get("epochs")), "finetune")
    return {
        "sve": {
            "base": base.name,
            "members": SVE_MEMBERS if "sve" in recipes else [],
            "recipe": "sve" if "sve" in recipes else None,
        },
        "deep_ensembles": [m for m in (2, 5, 8) if groups and m <= min(map(len, groups))],
        "examples": _examples(base.name, _flow(group) if group else "[]", any_vit, train_recipe),
    }


def _examples(base: str, group: str, vit: str | None, train_recipe: str) -> dict[str, str | None]:
    """stage name -> a commented example entry of each registered weight-based method (its ``example``)."""
    from benchmark.methods import registry

    x = {"base": base, "group": group, "vit": vit, "train_recipe": train_recipe}
    return {
        m.stage: (m.example(x) if m.example else None) for m in map(registry.get_method, registry.list_methods("stage"))
    }


def _existing_params(folder: Path) -> dict | None:
    """The suite folder's params.yaml when it exists (its ``baselines`` kinds select the method stages)."""
    path = folder / "params.yaml"
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def render(name: str, root=".") -> dict[str, str]:
    """``{"dvc.yaml": text, "params.yaml": text}`` of suite ``name`` in repository ``root``."""
    env, ctx = environment(), _context(name, Path(root))
    return {
        "dvc.yaml": env.get_template(TEMPLATE).render(ctx),
        "params.yaml": env.get_template("suite.params.yaml.j2").render(ctx),
    }


def leftover_subrepo(name: str, root=".") -> list[str]:
    """A ``suites/<name>/.dvc`` folder left from when each suite was its own DVC project: DVC then treats the
    folder as a sub-repository and refuses ``dvc repro suites/<name>/dvc.yaml`` ("is dvc-ignored")."""
    path = Path(root) / "suites" / name / ".dvc"
    if not path.exists():
        return []
    return [
        f"{path}: a leftover DVC sub-repository (suite folders now belong to the root DVC project, which "
        f"would ignore this folder); delete it (rm -r {path}; copy its cache/, if any, into .dvc/cache first "
        f"to keep computed outputs: same layout)"
    ]


def write(name: str, root=".", *, pipeline: bool = True) -> list[Path]:
    """Write ``suites/<name>/dvc.yaml`` (with ``pipeline``: the suite is asked for) and ``params.yaml`` (when
    absent); the paths written. Raises ``ValueError`` for a leftover sub-repository folder."""
    from benchmark.storage import store

    if problems := leftover_subrepo(name, root):
        raise ValueError(problems[0])
    folder = Path(root) / "suites" / name
    written = []
    for file, text in render(name, root).items():
        path = folder / file
        if (file == "params.yaml" and path.exists()) or (file == "dvc.yaml" and not pipeline):
            continue
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            store.write_text(path, text)
            written.append(path)
    return written


def is_materialised(name: str, root=".") -> bool:
    """Whether suite ``name`` was asked for (its ``dvc.yaml`` written)."""
    return (Path(root) / "suites" / name / "dvc.yaml").is_file()


def check(name: str, root=".") -> list[str]:
    """Differences between ``suites/<name>/`` and the generator: params.yaml's derived keys, and the
    dvc.yaml whole where the suite is materialised (an absent dvc.yaml is a suite not asked for)."""
    folder = Path(root) / "suites" / name
    expected = render(name, root)
    problems = leftover_subrepo(name, root)
    dvc_file, params_file = folder / "dvc.yaml", folder / "params.yaml"
    if dvc_file.is_file() and dvc_file.read_text(encoding="utf-8") != expected["dvc.yaml"]:
        problems.append(f"{dvc_file}: out of date (differs from the generator)")
    if not params_file.is_file():
        problems.append(f"{params_file}: missing")
    else:
        have, want = (
            yaml.safe_load(params_file.read_text(encoding="utf-8")) or {},
            yaml.safe_load(expected["params.yaml"]),
        )
        keys = [k for k in DERIVED_PARAMS if have.get(k) != want[k]]
        if keys:
            problems.append(
                f"{params_file}: {keys} differ from the suite file (expected { ({k: want[k] for k in keys}) })"
            )
        absent = [k for k in REQUIRED_PARAMS if not isinstance(have.get(k), dict)]
        if absent:
            problems.append(
                f"{params_file}: no {absent} section(s), which the generated dvc.yaml reads "
                f"(copy them from the generator: { ({k: want[k] for k in absent}) })"
            )
    return problems
