"""DVC stage `logits@<model>`: logits of one trained model on every split into results/logits/<model>/;
with --cost also its fvcore GFLOPs, parameters and CPU throughput into results/cost/<model>.json (in this
process: no separate cost stage, one Python start-up and import less per model).

params `distributed` asking for several processes runs it under torchrun (sharded splits; rank 0 writes the cost).
"""

from benchmark.stages.logits_stage import logits_and_cost
from benchmark.stages.per_model import model_stage_main


def _args(p) -> None:
    p.add_argument("--cost", action="store_true", help="also write results/cost/<model>.json (as the cost stage does)")


if __name__ == "__main__":
    raise SystemExit(
        model_stage_main(
            __doc__,
            lambda stage, a: logits_and_cost(stage, with_cost=a.cost, progress=not a.no_progress),
            script=__file__,
            add_args=_args,
            on_failure="no logits were written",
        )
    )
