"""DVC stage `logits@<model>`: logits of one trained model on every split into results/logits/<model>/;
with --cost also its fvcore GFLOPs, parameters and CPU throughput into results/cost/<model>.json (in this
process: no separate cost stage, one Python start-up and import less per model).

params `distributed` asking for several processes runs it under torchrun (sharded splits; rank 0 writes the cost).
"""
from benchmark.stages.entry import stage_main
from benchmark.stages.params_config import Params
from benchmark.stages.per_model import cost, logits


def logits_and_cost(params: Params, name: str, *, with_cost: bool, progress: bool = True) -> list[str]:
    from benchmark.models import distributed

    written = logits(params, name, progress=progress)
    if with_cost and distributed.is_main():
        cost(params, name)
    return written


def _args(p) -> None:
    p.add_argument("--model", required=True, help="zoo entry name")
    p.add_argument("--cost", action="store_true", help="also write results/cost/<model>.json (as the cost stage does)")


if __name__ == "__main__":
    raise SystemExit(stage_main(__doc__, lambda params, a: logits_and_cost(params, a.model, with_cost=a.cost,
                                                                           progress=not a.no_progress),
                                _args, script=__file__, stage=lambda a: f"logits@{a.model}",
                                on_failure="no logits were written"))
