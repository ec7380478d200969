"""``verify``'s recompute of the cost columns and of ``models.csv``, with the pipeline's own code.

* a zoo model's GFLOPs and parameters: its zoo entry built without weights
  (:func:`benchmark.models.factory.create`, as the cost stage
  :func:`benchmark.stages.logits_stage.cost` does) and counted with fvcore
  (:func:`benchmark.models.cost.count_flops`, which switches timm's fused attention off
  while counting) and :func:`~benchmark.models.cost.count_params`; the class count is the
  logits' (C). The weights are not initialised for this and each structure is counted
  once per process (:func:`benchmark.models.cost.structure_cost`);
* a unit's gflops, params, balance, overhead_percent and extra_params_percent: the
  evaluate stage's unit list (:func:`benchmark.evaluation.stage.unit_list`, i.e. the
  ``units`` functions of the methods evaluated per unit and
  :func:`benchmark.core.costs.sum_cost`) fed with those costs and the run's ``evaluate``
  params (which pairs and deep ensembles it evaluates); for a method output, its cost
  record rebuilt by the method's registered cost function
  (:func:`benchmark.methods.registry.output_cost`) from the zoo entry of its base, the
  settings in its cost record, the member count of its logits and the typed config of the
  params entry that wrote it. A method without a cost function cannot have its costs
  recomputed: its rows stay unverified;
* the training budgets (``train_images``, ``train_params``): a zoo model's from its recipe's epochs,
  the run's train split size (the manifest's ``train_size``) and its parameter count
  (:func:`benchmark.core.costs.train_budget`, as the cost stage); a method output's own part with
  :func:`benchmark.methods.budget.own_budget` (its training from the method's registration and
  params entry, ``trainable_params`` from its cost function) and the zoo models it builds on added by
  the evaluate stage's unit list. A bundle without ``train_size`` (made before budgets) has no
  budgets to recompute: its rows must not claim any (NaN).

Throughput is a measurement of the contributor's machine: it is never recomputed and never
makes anything verified (:data:`benchmark.bundle.schema.REPORTED`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from benchmark.bundle import intake
from benchmark.bundle.manifest import COST_FIELDS, evaluate_params
from benchmark.bundle.schema import COSTS, MANIFEST, MODEL_COLUMNS, Bundle

NAN = float("nan")


@dataclass
class Costs:
    """What the costs recompute found: per unit (inputs_hash) the cost columns, the per-model costs, and the
    units whose costs could not be recomputed (inputs_hash -> why)."""

    units: dict[str, dict] = field(default_factory=dict)
    models: dict[str, dict] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def _entries(bundle: Bundle) -> dict:
    from benchmark.models.zoo import parse_entry

    recipes = bundle.manifest["params"].get("recipes")
    return {
        n: parse_entry(n, raw, recipes=recipes if isinstance(recipes, dict) else None)
        for n, raw in bundle.manifest["zoo"].items()
    }


def recipes_of(params: dict) -> dict:
    """The run's params ``recipes``, typed (:class:`benchmark.models.recipe.Recipe`); ``ValueError`` naming a bad
    one."""
    from benchmark.models.recipe import Recipe

    raw = params.get("recipes")
    return {str(k): Recipe.from_params(str(k), v, "params") for k, v in raw.items()} if isinstance(raw, dict) else {}


def model_costs(
    entries: dict, num_classes: int, recipes: dict | None = None, train_size: int | None = None
) -> dict[str, dict]:
    """name -> the cost record of each zoo entry (gflops, params; throughput NaN: not recomputable) and its training
    budget (from ``recipes``, name -> Recipe, and ``train_size``; NaN without them)."""
    from benchmark.core.costs import BUDGET, train_budget
    from benchmark.models.cost import structure_cost
    from benchmark.models.recipe import recipe_of

    out = {}
    for name, e in entries.items():
        static = structure_cost(e, num_classes)  # as the cost stage (benchmark.stages.logits_stage.cost)
        if train_size is None or recipes is None or e.recipe not in recipes:
            trained = {k: NAN for k in BUDGET}
        else:  # as the cost stage (benchmark.stages.logits_stage.cost)
            trained = train_budget(recipe_of(recipes, e.recipe).epochs, train_size, static["params"])
        out[name] = {
            "name": name,
            "arch": e.arch,
            "init": e.init,
            "img_size": e.img_size,
            "seed": e.seed,
            "role": e.role,
            **static,
            **trained,
            "throughput": NAN,
        }
    return out


def _method_config(family: str, name: str, params: dict):
    """(method, typed config) of the params entry that wrote method output ``name`` (family ``family``), parsed with its
    method's config as its stage parses it (:mod:`benchmark.stages.method_stage`): the entry ``baselines.<kind>.<key>``
    whose outputs include ``name``, or the method's own section (SVE's ``sve``). ``ValueError`` when there is none."""
    from benchmark.config.typed import parse_config
    from benchmark.methods import registry

    methods = [registry.get_method(k) for k in registry.list_methods()]
    method = next((m for m in methods if m.family == family and m.run is not None), None)
    if method is None:
        raise ValueError(f"no method of family {family!r} writes outputs")
    if method.section != "baselines":
        raw = params.get(method.section)
        where = f"params {method.section}"
    else:
        entries = (params.get("baselines") or {}).get(method.kind)
        keys = [k for k in entries or {} if name in method.output_names(str(k))] if isinstance(entries, dict) else []
        if not keys:
            raise ValueError(f"params baselines.{method.kind} has no entry that writes output {name!r}")
        raw, where = entries[keys[0]], f"params baselines.{method.kind}.{keys[0]}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: missing or not a mapping")
    return method, (parse_config(method.config, raw, where) if method.config is not None else raw)


def _method_record(
    u: dict, entries: dict, num_classes: int, members: int, params: dict, recipes, train_size
) -> dict | str:
    """The recomputed cost record of method unit ``u``, or why it cannot be recomputed."""
    from benchmark.methods import budget, registry

    info, name = u["info"], u["members"][0]
    fn = registry.output_cost(info["family"])
    if fn is None:
        return f"no cost function is registered for method family {info['family']!r}"
    if info["base"] not in entries:
        return f"its base {info['base']!r} has no zoo entry in the manifest"
    try:
        method, method_cfg = _method_config(info["family"], name, params)
    except ValueError as e:
        return f"its params entry: {e}"
    try:
        static = fn(info, entries[info["base"]], num_classes, members, method_cfg)
    except (ValueError, KeyError, TypeError) as e:
        return f"its cost record does not describe its logits: {e}"
    # the claimed costs and budget never fill a gap
    record = {k: v for k, v in info.items() if k not in COST_FIELDS and k not in budget.FIELDS} | static
    try:
        if train_size is None:  # no budget recorded: none to recompute (the rows must claim none)
            trained = {k: NAN for k in budget.OWN} | {
                "builds_on": list(registry.training_of(method, method_cfg, record).builds_on)
            }
        else:
            trained = budget.own_budget(method, method_cfg, record, recipes, train_size)
    except (ValueError, KeyError, TypeError) as e:
        return f"its training budget: {e}"
    unknown = [n for n in trained["builds_on"] if n not in entries]
    if unknown:
        return f"it builds on {unknown}, which have no zoo entry in the manifest"
    return {**record, **trained, "throughput": NAN}


def recompute(bundle: Bundle, num_classes: int, method_members: dict[str, int]) -> Costs:
    """The costs every row of ``bundle`` must carry (``method_members``: method output -> member count of its
    logits)."""
    from benchmark.evaluation.stage import unit_list  # the evaluate stage's own unit list (costs included)

    entries = _entries(bundle)
    params = bundle.manifest["params"]
    recipes, train_size = recipes_of(params), bundle.manifest.get("train_size")
    res = Costs(models=model_costs(entries, num_classes, recipes, train_size))
    cfg = evaluate_params(
        bundle.manifest, intake.show(bundle.path / MANIFEST), bundle.suite
    )  # which pairs and ensembles
    units = bundle.manifest["units"]
    methods = {}
    for u in units:
        if u["kind"] != "method":
            continue
        name = u["members"][0]
        got = _method_record(u, entries, num_classes, method_members.get(name, 1), params, recipes, train_size)
        if isinstance(got, str):
            res.missing[u["inputs_hash"]] = got
        else:
            methods[name] = got
    by_ident = {tuple(ident): cost for ident, _, cost in unit_list(entries, res.models, cfg, methods)}
    for u in units:
        if u["inputs_hash"] in res.missing:
            continue
        cost = by_ident.get((u["kind"], *u["members"]))
        if cost is None:
            res.missing[u["inputs_hash"]] = "the evaluate stage would not evaluate such a unit"
            continue
        res.units[u["inputs_hash"]] = {c: float(cost.get(c, NAN)) for c in COSTS}
    return res


def close(a, b, tol: float) -> bool:
    """``|a - b| <= tol max(1, |a|, |b|)``; NaN equals NaN only."""
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def compare_rows(rows: pd.DataFrame, expected: dict, tol: float) -> list[str]:
    """Per mismatching column of ``rows`` (one unit's), ``'col: bundle x, recomputed y'``, for the first bad row."""
    out = []
    for c in COSTS:
        bad = [v for v in rows[c].tolist() if not close(v, expected[c], tol)]
        if bad:
            out.append(f"{c}: bundle {bad[0]!r}, recomputed {expected[c]!r}")
    return out


def compare_models(models: pd.DataFrame, expected: dict[str, dict], tol: float) -> list[str]:
    """models.csv against the zoo entries and the recomputed costs (throughput: reported, not compared)."""
    problems = []
    names = set(models["name"])
    for n in sorted(set(expected) - names):
        problems.append(f"models.csv: zoo model {n!r} is missing")
    for r in models.to_dict("records"):
        want = expected.get(r["name"])
        if want is None:
            problems.append(f"models.csv: model {r['name']!r} is not in the manifest's zoo")
            continue
        for c in MODEL_COLUMNS:
            if c == "throughput":
                continue
            a, b = r[c], want[c]
            same = (
                close(a, b, tol)
                if c in ("gflops", "params", "img_size", "seed")
                else str(a if a == a else "") == str(b)
            )
            if not same:
                problems.append(f"models.csv: model {r['name']!r}: {c}: bundle {a!r}, recomputed {b!r}")
    return problems
