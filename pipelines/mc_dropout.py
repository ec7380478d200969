"""DVC stage `mc_dropout@<key>`: MC dropout of params.yaml baselines.mc_dropout.<key> -> results/methods/<key>."""
from benchmark.methods.mc_dropout import mc_dropout
from benchmark.stages.entry import model_stage_main

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, mc_dropout, arg="key", help="entry of params.yaml baselines"))
