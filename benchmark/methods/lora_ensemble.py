"""LoRA-Ensemble (Halbheer et al., 2024): ``M`` LoRA adapters on the attention of one frozen ViT.

Every adapted projection ``y = W x + b`` becomes, for member ``m``,

    y = W x + b + (alpha / r) B_m A_m x,   A_m (r, in), B_m (out, r)

with ``W``, ``b`` and the rest of the ViT frozen and shared; ``alpha`` defaults
to ``r`` (scale 1: the authors' code adds ``w_b(w_a(x))`` unscaled). Each member
has its own linear head, drawn like ``nn.Linear``'s (``U(-1/sqrt(D), 1/sqrt(D))``,
seeded). ``B_m = 0``, so every member starts with the pretrained features.

Variants (:data:`VARIANTS`; the cost.json ``variant`` and the method name say which):

``published`` (default)
    As the authors' code (``prs-eth/LoRA-Ensemble``, ``models/lora_ensemble.py``
    and ``models/lora.py``) and its released settings: q, k and v each get their
    own rank-``r`` adapter (timm's fused ``attn.qkv`` is adapted as its three
    row blocks, ``A_q, A_k, A_v`` (r, d) and ``B_q, B_k, B_v`` (d, r)), plus one
    on the output projection ``attn.proj``; ``A`` is Xavier-uniform with gain 10
    (``"weight_init": "xavier_uniform", "xavier_gain": 10`` in every released
    experiment setting), ``U(-g sqrt(6 / (in + r)), +)``, drawn per member and block.
``fused-qkv``
    This project's earlier variant: one rank-``r`` adapter on the fused ``qkv``
    projection (and one on ``proj``), ``A`` with peft's default
    (Kaiming-uniform, ``a = sqrt(5)``: ``U(-1/sqrt(in), 1/sqrt(in))``), about 24x
    smaller than the published one at ViT-B (d = 768, r = 8).

Members are batched: the input is repeated ``M`` times along the batch
(member-major, rows ``[m B, (m + 1) B)`` are member ``m``'s) and each adapted
layer adds every member's update to its own rows; the forward returns (M, B, C).

Applies to ViTs only (a ``nn.Linear`` named ``*.attn.qkv``); anything else, e.g.
a CNN, raises ``ValueError`` naming the method and the model.

Cost (what fvcore counts on the wrapper): ``M`` forwards plus the adapters,
``GFLOPs = M (one forward + tokens * sum_layers r (k in + out)) / 1e9`` with ``k``
the adapter blocks of a layer (3 for a split ``qkv``, else 1). Training budget
(:mod:`benchmark.methods.budget`): ``M x`` the recipe's epochs over the train split (every member runs the whole
ViT on every image), the adapters and heads trained; it starts from the pretrained ViT (no zoo fine-tune).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.config.typed import check
from benchmark.methods import baselines as bl
from benchmark.methods.last_layer import linear_head, penultimate
from benchmark.methods.registry import Output, Training, register_cost, register_method
from benchmark.models import cost as costs
from benchmark.models.recipe import recipe_of
from benchmark.storage import store

METHOD = "LoRA-Ensemble"
TARGETS = (r"\.attn\.qkv$", r"\.attn\.proj$")
QKV = re.compile(r"(^|\.)qkv$")
INITS = ("xavier", "kaiming")
# variant -> (q, k, v adapted separately, A initialisation, Xavier gain)
VARIANTS = {"published": (True, "xavier", 10.0), "fused-qkv": (False, "kaiming", None)}
DEFAULT_VARIANT = "published"


def check_variant(variant, model_name: str = "") -> tuple[bool, str, float | None]:
    """The settings of LoRA-Ensemble variant ``variant`` (per-projection adapters, its name, the Xavier gain);
    ``ValueError`` naming the model."""
    if variant not in VARIANTS:
        raise ValueError(f"{METHOD} of model {model_name!r}: variant must be one of {list(VARIANTS)}, got {variant!r}")
    return VARIANTS[variant]


def target_layers(model: nn.Module, model_name: str, targets: Sequence[str] = TARGETS) -> list[str]:
    """Names of the attention projections to adapt; ``ValueError`` unless ``model`` is a ViT."""
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not any(re.search(TARGETS[0], n) for n in linears):
        raise ValueError(
            f"{METHOD} does not apply to model {model_name!r} ({type(model).__name__}): it has no attention "
            "projections (no nn.Linear '*.attn.qkv'); LoRA-Ensemble needs a ViT"
        )
    chosen = [n for n in linears if any(re.search(t, n) for t in targets)]
    if not chosen:
        raise ValueError(f"{METHOD} of model {model_name!r}: targets {list(targets)} match no nn.Linear layer")
    return chosen


def check_adapter(members, rank, alpha, model_name: str = "") -> None:
    """``members`` and ``rank`` integers >= 1 and ``alpha`` a finite number > 0; ``ValueError`` naming the model."""
    where = f"{METHOD} of model {model_name!r}"
    for key, v in (("members", members), ("rank", rank)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{where}: {key} must be an integer >= 1, got {v!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0 or not math.isfinite(alpha):
        raise ValueError(f"{where}: alpha must be a finite number > 0, got {alpha!r}")


def init_bound(init: str, fan_in: int, rank: int, gain: float | None = None) -> float:
    """Half-width of the uniform law of ``A`` (r, fan_in): Xavier-uniform with ``gain``, or peft's Kaiming default."""
    if init == "xavier":
        return float(gain) * math.sqrt(6.0 / (fan_in + rank))
    if init == "kaiming":
        return 1.0 / math.sqrt(fan_in)
    raise ValueError(f"{METHOD}: init must be one of {INITS}, got {init!r}")


class LoRAEnsembleLinear(nn.Module):
    """A frozen ``nn.Linear`` plus ``M`` low-rank updates per row block, applied to member-major stacked rows.

    ``chunks`` row blocks of the output (3 for a fused q/k/v projection) get one
    adapter each: ``lora_a`` (M, k, in, r) holds ``A_{m,j}^T``, ``lora_b`` (M, k,
    r, out / k) holds ``B_{m,j}^T``; block ``j`` of the output adds
    ``(alpha / r) B_{m,j} A_{m,j} x``.
    """

    def __init__(
        self,
        base: nn.Linear,
        members: int,
        rank: int,
        alpha: float,
        gen: torch.Generator,
        *,
        chunks: int = 1,
        init: str = "kaiming",
        gain: float | None = None,
    ):
        super().__init__()
        if base.out_features % chunks:
            raise ValueError(f"{METHOD}: cannot split {base.out_features} output features into {chunks} equal blocks")
        self.base = base.requires_grad_(False)
        self.chunks, self.rank = chunks, rank
        bound = init_bound(init, base.in_features, rank, gain)
        a = (torch.rand(members, chunks, rank, base.in_features, generator=gen) * 2 - 1) * bound  # A (r, in) per block
        self.lora_a = nn.Parameter(a.transpose(-1, -2).contiguous())
        self.lora_b = nn.Parameter(torch.zeros(members, chunks, rank, base.out_features // chunks))
        self.scale = alpha / rank

    def delta_weight(self, member: int) -> Tensor:
        """``(alpha / r) B_m A_m`` of member ``member`` as one (out, in) matrix (blocks stacked along the rows)."""
        return self.scale * torch.cat([(self.lora_a[member, j] @ self.lora_b[member, j]).T for j in range(self.chunks)])

    def forward(self, x: Tensor) -> Tensor:
        """Tokens (M B, T, D) -> (M B, T, out): the shared projection plus each member's low-rank update, member by
        member along the batch."""
        y = F.linear(x, self.base.weight, self.base.bias)
        m, k, d, r = self.lora_a.shape
        xm = x.reshape(m, -1, d)
        h = torch.bmm(xm, self.lora_a.permute(0, 2, 1, 3).reshape(m, d, k * r))  # (M, T, k r): all blocks' A at once
        t = h.shape[1]
        h = (
            h.view(m, t, k, r).transpose(1, 2).reshape(m * k, t, r)
        )  # one (T, r) @ (r, out / k) product per member block
        delta = torch.bmm(h, self.lora_b.reshape(m * k, r, -1)).view(m, k, t, -1).transpose(1, 2)  # (M, T, k, out / k)
        return y + self.scale * delta.reshape(y.shape)


class LoRAEnsemble(nn.Module):
    """(B, 3, S, S) -> (M, B, C) logits of ``M`` LoRA members around the frozen ViT ``model`` (changed in place).

    ``variant`` is one of :data:`VARIANTS` (module docstring); ``published`` by default.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        members: int,
        rank: int,
        alpha: float | None = None,
        targets: Sequence[str] = TARGETS,
        seed: int = 0,
        model_name: str = "",
        variant: str = DEFAULT_VARIANT,
    ):
        super().__init__()
        name = model_name or type(model).__name__
        alpha = float(rank) if alpha is None else alpha
        check_adapter(members, rank, alpha, name)
        split_qkv, init, gain = check_variant(variant, name)
        self.variant = variant
        head = linear_head(model, METHOD, name)
        self.layer_names = target_layers(model, name, targets)  # fails before the model is touched
        model.requires_grad_(False)
        gen = torch.Generator().manual_seed(int(seed))
        for layer in self.layer_names:
            parent, _, child = layer.rpartition(".")
            chunks = 3 if split_qkv and QKV.search(layer) else 1
            setattr(
                model.get_submodule(parent),
                child,
                LoRAEnsembleLinear(
                    model.get_submodule(layer), members, rank, alpha, gen, chunks=chunks, init=init, gain=gain
                ),
            )
        self.members, self.rank, self.model = members, rank, model
        bound = 1.0 / math.sqrt(head.in_features)
        self.head_weight = nn.Parameter(
            (torch.rand(members, head.in_features, head.out_features, generator=gen) * 2 - 1) * bound
        )
        self.head_bias = nn.Parameter((torch.rand(members, 1, head.out_features, generator=gen) * 2 - 1) * bound)

    def forward(self, x: Tensor) -> Tensor:
        """Images (B, 3, S, S) -> (M, B, C): every member's logits, the batch repeated once per member."""
        b = x.shape[0]
        f = penultimate(self.model, x.repeat(self.members, *([1] * (x.dim() - 1))))
        return torch.bmm(f.reshape(self.members, b, -1), self.head_weight) + self.head_bias

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Adapters and member heads."""
        return [p for p in self.parameters() if p.requires_grad]

    def adapter_macs(self, tokens: int) -> int:
        """Multiply-adds of one member's adapters for one image of ``tokens`` tokens."""
        layers = [m for m in self.model.modules() if isinstance(m, LoRAEnsembleLinear)]
        return tokens * sum(self.rank * (m.chunks * m.base.in_features + m.base.out_features) for m in layers)


# ---- the method: params.yaml baselines.lora_ensemble.<key> -> one output (registered; see
# benchmark.methods.baselines) ----


@dataclass(frozen=True)
class LoRAConfig:
    model: str
    members: int
    rank: int
    recipe: str
    alpha: float | None = field(default=None, metadata=check(above=0))
    variant: str = DEFAULT_VARIANT
    seed: int = bl.seed_field()
    splits: list[str] | None = bl.splits_field()


def check_lora(ctx, cfg: LoRAConfig) -> tuple[float, list[str]]:
    """The entry checked (adapter, variant, recipe, a ViT with a linear head): its ``alpha`` and the splits it
    covers."""
    name = bl.model(ctx, cfg.model)
    alpha = float(cfg.rank) if cfg.alpha is None else cfg.alpha
    check_adapter(cfg.members, cfg.rank, alpha, name)
    check_variant(cfg.variant, name)
    recipe_of(ctx.recipes, cfg.recipe, bl.who(ctx, name))
    skeleton = ctx.skeleton(name)
    target_layers(skeleton, name)
    linear_head(skeleton, METHOD, name)
    return alpha, ctx.splits(cfg.splits)


def lora_training(cfg: LoRAConfig, info: dict) -> Training:
    """Recipe ``recipe``, ``members`` forwards per image, from the pretrained ViT (no zoo fine-tune)."""
    return Training(recipe=cfg.recipe, members=cfg.members)


@register_method(
    kind="lora_ensemble",
    family="lora_ensemble",
    title=METHOD,
    training=lora_training,
    config=LoRAConfig,
    needs=("base-model",),
    persist=True,
    comment="M rank-r adapters (ViTs)",
    example=lambda x: (
        f"lora-{x['vit']}: {{model: {x['vit']}, members: 4, rank: 8, recipe: {x['train_recipe']}}}"
        if x["vit"]
        else None
    ),
)
def lora_ensemble(ctx, cfg: LoRAConfig, key: str) -> list[Output]:
    """LoRA-Ensemble on the pretrained init of ViT zoo model ``model`` -> ``results/methods/<key>``.

    Adapters and heads train with recipe ``recipe`` (resumable, in ``results/method_checkpoints/<key>``).
    """
    alpha, splits = check_lora(ctx, cfg)
    name = cfg.model
    entry = ctx.entry(name)
    recipe = recipe_of(ctx.recipes, cfg.recipe, bl.who(ctx, name))
    model = ctx.create(entry, drop_rate=recipe.drop_rate)  # the pretrained init; fails fast
    tr, va = ctx.inputs(bl.TRAIN, entry, train=True), ctx.inputs(bl.VAL, entry)
    ctx.set_threads()
    adapter = {"members": cfg.members, "rank": cfg.rank, "alpha": alpha, "seed": cfg.seed, "variant": cfg.variant}
    wrapper, cost = lora_ensemble_cost(model, entry.img_size, name, adapter)
    fp = ctx.fingerprint(entry.as_dict(), asdict(recipe), adapter, store.array_hash(tr.ids), store.array_hash(va.ids))
    record = bl.train_once(
        wrapper.to(ctx.device()),
        tr.fit_data,
        va.fit_data,
        recipe,
        seed=cfg.seed,
        folder=ctx.method_folder(key),
        fingerprint=fp,
        params=wrapper.trainable_parameters(),
        progress=ctx.progress,
        num_workers=ctx.source.num_workers,
    )
    info = {
        "family": "lora_ensemble",
        "method": f"m{cfg.members}-r{cfg.rank}-{cfg.variant}",
        "base": name,
        **adapter,
        "recipe": cfg.recipe,
        "targets": wrapper.layer_names[:2] + (["..."] if len(wrapper.layer_names) > 2 else []),
        "best_epoch": record["best_epoch"],
        "val_score": record["best_score"],
        **cost,
    }
    return [Output(key, info, model=wrapper, entry=entry, splits=splits)]


def lora_ensemble_cost(model: nn.Module, img_size: int, name: str, adapter: dict) -> tuple[LoRAEnsemble, dict]:
    """``model`` wrapped with ``adapter`` (members, rank, alpha, seed, variant) and cost.json's ``gflops`` (what fvcore
    counts on the wrapper), ``gflops_one_forward`` (the model alone), ``params`` (the member heads replace its own)
    and ``trainable_params`` (adapters and member heads)."""
    one = costs.count_flops(model, img_size)
    wrapper = LoRAEnsemble(model, model_name=name, **adapter)
    return wrapper, {
        "gflops": costs.count_flops(wrapper, img_size),
        "gflops_one_forward": one,
        "params": costs.count_params(wrapper) - costs.count_params(model.get_classifier()),
        "trainable_params": sum(p.numel() for p in wrapper.trainable_parameters()),
    }


@register_cost("lora_ensemble")
def lora_ensemble_output_cost(info: dict, entry, num_classes: int, members: int, cfg: LoRAConfig) -> dict:
    """:func:`lora_ensemble_cost` of an output described by its cost record, the model built without weights."""
    from benchmark.models import factory

    if info.get("members") != members:
        raise ValueError(f"members {info.get('members')!r}, but the logits have {members}")
    adapter = {k: info[k] for k in ("members", "rank", "alpha", "seed", "variant")}
    return lora_ensemble_cost(
        factory.create(entry, num_classes, load_weights=False), entry.img_size, entry.name, adapter
    )[1]
