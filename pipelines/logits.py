"""DVC stage `logits@<model>`: logits of one trained model on every split into results/logits/<model>/.

params `distributed` asking for several processes runs it under torchrun (sharded splits).
"""
from benchmark.pipeline.entry import model_stage_main
from benchmark.pipeline.stages import logits

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, logits, script=__file__, on_failure="no logits were written"))
