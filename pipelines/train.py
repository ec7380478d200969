"""DVC stage `train@<model>`: fine-tune one zoo entry (resumable) into results/checkpoints/<model>/.

params `distributed` asking for several processes runs it under torchrun (DDP).
"""
from benchmark.pipeline.entry import model_stage_main
from benchmark.pipeline.stages import train

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, train, script=__file__,
                                      on_failure="the checkpoint folder keeps its last complete epoch (rerun to resume)"))
