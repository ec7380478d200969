"""What every DVC stage shares: params.yaml parsed once at a stage's entry and handed down typed (params_config.py,
stage_config.py, entry.py), a suite's images (suite_source.py), the per-model stages (per_model.py: train, logits,
cost) and the stage of a method (method_stage.py: what it hands down to the method it runs)."""
