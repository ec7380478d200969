"""Shared command-line wrapper for the stage scripts in ``pipelines/``: a stage's entry.

The entry parses what the stage reads once into typed objects and hands them down (``load``: the model stages'
params blocks by default, :func:`benchmark.stages.model_params.load_model_params`; the whole file for the stages
that read more, :func:`benchmark.stages.params_config.load_params`); a per-model stage's entry also its zoo entry
and the suite's data source (:func:`benchmark.stages.per_model.model_stage_main`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from benchmark.config import numerics, runtime
from benchmark.stages.model_params import load_model_params

EXPECTED = (ValueError, FileNotFoundError, KeyError)


def stage_main(
    description: str,
    run: Callable[[object, argparse.Namespace], object],
    add_args: Callable[[argparse.ArgumentParser], None] | None = None,
    argv=None,
    *,
    load: Callable[[str], object] = load_model_params,
    runner: Callable[[object, argparse.Namespace, list[str], Callable], int] | None = None,
) -> int:
    """Parse ``--params`` (+ stage args) once with ``load`` (typed params), run ``run(params, args)``; errors ->
    message, exit 2.

    ``runner(params, args, argv, run)`` (the per-model stages' :func:`benchmark.stages.per_model.model_stage_main`)
    runs ``run`` instead and returns the exit status: a data-parallel stage's (torchrun) launch and rank handling
    live there, so a stage that runs no model imports no model code through its entry.
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
        runtime.mark_work()  # what came before is the stage's start-up (its timing record, UQ_TIMINGS)
        if runner is not None:
            return runner(params, args, argv, run)
        run(params, args)
    except EXPECTED as e:
        return error(e)
    return 0


def error(e: BaseException, who: str = "") -> int:
    """Print an expected error (``ValueError``, ``FileNotFoundError``, ``KeyError``) as one line, prefixed by ``who``
    (a rank); exit status 2."""
    msg = e.args[0] if isinstance(e, KeyError) and e.args else e
    print(f"error: {who}{msg}", file=sys.stderr)
    return 2
