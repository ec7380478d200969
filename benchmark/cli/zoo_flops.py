"""Command ``flops`` (registered in :mod:`benchmark.cli.main`; also ``python -m benchmark.cli.zoo_commands``), and
the FLOPs counts that ``validate-zoo`` (:mod:`benchmark.cli.zoo_commands`) reports.

``flops ARCH [--img-size N] [--suite NAME | --num-classes C] [--json]``: GFLOPs (fvcore multiply-adds, as
published GMACs) and parameters of a timm architecture (or ``torchvision:<builder>``),
built without weights with the classifier the pipeline builds: the classes of the suite
(``--suite``; default the one ``./params.yaml`` runs, i.e. the embedded default's 10 in the
repository root; 1000 without either).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

# the digits 0-9 of the embedded default (benchmark.data.embedded), whose pipeline reads its classes from results/data;
# tests/docs/test_tutorials.py checks that `flops` with them counts what the run's models.csv holds
EMBEDDED_CLASSES = 10


def _err(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)


@functools.cache
def arch_flops(arch: str, img_size: int, num_classes: int = 1000) -> dict:
    """GFLOPs and parameters of timm ``arch`` (``name`` or ``name.tag``) at ``img_size``, built without weights
    (:func:`benchmark.models.cost.unweighted_cost`)."""
    import timm

    from benchmark.models.cost import unweighted_cost
    from benchmark.models.factory import timm_kwargs

    if not timm.is_model(arch):
        close = timm.list_models(f"*{arch.split('.')[0].split('_')[0]}*")[:8]
        raise ValueError(f"unknown timm architecture {arch!r}; similar names: {close}")
    try:
        cost = unweighted_cost(
            lambda: timm.create_model(arch, pretrained=False, num_classes=num_classes, **timm_kwargs(arch, img_size)),
            img_size,
        )
    except Exception as e:  # wrong size for the architecture, unknown tag, ...
        raise ValueError(f"{arch} cannot run at {img_size}x{img_size} ({type(e).__name__}: {e})") from None
    return {"arch": arch, "img_size": img_size, "num_classes": num_classes, **cost}


@functools.cache
def torchvision_flops(arch: str, img_size: int, num_classes: int = 1000, weights: str | None = None) -> dict:
    """GFLOPs and parameters of torchvision builder ``arch`` with the structure of ``weights``
    (``<Enum>.<checkpoint>``; default: the builder's DEFAULT), built without weights
    (:func:`benchmark.models.cost.unweighted_cost`)."""
    import torchvision.models

    from benchmark.models import torchvision_zoo
    from benchmark.models.cost import unweighted_cost
    from benchmark.models.zoo import resolve_torchvision, torchvision_builders

    if weights is None:
        if arch not in torchvision_builders():
            raise ValueError(f"unknown torchvision classification model {arch!r}")
        enum = torchvision.models.get_model_weights(arch)
        weights = f"{enum.__name__}.{enum.DEFAULT.name}"
    w = resolve_torchvision(f"torchvision model {arch!r}", arch, weights)

    def build():
        model = torchvision_zoo.build(arch, arch, w, pretrained=False)
        if num_classes != model.num_classes:
            model.reset_classifier(num_classes)
        return model

    try:
        cost = unweighted_cost(build, img_size)
    except Exception as e:  # wrong size for the architecture, ...
        raise ValueError(f"torchvision {arch} cannot run at {img_size}x{img_size} ({type(e).__name__}: {e})") from None
    return {
        "arch": f"torchvision:{arch}",
        "weights": weights,
        "img_size": img_size,
        "num_classes": num_classes,
        **cost,
        "published_gflops": torchvision_zoo.published_gflops(w),
    }


def entry_flops(entry, num_classes: int = 1000) -> dict:
    """:func:`arch_flops` (timm) or :func:`torchvision_flops` of a zoo entry with a ``num_classes`` head: the model
    :func:`benchmark.models.factory.create` builds for a suite of that many classes, counted as the cost stage does."""
    if entry.init_kind == "torchvision":
        return torchvision_flops(entry.arch, entry.img_size, num_classes, weights=entry.init_source)
    return arch_flops(entry.arch, entry.img_size, num_classes)


# one fvcore count per model structure and process: (torchvision?, arch, img_size, weights) -> count (its classes in
# its "num_classes")
_COUNTED: dict[tuple, dict] = {}


def entry_heads(entry, classes) -> list[tuple[int, dict]]:
    """:func:`entry_flops` of ``entry`` with each head of ``classes`` (ascending), one counted with fvcore and the
    others from it: a head's parameters counted on the model built on the meta device, and, when the classifier is
    one ``nn.Linear`` (timm's and torchvision's), its GFLOPs as the count's plus the multiply-adds of the extra outputs
    (``in_features`` each per image, as fvcore counts a linear layer); any other head is counted again. The count is
    kept per model structure for the process: the same architecture at the same size in another zoo file (another
    suite, another number of classes) is not traced again."""
    import torch
    from torch import nn

    from benchmark.models import factory
    from benchmark.models.cost import count_params

    classes = sorted(classes)
    tv = entry.init_kind == "torchvision"
    key = (tv, entry.arch, entry.img_size, entry.init_source if tv else None)
    if key not in _COUNTED:
        _COUNTED[key] = entry_flops(entry, classes[0])
    counted = _COUNTED[key]
    counted_nc = counted["num_classes"]
    out = []
    for nc in classes:
        if nc == counted_nc:
            out.append((nc, counted))
            continue
        with torch.device("meta"):
            model = factory.create(entry, nc, load_weights=False)
        head = model.get_classifier() if hasattr(model, "get_classifier") else None
        if isinstance(head, nn.Linear):
            gflops = counted["gflops"] + (nc - counted_nc) * head.in_features / 1e9
            out.append((nc, {**counted, "num_classes": nc, "params": count_params(model), "gflops": gflops}))
        else:
            out.append((nc, entry_flops(entry, nc)))
    return out


def suite_classes(suite: str, suites_dir="suites") -> int:
    """The classes of ``suite`` (its models' heads): the embedded default's digits, or the suite file's ``num_classes``;
    ``ValueError`` naming an unknown suite."""
    if suite == "embedded":
        return EMBEDDED_CLASSES
    from benchmark.data.paper.suites import SuiteError, load_suite

    try:
        return load_suite(suite, suites_dir=suites_dir).num_classes
    except SuiteError as e:
        raise ValueError(str(e)) from None


def _params_suite(params: Path) -> str | None:
    """The suite ``params`` (a params.yaml) runs, if it is readable and names one."""
    from benchmark.models.zoo import load_yaml

    try:
        raw = load_yaml(params) if params.is_file() else None
    except (ValueError, OSError):
        return None
    return str(raw["suite"]) if isinstance(raw, dict) and isinstance(raw.get("suite"), str) else None


def default_img_size(arch: str) -> int:
    """The pretrained config's input size of ``arch`` (224 when it has none)."""
    import timm

    if arch.startswith("torchvision:"):
        import torchvision.models

        try:
            return int(torchvision.models.get_model_weights(arch.partition(":")[2]).DEFAULT.transforms().crop_size[0])
        except ValueError:  # unknown builder: reported by torchvision_flops
            return 224
    try:
        cfg = timm.get_pretrained_cfg(arch)
    except RuntimeError:  # unknown tag: reported by arch_flops
        cfg = None
    return int(cfg.input_size[-1]) if cfg is not None and cfg.input_size else 224


def add_flops_command(subparsers) -> None:
    """Register ``flops`` (GFLOPs and parameters of an architecture, no weights) in ``subparsers``."""
    p = subparsers.add_parser(
        "flops",
        help="GFLOPs and parameters of a timm architecture (no weights needed)",
        description="Build a timm architecture without weights and print its GFLOPs (fvcore multiply-adds, "
        "comparable to published GMACs; attention matmuls counted) and its parameters.",
    )
    p.add_argument(
        "arch",
        metavar="ARCH",
        help="timm architecture, optionally with a pretrained tag (resnet50, vit_base_patch16_224.augreg_in1k), "
        "or torchvision:<builder> (torchvision:convnext_base)",
    )
    p.add_argument(
        "--img-size",
        type=int,
        default=None,
        metavar="N",
        help="square input resolution (default: the pretrained input size, else 224)",
    )
    p.add_argument(
        "--suite",
        metavar="NAME",
        help="count the classifier the pipeline builds for this suite ('embedded' or "
        "suites/<NAME>.yaml; default: the suite of ./params.yaml)",
    )
    p.add_argument(
        "--num-classes",
        type=int,
        default=None,
        metavar="C",
        help="classifier outputs (default: the suite's classes; 1000 without a suite)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run_flops)


def _flops_classes(args) -> tuple[int, str]:
    """(classes, where they come from) of ``flops``: --num-classes, else --suite, else ./params.yaml's suite, else
    1000."""
    if getattr(args, "num_classes", None) is not None:
        return args.num_classes, "--num-classes"
    suite, where = getattr(args, "suite", None), "--suite"
    if suite is None:
        suite, where = _params_suite(Path("params.yaml")), "params.yaml"
    if suite is None:
        return 1000, "no --suite and no params.yaml: an ImageNet head"
    return suite_classes(suite), f"suite {suite}, {where}"


def run_flops(args) -> int:
    """``flops``: build the architecture without weights and print its GFLOPs and parameters; the exit status."""
    size = args.img_size if args.img_size is not None else default_img_size(args.arch)
    try:
        classes, source = _flops_classes(args)
    except ValueError as e:
        _err(f"--suite: {e}")
        return 2
    if size < 8 or classes < 1:
        _err(f"--img-size must be >= 8 and --num-classes >= 1, got {size} and {classes}")
        return 2
    try:
        if args.arch.startswith("torchvision:"):
            res = torchvision_flops(args.arch.partition(":")[2], size, classes)
        else:
            res = arch_flops(args.arch, size, classes)
    except ValueError as e:  # ZooError included
        _err(str(e))
        return 2
    if args.json:
        print(json.dumps(res))
    else:
        print(
            f"{res['arch']} @ {size}x{size}, {classes} classes ({source}): {res['gflops']:.4g} GFLOPs (fvcore "
            f"multiply-adds), {res['params'] / 1e6:.3f} M parameters"
        )
    return 0
