"""What every DVC stage shares: a stage's entry parses the params blocks it reads once and hands them down typed
(entry.py; model_params.py: the model and method stages' blocks, params_config.py: the whole file; stage_config.py:
reading them, the zoo, where each stage writes), a suite's images (suite_source.py, and per kind of suite
embedded_source.py, paper_source.py), the per-model stages (per_model.py: train, logits; logits_stage.py: the logits@
stage with its cost record) and the stage of a method (method_stage.py: what it hands down to the method it runs)."""
