"""DVC stage `sve@<M>`: fine-tune an M-member Singular Value Ensemble (params.yaml sve) -> results/methods/sve-m<M>/."""
from benchmark.pipeline.entry import stage_main
from benchmark.pipeline.sve import train_sve

if __name__ == "__main__":
    raise SystemExit(stage_main(__doc__, lambda params, a: train_sve(params, a.members, progress=not a.no_progress),
                                lambda p: p.add_argument("--members", type=int, required=True, help="ensemble size M")))
