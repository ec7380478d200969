"""The stage of a method: one params entry in, the method's outputs written to ``results/methods/``.

``python pipelines/method.py --kind <kind> --key <key>`` (DVC stage ``<stage>@<key>``) runs :func:`run`: the
entry ``baselines.<kind>.<key>`` is parsed with the method's typed config (:mod:`benchmark.methods.registry`), the
method's ``run(ctx, cfg, key)`` gets a :class:`MethodContext` (what the stage hands down: the typed params, the zoo,
the suite's splits, trained checkpoints, the zoo's logits) and returns its outputs
(:class:`benchmark.methods.registry.Output`), which :func:`write_output` writes: one logits file per split and
``cost.json`` per output folder, atomically, with the output's training budget (its own training and the zoo models
it builds on: :func:`benchmark.methods.budget.own_budget`). The evaluate stage evaluates every output alike.

The stage imports the method it runs (the registry imports ``benchmark/methods/<kind>.py``), never the others;
the pipeline generator validates every entry (:func:`check_entries`) when it writes ``dvc.yaml``.
"""

from __future__ import annotations

from pathlib import Path

from benchmark.config.typed import parse_config
from benchmark.methods import budget, registry
from benchmark.methods.registry import Method, Output
from benchmark.models import cost as costs
from benchmark.models import factory
from benchmark.models.infer import predict_logits
from benchmark.models.recipe import recipe_of
from benchmark.models.zoo import NAME_RE
from benchmark.stages import per_model, stage_config, suite_source
from benchmark.stages.model_params import MethodParams
from benchmark.stages.suite_source import TRAIN, VAL, SplitInputs
from benchmark.storage import store

SECTION = "baselines"
COST_KEYS = ("gflops", "params", "throughput")


class MethodContext:
    """What a method's stage hands down to the method (its ``run(ctx, cfg, key)``)."""

    def __init__(self, params: MethodParams, method: Method, where: str, *, progress: bool = True, config=None):
        self.params = params  # typed (benchmark.stages.model_params.MethodParams)
        self.method = method  # the registered method (benchmark.methods.registry.Method)
        self.config = config  # the entry's typed config (what the method's run gets)
        self.title = method.title  # how messages name the method
        self.where = where  # the entry, for messages: "baselines.<kind>.<key>"
        self.progress = progress
        self.zoo = stage_config.zoo(params)  # name -> zoo entry
        self.recipes = params.recipes  # name -> recipe
        self.batch_size = params.logits.batch_size  # images per forward (params logits.batch_size)
        self._source = None

    # -- the suite's data -------------------------------------------------------------------------------
    @property
    def source(self):
        """The suite's data source (:func:`benchmark.stages.suite_source.for_params`: its ``num_classes()`` and
        ``num_workers``), opened once."""
        if self._source is None:
            self._source = suite_source.for_params(self.params)
        return self._source

    def inputs(self, split: str, entry, *, train: bool = False) -> SplitInputs:
        """One split prepared for ``entry`` (``train``: with the fine-tuning augmentation)."""
        return self.source.inputs(split, entry, train=train)

    def splits(self, patterns=None) -> list[str]:
        """The split names the entry's output covers: ``patterns`` (its ``splits``; None: params ``baselines.splits``,
        else every split but train), see :meth:`resolve_splits`."""
        if patterns is None:
            patterns = (self.params.baselines or {}).get("splits")
        return self.resolve_splits(patterns, f"{self.where}: splits")

    def train_size(self) -> int:
        """Images of the train split (one epoch of a recipe)."""
        return suite_source.train_size()

    def resolve_splits(self, patterns, where: str) -> list[str]:
        """Split names matching ``patterns`` (names or shell patterns; None: every split but train) in data order;
        val and test required. ``ValueError`` starting with ``where``."""
        available = [s for s in suite_source.split_files() if s != TRAIN]
        patterns = list(patterns) if isinstance(patterns, tuple) else patterns
        return suite_source.resolve_splits(patterns, available, where)

    def device(self):
        """The torch device params ``device`` selects."""
        return suite_source.device(self.params)

    def set_threads(self) -> None:
        """Torch threads as params ``threads`` says."""
        stage_config.set_threads(self.params)

    # -- zoo models -----------------------------------------------------------------------------------------
    def entry(self, name: str):
        """Zoo entry ``name`` (:func:`benchmark.stages.stage_config.entry`)."""
        return stage_config.entry(self.params, name)

    def skeleton(self, name: str):
        """The architecture of zoo entry ``name`` without weights (to check applicability before any work)."""
        entry = self.entry(name)
        return factory.create(
            entry,
            self.source.num_classes(),
            load_weights=False,
            drop_rate=recipe_of(self.recipes, entry.recipe, f"zoo entry {name!r}").drop_rate,
        )

    def create(self, entry, drop_rate: float = 0.0):
        """Zoo entry ``entry`` with its initial (pretrained) weights and the suite's classes (fails fast)."""
        return factory.create(entry, self.source.num_classes(), drop_rate=drop_rate)

    def model_stage(self, name: str) -> per_model.ModelStage:
        """Zoo model ``name`` as its own stages see it (:class:`benchmark.stages.per_model.ModelStage`)."""
        return per_model.model_stage(self.params, name, self.source)

    def load_trained(self, name: str):
        """(zoo entry, its trained model in eval mode on the CPU) from ``results/checkpoints/<name>``."""
        stage = self.model_stage(name)
        return stage.entry, per_model.load_trained(stage)

    def checkpoint(self, name: str) -> Path:
        """The folder of zoo model ``name``'s trained checkpoint (``model.safetensors``, ``train.json``)."""
        return stage_config.paths(name)["checkpoint"]

    def zoo_logits(self, name: str) -> dict:
        """split -> :class:`benchmark.storage.store.LogitsFile` (logits, labels, ids) of zoo model ``name``."""
        files = store.listing(stage_config.paths(name)["logits"], "*.safetensors")
        if not files:
            raise store.StoreError(
                f"{stage_config.paths(name)['logits']}: no logits of model {name!r}; run `dvc repro logits@{name}`"
            )
        return {f.stem: store.load_logits_file(f) for f in files}

    def zoo_cost(self, name: str) -> dict:
        """The cost record of zoo model ``name`` (gflops, params, throughput; written with its logits)."""
        return store.read_json(stage_config.paths(name)["cost"])

    # -- the method's own files -----------------------------------------------------------------------------
    def method_folder(self, name: str) -> Path:
        """``results/method_checkpoints/<name>``: the method's resumable training (an output with ``persist``)."""
        return stage_config.paths()["method_checkpoints"] / name

    @staticmethod
    def fingerprint(*parts) -> str:
        """Short stable hash of JSON-serialisable parts (what a resumable training is keyed on)."""
        return stage_config.fingerprint(*parts)

    def costs(self, model, img_size: int) -> dict:
        """``gflops``, ``params`` and CPU ``throughput`` (params ``cost``) of ``model`` at ``img_size`` (on the CPU)."""
        self.set_threads()
        c = self.params.cost
        model.cpu()
        return {**costs.static_cost(model, img_size), **costs.measured(model, img_size, c)}

    def predict(self, model, entry, splits, *, batch_size: int | None = None, desc: str = "") -> dict[str, tuple]:
        """split -> (logits, labels, ids) of ``model`` on each of ``splits`` (inputs prepared for ``entry``), on
        params' device."""
        self.set_threads()
        model.to(self.device())
        out = {}
        for split_name in splits:
            s = self.inputs(split_name, entry)
            z = predict_logits(
                model,
                s.inputs,
                batch_size=batch_size or self.batch_size,
                desc=f"{desc}/{split_name}",
                progress=self.progress,
                num_workers=self.source.num_workers,
            )
            out[split_name] = (z, s.labels, s.ids)
        return out


def _entry(params: MethodParams, method: Method, key: str) -> tuple[object, str]:
    """The parsed config of ``method``'s entry ``key`` and where it is (for messages)."""
    if method.section == SECTION:
        where = f"{SECTION}.{method.kind}.{key}"
        entries = (params.baselines or {}).get(method.kind) or {}
        if key not in entries:
            raise ValueError(f"{where}: no such {method.title} entry in params.yaml (known: {sorted(entries)})")
        raw = entries[key]
    else:
        where, raw = f"params.yaml {method.section}", getattr(params, method.section)
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: missing or malformed section {method.section!r} (see {method.module})")
    return (parse_config(method.config, raw, where) if method.config is not None else raw), where


def context(params: MethodParams, kind: str, key: str = "", *, progress: bool = True) -> tuple[MethodContext, object]:
    """(context, parsed config) of method ``kind``'s entry ``key``; ``ValueError`` naming the entry and the field."""
    method = registry.get_method(kind)
    cfg, where = _entry(params, method, key)
    return MethodContext(params, method, where, progress=progress, config=cfg), cfg


def run(params: MethodParams, kind: str, key: str, *, progress: bool = True) -> dict[str, dict]:
    """The stage of method ``kind``'s entry ``key``: run it, write its outputs; output name -> its ``cost.json``."""
    method = registry.get_method(kind)
    if method.run is None:
        raise ValueError(f"method {kind!r} is evaluated inside the evaluate stage; it has no stage of its own")
    ctx, cfg = context(params, kind, key, progress=progress)
    if method.section == SECTION:
        for name in method.output_names(key):
            if not NAME_RE.match(name) or name in ctx.zoo:
                raise ValueError(
                    f"{ctx.where}: output name {name!r} must be a valid name (letters, digits, '_', '.', '-') "
                    "and differ from every zoo model"
                )
    return {o.name: write_output(ctx, o) for o in method.run(ctx, cfg, key)}


def write_output(ctx: MethodContext, out: Output) -> dict:
    """``results/methods/<name>/``: one logits file per split and ``cost.json`` (the folder written atomically);
    a model output's costs are measured (unless ``info`` has them) and its predictions computed first; the record
    gets the output's training budget (:func:`benchmark.methods.budget.own_budget`)."""
    for k in ("family", "method", "base"):
        if k not in out.info:
            raise ValueError(f"method output {out.name!r}: info needs {k!r}")
    record = dict(out.info)
    try:
        images = ctx.train_size() if registry.training_of(ctx.method, ctx.config, record).recipe else 0
        record.update(budget.own_budget(ctx.method, ctx.config, record, ctx.recipes, images))
    except ValueError as e:
        raise ValueError(f"method output {out.name!r}: training budget: {e}") from None
    if out.model is not None:
        files = _model_splits(out)
        out.model.cpu()  # costs are measured on the CPU, logits computed on params' device
        record.update({k: v for k, v in ctx.costs(out.model, out.entry.img_size).items() if k not in record})
        predictions = ctx.predict(out.model, out.entry, files, batch_size=out.batch_size, desc=out.name)
    else:
        predictions = out.predictions or {}
        missing = [k for k in COST_KEYS if k not in record] + sorted({VAL, "test"} - set(predictions))
        if missing:
            raise ValueError(
                f"method output {out.name!r}: needs {missing} (costs in its info, predictions of val and test)"
            )
    with store.atomic_dir(stage_config.paths()["methods"] / out.name) as folder:
        for split_name, (z, labels, ids) in predictions.items():
            store.save_logits_file(
                folder / f"{split_name}.safetensors",
                z,
                labels,
                ids,
                meta={"model": out.name, "split": split_name, "family": record["family"]},
            )
        store.write_json(folder / "cost.json", record)
    return record


def _model_splits(out: Output) -> list[str]:
    """The splits a model output covers (default: every split but train); they must exist and include val and test."""
    files = [s for s in suite_source.split_files() if s != TRAIN and (out.splits is None or s in out.splits)]
    missing = sorted({VAL, "test"} - set(files))
    if missing or (out.splits is not None and set(out.splits) - set(files)):
        raise ValueError(
            f"method output {out.name!r}: splits {sorted(set(out.splits or []) - set(files)) or missing} do not "
            f"exist in {stage_config.paths()['data']}"
        )
    return files


def check_entries(params: MethodParams, where: str = "params.yaml") -> None:
    """Every method entry of ``params`` parsed with its method's typed config (what the pipeline generator runs
    before it writes ``dvc.yaml``): ``baselines`` holds ``splits`` and one mapping per registered method kind."""
    section = params.baselines
    if section is not None:
        kinds = registry.list_methods("stage")
        unknown = sorted(set(section) - set(kinds) - {"splits"})
        if unknown:
            raise stage_config.ConfigError(
                f"{where}: {SECTION}: unknown method kind(s) {unknown}; registered: {kinds} "
                "(modules of benchmark/methods)"
            )
        for kind in kinds:
            entries = section.get(kind)
            if entries is None:
                continue
            if not isinstance(entries, dict):
                raise stage_config.ConfigError(
                    f"{where}: {SECTION}.{kind}: must be a mapping of entry names to entries "
                    f"({{}} = none), got {entries!r}"
                )
            for key in entries:
                try:
                    _entry(params, registry.get_method(kind), key)
                except ValueError as e:
                    raise stage_config.ConfigError(f"{where}: {e}") from None
    for kind in registry.list_methods("sve"):
        method = registry.get_method(kind)
        if isinstance(getattr(params, method.section), dict):
            try:
                _entry(params, method, "")
            except ValueError as e:
                raise stage_config.ConfigError(f"{where}: {e}") from None
