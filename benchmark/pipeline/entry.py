"""Shared command-line wrapper for the stage scripts in ``pipelines/``."""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from benchmark.pipeline.config import load_params

EXPECTED = (ValueError, FileNotFoundError, KeyError)


def stage_main(description: str, run: Callable[[dict, argparse.Namespace], object],
               add_args: Callable[[argparse.ArgumentParser], None] | None = None, argv=None) -> int:
    """Parse ``--params`` (+ stage args), run ``run(params, args)``; errors -> message, exit 2."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    if add_args:
        add_args(parser)
    args = parser.parse_args(argv)
    try:
        run(load_params(args.params), args)
    except EXPECTED as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {msg}", file=sys.stderr)
        return 2
    return 0


def model_stage_main(description: str, fn: Callable[..., object], argv=None, *, arg: str = "model",
                     help: str = "zoo entry name") -> int:
    """``stage_main`` for per-item stages (``foreach``): ``fn(params, value, progress=...)`` with ``--<arg> VALUE``."""
    return stage_main(
        description,
        lambda params, a: fn(params, getattr(a, arg), progress=not a.no_progress),
        lambda p: p.add_argument(f"--{arg}", required=True, help=help),
        argv,
    )
