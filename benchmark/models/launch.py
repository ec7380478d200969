"""Running a stage's own command under torchrun: what a stage entry does when params ``distributed`` asks for several
processes and it is not a torchrun worker yet (:func:`benchmark.stages.per_model.model_stage_main`).

The entry imports this module only then, and the generated pipeline makes it a dependency of the ``train@`` and
``logits@`` stages only when the params ask for several processes (:func:`benchmark.stages.per_model.launch_modules`):
a one-process stage neither runs nor depends on the launcher.
"""

from __future__ import annotations

import os
import sys


def _quiet_torch_logs() -> None:
    import logging

    for name in list(logging.root.manager.loggerDict):
        if name.startswith("torch.distributed"):
            logging.getLogger(name).setLevel(logging.ERROR)


def launch(cfg, script: str, argv, *, stage: str, on_failure: str) -> int:
    """Run ``python script argv`` under torchrun as this node's ``cfg.nproc_per_node`` workers and wait.

    Returns 0, or 1 after printing one message: the stage, the rank that stopped
    first and how, and ``on_failure`` (what the failure means for the outputs).
    """
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    args = cfg.torchrun_args(script, argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # what torchrun sets; each worker then sets params 'threads'
    try:
        parsed = torchrun.parse_args(args)
        _quiet_torch_logs()
        torchrun.run(parsed)
    except ChildFailedError as e:
        r, failure = e.get_first_failure()
        how = f"killed by {failure.signal_name()}" if failure.exitcode < 0 else f"exit code {failure.exitcode}"
        print(
            f"error: stage {stage} failed with {cfg.world_size} processes: rank {r} stopped first ({how}); "
            f"{on_failure}. The ranks' own messages are above.",
            file=sys.stderr,
        )
        return 1
    except Exception as e:  # rendezvous: port in use, master unreachable, ...
        print(
            f"error: stage {stage}: torchrun could not run {cfg.world_size} processes ({type(e).__name__}: {e}); "
            f"{on_failure}. Command: torchrun {' '.join(args)}",
            file=sys.stderr,
        )
        return 1
    return 0
