"""The method registry: every method of the benchmark, registered by its own module (as timm's ``register_model``).

A leaf: this module imports nothing from the package, so a method module imports it without pulling in any
other method, and the stages import exactly the methods they run. One registration for every kind of method::

    @register_method(kind="toy", family="toy", config=ToyConfig, needs=("checkpoints",))
    def toy(ctx, cfg: ToyConfig, key: str) -> list[Output]:
        entry, model = ctx.load_trained(cfg.model)
        return [Output(key, {"family": "toy", "method": "x2", "base": cfg.model}, model=Doubled(model), entry=entry)]

What a method declares:

* ``kind``: its params entries are ``baselines.<kind>.<key>``; by convention its module is
  ``benchmark/methods/<kind>.py``
  (:func:`get_method` imports that module when the kind is not registered yet);
* ``family``: the ``family`` column of its rows in the results table;
* ``config``: a frozen dataclass of one params entry, parsed field by field by its stage
  (:func:`benchmark.config.typed.parse_config`: unknown, missing or mistyped keys name the file and the field);
* ``needs``: what it reads. ``"logits"``: the zoo models' logits and cost records (a weight-free method);
  ``"checkpoints"``: trained checkpoints; ``"base-model"``: the zoo entry's pretrained init and its ``recipe``. The
  generated stage depends on exactly those outputs: those of the entry's ``model`` where its config has a ``model``
  field, else every model's (DVC cannot expand a list of models);
* ``run(ctx, cfg, key) -> list[Output]``: what it returns, one :class:`Output` per name it writes under
  ``results/methods/`` (a model its stage runs on the suite's splits, or the predictions themselves); its stage
  (``python pipelines/method.py --kind <kind> --key <key>``) writes them, and the evaluate stage evaluates every
  output alike. ``ctx`` is what the stage hands down (:class:`benchmark.stages.method_stage.MethodContext`: the typed
  params, the zoo, the suite's splits, trained checkpoints, zoo logits); a method never imports the stage layer;
* ``outputs``: the names it writes for one key (default: the key itself);
* ``training``: the training behind one output, ``training(cfg, info) -> Training`` (:class:`Training`: the recipe of
  its own training, the members that each see every image, the zoo models whose training it builds on); its rows'
  budget is computed from it (:mod:`benchmark.methods.budget`). Default (:func:`training_of`): no training of its own,
  built on the entry's ``model`` (or ``models``) when it needs their checkpoints or logits. A method that trains
  declares it, and its cost function then returns the ``trainable_params`` its training updates;
* ``fixture``: ``fixture(x) -> {key: entry}`` (or None), the CPU-sized params entry that runs the method on the tiny
  fixture suite of the pipeline tests and the GPU check (:mod:`benchmark.gpu.fixture`; ``x``: its zoo's ``base``, a
  ResNet, and ``sidekick``, an EfficientNet with dropout, and ``train_recipe``); None: the fixture runs no entry of it;
* ``chosen``: the values of its rows' ``method`` column whose ``base`` and ``members`` the method chooses from the
  data (the greedy soup keeps the ingredients that improve its validation score): another CPU kind or training seed
  may choose otherwise, so the reproducibility gate matches such rows by what they are, the choice being a value
  (:func:`chosen_rows`, :func:`benchmark.reproduce.gate.identity`);
* its cost function (:func:`register_cost`, by family): an output's ``gflops`` and ``params`` rebuilt without weights
  from its ``cost.json`` settings, the zoo entry of its base and its typed config; ``verify`` recomputes a bundle's
  costs with it, and the method's ``run`` computes its cost record with the same function.

The methods evaluated per unit inside the evaluate stage (group ``evaluate``: single models, Asymmetric Duos, deep
ensembles, from the zoo's logits) register ``units(x: LogitsInput) -> [(identity, info, cost)]`` and
``rows(cfg, names, logits, *, info, memo, release) -> (rows, paired)`` instead of ``run``: the evaluate stage
enumerates their units and its runner computes each through the registry (the unit's identity starts with the kind).
SVE (group ``sve``) has its own params section and stages (``sve-train``, ``sve``: one output per size).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GROUPS = (
    "stage",
    "evaluate",
    "sve",
)  # stage: one DVC stage per baselines.<kind> entry; evaluate: units of the evaluate stage
NEEDS = ("logits", "checkpoints", "base-model")
PACKAGE = "benchmark.methods"
# the methods of the papers first, in this order (the evaluate stage's unit order, the generated stage order); every
# other method: its module in benchmark.methods, by name
BUILTIN_MODULES = tuple(f"{PACKAGE}.{m}" for m in ("single", "duo", "deep_ensemble", "sve_stage"))


@dataclass(frozen=True)
class Method:
    """One registered method (see the module docstring)."""

    kind: str
    family: str
    run: Callable | None = None
    title: str = ""  # how messages name it ("MC dropout")
    stage: str = ""  # DVC stage name (default: the kind)
    config: type | None = None
    needs: tuple[str, ...] = ()
    outputs: Callable[[str], list[str]] | None = None
    script: str = "method"  # pipelines/<script>.py
    section: str = "baselines"
    group: str = "stage"
    comment: str = ""
    example: Callable | None = None  # (zoo entries, recipes) -> example params entry text for the suites' params
    persist: bool = False  # resumable training in results/method_checkpoints/<key>
    units: Callable | None = None  # group evaluate: the units it adds to the evaluate stage
    rows: Callable | None = None  # group evaluate: the rows of one unit
    module: str = ""
    training: Callable | None = None  # (cfg, info) -> Training; None: see training_of
    chosen: tuple[
        str, ...
    ] = ()  # row methods whose base and members are chosen from the data (see the module docstring)
    fixture: Callable | None = None  # x -> {key: entry}: its entry on the tiny fixture suite (see the module docstring)

    def output_names(self, key: str) -> list[str]:
        """The output names the method writes for params entry ``key`` (default: the key itself)."""
        return list(self.outputs(key)) if self.outputs else [key]


@dataclass(frozen=True)
class Training:
    """The training behind one method output: its own (``recipe``: a recipe of params ``recipes``, '' when it trains
    nothing itself; ``members``: full forward passes per training image, the M members of an SVE or LoRA-Ensemble, 1
    for a shared backbone; ``images``: training images per epoch, None = the whole train split) and the zoo models
    whose trained checkpoints or logits it starts from (``builds_on``: their training is part of its budget)."""

    recipe: str = ""
    members: int = 1
    images: int | None = None
    builds_on: tuple[str, ...] = ()


def training_of(method: Method, cfg, info: dict) -> Training:
    """The training behind output ``info`` (its cost record) of ``method``'s params entry ``cfg``: the method's
    ``training`` function, else none of its own, built on the entry's ``model`` or ``models`` when it needs their
    checkpoints or logits (``needs``)."""
    if method.training is not None:
        return method.training(cfg, info)
    if not {"checkpoints", "logits"} & set(method.needs):
        return Training()
    get = (
        cfg.get if isinstance(cfg, dict) else lambda k: getattr(cfg, k, None)
    )  # a method without a typed config: the mapping
    models, model = get("models"), get("model")
    names = list(models) if isinstance(models, (list, tuple)) else [model] if isinstance(model, str) else []
    return Training(builds_on=tuple(names))


@dataclass
class Output:
    """One output of a method: ``results/methods/<name>/`` (one logits file per split and ``cost.json``).

    ``info`` (``cost.json``) holds at least ``family``, ``method`` and ``base``. Either ``model`` (maps (B, 3, S, S)
    inputs prepared for zoo entry ``entry`` to (B, C) or (M, B, C) logits; its stage measures ``gflops``, ``params`` and
    ``throughput`` unless ``info`` has them and runs it on ``splits``, default every split but train, in batches of
    ``batch_size``, default params ``logits.batch_size``) or ``predictions`` (split -> (logits, labels, ids), with the
    costs in ``info``)."""

    name: str
    info: dict
    model: Any = None
    entry: Any = None
    splits: list[str] | None = None
    batch_size: int | None = None
    predictions: dict | None = None


@dataclass(frozen=True)
class LogitsInput:
    """What the methods of group ``evaluate`` build their evaluation units from."""

    zoo: dict  # name -> zoo entry
    costs: dict  # model -> its cost record (gflops, params, throughput)
    cfg: Any  # the typed evaluate block (benchmark.config.evaluate.EvalConfig)


_REGISTRY: dict[str, Method] = {}


def register_method(
    *,
    kind: str,
    family: str,
    config: type | None = None,
    needs=(),
    outputs=None,
    script: str = "method",
    group: str = "stage",
    comment: str = "",
    example=None,
    persist: bool = False,
    section: str = "baselines",
    title: str = "",
    stage: str = "",
    rows: Callable | None = None,
    training: Callable | None = None,
    chosen: tuple[str, ...] = (),
    fixture: Callable | None = None,
):
    """Decorator registering a method's function: ``run(ctx, cfg, key)`` (groups ``stage``, ``sve``) or, for group
    ``evaluate``, ``units(x)`` (with its ``rows`` function)."""
    if group not in GROUPS:
        raise ValueError(f"method {kind!r}: group must be one of {list(GROUPS)}, got {group!r}")
    bad = sorted(set(needs) - set(NEEDS))
    if bad:
        raise ValueError(f"method {kind!r}: unknown needs {bad}; known: {list(NEEDS)}")
    if (group == "evaluate") != (rows is not None):
        raise ValueError(f"method {kind!r}: a method of group 'evaluate' (and only one) registers its rows function")

    def wrap(fn):
        module = getattr(fn, "__module__", "") or ""
        old = _REGISTRY.get(kind)
        if old is not None and old.module != module:
            raise ValueError(f"method kind {kind!r} is registered twice: by {old.module} and by {module}")
        evaluated = group == "evaluate"
        _REGISTRY[kind] = Method(
            kind=kind,
            family=family,
            run=None if evaluated else fn,
            units=fn if evaluated else None,
            rows=rows,
            title=title or kind,
            stage=stage or kind,
            config=config,
            needs=tuple(needs),
            outputs=outputs,
            script=script,
            section=section,
            group=group,
            comment=comment,
            example=example,
            persist=persist,
            module=module,
            training=training,
            chosen=tuple(chosen),
            fixture=fixture,
        )
        return fn

    return wrap


def discover() -> None:
    """Import every module of :mod:`benchmark.methods` (idempotent): every method registers."""
    pkg = importlib.import_module(PACKAGE)
    for name in BUILTIN_MODULES:
        importlib.import_module(name)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        importlib.import_module(f"{PACKAGE}.{info.name}")


def _ordered() -> list[Method]:
    """Every registered method in one fixed order, whichever module was imported first (generated files
    must not depend on it): the built-ins in ``BUILTIN_MODULES`` order, then the other modules by name,
    each module's methods in their registration order."""
    discover()
    pos = {k: i for i, k in enumerate(_REGISTRY)}

    def key(m: Method):
        builtin = BUILTIN_MODULES.index(m.module) if m.module in BUILTIN_MODULES else len(BUILTIN_MODULES)
        return builtin, m.module, pos[m.kind]

    return sorted(_REGISTRY.values(), key=key)


def list_methods(group: str | None = None) -> list[str]:
    """Registered method kinds (built-ins first, then by module name), optionally of one ``group``; imports every
    method module (:func:`discover`)."""
    return [m.kind for m in _ordered() if group is None or m.group == group]


def chosen_rows() -> list[tuple[str, str]]:
    """``(family, method)`` of every row whose ``base`` and ``members`` a method chose from the data (``chosen``);
    imports every method module (:func:`discover`)."""
    return [(m.family, row_method) for m in _ordered() for row_method in m.chosen]


def get_method(kind: str) -> Method:
    """The method registered as ``kind``: imports ``benchmark.methods.<kind>`` (the convention) when it is not
    registered yet, every method module when that does not register it either; ``ValueError`` naming the kinds."""
    if kind not in _REGISTRY and isinstance(kind, str) and kind.isidentifier():
        try:
            importlib.import_module(f"{PACKAGE}.{kind}")
        except ModuleNotFoundError as e:
            if e.name != f"{PACKAGE}.{kind}":
                raise
    if kind not in _REGISTRY:
        discover()
    if kind not in _REGISTRY:
        raise ValueError(f"unknown method kind {kind!r}; registered: {list_methods()}")
    return _REGISTRY[kind]


_COSTS: dict[str, Callable] = {}


def register_cost(family: str):
    """Decorator registering the cost function of a method family's outputs (``family``: their rows' family)::

        @register_cost("toy")
        def toy_cost(info: dict, entry: ZooEntry, num_classes: int, members: int, cfg: ToyConfig) -> dict:
            ...  # {"gflops": ..., "params": ..., and "overhead_percent"/"extra_params_percent" where reported}

    It rebuilds, without weights, the cost fields of one output's ``cost.json`` from that record's settings
    (``info``), the zoo entry of its base, the class count, the member count M of its logits (1 for (N, C) logits)
    and ``cfg``, the method's typed config of the params entry that wrote the output (what ``run`` got); it raises
    ``ValueError`` when ``info`` does not describe such logits. ``verify`` recomputes a bundle's costs with it
    (:mod:`benchmark.bundle.recost`); a family without one has its rows' costs unverifiable. The method's ``run``
    computes its cost record with the same function."""

    def wrap(fn):
        old = _COSTS.get(family)
        if old is not None and old.__module__ != fn.__module__:
            raise ValueError(
                f"cost of method family {family!r} is registered twice: by {old.__module__} and by {fn.__module__}"
            )
        _COSTS[family] = fn
        return fn

    return wrap


def output_cost(family: str) -> Callable | None:
    """The cost function registered for a method family (:func:`register_cost`), or None; imports every method
    module (:func:`discover`)."""
    discover()
    return _COSTS.get(family)
