"""The docs' reference pages, generated from the code at build time (never copied by hand).

A page holds a marker alone on a line; :func:`expand` replaces it (the MkDocs hook ``docs/hooks/mkdocs_hooks.py``
calls it for every page, ``tests/docs`` call it directly):

* ``<!-- generated-reference:cli -->``: every ``python -m benchmark`` command, from its argparse parser
  (:mod:`cli_reference`), and the stage scripts of ``pipelines/`` (their docstrings);
* ``<!-- generated-reference:params -->``: ``params.yaml``, from :class:`benchmark.stages.params_config.Params`,
  the dataclasses of its blocks and the typed configs of the registered methods (keys, types, defaults, bounds,
  choices: the field metadata that :func:`benchmark.config.typed.parse_config` enforces, and the field comments);
* ``<!-- generated-reference:suite -->``, ``<!-- generated-reference:zoo -->``: a suite file and a zoo entry;
* ``<!-- generated-reference:results -->``: the results table's columns and the metrics;
* ``<!-- generated-reference:embedded -->``: the embedded default's data block, zoo and recipes as committed;
* ``<!-- generated-reference:api PACKAGE -->``: one mkdocstrings block per module of ``PACKAGE``.

Above its first marker a page says, in a quoted line that only plain Markdown shows (:data:`PLAIN_NOTE`; the site
drops it), that the part is generated when the site is built.

The sections of CONTRIBUTING.md that tutorials and how-tos show are not expanded here: they are written into the
pages' Markdown (:mod:`benchmark.docsgen.includes`), so that GitHub shows them too.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import io
import pkgutil
import re
import textwrap
import tokenize
import types
import typing
from pathlib import Path

import cli_reference  # docs/hooks/: the modules beside this file
import griffe_rst
import yaml
from md_cells import _cell, _code, _slug, _text

MARKER = re.compile(r"^<!-- generated-reference:(?P<what>[\w-]+)(?: (?P<arg>[\w.]+))? -->$", re.M)
# the line a page shows above its first marker where the marker is not expanded (GitHub, plain Markdown); the site
# drops it
PLAIN_NOTE = re.compile(r"^> \*\*Generated when the docs site is built\*\*.*\n\n(?=<!-- generated-reference:)", re.M)


# ---------------------------------------------------------------- typed configuration


def field_comments(cls) -> dict[str, str]:
    """``name -> comment`` of a dataclass's fields: the comment at the end of the field's line(s), else the comment
    lines right above it (a field a base class defines: that class's comment)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is not object and dataclasses.is_dataclass(klass):
            out.update(_own_field_comments(klass))
    return out


def _own_field_comments(cls) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    out = {}
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            trailing = [
                comments[n]
                for n in range(node.lineno, node.end_lineno + 1)
                if n in comments and not lines[n - 1].lstrip().startswith("#")
            ]
            above, n = [], node.lineno - 1
            while n in comments and lines[n - 1].lstrip().startswith("#"):
                above.insert(0, comments[n])
                n -= 1
            out[node.target.id] = " ".join(trailing or above)
    return out


def type_name(t, links: dict) -> str:
    """A field's type in YAML's words; a nested config links to its section (``links``: class -> anchor)."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if t is type(None):
        return "null"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a, links) for a in args)
    if origin in (list, tuple) or t in (list, tuple):
        return f"list of {type_name(args[0], links)}" if args else "list"
    if origin is dict or t is dict:
        return f"mapping of name to {type_name(args[1], links)}" if len(args) == 2 else "mapping"
    if dataclasses.is_dataclass(t):
        return f"[{t.__name__}](#{links[t]})" if t in links else t.__name__
    return {int: "integer", float: "number", str: "text", bool: "true/false", typing.Any: "any"}.get(
        t, getattr(t, "__name__", str(t))
    )


def _yaml(value) -> str:
    if isinstance(value, tuple):
        value = list(value)
    if dataclasses.is_dataclass(value):
        return "(the defaults below)"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text[:-4].strip() if text.endswith("\n...") else text.removesuffix("...").strip()


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return _code(_yaml(f.default))
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        return "(the defaults below)" if dataclasses.is_dataclass(value) else _code(_yaml(value))
    return "**required**"


def _rules(meta, is_list: bool) -> str:
    each = "each " if is_list else ""
    rules = []
    for key, word in (("minimum", "≥"), ("above", ">"), ("maximum", "≤")):
        if meta.get(key) is not None:
            rules.append(
                f"{each}{word} {meta[key]:g}" if isinstance(meta[key], (int, float)) else f"{each}{word} {meta[key]}"
            )
    if meta.get("choices"):
        rules.append(f"{each}one of " + ", ".join(_code(c) for c in meta["choices"]))
    if meta.get("min_len"):
        rules.append(f"at least {meta['min_len']} entries")
    if meta.get("unique"):
        rules.append("distinct values")
    if meta.get("inf"):
        rules.append("`.inf` allowed")
    return "; ".join(rules)


def config_fields(cls, skip=()) -> list[dataclasses.Field]:
    """The keys of the block ``cls`` parses: fields set from YAML (not derived, not given by the caller)."""
    return [f for f in dataclasses.fields(cls) if f.init and f.name not in skip and not f.metadata.get("derived")]


def config_table(cls, links: dict, skip=()) -> list[str]:
    """The Markdown table of one config dataclass: key, type, default, rules, meaning."""
    hints = typing.get_type_hints(cls)
    comments = field_comments(cls)
    out = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    for f in config_fields(cls, skip):
        t = hints[f.name]
        base = (
            [a for a in typing.get_args(t) if a is not type(None)]
            if typing.get_origin(t) in (typing.Union, types.UnionType)
            else [t]
        )
        is_list = any(typing.get_origin(b) in (list, tuple) or b in (list, tuple) for b in base)
        out.append(
            f"| `{f.name}` | {type_name(t, links)} | {_default(f)} | {_cell(_rules(f.metadata, is_list))} | "
            f"{_cell(comments.get(f.name, ''))} |"
        )
    return out


def _doc(cls) -> str:
    doc = inspect.getdoc(cls) or ""
    if doc.startswith(f"{cls.__name__}("):  # dataclass's generated signature, not a docstring
        return ""
    return _rst(doc)


def _rst(text: str) -> str:
    """reST roles and double back-quotes as Markdown code (as the API pages show them: :mod:`griffe_rst`)."""
    return _text(griffe_rst.markdown(text))


def _nested(t):
    """The config dataclasses a field's type holds (directly, in a union or as the values of a mapping)."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if dataclasses.is_dataclass(t):
        return [(t, False)]
    if origin in (typing.Union, types.UnionType):
        return [x for a in args for x in _nested(a)]
    if (origin is dict or t is dict) and len(args) == 2 and dataclasses.is_dataclass(args[1]):
        return [(args[1], True)]
    return []


def _registry():
    try:  # the method registry (a leaf of benchmark.methods; before issue 24 it lived in the stage layer)
        return importlib.import_module("benchmark.methods.registry")
    except ModuleNotFoundError:
        return importlib.import_module("benchmark.stages.registry")


def params_reference() -> str:
    """``params.yaml``: every block of :class:`Params`, the embedded suite's ``data`` block and every registered
    method's params entry."""
    from benchmark.data.embedded import EmbeddedData
    from benchmark.stages.model_params import DataRef
    from benchmark.stages.params_config import Params

    sections: list[tuple[str, type, str]] = []  # (key path, class, note)
    seen = set()

    def walk(cls, path: str):
        for f in config_fields(cls):
            if cls is Params and f.name == "data":
                continue  # its own section below: a paper suite's file, or the embedded suite's settings
            for sub, keyed in _nested(typing.get_type_hints(cls)[f.name]):
                if sub not in seen:
                    seen.add(sub)
                    key = f"{path}{f.name}" + (".<name>" if keyed else "")
                    sections.append((key, sub, ""))
                    walk(sub, key + ".")

    walk(Params, "")
    from benchmark.cluster.config import ClusterConfig  # params `cluster` (a mapping to the stages, typed where used)

    seen.add(ClusterConfig)
    sections.append(("cluster", ClusterConfig, ""))
    walk(ClusterConfig, "cluster.")
    links = {cls: _slug(path) for path, cls, _ in sections}
    links[Params] = "top-level-keys"
    links[DataRef] = "data"
    out = ["## Top-level keys", "", _doc(Params), "", *config_table(Params, links), ""]
    for path, cls, _ in sections:
        out += [f"## `{path}` {{ #{_slug(path)} }}", "", _doc(cls), "", *config_table(cls, links), ""]
    out += [
        "## `data` { #data }",
        "",
        "A paper suite's data come from its suite file, `data: {spec: <suite file>}` (see [Suite and zoo "
        "files](suite-and-zoo.md)); the embedded default's `data` block is:",
        "",
        _doc(EmbeddedData),
        "",
        *config_table(EmbeddedData, links),
        "",
    ]
    reg = _registry()
    typed = {s for s, _, _ in sections}
    for kind in reg.list_methods():
        m = reg.get_method(kind)
        if m.config is None or not m.section or m.section in typed:
            continue
        path = f"{m.section}.{kind}.<key>" if m.section == "baselines" else m.section
        what = f"{m.title}" + (f": {m.comment}" if m.comment and m.comment != m.title else "")
        needs = ", ".join(m.needs) or "nothing"
        out += [
            f"## `{path}` {{ #{_slug(path)} }}",
            "",
            f"{_cell(what)} (needs: {needs}; module `{m.module}`). " + _doc(m.config),
            "",
            *config_table(m.config, links),
            "",
        ]
    return "\n".join(out) + "\n"


def suite_reference() -> str:
    """A suite file ``suites/<name>.yaml`` and its ``datasets`` entries."""
    from benchmark.data.paper.suites import LOADERS, SPLIT_RE, DatasetEntry, SuiteFile, loader

    links = {DatasetEntry: "datasets-entry"}
    return (
        "\n".join(
            [
                "## Suite file `suites/<name>.yaml` { #suite-file }",
                "",
                _doc(SuiteFile),
                "",
                *config_table(SuiteFile, links),
                "",
                "Every entry of `recipes` is a training recipe, with the keys of "
                "[`recipes.<name>`](params.md#recipesname).",
                f"Split names match `{SPLIT_RE.pattern}`.",
                "",
                "## `datasets.<key>` { #datasets-entry }",
                "",
                _doc(DatasetEntry),
                "",
                *config_table(DatasetEntry, links),
                "",
                "## Dataset layouts { #layouts }",
                "",
                "Each loader (`loader`, default the entry's key) reads the dataset's official on-disk layout under "
                "the entry's `root` (relative to the data root: `UQBENCH_DATA` or params `data_root`); nothing is "
                "downloaded. A "
                "missing root or a wrong layout is one error that shows the layout.",
                "",
                *[
                    line
                    for n in sorted(LOADERS)
                    for line in (f"`{n}`", "", "```text", loader(n).sketch.strip("\n"), "```", "")
                ],
            ]
        )
        + "\n"
    )


def zoo_reference() -> str:
    """One entry of a zoo file ``zoo/<zoo>.yaml`` (its key is the model's name)."""
    from benchmark.models.zoo import NAME_RE, ZooEntry

    return (
        "\n".join(
            [
                "## Zoo entry `<name>: {...}` { #zoo-entry }",
                "",
                _doc(ZooEntry),
                "",
                f"The key (the model's name) matches `{NAME_RE.pattern}`.",
                "",
                *config_table(ZooEntry, {}, skip=("name",)),
                "",
            ]
        )
        + "\n"
    )


def results_reference() -> str:
    """The columns of the tidy results table and the metric names of its ``metric`` column."""
    from benchmark.core.metric_info import METRICS
    from benchmark.storage import results_schema as rs

    out = [
        "## Columns { #columns }",
        "",
        _rst(inspect.getdoc(rs) or ""),
        "",
        "| column | type | meaning |",
        "|---|---|---|",
    ]
    out += [
        f"| `{c}` | {t} | {_cell(m)}{' (optional)' if c in rs.OPTIONAL_COLUMNS else ''} |"
        for c, (t, m) in rs.COLUMNS.items()
    ]
    out += [
        "",
        "## Metrics { #metrics }",
        "",
        "Values of the `metric` column (fractions, not percentages).",
        "",
        "| metric | label | better | meaning |",
        "|---|---|---|---|",
    ]
    out += [
        f"| `{m.name}` | {_cell(m.label)} | {'higher' if m.higher_is_better else 'lower'} | {_cell(m.description)} |"
        for m in METRICS.values()
    ]
    return "\n".join(out) + "\n"


def api_reference(package: str) -> str:
    """One mkdocstrings block per public module of ``package`` (found on disk, nothing imported)."""
    root = Path(__file__).resolve().parents[2] / package.replace(".", "/")
    names = sorted(m.name for m in pkgutil.iter_modules([str(root)]) if not m.name.startswith("_"))
    return "\n".join(f"::: {package}.{name}\n" for name in names)


def embedded_reference(root: Path | None = None) -> str:
    """The embedded default as committed: its ``data`` block (defaults filled in), zoo and recipes, read from
    ``params.yaml`` and its zoo file while the docs are built (so no number here is written by hand)."""
    from benchmark.config.yaml_input import read_yaml
    from benchmark.data.embedded import resolve_config, split_names
    from benchmark.models.zoo import load_zoo

    root = root or Path(__file__).resolve().parents[2]
    params = read_yaml(root / "params.yaml", what="params file")
    data = resolve_config(params.get("data"))
    zoo = {name: e.as_dict() for name, e in load_zoo(root / params["zoo"], check_arch=False).items()}
    out = [
        f"From `params.yaml` (`data`) and `{params['zoo']}` at this commit.",
        "",
        "| `data` key | value |",
        "|---|---|",
    ]
    out += [f"| `{k}` | {_code(_yaml(v))} |" for k, v in data.items()]
    splits = split_names(params.get("data"))
    corrupt = [s for s in splits if s.startswith("corrupt-")]
    clean = ", ".join(f"`{s}`" for s in splits if s not in corrupt)
    more = f" and {len(corrupt)} corrupted splits (`{corrupt[0]}` ... `{corrupt[-1]}`)" if corrupt else ""
    out += [
        "",
        f"Splits: {clean}{more}.",
        "",
        "| model | arch | init | img_size | seed | recipe | role |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, e in zoo.items():
        out.append(
            f"| `{name}` | `{e.get('arch')}` | `{e.get('init')}` | {e.get('img_size')} | {e.get('seed')} | "
            f"`{e.get('recipe')}` | {_cell(e.get('role', ''))} |"
        )
    used = sorted(
        {str(e.get("recipe")) for e in zoo.values()} | {str((params.get("sve") or {}).get("recipe"))} - {"None"}
    )
    keys = sorted({k for r in used for k in (params["recipes"].get(r) or {})})
    out += ["", "| recipe | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for r in used:
        rec = params["recipes"].get(r) or {}
        out.append(f"| `{r}` | " + " | ".join(_cell(_yaml(rec[k])) if k in rec else "" for k in keys) + " |")
    return "\n".join(out) + "\n"


GENERATORS = {
    "cli": cli_reference.cli_reference,
    "params": params_reference,
    "suite": suite_reference,
    "zoo": zoo_reference,
    "results": results_reference,
    "embedded": embedded_reference,
}


def expand(markdown: str, root: Path) -> str:
    """``markdown`` with every marker replaced by what it stands for (``root``: the repository). An ``<!-- include:
    ... -->`` comment, the old way of showing a CONTRIBUTING.md section, is refused: the section goes into the page
    as a generated block (:mod:`benchmark.docsgen.includes`)."""
    if re.search(r"^<!-- include:", markdown, re.M):
        raise ValueError(
            "<!-- include:FILE#HEADING --> is no longer expanded: put a <!-- generated:contributing-<heading "
            "slug> --> block there and run `python -m benchmark.docsgen.includes --write`"
        )

    def generated(m):
        what, arg = m.group("what"), m.group("arg")
        if what == "api":
            return api_reference(arg)
        if what not in GENERATORS:
            raise ValueError(f"unknown generated reference {what!r}; known: {sorted(GENERATORS)} and api")
        return GENERATORS[what]()

    return MARKER.sub(generated, PLAIN_NOTE.sub("", markdown))
