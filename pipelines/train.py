"""DVC stage `train@<model>`: fine-tune one zoo entry (resumable) into results/checkpoints/<model>/.

params `distributed` asking for several processes runs it under torchrun (DDP).
"""
from benchmark.stages.entry import model_stage_main
from benchmark.stages.per_model import train

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, train, script=__file__,
                                      on_failure="the checkpoint folder keeps its last complete epoch (rerun to resume)"))
