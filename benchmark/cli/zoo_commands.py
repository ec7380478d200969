"""Commands ``flops`` and ``validate-zoo`` (registered in :mod:`benchmark.cli.main`; also ``python -m
benchmark.cli.zoo_commands``).

``flops ARCH [--img-size N] [--suite NAME | --num-classes C] [--json]``: GFLOPs (fvcore multiply-adds, as
published GMACs) and parameters of a timm architecture (or ``torchvision:<builder>``),
built without weights with the classifier the pipeline builds: the classes of the suite
(``--suite``; default the one ``./params.yaml`` runs, i.e. the embedded default's 10 in the
repository root; 1000 without either).

``validate-zoo [FILE ...]``: every zoo file (default ``zoo/*.yaml``) without
network: schema, unique names, timm architecture, pretrained tag known to
``timm.list_pretrained`` (``torchvision:`` entries: builder, weights enum and
checkpoint known to torchvision), recipe defined (by the suites that use the
file, or params.yaml), FLOPs computable at the entry's input size, counted as
the pipeline builds the model (the classes of the suites that use the file:
the numbers of their ``models.csv``), and DVC can read the file
(:func:`dvc_readable`). One line per entry and class count; exit status 2 when
anything fails.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

# the digits 0-9 of the embedded default (benchmark.data.embedded), whose pipeline reads its classes from results/data;
# tests/docs/test_tutorials.py checks that `flops` with them counts what the run's models.csv holds
EMBEDDED_CLASSES = 10


def _err(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)


@functools.cache
def arch_flops(arch: str, img_size: int, num_classes: int = 1000) -> dict:
    """GFLOPs and parameters of timm ``arch`` (``name`` or ``name.tag``) at ``img_size``, built without weights
    (:func:`benchmark.models.cost.unweighted_cost`)."""
    import timm

    from benchmark.models.cost import unweighted_cost
    from benchmark.models.factory import timm_kwargs

    if not timm.is_model(arch):
        close = timm.list_models(f"*{arch.split('.')[0].split('_')[0]}*")[:8]
        raise ValueError(f"unknown timm architecture {arch!r}; similar names: {close}")
    try:
        cost = unweighted_cost(
            lambda: timm.create_model(arch, pretrained=False, num_classes=num_classes, **timm_kwargs(arch, img_size)),
            img_size,
        )
    except Exception as e:  # wrong size for the architecture, unknown tag, ...
        raise ValueError(f"{arch} cannot run at {img_size}x{img_size} ({type(e).__name__}: {e})") from None
    return {"arch": arch, "img_size": img_size, "num_classes": num_classes, **cost}


@functools.cache
def torchvision_flops(arch: str, img_size: int, num_classes: int = 1000, weights: str | None = None) -> dict:
    """GFLOPs and parameters of torchvision builder ``arch`` with the structure of ``weights``
    (``<Enum>.<checkpoint>``; default: the builder's DEFAULT), built without weights
    (:func:`benchmark.models.cost.unweighted_cost`)."""
    import torchvision.models

    from benchmark.models import torchvision_zoo
    from benchmark.models.cost import unweighted_cost
    from benchmark.models.zoo import resolve_torchvision, torchvision_builders

    if weights is None:
        if arch not in torchvision_builders():
            raise ValueError(f"unknown torchvision classification model {arch!r}")
        enum = torchvision.models.get_model_weights(arch)
        weights = f"{enum.__name__}.{enum.DEFAULT.name}"
    w = resolve_torchvision(f"torchvision model {arch!r}", arch, weights)

    def build():
        model = torchvision_zoo.build(arch, arch, w, pretrained=False)
        if num_classes != model.num_classes:
            model.reset_classifier(num_classes)
        return model

    try:
        cost = unweighted_cost(build, img_size)
    except Exception as e:  # wrong size for the architecture, ...
        raise ValueError(f"torchvision {arch} cannot run at {img_size}x{img_size} ({type(e).__name__}: {e})") from None
    return {
        "arch": f"torchvision:{arch}",
        "weights": weights,
        "img_size": img_size,
        "num_classes": num_classes,
        **cost,
        "published_gflops": torchvision_zoo.published_gflops(w),
    }


def entry_flops(entry, num_classes: int = 1000) -> dict:
    """:func:`arch_flops` (timm) or :func:`torchvision_flops` of a zoo entry with a ``num_classes`` head: the model
    :func:`benchmark.models.factory.create` builds for a suite of that many classes, counted as the cost stage does."""
    if entry.init_kind == "torchvision":
        return torchvision_flops(entry.arch, entry.img_size, num_classes, weights=entry.init_source)
    return arch_flops(entry.arch, entry.img_size, num_classes)


def entry_heads(entry, classes) -> list[tuple[int, dict]]:
    """:func:`entry_flops` of ``entry`` with each head of ``classes`` (ascending), the first counted with fvcore and
    the others from it: a head's parameters counted on the model built on the meta device, and, when the classifier
    is one ``nn.Linear`` (timm's and torchvision's), its GFLOPs as the first count's plus the multiply-adds of the
    extra outputs (``in_features`` each per image, as fvcore counts a linear layer); any other head is counted again."""
    import torch
    from torch import nn

    from benchmark.models import factory
    from benchmark.models.cost import count_params

    classes = sorted(classes)
    first = entry_flops(entry, classes[0])
    out = [(classes[0], first)]
    for nc in classes[1:]:
        with torch.device("meta"):
            model = factory.create(entry, nc, load_weights=False)
        head = model.get_classifier() if hasattr(model, "get_classifier") else None
        if isinstance(head, nn.Linear):
            out.append(
                (
                    nc,
                    {
                        **first,
                        "num_classes": nc,
                        "params": count_params(model),
                        "gflops": first["gflops"] + (nc - classes[0]) * head.in_features / 1e9,
                    },
                )
            )
        else:
            out.append((nc, entry_flops(entry, nc)))
    return out


def suite_classes(suite: str, suites_dir="suites") -> int:
    """The classes of ``suite`` (its models' heads): the embedded default's digits, or the suite file's ``num_classes``;
    ``ValueError`` naming an unknown suite."""
    if suite == "embedded":
        return EMBEDDED_CLASSES
    from benchmark.data.paper.suites import SuiteError, load_suite

    try:
        return load_suite(suite, suites_dir=suites_dir).num_classes
    except SuiteError as e:
        raise ValueError(str(e)) from None


def _params_suite(params: Path) -> str | None:
    """The suite ``params`` (a params.yaml) runs, if it is readable and names one."""
    from benchmark.models.zoo import load_yaml

    try:
        raw = load_yaml(params) if params.is_file() else None
    except (ValueError, OSError):
        return None
    return str(raw["suite"]) if isinstance(raw, dict) and isinstance(raw.get("suite"), str) else None


def default_img_size(arch: str) -> int:
    """The pretrained config's input size of ``arch`` (224 when it has none)."""
    import timm

    if arch.startswith("torchvision:"):
        import torchvision.models

        try:
            return int(torchvision.models.get_model_weights(arch.partition(":")[2]).DEFAULT.transforms().crop_size[0])
        except ValueError:  # unknown builder: reported by torchvision_flops
            return 224
    try:
        cfg = timm.get_pretrained_cfg(arch)
    except RuntimeError:  # unknown tag: reported by arch_flops
        cfg = None
    return int(cfg.input_size[-1]) if cfg is not None and cfg.input_size else 224


def add_flops_command(subparsers) -> None:
    """Register ``flops`` (GFLOPs and parameters of an architecture, no weights) in ``subparsers``."""
    p = subparsers.add_parser(
        "flops",
        help="GFLOPs and parameters of a timm architecture (no weights needed)",
        description="Build a timm architecture without weights and print its GFLOPs (fvcore multiply-adds, "
        "comparable to published GMACs; attention matmuls counted) and its parameters.",
    )
    p.add_argument(
        "arch",
        metavar="ARCH",
        help="timm architecture, optionally with a pretrained tag (resnet50, vit_base_patch16_224.augreg_in1k), "
        "or torchvision:<builder> (torchvision:convnext_base)",
    )
    p.add_argument(
        "--img-size",
        type=int,
        default=None,
        metavar="N",
        help="square input resolution (default: the pretrained input size, else 224)",
    )
    p.add_argument(
        "--suite",
        metavar="NAME",
        help="count the classifier the pipeline builds for this suite ('embedded' or "
        "suites/<NAME>.yaml; default: the suite of ./params.yaml)",
    )
    p.add_argument(
        "--num-classes",
        type=int,
        default=None,
        metavar="C",
        help="classifier outputs (default: the suite's classes; 1000 without a suite)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run_flops)


def _flops_classes(args) -> tuple[int, str]:
    """(classes, where they come from) of ``flops``: --num-classes, else --suite, else ./params.yaml's suite, else
    1000."""
    if getattr(args, "num_classes", None) is not None:
        return args.num_classes, "--num-classes"
    suite, where = getattr(args, "suite", None), "--suite"
    if suite is None:
        suite, where = _params_suite(Path("params.yaml")), "params.yaml"
    if suite is None:
        return 1000, "no --suite and no params.yaml: an ImageNet head"
    return suite_classes(suite), f"suite {suite}, {where}"


def run_flops(args) -> int:
    """``flops``: build the architecture without weights and print its GFLOPs and parameters; the exit status."""
    size = args.img_size if args.img_size is not None else default_img_size(args.arch)
    try:
        classes, source = _flops_classes(args)
    except ValueError as e:
        _err(f"--suite: {e}")
        return 2
    if size < 8 or classes < 1:
        _err(f"--img-size must be >= 8 and --num-classes >= 1, got {size} and {classes}")
        return 2
    try:
        if args.arch.startswith("torchvision:"):
            res = torchvision_flops(args.arch.partition(":")[2], size, classes)
        else:
            res = arch_flops(args.arch, size, classes)
    except ValueError as e:  # ZooError included
        _err(str(e))
        return 2
    if args.json:
        print(json.dumps(res))
    else:
        print(
            f"{res['arch']} @ {size}x{size}, {classes} classes ({source}): {res['gflops']:.4g} GFLOPs (fvcore "
            f"multiply-adds), {res['params'] / 1e6:.3f} M parameters"
        )
    return 0


def _suites_by_zoo(suites_dir: Path) -> tuple[dict, list[str]]:
    """{resolved zoo path: [SuiteSpec, ...]} of every suite file, and the errors of broken suites."""
    from benchmark.data.paper.suites import SuiteError, list_suites, load_suite

    by_zoo, errors = {}, []
    for name in list_suites(suites_dir):
        try:
            spec = load_suite(name, suites_dir=suites_dir)
        except SuiteError as e:
            errors.append(str(e))
            continue
        by_zoo.setdefault(spec.zoo.resolve(), []).append(spec)
    return by_zoo, errors


def _params_recipes(params: Path, zoo_file: Path):
    from benchmark.models.zoo import load_yaml

    if not params.is_file():
        return None
    raw = load_yaml(params) or {}
    return raw.get("recipes") if raw.get("zoo") and Path(raw["zoo"]).resolve() == zoo_file.resolve() else None


def _zoo_classes(suites: list, params: Path, zoo_file: Path) -> dict[int, list[str]]:
    """classes -> the suites whose pipelines build the models of ``zoo_file`` with that many (the suite files using it,
    else the suite of ``params`` when it runs this zoo); {1000: []} when none does."""
    from benchmark.models.zoo import load_yaml

    out: dict[int, list[str]] = {}
    for s in suites:
        out.setdefault(s.num_classes, []).append(s.name)
    if not out and params.is_file() and _params_recipes(params, zoo_file) is not None:
        suite = str((load_yaml(params) or {}).get("suite") or "embedded")
        try:
            out[suite_classes(suite)] = [suite]
        except ValueError:
            pass
    return out or {1000: []}


def dvc_readable(path: Path) -> str | None:
    """Why DVC cannot read zoo file ``path`` (None when it can). A suite's ``dvc.yaml`` names its zoo under ``vars:``,
    which DVC reads with ruamel.yaml's safe loader: with ``ruamel.yaml.clib`` installed (a dependency of every
    ruamel.yaml before 0.19) that loader scans with libyaml, which rejects a plain value holding ``:`` inside a flow
    mapping (``{init: timm:ra_in1k}``) that the pure-Python one accepts; a value in quotes reads the same in both."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    default = YAML(typ="safe")  # the C loader where clib is installed
    text = path.read_text(encoding="utf-8")
    for yaml in [YAML(typ="safe", pure=True)] + ([default] if default.Parser.__name__ == "CParser" else []):
        try:
            yaml.load(text)
        except YAMLError as e:
            mark, problem = getattr(e, "problem_mark", None), getattr(e, "problem", None) or str(e).splitlines()[0]
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            hint = "; quote a value that holds ':' inside { }, e.g. init: \"timm:ra_in1k\"" if "':'" in problem else ""
            return f"DVC cannot read this file{where}: {problem}{hint}"
    return None


def validate_file(
    path: Path,
    recipes,
    *,
    flops: bool = True,
    recipes_in: str | None = None,
    classes: dict[int, list[str]] | None = None,
) -> tuple[list[str], list[str]]:
    """(report lines, error messages) for one zoo file; FLOPs of each entry with each head of ``classes`` (classes ->
    the suites building it; default a 1000-class head), counted once per process for each structure."""
    import yaml

    from benchmark.models.zoo import RECIPES_IN, ZooError, load_yaml, parse_entry

    try:
        raw = load_yaml(path)
    except ZooError as e:  # names the file already (not UTF-8, empty, YAML syntax, tags, duplicate keys)
        return [], [str(e)]
    except (yaml.YAMLError, OSError) as e:
        return [], [f"{path}: {e}"]
    if not isinstance(raw, dict) or not isinstance(raw.get("models"), dict) or not raw["models"]:
        return [], [f"{path}: expected a non-empty mapping under 'models:'"]
    lines, errors = [], []
    if (why := dvc_readable(path)) is not None:
        errors.append(f"{path}: {why}")
    heads = sorted((classes or {1000: []}).items())
    for name, item in raw["models"].items():
        try:
            e = parse_entry(name, item, recipes=recipes, check_arch=True, recipes_in=recipes_in or RECIPES_IN)
            costs = [(nc, dict(heads)[nc], c) for nc, c in entry_heads(e, dict(heads))] if flops else [(None, [], None)]
        except (ZooError, ValueError) as ex:
            errors.append(f"{path}: {ex}" if str(ex).startswith("zoo entry") else f"{path}: zoo entry {name!r}: {ex}")
            continue
        for nc, suites, cost in costs:
            size = (
                f"{nc:>5} classes {cost['gflops']:9.4g} GFLOPs {cost['params'] / 1e6:8.2f} M params"
                if cost
                else "(FLOPs not counted)"
            )
            lines.append(
                f"{path}  {name:<28} {e.arch:<34} {e.init:<34} {e.img_size:>4}px {size}  ok"
                + (f" ({', '.join(suites)})" if suites else "")
            )
    return lines, errors


def add_validate_zoo_command(subparsers) -> None:
    """Register ``validate-zoo`` (zoo files checked offline) in ``subparsers``."""
    p = subparsers.add_parser(
        "validate-zoo",
        help="check zoo files offline (schema, names, architectures, tags, recipes, FLOPs)",
        description="Validate zoo files without network: schema, unique names, the timm architecture exists, the "
        "pretrained tag is in timm.list_pretrained (torchvision: entries: torchvision knows the builder, weights "
        "enum and "
        "checkpoint), the recipe is defined, FLOPs are computable at the entry's img_size (counted with the classes "
        "of the suites "
        "using the file, as their models.csv), and DVC can read the file (with libyaml too).",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="zoo YAML files (default: every zoo/*.yaml)")
    p.add_argument(
        "--suites-dir", default="suites", metavar="DIR", help="suite files whose recipes the zoos use (default suites/)"
    )
    p.add_argument(
        "--params", default="params.yaml", metavar="FILE", help="params.yaml with the recipes of its own zoo"
    )
    p.add_argument("--no-flops", action="store_true", help="skip building the models and counting FLOPs")
    p.set_defaults(handler=run_validate_zoo)


def run_validate_zoo(args) -> int:
    """``validate-zoo``: check every entry of the zoo files (schema, names, architectures, tags, recipes, FLOPs); 2 when
    one fails."""
    files = [Path(f) for f in args.files] or sorted(Path("zoo").glob("*.yaml"))
    if not files:
        _err("no zoo files given and none found in zoo/")
        return 2
    by_zoo, errors = _suites_by_zoo(Path(args.suites_dir))
    n_entries = 0
    for path in files:
        if not path.is_file():
            errors.append(f"{path}: zoo file not found")
            continue
        suites = by_zoo.get(path.resolve(), [])
        recipes = (
            {k: v for s in suites for k, v in s.recipes.items()} if suites else _params_recipes(Path(args.params), path)
        )
        recipes_in = " or ".join(f"{s.path} 'recipes'" for s in suites) if suites else f"{args.params} 'recipes'"
        lines, errs = validate_file(
            path,
            recipes,
            flops=not args.no_flops,
            recipes_in=recipes_in,
            classes=_zoo_classes(suites, Path(args.params), path),
        )
        for line in lines:
            print(line)
        n_entries += len({line.split()[1] for line in lines})
        errors += errs
    for e in errors:
        _err(e)
    print(
        f"{n_entries} entries in {len(files)} files valid; {len(errors)} error(s)",
        file=sys.stderr if errors else sys.stdout,
    )
    return 2 if errors else 0


def main(argv=None) -> int:
    """``python -m benchmark.cli.zoo_commands``: the ``flops`` and ``validate-zoo`` commands alone."""
    from benchmark.cli.subcommands import run_subcommands

    return run_subcommands("python -m benchmark.cli.zoo_commands", [add_flops_command, add_validate_zoo_command], argv)


if __name__ == "__main__":
    raise SystemExit(main())
