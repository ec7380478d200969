"""Command ``validate-zoo`` (registered in :mod:`benchmark.cli.main`; also, with ``flops``
(:mod:`benchmark.cli.zoo_flops`), ``python -m benchmark.cli.zoo_commands``).

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

import sys
from pathlib import Path

from benchmark.cli.zoo_flops import _err, add_flops_command, entry_heads, suite_classes


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
