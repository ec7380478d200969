"""DVC stage `evaluate`: every single model and every base-sidekick duo -> results/*.csv, summary.json."""

from benchmark.evaluation.stage import run
from benchmark.stages.entry import stage_main
from benchmark.stages.params_config import load_params

if __name__ == "__main__":
    raise SystemExit(
        stage_main(__doc__, lambda params, a: print(run(params, progress=not a.no_progress)), load=load_params)
    )
