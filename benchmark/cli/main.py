"""Command line: ``python -m benchmark <command> ...`` (also installed as ``uqbench``).

Each subcommand is registered by an ``add_<name>_command(subparsers)`` function
listed in :data:`COMMANDS` and handled by a ``run_<name>(args) -> int`` function.
Errors print ``error: <message>`` on stderr and return exit code 2. Ctrl-C (SIGINT) anywhere prints one line,
``interrupted: ...``, and returns :data:`INTERRUPTED` (130, as a shell reports a command ended by SIGINT): what the
command was doing unwinds as for any exception first (atomic writes drop their temporary files, a local cluster is
stopped), and no traceback is shown.
"""

from __future__ import annotations

import argparse
import sys

from benchmark.cli.bundle_commands import COMMANDS as BUNDLE_COMMANDS
from benchmark.cli.cluster_commands import add_cluster_command, add_run_command
from benchmark.cli.logits_commands import add_duo_command, add_metrics_command
from benchmark.cli.remote_commands import add_remote_command
from benchmark.cli.reproduce_commands import add_reproduce_command
from benchmark.cli.zoo_commands import add_validate_zoo_command
from benchmark.cli.zoo_flops import add_flops_command
from benchmark.dvcgen.command import add_suite_pipeline_command

INTERRUPTED = 130  # 128 + SIGINT
COMMANDS = [
    add_metrics_command,
    add_duo_command,
    add_flops_command,
    add_validate_zoo_command,
    add_suite_pipeline_command,
    add_remote_command,
    *BUNDLE_COMMANDS,
    add_reproduce_command,
    add_cluster_command,
    add_run_command,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m benchmark`` parser with every command of :data:`COMMANDS` registered."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmark", description="Benchmark of cheap uncertainty quantification."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(subparsers)
    return parser


def interrupted(command: str | None = None) -> int:
    """Say that Ctrl-C stopped ``command`` (one line on stderr); returns :data:`INTERRUPTED`."""
    what = f"python -m benchmark {command}" if command else "python -m benchmark"
    bars = getattr(sys.modules.get("tqdm"), "tqdm", None)
    for bar in list(getattr(bars, "_instances", ())):  # a progress bar left mid-line: end it, the line goes below
        bar.close()
    print(f"interrupted: {what} stopped (Ctrl-C)", file=sys.stderr, flush=True)
    return INTERRUPTED


def main(argv=None) -> int:
    """Run one command (``argv``, default the process's arguments); its exit status, 2 for a usage error or bad
    input, 130 after Ctrl-C (one line on stderr)."""
    command = None
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help (0) or a usage error (2)
            return e.code if isinstance(e.code, int) else 2
        command = args.command
        return _run(parser, args)
    except KeyboardInterrupt:
        return interrupted(command)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.handler(args)
    except Exception as e:
        if not _bad_input(e):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2


def _bad_input(e: Exception) -> bool:
    """``e`` is an :class:`~benchmark.core.validation.InputError` or a :class:`~benchmark.storage.store.StoreError`
    (one line, exit 2). Their modules import torch; a command that raises one has imported it already."""
    kinds = tuple(
        getattr(sys.modules[m], n)
        for m, n in (("benchmark.core.validation", "InputError"), ("benchmark.storage.store", "StoreError"))
        if m in sys.modules
    )
    return bool(kinds) and isinstance(e, kinds)
