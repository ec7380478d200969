"""DVC stage `lora_ensemble@<key>`: LoRA-Ensemble of params.yaml baselines.lora_ensemble.<key> -> results/methods/<key>."""
from benchmark.methods.lora_ensemble import lora_ensemble
from benchmark.stages.entry import model_stage_main

if __name__ == "__main__":
    raise SystemExit(model_stage_main(__doc__, lora_ensemble, arg="key", help="entry of params.yaml baselines"))
