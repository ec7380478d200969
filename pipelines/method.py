"""DVC stage `<stage>@<key>` of a registered method: params.yaml baselines.<kind>.<key> -> results/methods/.

It imports the method it runs (benchmark/methods/<kind>.py, through benchmark.methods.registry), no other."""

from benchmark.stages.entry import stage_main
from benchmark.stages.method_stage import run
from benchmark.stages.model_params import load_method_params


def _add(p):
    p.add_argument("--kind", required=True, help="registered method kind (benchmark/methods/<kind>.py)")
    p.add_argument("--key", required=True, help="entry of params.yaml baselines.<kind>")


if __name__ == "__main__":
    raise SystemExit(
        stage_main(
            __doc__,
            lambda params, a: run(params, a.kind, a.key, progress=not a.no_progress),
            _add,
            load=load_method_params,
        )
    )
