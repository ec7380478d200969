"""DVC stage `train@<model>`: fine-tune one zoo entry (resumable) into results/checkpoints/<model>/.

params `distributed` asking for several processes runs it under torchrun (DDP).
"""

from benchmark.stages.per_model import model_stage_main, train

if __name__ == "__main__":
    raise SystemExit(
        model_stage_main(
            __doc__,
            lambda stage, a: train(stage, progress=not a.no_progress),
            script=__file__,
            on_failure="the checkpoint folder keeps its last complete epoch (rerun to resume)",
        )
    )
