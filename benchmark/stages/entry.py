"""Shared command-line wrapper for the stage scripts in ``pipelines/``: a stage's entry.

The entry parses what the stage reads once into typed objects and hands them down (``load``: the model stages'
params blocks by default, :func:`benchmark.stages.model_params.load_model_params`; the whole file for the stages
that read more, :func:`benchmark.stages.params_config.load_params`); a per-model stage's entry also its zoo entry
and the suite's data source (:func:`benchmark.stages.per_model.model_stage_main`).
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Callable

from benchmark.config import numerics
from benchmark.models import distributed
from benchmark.stages.model_params import load_model_params

EXPECTED = (ValueError, FileNotFoundError, KeyError)
LAUNCHER = "benchmark.models.launch"  # torchrun: imported only when params ask for several processes


def launch_modules(cfg: distributed.DistConfig) -> list[str]:
    """The dotted modules a stage entry with a ``script`` imports at run time for params ``distributed`` (``cfg``):
    the torchrun launcher when it asks for several processes, none otherwise (what the generated pipeline adds to the
    ``train@`` and ``logits@`` stages' dependencies)."""
    return [LAUNCHER] if cfg.world_size > 1 else []


def stage_main(description: str, run: Callable[[object, argparse.Namespace], object],
               add_args: Callable[[argparse.ArgumentParser], None] | None = None, argv=None, *,
               load: Callable[[str], object] = load_model_params, script: str | None = None,
               stage: Callable[[argparse.Namespace], str] | None = None,
               on_failure: str = "its outputs were not written") -> int:
    """Parse ``--params`` (+ stage args) once with ``load`` (typed params), run ``run(params, args)``; errors ->
    message, exit 2.

    ``script`` (the stage script's path) makes the stage data-parallel: when params
    ``distributed`` asks for several processes and this process is not a torchrun
    worker yet, the same command (``script`` + ``argv``) runs under torchrun instead
    (:mod:`benchmark.models.launch`) and a failure of any rank is one message naming the stage (``stage(args)``,
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
        note = numerics.unpinnable_note()  # a CPU without AVX2: what this run cannot promise, in one line
        if note:
            print(note, file=sys.stderr)
        params = load(args.params)
        if script is not None:
            cfg = distributed.config(params.distributed, params.device)
            if cfg.world_size > 1 and not distributed.is_worker():
                return importlib.import_module(LAUNCHER).launch(cfg, script, argv, on_failure=on_failure,
                                                                stage=stage(args) if stage else Path(script).stem)
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
