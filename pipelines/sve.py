"""DVC stages of Singular Value Ensembles (params.yaml sve), nested: `sve-train` (--train) trains the largest
size of sve.members once into results/method_checkpoints/sve/; `sve` (--members M [M ...], every size of
sve.members) writes the first M members of it -> results/methods/sve-m<M>/ for each M, in one process.
--members M --alone trains an M-member SVE by itself."""

from benchmark.methods import sve_stage
from benchmark.stages import method_stage
from benchmark.stages.entry import stage_main
from benchmark.stages.model_params import load_method_params


def _run(params, a) -> object:
    progress = not a.no_progress
    if a.train == (a.members is not None):
        raise ValueError("sve stage: give --train or --members M [M ...]")
    if not a.train and not a.alone:
        return method_stage.run(params, "sve", a.members, progress=progress)
    ctx, cfg = method_stage.context(params, "sve", progress=progress)
    if a.train:
        return sve_stage.train_nested(ctx, cfg)
    if len(a.members) != 1:
        raise ValueError("sve stage: --alone trains one size: give --members M")
    return method_stage.write_output(ctx, sve_stage.train_sve(ctx, cfg, a.members[0]))


def _args(p) -> None:
    p.add_argument(
        "--train", action="store_true", help="train the largest size of params.yaml sve.members (stage sve-train)"
    )
    p.add_argument(
        "--members",
        type=int,
        nargs="+",
        default=None,
        help="ensemble sizes M, every one of params.yaml sve.members: write their outputs (stage sve)",
    )
    p.add_argument("--alone", action="store_true", help="with --members M: train M members by themselves, not nested")


if __name__ == "__main__":
    raise SystemExit(stage_main(__doc__, _run, _args, load=load_method_params))
