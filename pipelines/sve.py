"""DVC stage `sve`: fine-tune the largest Singular Value Ensemble of params.yaml sve.members once and write one
output per size M, its first M members (nested) -> results/methods/sve-m<M>/; `--members M` trains M alone."""
from benchmark.pipeline.entry import stage_main
from benchmark.pipeline.sve import train_sve, train_sves

if __name__ == "__main__":
    raise SystemExit(stage_main(
        __doc__, lambda params, a: (train_sves(params, progress=not a.no_progress) if a.members is None
                                    else train_sve(params, a.members, progress=not a.no_progress)),
        lambda p: p.add_argument("--members", type=int, default=None,
                                 help="train this ensemble size alone (default: every size of params.yaml sve.members, "
                                      "nested in one run)")))
