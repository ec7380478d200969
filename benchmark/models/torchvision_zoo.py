"""torchvision models in the zoo: ``init: torchvision:<Weights enum>.<checkpoint>``.

An entry such as ``{arch: convnext_base, init: torchvision:ConvNeXt_Base_Weights.IMAGENET1K_V1}``
names torchvision's model builder (``arch``, a name of
``torchvision.models.list_models(module=torchvision.models)``) and one of its
weights (a member of ``torchvision.models.get_model_weights(arch)``). It gets:

* torchvision's own builder and weights (``torchvision.models.get_model(arch,
  weights=...)``): the published Asymmetric Duos numbers come from these
  checkpoints. torchvision downloads the weights into ``torch.hub.get_dir()``
  on first use; the file is read with ``weights_only=True``
  (``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` while the builder loads it);
* the weights' own evaluation transform, ``weights.transforms()`` (at another
  ``img_size`` the same transform with the resize scaled alike);
* FLOPs counted with fvcore (:func:`benchmark.models.cost.count_flops`) on the built
  model, as for timm models; torchvision's published ``_ops`` are the same
  multiply-add counts.

``DEFAULT`` is refused: it names different checkpoints in different torchvision
versions. Builders whose pretrained model differs in structure from the one
built without weights (auxiliary heads, input transform) or whose classifier is
not a linear layer are refused too (:data:`benchmark.models.zoo.UNSUPPORTED`).

The model is wrapped in :class:`TorchvisionClassifier`, which gives it the
classifier interface of timm models the methods use (``get_classifier``,
``reset_classifier``, ``num_features``, ``forward_features``, ``forward_head``):
its last linear layer (under ``fc``, ``classifier``, ``head`` or ``heads``, as
the published code's head replacement finds it) becomes ``head``, and a new head
for a suite's class count replaces only that layer.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

from benchmark.models import hub
from benchmark.models.zoo import ZooError  # noqa: F401
from benchmark.models.zoo import resolve_torchvision as resolve

HEAD_ATTRS = ("fc", "classifier", "head", "heads")


def entry_weights(entry):
    """The weights member of a ``torchvision:`` zoo entry."""
    return resolve(f"zoo entry {entry.name!r}", entry.arch, entry.init_source)


class TorchvisionClassifier(nn.Module):
    """A torchvision classification model with timm's classifier interface.

    ``body`` is the torchvision model with its last linear layer replaced by
    ``nn.Identity`` (its output: the pre-logits features, ``num_features`` wide);
    ``head`` is that linear layer. ``drop_rate`` is dropout before the head, as
    timm's ``drop_rate`` (no weights).
    """

    def __init__(self, model: nn.Module, head_path: str, weights, drop_rate: float = 0.0):
        super().__init__()
        head = model.get_submodule(head_path)
        model.set_submodule(head_path, nn.Identity())
        self.body = model
        self.head_drop = nn.Dropout(drop_rate)
        self.head = head
        self.num_features = head.in_features
        self.num_classes = head.out_features
        self.tv_weights = weights  # the torchvision weights member (its transforms and meta)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Images -> the body's pooled features (timm's name for it)."""
        return self.body(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Features -> logits, through the head's dropout (``pre_logits``: the features after it)."""
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images -> logits."""
        return self.forward_head(self.forward_features(x))

    def get_classifier(self) -> nn.Module:
        """The linear head (timm's name for it)."""
        return self.head

    def reset_classifier(self, num_classes: int) -> None:
        """A new linear head with ``num_classes`` outputs (``0``: none, the model returns its features)."""
        self.head = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()
        self.num_classes = num_classes


def head_path(model: nn.Module, arch: str = "") -> str:
    """Dotted path of the classifier: the last ``nn.Linear`` under ``fc``, ``classifier``, ``head`` or ``heads``."""
    for attr in HEAD_ATTRS:
        layer = getattr(model, attr, None)
        if isinstance(layer, nn.Linear):
            return attr
        if isinstance(layer, nn.Sequential):
            linear = [name for name, m in layer.named_children() if isinstance(m, nn.Linear)]
            if linear:
                return f"{attr}.{linear[-1]}"
    raise ZooError(f"torchvision model {arch or type(model).__name__!r}: no linear classifier under {list(HEAD_ATTRS)}")


def _builder_kwargs(arch: str, weights) -> dict:
    """What the builder sets from the weights besides loading them (so that a model built without
    weights has the pretrained model's structure): the class count and, for ViT, the image size."""
    kwargs = {"num_classes": len(weights.meta["categories"])}
    if arch.startswith("vit_"):
        kwargs["image_size"] = weights.meta["min_size"][0]
    return kwargs


@contextmanager
def _weights_only_load():
    """torch.load reads tensors only, whatever its caller passes (torch's TORCH_FORCE_WEIGHTS_ONLY_LOAD)."""
    key = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"
    old = os.environ.get(key)
    os.environ[key] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


def weight_file(weights) -> Path:
    """Where torchvision caches the weights' file (``torch.hub.get_dir()/checkpoints``)."""
    from urllib.parse import urlparse

    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(weights.url).path)


def _pretrained_model(name: str, arch: str, weights) -> nn.Module:
    """torchvision's builder with its weights; without network, from torch's cache or a plain error at once."""
    from urllib.parse import urlparse

    import torchvision.models

    cached = weight_file(weights)
    if not cached.is_file():
        url = urlparse(weights.url)
        proxy = urlparse(os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy") or "")
        host, port = (proxy.hostname, proxy.port or 80) if proxy.hostname else (url.hostname, 443)
        if hub.hub_offline() or not hub.reachable(host, port):
            why = "HF_HUB_OFFLINE is set" if hub.hub_offline() else f"no network: {host}:{port} did not answer"
            raise ZooError(
                f"zoo entry {name!r}: cannot load torchvision weights {weights} ({why} and {cached} is not in "
                "torch's cache). Download them once with network or point TORCH_HOME at a cache that has them."
            )
    try:
        with _weights_only_load():
            return torchvision.models.get_model(arch, weights=weights)
    except Exception as e:  # download, hash or unpickling errors come in many types
        raise ZooError(
            f"zoo entry {name!r}: cannot load torchvision weights {weights} ({type(e).__name__}: {e})"
        ) from e


def build(name: str, arch: str, weights, *, pretrained: bool, drop_rate: float = 0.0) -> TorchvisionClassifier:
    """The wrapped model with the weights' own head (``pretrained=False``: random weights, same structure)."""
    import torchvision.models

    if pretrained:
        model = _pretrained_model(name, arch, weights)
    else:
        model = torchvision.models.get_model(arch, weights=None, **_builder_kwargs(arch, weights))
    return TorchvisionClassifier(model, head_path(model, arch), weights, drop_rate=float(drop_rate))


def create(entry, num_classes: int, *, load_weights: bool, drop_rate: float, head_seed: int) -> TorchvisionClassifier:
    """:func:`benchmark.models.factory.create` for a ``torchvision:`` entry (same seeding as for timm models)."""
    weights = entry_weights(entry)
    torch.manual_seed(entry.seed if not load_weights else head_seed)
    model = build(entry.name, entry.arch, weights, pretrained=load_weights, drop_rate=drop_rate)
    if num_classes != model.num_classes:
        if load_weights:
            torch.manual_seed(head_seed)
        model.reset_classifier(num_classes)
    return model


def eval_transform(weights, img_size: int | None = None):
    """``weights.transforms()``; at another ``img_size`` the same transform with the resize scaled alike."""
    from torchvision.transforms._presets import ImageClassification

    t = weights.transforms()
    crop, resize = t.crop_size[0], t.resize_size[0]
    if img_size is None or img_size == crop:
        return t
    return ImageClassification(
        crop_size=img_size,
        resize_size=int(round(img_size * resize / crop)),
        mean=t.mean,
        std=t.std,
        interpolation=t.interpolation,
        antialias=t.antialias,
    )


def data_config(weights, img_size: int | None = None) -> dict:
    """The transform's settings in timm's data-config keys (input_size, interpolation, mean, std, crop_pct,
    crop_mode)."""
    t = eval_transform(weights, img_size)
    crop, resize = t.crop_size[0], t.resize_size[0]
    return {
        "input_size": (3, crop, crop),
        "interpolation": t.interpolation.value,
        "mean": tuple(t.mean),
        "std": tuple(t.std),
        "crop_pct": crop / resize,
        "crop_mode": "center",
    }


def published_gflops(weights) -> float:
    """torchvision's published multiply-adds (``meta["_ops"]``, GFLOPS) at the weights' own resolution."""
    return float(weights.meta["_ops"])
