"""DVC stage `soup@<key>`: uniform and greedy model soups of params.yaml baselines.soups.<key> -> results/methods/<key>-{uniform,greedy}."""
from benchmark.methods.soups import soup
from benchmark.stages.entry import model_stage_main

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, soup, arg="key", help="entry of params.yaml baselines"))
