"""Shared command-line wrapper for the stage scripts in ``pipelines/``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from benchmark.config import numerics
from benchmark.models import distributed
from benchmark.stages.params_config import Params
from benchmark.stages.stage_config import load_params

EXPECTED = (ValueError, FileNotFoundError, KeyError)


def stage_main(description: str, run: Callable[[Params, argparse.Namespace], object],
               add_args: Callable[[argparse.ArgumentParser], None] | None = None, argv=None, *,
               script: str | None = None, stage: Callable[[argparse.Namespace], str] | None = None,
               on_failure: str = "its outputs were not written") -> int:
    """Parse ``--params`` (+ stage args) once, run ``run(params, args)`` with the typed
    :class:`~benchmark.stages.params_config.Params`; errors -> message, exit 2.

    ``script`` (the stage script's path) makes the stage data-parallel: when params
    ``distributed`` asks for several processes and this process is not a torchrun
    worker yet, the same command (``script`` + ``argv``) runs under torchrun instead
    and a failure of any rank is one message naming the stage (``stage(args)``,
    default the script's name) and ``on_failure`` (exit 1). In a worker, a failed
    collective (another rank stopped) exits 1 with a one-line message.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    if add_args:
        add_args(parser)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    try:
        numerics.check_pinned()
        params = load_params(args.params)
        if script is not None:
            cfg = distributed.config(params.distributed, params.device)
            if cfg.world_size > 1 and not distributed.is_worker():
                return distributed.launch(cfg, script, argv, stage=stage(args) if stage else Path(script).stem,
                                          on_failure=on_failure)
        run(params, args)
    except EXPECTED as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {_who()}{msg}", file=sys.stderr)
        return 2
    except distributed.RankFailure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    distributed.shutdown()
    return 0


def _who() -> str:
    return f"rank {distributed.rank()}: " if distributed.world_size() > 1 else ""


def model_stage_main(description: str, fn: Callable[..., object], argv=None, *, arg: str = "model",
                     help: str = "zoo entry name", script: str | None = None, on_failure: str = "its outputs were not written") -> int:
    """``stage_main`` for per-item stages (``foreach``): ``fn(params, value, progress=...)`` with ``--<arg> VALUE``.

    ``script``: see :func:`stage_main`; the stage is named ``<script stem>@<value>`` as in dvc.yaml.
    """
    return stage_main(
        description,
        lambda params, a: fn(params, getattr(a, arg), progress=not a.no_progress),
        lambda p: p.add_argument(f"--{arg}", required=True, help=help),
        argv, script=script, stage=lambda a: f"{Path(script).stem}@{getattr(a, arg)}", on_failure=on_failure,
    )
