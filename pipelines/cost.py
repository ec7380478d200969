"""DVC stage `cost@<model>`: fvcore GFLOPs, parameters and CPU throughput into results/cost/<model>.json."""
from benchmark.stages.entry import model_stage_main
from benchmark.stages.per_model import cost

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, cost))
