"""Paper suites as data: ``suites/<name>.yaml`` names datasets, splits, classes, zoo and recipes.

A suite file (validated on load, never executed)::

    description: free text
    num_classes: 1000
    select_by: accuracy            # validation score for model selection: accuracy | macro_f1
    zoo: zoo/imagenet.yaml         # the suite's model zoo (relative to the working directory)
    datasets:                      # <key>: one dataset, read by loader <loader> (default: the key)
      imagenet:
        root: imagenet             # relative to the data root, or absolute
        options: {val_fraction: 0.05, seed: 42}   # keyword arguments of the loader
    splits:                        # suite split name: <dataset key>/<loader split>
      val: imagenet/val
      test: imagenet/test
      corrupt-*: cifar100_c/*      # every loader split whose name starts with 'corrupt-'
    recipes:                       # training recipes the zoo refers to; epochs 0 = use the weights as they are
      none: {epochs: 0}

Split names follow the results table: ``train``, ``val``, ``test``, ``shift`` (same
classes, shifted distribution), ``ood`` (another label space: labels become -1),
``corrupt-<type>-<severity>``. ``val`` and ``test`` are required, ``train`` too as soon
as a recipe trains. The data root is the ``data_root`` argument (params.yaml
``data_root``), else the environment variable ``UQBENCH_DATA``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.config.typed import check, parse_config
from benchmark.data.paper.common import DatasetLayoutError, Loader, SampleSplit, layout_error
from benchmark.data.paper.transforms import SplitDataset, eval_transform, train_transform

DATA_ROOT_ENV = "UQBENCH_DATA"
SUITES_DIR = Path("suites")
SELECT_BY = ("accuracy", "macro_f1")
SPLIT_RE = re.compile(r"^(train|val|test|shift|ood|corrupt-\*|corrupt-[a-z0-9_]+-[1-5])$")


LOADERS: dict[str, str] = {
    "imagenet": "imagenet",
    "imagenet_v2": "imagenet",
    "caltech256": "caltech",
    "iwildcam": "iwildcam",
    "cifar100": "cifar",
    "cifar10": "cifar",
    "cifar100_c": "cifar",
    "flowers102": "oxford",
    "dtd": "oxford",
    "pets": "oxford",
}
"""Dataset loaders by name: the module of :mod:`benchmark.data.paper` that holds each (in its ``LOADERS``,
:class:`~benchmark.data.paper.common.Loader`: ``fn(root, **options) -> {split: SampleSplit}`` and the layout sketch
of its root). A suite imports the modules of its own loaders only (:func:`loader`), so a stage of one suite runs, and
depends on, no other suite's loader (:func:`loader_modules`)."""


def loader_module(name: str) -> str:
    """The dotted module that holds loader ``name``."""
    return f"{__package__}.{LOADERS[name]}"


def loader(name: str) -> Loader:
    """Loader ``name`` (its module imported now, the first time a suite uses it)."""
    return importlib.import_module(loader_module(name)).LOADERS[name]


def loader_modules(spec: SuiteSpec) -> list[str]:
    """The dotted modules of the loaders suite ``spec`` uses (what its stages import besides their own imports),
    sorted."""
    return sorted({loader_module(d.loader) for d in spec.datasets.values()})


_LOADED: dict[tuple[str, str], SuiteSpec] = {}


class SuiteError(ValueError):
    """A suite file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class DatasetEntry:
    """One ``datasets`` entry of a suite file (its loader's options are checked against the loader's signature)."""

    root: str
    loader: str | None = None  # default: the entry's key
    options: dict | None = None  # keyword arguments of the loader


@dataclass(frozen=True)
class SuiteFile:
    """A suite file as written, parsed field by field (:func:`benchmark.config.typed.parse_config`); its
    recipes are parsed by :meth:`benchmark.models.recipe.Recipe.from_params`, its splits and loaders checked in
    :func:`load_suite`."""

    description: str
    num_classes: int = field(metadata=check(minimum=2))
    select_by: str = field(metadata=check(choices=SELECT_BY))
    zoo: str
    datasets: dict[str, DatasetEntry] = field(metadata=check(min_len=1))
    splits: dict[str, str] = field(metadata=check(min_len=1))
    recipes: dict[str, dict]


@dataclass(frozen=True)
class DatasetSpec:
    key: str
    loader: str
    root: str
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SuiteSpec:
    """A validated paper suite (see the module docstring)."""

    name: str
    path: Path
    description: str
    num_classes: int
    select_by: str
    zoo: Path
    datasets: dict[str, DatasetSpec]
    splits: dict[str, tuple[str, str]]  # suite split -> (dataset key, loader split); a '*' key maps a prefix
    recipes: dict[str, dict]

    def trains(self) -> bool:
        """Whether a recipe of the suite trains (``epochs`` > 0)."""
        return any(r.get("epochs", 0) > 0 for r in self.recipes.values())

    def recipe(self, name: str):
        """The :class:`benchmark.models.recipe.Recipe` called ``name``, or None for an ``epochs: 0`` recipe (no
        training)."""
        from benchmark.models.recipe import Recipe

        if name not in self.recipes:
            raise SuiteError(f"suite {self.name!r}: no recipe {name!r}; known {sorted(self.recipes)}")
        raw = self.recipes[name]
        return None if raw["epochs"] == 0 else Recipe.from_params(name, raw)

    def zoo_entries(self, *, check_arch: bool = True) -> dict:
        """The suite's zoo, validated against the suite's recipes."""
        from benchmark.models.zoo import load_zoo

        return load_zoo(self.zoo, recipes=self.recipes, check_arch=check_arch, recipes_in=f"{self.path} 'recipes'")

    def root(self, key: str, data_root=None) -> Path:
        """Where dataset ``key`` must be: its ``root``, relative to the data root unless absolute."""
        ds = self.datasets[key]
        root = Path(os.path.expanduser(ds.root))
        if root.is_absolute():
            return root
        base = data_root if data_root is not None else os.environ.get(DATA_ROOT_ENV)
        if not base:
            raise layout_error(
                f"suite {self.name!r} dataset {key!r}",
                "<data root>" if ds.root in (".", "") else f"<data root>/{ds.root}",
                "no data root is set: pass data_root (params.yaml 'data_root') or export "
                f"{DATA_ROOT_ENV}=/path/to/datasets",
                loader(ds.loader).sketch,
            )
        return Path(os.path.expanduser(str(base))) / root

    def load_splits(self, data_root=None, *, only=None) -> dict[str, SampleSplit]:
        """The suite's splits ``{suite split name: SampleSplit}`` (``only``: a subset of split names)."""
        wanted = list(self.splits) if only is None else list(only)
        unknown = [s for s in wanted if s not in self.splits and not any(_matches(k, s) for k in self.splits)]
        if unknown:
            raise SuiteError(f"suite {self.name!r}: unknown split(s) {unknown}; it has {sorted(self.splits)}")
        keys = [k for k in self.splits if k in wanted or any(_matches(k, s) for s in wanted)]
        loaded: dict[str, dict] = {}
        out: dict[str, SampleSplit] = {}
        for key in keys:
            ds_key, loader_split = self.splits[key]
            if ds_key not in loaded:
                loaded[ds_key] = self._load_dataset(ds_key, data_root)
            have = loaded[ds_key]
            if key.endswith("*"):
                names = [n for n in have if n.startswith(key[:-1])]
                if not names:
                    raise SuiteError(
                        f"suite {self.name!r}: dataset {ds_key!r} has no split matching {key!r} (has {sorted(have)})"
                    )
                pairs = [(n, n) for n in names if only is None or n in wanted or key in wanted]
            else:
                if loader_split not in have:
                    raise SuiteError(
                        f"suite {self.name!r}: dataset {ds_key!r} has no split {loader_split!r} (has {sorted(have)})"
                    )
                pairs = [(key, loader_split)]
            for name, src in pairs:
                out[name] = self._checked(have[src].renamed(name, ood=name == "ood"))
        return out

    def torch_dataset(self, split: str, model_or_entry, *, data_root=None, train: bool = False) -> SplitDataset:
        """A torch Dataset of ``(image tensor, label, id)`` for ``split`` with the model's transform.

        ``model_or_entry``: a zoo entry (its arch, tag and img_size), a timm model or a timm name.
        ``train=True`` uses the published fine-tuning augmentation.
        """
        s = self.load_splits(data_root, only=[split])[split]
        return SplitDataset(s, (train_transform if train else eval_transform)(model_or_entry))

    def _load_dataset(self, key: str, data_root) -> dict:
        ds = self.datasets[key]
        root = self.root(key, data_root)
        try:
            return loader(ds.loader).fn(root, **ds.options)
        except DatasetLayoutError as e:
            raise DatasetLayoutError(f"suite {self.name!r}: {e}") from None

    def _checked(self, s: SampleSplit) -> SampleSplit:
        if s.name != "ood" and len(s) and s.labels.max() >= self.num_classes:
            raise SuiteError(
                f"suite {self.name!r}: split {s.name!r} ({s.dataset}) has label {s.labels.max()} "
                f">= num_classes {self.num_classes}"
            )
        return s


def _matches(pattern_key: str, name: str) -> bool:
    return pattern_key.endswith("*") and name.startswith(pattern_key[:-1])


def _check_recipes(where: str, raw: dict, select_by: str) -> dict[str, dict]:
    """Each recipe parsed as a :class:`benchmark.models.recipe.Recipe` (field by field) and selecting by the suite's
    score."""
    from benchmark.models.recipe import Recipe

    out = {}
    for name, r in raw.items():
        if r.get("select_by", select_by) != select_by:
            raise SuiteError(f"{where}: recipe {name!r} selects by {r['select_by']!r} but the suite by {select_by!r}")
        r = {**r, "select_by": select_by}
        try:
            Recipe.from_params(name, r, where)
        except ValueError as e:
            raise SuiteError(str(e)) from None
        out[name] = r
    return out


def _check_datasets(where: str, raw: dict[str, DatasetEntry]) -> dict[str, DatasetSpec]:
    out = {}
    for key, d in raw.items():
        name = d.loader or key
        if name not in LOADERS:
            raise SuiteError(f"{where}: dataset {key!r}: unknown loader {name!r}; known {sorted(LOADERS)}")
        options = d.options or {}
        params = inspect.signature(loader(name).fn).parameters
        allowed = [p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY]
        bad = sorted(set(options) - set(allowed))
        if bad:
            raise SuiteError(f"{where}: dataset {key!r}: unknown options {bad} for loader {name!r}; allowed {allowed}")
        out[key] = DatasetSpec(key=key, loader=name, root=d.root, options=dict(options))
    return out


def _check_splits(where: str, raw: dict, datasets: dict) -> dict[str, tuple[str, str]]:
    out = {}
    for name, target in raw.items():
        if not isinstance(name, str) or not SPLIT_RE.match(name):
            raise SuiteError(
                f"{where}: split name {name!r} must be train, val, test, shift, ood or corrupt-<type>-<severity> (or "
                "corrupt-*)"
            )
        ds_key, _, loader_split = str(target).partition("/")
        if ds_key not in datasets or not loader_split:
            raise SuiteError(
                f"{where}: split {name!r} -> {target!r} must be '<dataset>/<split>' with a dataset of "
                f"{sorted(datasets)}"
            )
        if name.endswith("*") != (loader_split == "*"):
            raise SuiteError(f"{where}: split {name!r}: a '*' name maps to '<dataset>/*' and only then")
        out[name] = (ds_key, loader_split)
    return out


def load_suite(name_or_path, *, suites_dir=SUITES_DIR) -> SuiteSpec:
    """Read and validate ``suites/<name>.yaml`` (or a path to a suite file)."""
    from benchmark.config.yaml_input import read_yaml

    text = str(name_or_path)
    path = Path(text) if text.endswith((".yaml", ".yml")) or os.sep in text else Path(suites_dir) / f"{text}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in Path(suites_dir).glob("*.yaml")) if Path(suites_dir).is_dir() else []
        raise SuiteError(
            f"suite {text!r}: {path} not found; known suites: {known} (the default 'embedded' suite is built "
            "from params.yaml 'data', not from a suite file)"
        )
    try:  # parsed once per process: cached on the path and a hash of the file's bytes
        key = (str(path), hashlib.sha256(path.read_bytes()).hexdigest())
    except OSError:
        key = None  # read_yaml names the problem
    if key in _LOADED:
        return _LOADED[key]
    raw = read_yaml(path, what="suite file", error=SuiteError)  # not UTF-8, empty, YAML syntax, tags, duplicates
    where = str(path)
    try:  # keys and types, field by field (the helpers of params, recipes and zoo entries)
        f = parse_config(SuiteFile, raw, where)
    except ValueError as e:
        raise SuiteError(str(e)) from None
    datasets = _check_datasets(where, f.datasets)
    splits = _check_splits(where, f.splits, datasets)
    recipes = _check_recipes(where, f.recipes, f.select_by)
    spec = SuiteSpec(
        name=path.stem,
        path=path,
        description=f.description,
        num_classes=f.num_classes,
        select_by=f.select_by,
        zoo=Path(f.zoo),
        datasets=datasets,
        splits=splits,
        recipes=recipes,
    )
    required = ["val", "test"] + (["train"] if spec.trains() else [])
    if [s for s in required if s not in splits]:
        raise SuiteError(f"{where}: splits must include {required} (train because a recipe trains)")
    if key is not None:
        _LOADED[key] = spec
    return spec


def list_suites(suites_dir=SUITES_DIR) -> list[str]:
    """The suites defined in ``suites_dir`` (one ``<name>.yaml`` each), sorted."""
    return sorted(p.stem for p in Path(suites_dir).glob("*.yaml"))
