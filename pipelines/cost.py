"""DVC stage `cost@<model>`: fvcore GFLOPs, parameters and CPU throughput into results/cost/<model>.json."""
from benchmark.pipeline.entry import model_stage_main
from benchmark.pipeline.stages import cost

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, cost))
