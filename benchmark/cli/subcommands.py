"""What the stand-alone sub-command modules share (``python -m benchmark.cli.zoo_commands``, ``.remote_commands``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable


def run_subcommands(prog: str, adders: Iterable[Callable], argv=None) -> int:
    """Parse ``argv`` with the sub-commands that ``adders`` register and run the chosen one's handler.

    ``--help`` returns 0 and a usage error 2 (argparse's exit codes) instead of exiting.
    """
    parser = argparse.ArgumentParser(prog=prog)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in adders:
        add(sub)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    return args.handler(args)
