"""The command-line reference: every ``python -m benchmark`` command from its argparse parser
(:func:`benchmark.cli.main.build_parser`, nested sub-commands included) and the stage scripts of ``pipelines/``
(their docstrings). Part of the generated reference pages (:mod:`reference`)."""

from __future__ import annotations

import argparse
import ast
import os
from pathlib import Path

from md_cells import _cell, _code, _slug

CLI_WIDTH = "100"  # columns of the usage lines (argparse reads $COLUMNS)


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            return [(name, sub, helps.get(name) or "") for name, sub in action.choices.items()]
    return []


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    fmt = parser._get_formatter()
    lines = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or a.help == argparse.SUPPRESS:
            continue
        name = ", ".join(a.option_strings) if a.option_strings else (a.metavar or a.dest)
        if a.option_strings and a.nargs != 0:
            name += f" {a.metavar or a.dest.upper()}"
        notes = []
        if a.required and a.option_strings:
            notes.append("required")
        if a.choices:
            notes.append("one of " + ", ".join(_code(c) for c in a.choices))
        if a.option_strings and a.default not in (None, False, argparse.SUPPRESS) and a.nargs != 0:
            notes.append(f"default {_code(a.default)}")
        if a.nargs in ("*", "+"):
            notes.append("repeatable" if a.nargs == "*" else "one or more")
        lines.append(f"| {_code(name)} | {_cell(fmt._expand_help(a) if a.help else '')} | {_cell('; '.join(notes))} |")
    return ["| argument | meaning | notes |", "|---|---|---|", *lines] if lines else []


def _command(parser: argparse.ArgumentParser, words: list[str], summary: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{' '.join(words)}`", ""]
    text = parser.description or summary
    if text:
        out += [text.strip(), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    table = _arguments(parser)
    if table:
        out += [*table, ""]
    for name, sub, help_ in _subcommands(parser):
        out += _command(sub, [*words, name], help_, min(level + 1, 4))
    return out


def cli_reference() -> str:
    """Every command of ``python -m benchmark`` (nested sub-commands included) and the stage scripts."""
    from benchmark.cli.main import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = CLI_WIDTH
    try:
        parser = build_parser()
        commands = _subcommands(parser)
        out = ["| command | what it does |", "|---|---|"]
        out += [
            f"| [`{name}`](#{_slug('python -m benchmark ' + name)}) | {_cell(help_)} |" for name, _, help_ in commands
        ]
        out.append("")
        for name, sub, help_ in commands:
            out += _command(sub, ["python -m benchmark", name], help_, 2)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    out += [
        "## Stage scripts (`pipelines/`)",
        "",
        "The generated `dvc.yaml` runs these thin scripts; each takes `--params FILE` (default `params.yaml`), "
        "`--no-progress` and `--help`. Run them through `dvc repro`; call one yourself only to debug a stage or "
        "to launch it under `torchrun`.",
        "",
        "| script | stage |",
        "|---|---|",
    ]
    root = Path(__file__).resolve().parents[2]
    for script in sorted((root / "pipelines").glob("*.py")):
        doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
        out.append(f"| `pipelines/{script.name}` | {_cell(doc.split(chr(10) + chr(10))[0])} |")
    return "\n".join(out) + "\n"
