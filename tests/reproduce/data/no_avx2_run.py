"""A few training steps and a logits pass through the pipeline's own functions, as a stage runs them (its entry,
the model as train@ builds it, fine_tune's steps, the logits pass, a cost record's measured part), for a CPU without
AVX2 (tests/reproduce/test_emulation.py runs it under `qemu-x86_64 -cpu Nehalem`). Prints one JSON line: what
train.json and the cost record say of the numerics, and the logits' shape."""

import json
import sys
import types

import benchmark  # noqa: F401  (pins what the CPU has, before torch)

out_dir = sys.argv[1]


def run(params, args) -> None:
    import torch

    from benchmark.models import cost, distributed, train
    from benchmark.models.recipe import Recipe
    from benchmark.models.zoo import parse_entry

    torch.set_num_threads(2)
    recipe = Recipe(epochs=1, batch_size=8, lr=0.01, drop_rate=0.2)
    entry = parse_entry(
        "m",
        {"arch": "mobilenetv3_small_050", "init": "scratch", "img_size": 16, "seed": 0, "recipe": "r"},
        check_arch=False,
    )
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 3, 16, 16, generator=g), torch.arange(16) % 10
    model = train.training_model(entry, 10, recipe)
    record = train.fine_tune(
        model, (x, y), (x[:8], y[:8]), recipe, seed=0, folder=out_dir, fingerprint="f", progress=False
    )
    z = distributed.predict_logits(model, x[:5], to_all=False, batch_size=4)
    measured = cost.measured(model, 16, types.SimpleNamespace(throughput_batch=4, throughput_iters=1))
    with open(f"{out_dir}/train.json") as f:
        written = json.load(f)
    print(
        json.dumps(
            {
                "train_json": written["numerics"],
                "returned": record["numerics"],
                "cost": measured["numerics"],
                "logits": list(z.shape),
                "finite": bool(torch.isfinite(z).all()),
            }
        )
    )


if __name__ == "__main__":
    from benchmark.stages.entry import stage_main

    raise SystemExit(stage_main("no-AVX2 fixture", run, load=lambda path: None, argv=[]))
