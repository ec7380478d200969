"""DVC stage `<kind>@<key>` of a registered method without a script of its own: params.yaml baselines.<kind>.<key> -> results/methods/."""
from benchmark.stages.entry import stage_main
from benchmark.stages.registry import get_method


def _add(p):
    p.add_argument("--kind", required=True, help="registered method kind (benchmark.stages.registry.list_methods())")
    p.add_argument("--key", required=True, help="entry of params.yaml baselines.<kind>")


if __name__ == "__main__":
    raise SystemExit(stage_main(__doc__, lambda params, a: get_method(a.kind).run(params, a.key, progress=not a.no_progress), _add))
