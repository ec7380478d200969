"""DVC stages of Singular Value Ensembles (params.yaml sve), nested: `sve-train` (--train) trains the largest
size of sve.members once into results/method_checkpoints/sve/; `sve@<M>` (--members M) writes its first M
members -> results/methods/sve-m<M>/. --members M --alone trains an M-member SVE by itself."""
from benchmark.methods import sve_stage
from benchmark.stages import method_stage
from benchmark.stages.entry import stage_main
from benchmark.stages.model_params import load_method_params


def _run(params, a) -> object:
    progress = not a.no_progress
    if a.train == (a.members is not None):
        raise ValueError("sve stage: give --train or --members M")
    if not a.train and not a.alone:
        return method_stage.run(params, "sve", a.members, progress=progress)
    ctx, cfg = method_stage.context(params, "sve", progress=progress)
    if a.train:
        return sve_stage.train_nested(ctx, cfg)
    return method_stage.write_output(ctx, sve_stage.train_sve(ctx, cfg, a.members))


def _args(p) -> None:
    p.add_argument("--train", action="store_true", help="train the largest size of params.yaml sve.members (stage sve-train)")
    p.add_argument("--members", type=int, default=None, help="ensemble size M: write its output (stage sve@<M>)")
    p.add_argument("--alone", action="store_true", help="with --members: train M members by themselves, not nested")


if __name__ == "__main__":
    raise SystemExit(stage_main(__doc__, _run, _args, load=load_method_params))
