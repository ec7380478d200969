"""DVC stage `shallow@<key>`: shallow ensemble of params.yaml baselines.shallow.<key> -> results/methods/<key>."""
from benchmark.methods.shallow import shallow
from benchmark.stages.entry import model_stage_main

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, shallow, arg="key", help="entry of params.yaml baselines"))
