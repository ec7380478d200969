"""DVC stage `data`: build the embedded suite's splits into results/data/."""
from benchmark.pipeline.entry import stage_main
from benchmark.pipeline.stages import prepare_data

if __name__ == "__main__":
    raise SystemExit(stage_main(__doc__, lambda params, args: prepare_data(params)))
