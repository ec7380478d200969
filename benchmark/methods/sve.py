"""Singular Value Ensemble (SVE, arXiv 2601.22068) for timm classifiers.

Every adapted weight ``W = U S V^T`` keeps its pretrained singular vectors frozen;
each of ``M`` members trains its own singular values ``S^(m) = S (1 + eps^(m))``,
``eps^(m) ~ N(0, sigma_init^2 I)``, its own bias and its own linear head, drawn from its own generator
(:func:`member_generator`), so member ``m`` starts the same whatever ``M``
(``member_streams=False``: one generator for all members, the former draws). All
members run in one forward: the input is repeated ``M`` times along the batch
(member-major; channels-last at inference when pointwise convs are adapted, as
their outputs are) and every adapted layer applies each member's singular values
to its own rows (see :mod:`benchmark.methods.sve_layers`). Non-adapted layers run
unchanged on the ``M B`` batch.

Which layers are adapted (regexes searched in ``named_modules()`` names):

* ViTs (a ``nn.Linear`` named ``*.attn.qkv`` exists): :data:`VIT_PATTERNS`, the
  attention ``qkv``/``proj`` and MLP ``fc1``/``fc2`` projections. A fused ``qkv``
  is split into its q, k and v blocks (``split_qkv=True``), each with its own SVD,
  as in the paper's count of ``6d`` singular values and ``9d`` biases per block.
* Otherwise (CNNs): every pointwise ``nn.Conv2d`` (1x1, groups 1, no padding),
  e.g. ``conv_pw``, ``conv_pwl`` and ``conv_head`` of ``tf_efficientnet_lite0``.
* ``patterns=[...]``: exactly the ``nn.Linear``/``nn.Conv2d`` layers whose names
  match; each pattern must match a layer, and every match must be adaptable.

Diversity: members must not start as exact clones, since the same gradient would
then keep them clones through training. The default ``sigma_init`` =
:data:`SIGMA_INIT` (0.01) is the authors' own (``init_std`` of the released
``moturkoglu/Singular-Value-Ensemble``, commit 83e7763; the paper gives the
multiplicative form but no value). ``sigma_init = 0`` is accepted only when the
member heads are drawn independently (a fresh head per member); with the
backbone's own head copied into every member (``reuse_head`` and matching class
counts, e.g. ImageNet) and ``M > 1`` it is refused (:func:`check_diversity`).

BatchNorm: the backbone is frozen, so its BatchNorm layers stay in eval mode
(running statistics, per-sample) even in ``train()``; training-mode statistics
would mix the members of the stacked batch.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from benchmark.methods.sve_layers import MODES, SVEConv1x1, SVELayer, SVELinear, is_adaptable, is_pointwise_conv

SIGMA_INIT = 0.01  # the authors' released default (init_std); see the module docstring
VIT_PATTERNS = (r"\.attn\.qkv$", r"\.attn\.proj$", r"\.mlp\.fc1$", r"\.mlp\.fc2$")
QKV_NAME = re.compile(r"(^|\.)qkv$")


def select_layers(model: nn.Module, patterns: Sequence[str] | None = None, skip: Sequence[str] = ()) -> list[str]:
    """Names of the layers SVE adapts in ``model`` (module order), never those in ``skip``; see the module docstring."""
    weight_layers = {n: m for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d)) and n not in skip}
    adaptable = [n for n, m in weight_layers.items() if is_adaptable(m)]
    if patterns is None:
        if any(re.search(VIT_PATTERNS[0], n) and isinstance(weight_layers[n], nn.Linear) for n in adaptable):
            patterns = VIT_PATTERNS
        else:
            chosen = [n for n, m in weight_layers.items() if is_pointwise_conv(m)]
            if not chosen:
                raise ValueError(
                    f"{type(model).__name__} has no default SVE layers (no '*.attn.qkv' Linear, no pointwise "
                    f"conv); pass patterns=[...] naming some of: {_some(adaptable)}"
                )
            return chosen
    if isinstance(patterns, str) or not patterns:
        raise ValueError(f"patterns must be a non-empty list of regexes, got {patterns!r}")
    chosen: set[str] = set()
    for pattern in patterns:
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise ValueError(f"SVE pattern {pattern!r} is not a valid regex: {e}") from e
        hits = [n for n in weight_layers if rx.search(n)]
        if not hits:
            raise ValueError(
                f"SVE pattern {pattern!r} matches no Linear/Conv2d layer of {type(model).__name__}; "
                f"adaptable layers include: {_some(adaptable)}"
            )
        bad = [n for n in hits if n not in adaptable]
        if bad:
            raise ValueError(
                f"SVE pattern {pattern!r} matches layers SVE cannot adapt (only nn.Linear and 1x1 convs with "
                f"groups=1, padding 0): {_some(bad)}"
            )
        chosen.update(hits)
    return [n for n in weight_layers if n in chosen]


def _some(names: Sequence[str], k: int = 8) -> str:
    shown = ", ".join(names[:k])
    return f"{shown}, ... ({len(names)} in all)" if len(names) > k else shown or "(none)"


def check_diversity(members: int, sigma_init: float, head_copied: bool, where: str = "SVE") -> None:
    """Refuse a configuration whose ``members`` would be exact clones forever.

    With ``sigma_init == 0`` every member starts from the same singular values; if
    they also share one head (``head_copied``), they compute the same function,
    get the same gradients and stay identical: the user would silently get one model.
    """
    if members > 1 and sigma_init == 0 and head_copied:
        raise ValueError(
            f"{where}: sigma_init = 0 with the backbone's own head copied into all {members} members makes "
            f"every member an exact clone of the others for the whole training (one model, no ensemble); "
            f"use sigma_init > 0 (the authors' default is {SIGMA_INIT}) or fresh per-member heads"
        )


def member_generator(seed: int, member: int) -> torch.Generator:
    """The generator of member ``member``'s initial noise and head: one stream per member, whatever ``M``."""
    return torch.Generator().manual_seed(seed * 100_003 + member)


def check_members(members) -> int:
    """``members`` (M) as an integer >= 1; ``ValueError`` otherwise."""
    if isinstance(members, bool) or not isinstance(members, int) or members < 1:
        raise ValueError(f"members must be an integer >= 1, got {members!r}")
    return members


def _check_settings(
    backbone: nn.Module,
    *,
    sigma_init: float,
    num_classes: int | None,
    mode: str,
    pretrained: bool,
    allow_random_init: bool,
) -> None:
    """:class:`SingularValueEnsemble`'s settings checked before it changes the backbone: ``ValueError`` (``TypeError``
    for a backbone that is not a timm model) naming the setting."""
    if not (isinstance(sigma_init, (int, float)) and math.isfinite(sigma_init) and sigma_init >= 0):
        raise ValueError(f"sigma_init must be a finite number >= 0, got {sigma_init!r}")
    if num_classes is not None and (
        isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1
    ):
        raise ValueError(f"num_classes must be an integer >= 1 or None, got {num_classes!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not pretrained and not allow_random_init:
        raise ValueError(
            "SVE needs a pretrained backbone (its singular vectors are the basis all members share; from a "
            "random init SVE does poorly): load weights and pass pretrained=True, or pass "
            "allow_random_init=True for tests and parameter counts"
        )
    if not (hasattr(backbone, "get_classifier") and hasattr(backbone, "reset_classifier")):
        raise TypeError(
            f"SVE wraps timm models (get_classifier/reset_classifier); {type(backbone).__name__} has neither"
        )


def _head_input(backbone: nn.Module, head: nn.Module, num_classes: int | None) -> tuple[int, str | None]:
    """(feature dimension D, name of the linear classifier or None) of ``backbone`` whose classifier is ``head``;
    ``ValueError`` for a classifier that is not ``nn.Linear`` without ``num_classes``."""
    if isinstance(head, nn.Linear):
        return head.in_features, next(n for n, m in backbone.named_modules() if m is head)
    if num_classes is not None:
        return backbone.num_features, None
    raise ValueError(f"the backbone's classifier is {type(head).__name__}, not nn.Linear: pass num_classes")


def _member_draws(seed: int, members: int, member_streams: bool):
    """``draw(fn, *shape)``: a ``(members, *shape)`` draw of ``fn`` (``torch.randn``, ``torch.rand``), each member's
    rows from its own generator (:func:`member_generator`) or, without ``member_streams``, all from one."""
    gen = torch.Generator().manual_seed(seed)  # member_streams=False: one stream for all members (draws depend on M)
    gens = [member_generator(seed, m) for m in range(members)]  # member m's draws do not depend on M

    def draw(fn, *shape):
        return (
            torch.stack([fn(*shape, generator=g) for g in gens])
            if member_streams
            else fn(members, *shape, generator=gen)
        )

    return draw


def _adapt_layer(backbone: nn.Module, name: str, draw, *, sigma_init: float, split_qkv: bool, mode: str) -> None:
    """Replace layer ``name`` of ``backbone`` by its SVE layer, the members' noise ``eps`` drawn with ``draw``
    (a fused ``qkv`` split in three blocks with ``split_qkv``)."""
    old = backbone.get_submodule(name)
    chunks = 3 if split_qkv and isinstance(old, nn.Linear) and QKV_NAME.search(name) else 1
    out = old.weight.shape[0]
    rank = min(out // chunks, old.weight[0].numel())
    eps = draw(torch.randn, chunks * rank) * sigma_init
    new = (
        SVEConv1x1(old, eps, mode=mode)
        if isinstance(old, nn.Conv2d)
        else SVELinear(old.weight, old.bias, eps, chunks=chunks, mode=mode)
    )
    parent, _, child = name.rpartition(".")
    setattr(backbone.get_submodule(parent) if parent else backbone, child, new)


class SingularValueEnsemble(nn.Module):
    """``M`` SVE members around a timm backbone; ``forward(x)`` returns logits (M, B, C).

    ``backbone`` is modified in place (adapted layers replaced, classifier removed)
    and frozen; invalid arguments raise before it is touched. ``pretrained``
    states that it holds pretrained weights; without them SVE has no meaningful
    basis and construction fails unless ``allow_random_init=True`` (tests,
    parameter counts). Member heads copy the backbone's linear classifier when
    ``reuse_head`` and the class counts agree, else they are drawn independently
    from U(-1/sqrt(D), 1/sqrt(D)) with ``seed``.
    ``member_streams``: each member's noise and head from its own generator (nested
    ensembles); False draws all members from one generator (as before nesting).
    ``mode`` chooses the layer arithmetic (``auto``, ``factored`` or ``materialized``,
    see :mod:`benchmark.methods.sve_layers`); ``auto`` trains factored and runs
    inference on cached member weights where they pay.
    """

    def __init__(
        self,
        backbone: nn.Module,
        *,
        members: int,
        num_classes: int | None = None,
        patterns: Sequence[str] | None = None,
        sigma_init: float = SIGMA_INIT,
        seed: int = 0,
        pretrained: bool,
        allow_random_init: bool = False,
        reuse_head: bool = True,
        split_qkv: bool = True,
        mode: str = "auto",
        member_streams: bool = True,
    ):
        super().__init__()
        self.members = check_members(members)
        _check_settings(
            backbone,
            sigma_init=sigma_init,
            num_classes=num_classes,
            mode=mode,
            pretrained=pretrained,
            allow_random_init=allow_random_init,
        )
        head = backbone.get_classifier()
        dim, self.classifier_name = _head_input(backbone, head, num_classes)
        self.num_classes = num_classes or head.out_features
        head_copied = reuse_head and isinstance(head, nn.Linear) and head.out_features == self.num_classes
        check_diversity(self.members, sigma_init, head_copied)
        self.layer_names = select_layers(backbone, patterns, skip=(self.classifier_name,))  # fails before any change
        backbone.reset_classifier(0)
        backbone.requires_grad_(False)
        self.backbone_params = sum(p.numel() for p in backbone.parameters())

        draw = _member_draws(seed, self.members, member_streams)
        for name in self.layer_names:
            _adapt_layer(backbone, name, draw, sigma_init=sigma_init, split_qkv=split_qkv, mode=mode)
        self.backbone = backbone
        self.channels_last = any(isinstance(m, SVEConv1x1) for m in self.sve_layers())  # their output layout

        ref = self.sve_layers()[0].U
        if head_copied:
            w, b = head.weight.detach().expand(self.members, -1, -1), head.bias.detach().expand(self.members, -1)
        else:
            bound = 1 / math.sqrt(dim)
            w = (draw(torch.rand, self.num_classes, dim) * 2 - 1) * bound
            b = (draw(torch.rand, self.num_classes) * 2 - 1) * bound
        self.head_weight = nn.Parameter(w.to(device=ref.device, dtype=ref.dtype).clone())  # (M, C, D)
        self.head_bias = nn.Parameter(b.to(device=ref.device, dtype=ref.dtype).clone())  # (M, C)

    def first_members(self, members: int) -> SingularValueEnsemble:
        """A copy holding members ``0 .. members - 1`` of this ensemble (their parameters, cloned).

        Members are independent (own noise stream, own parameters), so the copy is the
        ensemble a ``members``-member run with the same seed and batches trains (nested SVE).
        """
        if isinstance(members, bool) or not isinstance(members, int) or not 1 <= members <= self.members:
            raise ValueError(f"members must be an integer in [1, {self.members}], got {members!r}")
        sub = copy.deepcopy(self)
        for layer in sub.sve_layers():
            layer.take_members(members)
        with torch.no_grad():
            sub.head_weight = nn.Parameter(self.head_weight[:members].detach().clone(), self.head_weight.requires_grad)
            sub.head_bias = nn.Parameter(self.head_bias[:members].detach().clone(), self.head_bias.requires_grad)
        sub.members = members
        return sub

    def sve_layers(self) -> list[SVELayer]:
        """The ensemble's SVE layers, in module order."""
        return [m for m in self.backbone.modules() if isinstance(m, SVELayer)]

    def forward(self, x: Tensor) -> Tensor:
        """Logits (M, B, C) of all members for ``x`` (B, ...)."""
        b = x.shape[0]
        stacked = x.repeat(self.members, *([1] * (x.dim() - 1)))
        if self.channels_last and x.dim() == 4 and not (self.training and torch.is_grad_enabled()):
            stacked = stacked.contiguous(memory_format=torch.channels_last)  # no layout copy at the first 1x1 conv
        feats = self.backbone(stacked)
        if feats.dim() != 2:
            raise RuntimeError(f"backbone without classifier returned shape {tuple(feats.shape)}, expected (M*B, D)")
        feats = feats.reshape(self.members, b, -1)
        return torch.baddbmm(self.head_bias.unsqueeze(1), feats, self.head_weight.transpose(1, 2))

    def train(self, mode: bool = True):
        """Set train/eval mode; the frozen backbone's BatchNorm layers always stay in eval mode."""
        super().train(mode)
        for m in self.backbone.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()
        return self

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Singular values, biases of the adapted layers and the member heads."""
        return [p for p in self.parameters() if p.requires_grad]

    def overhead(self) -> dict:
        """Parameter counts (from shapes) and overhead in % of the backbone.

        ``backbone``: pretrained backbone without its classifier. Per member:
        ``singular_values``, ``biases`` (adapted layers) and ``head``.
        ``trainable = M (singular_values + biases + head)``; ``extra = (M - 1)
        (singular_values + biases)``, what SVE adds over one model and what the
        paper's ``5 (M - 1) / (4 d)`` counts (no heads). ``percent = 100
        trainable / backbone``; ``percent_extra = 100 extra / backbone``.
        """
        layers = self.sve_layers()
        sv = sum(layer.singular_values[0].numel() for layer in layers)
        bias = sum(layer.bias[0].numel() for layer in layers)
        head = self.head_weight[0].numel() + self.head_bias[0].numel()
        trainable, extra = self.members * (sv + bias + head), (self.members - 1) * (sv + bias)
        return {
            "members": self.members,
            "backbone": self.backbone_params,
            "singular_values": sv,
            "biases": bias,
            "head": head,
            "trainable": trainable,
            "extra": extra,
            "percent": 100 * trainable / self.backbone_params,
            "percent_extra": 100 * extra / self.backbone_params,
        }

    def export_member(self, member: int) -> nn.Module:
        """Member ``member`` as a standalone dense timm model in eval mode (logits (B, C)), e.g. for FLOP counts."""
        if isinstance(member, bool) or not isinstance(member, int) or not 0 <= member < self.members:
            raise ValueError(f"member must be an integer in [0, {self.members}), got {member!r}")
        if self.classifier_name is None:
            raise ValueError("the backbone had no linear classifier to put a member head back into")
        dense = {id(layer): layer.to_dense(member) for layer in self.sve_layers()}
        model = copy.deepcopy(self.backbone, memo=dense)  # the copy takes the dense layers in place of SVE layers
        head = nn.Linear(
            self.head_weight.shape[2], self.num_classes, device=self.head_weight.device, dtype=self.head_weight.dtype
        )
        with torch.no_grad():
            head.weight.copy_(self.head_weight[member])
            head.bias.copy_(self.head_bias[member])
        parent, _, child = self.classifier_name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, head)
        model.num_classes = self.num_classes
        return model.eval()


def sve_from_timm(
    arch: str,
    *,
    members: int,
    num_classes: int | None = None,
    pretrained_state_dict: Mapping[str, Tensor] | str | None = None,
    allow_random_init: bool = False,
    patterns: Sequence[str] | None = None,
    sigma_init: float = SIGMA_INIT,
    seed: int = 0,
    **kwargs,
) -> SingularValueEnsemble:
    """Build timm ``arch``, load ``pretrained_state_dict`` (mapping or file) and wrap it in an SVE.

    Keyword arguments that :class:`SingularValueEnsemble` knows (``split_qkv``,
    ``mode``, ``reuse_head``) go to it; the rest (e.g. ``img_size``) to
    ``timm.create_model``. The backbone keeps its pretrained head, so
    ``num_classes`` different from it gives fresh member heads.
    """
    import timm

    check_members(members)
    sve_keys = {"split_qkv", "mode", "reuse_head"}
    sve_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in sve_keys}
    torch.manual_seed(seed)
    backbone = timm.create_model(arch, pretrained=False, **kwargs)
    if pretrained_state_dict is not None:
        load_backbone_weights(backbone, pretrained_state_dict)
    return SingularValueEnsemble(
        backbone,
        members=members,
        num_classes=num_classes,
        patterns=patterns,
        sigma_init=sigma_init,
        seed=seed,
        pretrained=pretrained_state_dict is not None,
        allow_random_init=allow_random_init,
        **sve_kwargs,
    )


def load_backbone_weights(model: nn.Module, source: Mapping[str, Tensor] | str) -> None:
    """Load a state_dict (mapping, ``.safetensors`` or ``torch.load(weights_only=True)`` file) strictly.

    Keys are matched by name; if the names differ but the counts agree, tensors
    are matched in order and every shape must agree.
    """
    where = "pretrained_state_dict"
    if not isinstance(source, Mapping):
        where = str(source)
        if where.endswith(".safetensors"):
            from safetensors.torch import load_file

            source = load_file(where)
        else:
            source = torch.load(where, map_location="cpu", weights_only=True)
            if isinstance(source, Mapping) and isinstance(source.get("state_dict"), Mapping):
                source = source["state_dict"]
    dst = model.state_dict()
    if set(source) != set(dst):
        if len(source) != len(dst):
            raise ValueError(
                f"{where}: {len(source)} tensors, but {type(model).__name__} has {len(dst)}; wrong architecture?"
            )
        pairs = zip(source.items(), dst.items())
        source = {}
        for (sk, sv), (dk, dv) in pairs:
            if tuple(sv.shape) != tuple(dv.shape):
                raise ValueError(
                    f"{where}: tensor {sk} {tuple(sv.shape)} does not fit {dk} {tuple(dv.shape)} (matched in order)"
                )
            source[dk] = sv
    model.load_state_dict(source, strict=True)
