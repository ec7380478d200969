"""DVC stage `laplace@<key>`: last-layer Laplace of params.yaml baselines.laplace.<key> -> results/methods/<key>."""
from benchmark.methods.laplace import laplace
from benchmark.stages.entry import model_stage_main

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, laplace, arg="key", help="entry of params.yaml baselines"))
