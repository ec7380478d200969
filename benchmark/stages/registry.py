"""The method registry: every method the benchmark runs, registered by its own module (as timm's ``register_model``).

A method registers itself with :func:`register_method` on the function that runs it::

    @register_method(kind="toy", family="toy", config=ToyConfig, needs=("checkpoints",))
    def toy(params: dict, key: str, *, progress: bool = True) -> dict:
        ...  # reads params.yaml baselines.toy.<key>, writes results/methods/<key>/

* ``kind``: the params section (``baselines.<kind>`` for weight-based methods) and the DVC stage name;
* ``family``: the ``family`` column of its rows in the results table;
* ``config``: a frozen dataclass of one params entry, parsed by :func:`parse_config`
  (field-level validation: unknown, missing or mistyped keys name the file and the field);
* ``needs``: what its stage reads: ``"checkpoints"`` (the model's trained checkpoint; ``"all-checkpoints"``:
  every one), ``"logits"`` (the zoo's logits; evaluated inside the evaluate stage), ``"base-model"`` (the zoo
  entry's pretrained init and ``recipe``: its zoo entry and recipe are stage params);
* ``outputs``: the names it writes under ``results/methods/`` for one key (default: the key itself);
* ``script``: its stage script ``pipelines/<script>.py`` (default: the generic ``pipelines/method.py``).

:func:`list_methods` / :func:`get_method` are what stage generation, params validation,
the evaluate stage, the report and the tests iterate over; :func:`discover` imports the
modules that register methods: every module of :mod:`benchmark.methods` (the papers' methods ``single``, ``duo``,
``deep_ensemble`` and ``sve`` first, then the others by name). Each method is its own module there, holding its
algorithm (or its evaluation units), config, check and stage function, so a new method is one new module there.

Methods of group ``logits`` (evaluated inside the evaluate stage from the zoo's logits) register a function
``units(x: LogitsInput) -> [(identity, method info, cost)]`` listing their evaluation units.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

from benchmark.config.typed import check, parse_config  # noqa: F401 (the methods' config helpers, re-exported)

KINDS = ("weights", "logits", "sve")  # weights: baselines.<kind> entries, one stage each; logits: evaluate stage
NEEDS = ("checkpoints", "all-checkpoints", "logits", "base-model")
# the methods of the papers first, in this order (the evaluate stage's unit order); every other method: its module in
# benchmark.methods, by name
BUILTIN_MODULES = ("benchmark.methods.single", "benchmark.methods.duo", "benchmark.methods.deep_ensemble", "benchmark.methods.sve")


@dataclass(frozen=True)
class Method:
    """One registered method (see the module docstring)."""

    kind: str
    family: str
    run: Callable | None
    title: str = ""  # how messages name it ("MC dropout")
    stage: str = ""  # DVC stage name (default: the kind)
    config: type | None = None
    needs: tuple[str, ...] = ()
    outputs: Callable[[str], list[str]] | None = None
    script: str = "method"
    section: str = "baselines"
    group: str = "weights"
    comment: str = ""
    example: Callable | None = None  # (zoo entries, recipes) -> example params entry text for the suites' params
    persist: bool = False  # resumable training in results/method_checkpoints/<key>
    module: str = ""

    def output_names(self, key: str) -> list[str]:
        return list(self.outputs(key)) if self.outputs else [key]


@dataclass(frozen=True)
class LogitsInput:
    """What the methods of group ``logits`` build their evaluation units from."""

    zoo: dict
    costs: dict  # model -> its cost record (gflops, params, throughput)
    pairs: list  # base-sidekick pairs (benchmark.core.pairs)
    ensembles: list  # member tuples of the deep ensembles


_REGISTRY: dict[str, Method] = {}


def register_method(*, kind: str, family: str, config: type | None = None, needs=(), outputs=None, script: str = "method",
                    group: str = "weights", comment: str = "", example=None, persist: bool = False,
                    section: str = "baselines", title: str = "", stage: str = ""):
    """Decorator registering the run function ``fn(params, key, *, progress)`` of a method."""
    if group not in KINDS:
        raise ValueError(f"method {kind!r}: group must be one of {list(KINDS)}, got {group!r}")
    bad = sorted(set(needs) - set(NEEDS))
    if bad:
        raise ValueError(f"method {kind!r}: unknown needs {bad}; known: {list(NEEDS)}")

    def wrap(fn):
        module = getattr(fn, "__module__", "") or ""
        old = _REGISTRY.get(kind)
        if old is not None and old.module != module:
            raise ValueError(f"method kind {kind!r} is registered twice: by {old.module} and by {module}")
        _REGISTRY[kind] = Method(kind=kind, family=family, run=fn, title=title or kind, stage=stage or kind, config=config, needs=tuple(needs), outputs=outputs,
                                 script=script, section=section, group=group, comment=comment, example=example,
                                 persist=persist, module=module)
        return fn

    return wrap


def discover() -> None:
    """Import every module that registers methods (idempotent)."""
    import benchmark.methods as pkg

    for name in BUILTIN_MODULES:
        importlib.import_module(name)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        importlib.import_module(f"{pkg.__name__}.{info.name}")


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
    """Registered method kinds (built-ins first, then by module name), optionally of one ``group``."""
    return [m.kind for m in _ordered() if group is None or m.group == group]


def get_method(kind: str) -> Method:
    discover()
    if kind not in _REGISTRY:
        raise ValueError(f"unknown method kind {kind!r}; registered: {list(_REGISTRY)}")
    return _REGISTRY[kind]


_COSTS: dict[str, Callable] = {}


def register_cost(family: str):
    """Decorator registering the cost function of a method family's outputs (``family``: their rows' family)::

        @register_cost("toy")
        def toy_cost(info: dict, entry: ZooEntry, num_classes: int, members: int, params: dict) -> dict:
            ...  # {"gflops": ..., "params": ..., and "overhead_percent"/"extra_params_percent" where reported}

    It rebuilds, without weights, the cost fields of one output's ``cost.json`` from that record's settings
    (``info``), the zoo entry of its base, the class count and the member count M of its logits (1 for (N, C)
    logits), with the bundle's ``params``; it raises ``ValueError`` when ``info`` does not describe such logits.
    ``verify`` recomputes a bundle's costs with it (:mod:`benchmark.bundle.recost`); a family without one has its
    rows' costs unverifiable. The method's stage should compute its cost record with the same function."""

    def wrap(fn):
        old = _COSTS.get(family)
        if old is not None and old.__module__ != fn.__module__:
            raise ValueError(f"cost of method family {family!r} is registered twice: by {old.__module__} and by {fn.__module__}")
        _COSTS[family] = fn
        return fn

    return wrap


def output_cost(family: str) -> Callable | None:
    """The cost function registered for a method family (:func:`register_cost`), or None."""
    discover()
    return _COSTS.get(family)


def families() -> list[str]:
    """The ``family`` of every registered method, in :func:`list_methods` order (the report's ordering)."""
    return list(dict.fromkeys(m.family for m in _ordered()))


def check_baselines(section, where: str = "baselines") -> None:
    """params ``baselines``: ``splits`` and one mapping per registered weight-based kind, each entry a valid config."""
    if section is None:
        return
    if not isinstance(section, dict):
        raise ValueError(f"{where}: must be a mapping of method kinds to entries")
    kinds = list_methods("weights")
    unknown = sorted(set(section) - set(kinds) - {"splits"})
    if unknown:
        raise ValueError(f"{where}: unknown method kind(s) {unknown}; registered: {kinds} (see benchmark.stages.registry)")
    for kind in kinds:
        entries = section.get(kind)
        if entries is None:
            continue
        if not isinstance(entries, dict):
            raise ValueError(f"{where}.{kind}: must be a mapping of entry names to entries ({{}} = none), got {entries!r}")
        spec = _REGISTRY[kind]
        for key, raw in entries.items():
            if spec.config is not None:
                parse_config(spec.config, raw, f"{where}.{kind}.{key}")
