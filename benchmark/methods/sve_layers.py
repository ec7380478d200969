"""Singular-value-ensemble layers: a frozen SVD basis shared by M members.

An adapted weight ``W`` (out, in) is split into ``k`` equal row blocks (``k = 3``
for a fused q/k/v projection, else 1) and each block is decomposed once,
``W_j = U_j diag(S_j) V_j^T`` (thin SVD, rank ``r = min(out / k, in)``). ``U`` and
``V`` are frozen buffers; member ``m`` owns singular values ``S^(m)`` (k r,) and a
bias ``b^(m)`` (out,). Member ``m`` computes ``y = U diag(S^(m)) V^T x + b^(m)``.

The input of every layer holds all members stacked along the batch, member-major:
rows ``[m B, (m + 1) B)`` belong to member ``m``. Ways to compute (``mode``):

``factored``
    ``x V`` and ``(.) U^T`` are shared GEMMs over all ``M B`` rows; only the
    scaling by ``S^(m)`` and the bias are per member. Costs ``(in + out) r`` per
    row instead of ``in out`` (1.25x for a 4:1 MLP matrix, 2x for a square one)
    and never forms a weight.
``materialized``
    ``W^(m) = U diag(S^(m)) V^T`` is formed for all members every forward
    (``M out in r`` multiply-adds, ``M out in`` memory) and applied with one
    batched matmul: the dense cost per row, plus the materialisation.
``auto`` (default)
    ``factored`` while gradients flow to the layer's parameters (training). At
    inference, per layer and forward, the cheaper of ``factored`` and cached member
    weights in a simple cost model (:meth:`SVELayer.cache_pays`): cached weights
    for many rows per member (large batches, high-resolution CNN stages, square
    ViT matrices), factored for few rows through a wide layer, whose ``M`` weight
    copies would stream from memory.

Whenever no gradient can reach ``singular_values`` or ``bias`` (``torch.no_grad``,
``inference_mode`` or frozen parameters), ``materialized`` (and ``auto`` where it
pays) applies cached member weights with one batched matmul: the dense cost,
``M out in`` floats held per layer (as much as ``M`` dense copies of it). The
cache is rebuilt when ``singular_values``, ``U`` or ``V`` change in place (their
version counters, e.g. an optimizer step) or are replaced (``load_state_dict``,
``.to()``), and dropped by ``train()``/``eval()``; writes through ``.data``
bypass the version counter, so call :meth:`SVELayer.clear_cache` after them.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

MODES = ("auto", "factored", "materialized")
WEIGHT_READ_COST = 10.0  # multiply-adds one weight read from memory costs (best of 0..25 on a 1-thread CPU)


def thin_svd(weight: Tensor, chunks: int) -> tuple[Tensor, Tensor, Tensor]:
    """Per-block thin SVD of ``weight`` (out, in) split into ``chunks`` row blocks.

    Returns ``U`` (k, out/k, r), ``S`` (k, r), ``V`` (k, in, r) in ``weight``'s
    dtype with ``weight[j] = U[j] diag(S[j]) V[j]^T``; computed in float64 (except
    on the ``meta`` device, where only shapes exist).
    """
    out, inp = weight.shape
    if out % chunks:
        raise ValueError(f"cannot split a weight with {out} output rows into {chunks} equal blocks")
    w = weight.detach().reshape(chunks, out // chunks, inp)
    work = w if w.device.type == "meta" else w.double()
    u, s, vh = torch.linalg.svd(work, full_matrices=False)
    return u.to(weight.dtype), s.to(weight.dtype), vh.transpose(-1, -2).to(weight.dtype)


class SVELayer(nn.Module):
    """Shared frozen ``U``, ``V``; per-member ``singular_values`` (M, k r) and ``bias`` (M, out).

    ``eps`` (M, k r) perturbs the singular values multiplicatively:
    ``S^(m) = S (1 + eps^(m))``. A layer without a bias gets a zero bias per member.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None, eps: Tensor, *, chunks: int = 1, mode: str = "auto"):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"SVE mode must be one of {MODES}, got {mode!r}")
        u, s, v = thin_svd(weight, chunks)
        members = eps.shape[0]
        k, rank = s.shape
        if eps.shape != (members, k * rank):
            raise ValueError(f"eps must have shape (members, {k * rank}), got {tuple(eps.shape)}")
        self.mode = mode
        self.members, self.chunks, self.rank = members, k, rank
        self.out_features, self.in_features = weight.shape
        self.register_buffer("U", u)  # (k, o, r)
        self.register_buffer("V", v.permute(1, 0, 2).reshape(self.in_features, k * rank))  # (in, k r)
        base = (
            torch.zeros(self.out_features, dtype=weight.dtype, device=weight.device) if bias is None else bias.detach()
        )
        self.singular_values = nn.Parameter(s.reshape(1, k * rank) * (1 + eps.to(device=s.device, dtype=s.dtype)))
        self.bias = nn.Parameter(base.reshape(1, -1).repeat(members, 1))
        self._cache: tuple[tuple, Tensor] | None = None  # (key of the tensors it depends on, W^T (M, in, out))

    def member_weights(self, members: slice | list[int] = slice(None)) -> Tensor:
        """``W^(m) = U diag(S^(m)) V^T`` for the selected members (default all), (M', out, in)."""
        k, r = self.chunks, self.rank
        sv = self.singular_values[members]
        us = self.U.unsqueeze(0) * sv.view(-1, k, 1, r)  # (M', k, o, r)
        vt = self.V.view(self.in_features, k, r).permute(1, 2, 0)  # (k, r, in)
        return (us @ vt).reshape(-1, self.out_features, self.in_features)

    def _per_member(self, x: Tensor) -> int:
        """Rows per member of ``x`` (M B, ...); raises if the batch does not split into M."""
        if x.shape[0] % self.members:
            raise ValueError(f"SVE layer input batch {x.shape[0]} is not a multiple of members={self.members}")
        return x.shape[0] // self.members

    def _members_apply(self, x: Tensor) -> Tensor:
        """``y[m] = x[m] W^(m)^T + b^(m)`` for ``x`` (M, T, in) -> (M, T, out)."""
        grad = torch.is_grad_enabled() and (self.singular_values.requires_grad or self.bias.requires_grad)
        if not grad and (self.mode == "materialized" or self.mode == "auto" and self.cache_pays(x.shape[1])):
            return torch.baddbmm(self.bias.unsqueeze(1), x, self.cached_weights())
        if self.mode == "materialized":
            return torch.baddbmm(self.bias.unsqueeze(1), x, self.member_weights().transpose(1, 2))
        h = (x @ self.V) * self.singular_values.unsqueeze(1)  # (M, T, k r)
        m, t, _ = h.shape
        if self.chunks == 1:
            return torch.baddbmm(self.bias.unsqueeze(1), h, self.U[0].T.expand(m, -1, -1))
        # block-diagonal U: one (r -> o) map per block
        y = torch.einsum("mtkr,kor->mtko", h.view(m, t, self.chunks, self.rank), self.U).reshape(m, t, -1)
        return y + self.bias.unsqueeze(1)

    def cache_pays(self, rows: int) -> bool:
        """Whether cached weights beat ``factored`` for ``rows`` rows per member.

        Cost in multiply-adds, counting a weight read from memory as ``c =``
        :data:`WEIGHT_READ_COST`: cached ``M T d + c M d``, factored ``M T a + c a``
        with ``T = rows``, ``d = in out``, ``a = r (k in + out)`` (``a > d`` as
        ``r = min(out / k, in)``); the cache pays iff ``M T (a - d) > c (M d - a)``.
        """
        dense = self.in_features * self.out_features
        factored = self.rank * (self.chunks * self.in_features + self.out_features)
        return rows * self.members * (factored - dense) > WEIGHT_READ_COST * (self.members * dense - factored)

    def cached_weights(self) -> Tensor:
        """``W^(m)^T`` of all members (M, in, out), contiguous, without autograd; rebuilt when stale."""
        key = tuple((t._version, t.data_ptr(), t.dtype, t.device) for t in (self.singular_values, self.U, self.V))
        if self._cache is None or self._cache[0] != key:
            self._cache = None  # free the stale weights before forming new ones
            with torch.inference_mode(False), torch.no_grad():  # a plain tensor even if built in inference mode
                self._cache = (key, self.member_weights().transpose(1, 2).contiguous())
        return self._cache[1]

    def take_members(self, members: int) -> None:
        """Keep only members ``0 .. members - 1`` (their parameters, cloned); used by nested SVE."""
        with torch.no_grad():
            self.singular_values = nn.Parameter(
                self.singular_values[:members].detach().clone(), self.singular_values.requires_grad
            )
            self.bias = nn.Parameter(self.bias[:members].detach().clone(), self.bias.requires_grad)
        self.members = members
        self.clear_cache()

    def clear_cache(self) -> None:
        """Drop the cached member weights (they are rebuilt by the next forward that uses them)."""
        self._cache = None

    def train(self, mode: bool = True):
        """Train or eval mode; either drops the cached member weights (rebuilt by the next forward that uses them)."""
        self.clear_cache()
        return super().train(mode)

    def _apply(self, fn, recurse=True):
        self.clear_cache()
        return super()._apply(fn, recurse)

    def _load_from_state_dict(self, *args, **kwargs):
        self.clear_cache()
        super()._load_from_state_dict(*args, **kwargs)

    def extra_repr(self) -> str:
        """The layer's sizes, members, chunks, rank and mode, for ``repr``."""
        return (
            f"in={self.in_features}, out={self.out_features}, members={self.members}, "
            f"chunks={self.chunks}, rank={self.rank}, mode={self.mode}"
        )


class SVELinear(SVELayer):
    """SVE replacement of ``nn.Linear``; input (M B, ..., in), output (M B, ..., out)."""

    def forward(self, x: Tensor) -> Tensor:
        """Inputs (M B, ..., in) -> (M B, ..., out): member m's weights applied to the m-th block of the batch."""
        self._per_member(x)
        y = self._members_apply(x.reshape(self.members, -1, self.in_features))
        return y.reshape(*x.shape[:-1], self.out_features)

    def to_dense(self, member: int) -> nn.Linear:
        """Member ``member`` as a plain ``nn.Linear``."""
        layer = nn.Linear(self.in_features, self.out_features, device=self.U.device, dtype=self.U.dtype)
        with torch.no_grad():
            layer.weight.copy_(self.member_weights([member])[0])
            layer.bias.copy_(self.bias[member])
        return layer


class SVEConv1x1(SVELayer):
    """SVE replacement of a pointwise ``nn.Conv2d`` (1x1, groups 1, no padding, any stride)."""

    def __init__(self, conv: nn.Conv2d, eps: Tensor, *, mode: str = "auto"):
        super().__init__(conv.weight.flatten(1), conv.bias, eps, chunks=1, mode=mode)
        self.stride = tuple(conv.stride)

    def forward(self, x: Tensor) -> Tensor:
        """Feature maps (M B, in, H, W) -> (M B, out, H', W'): a 1x1 convolution (with its stride) with member m's
        weights on the m-th block of the batch."""
        if self.stride != (1, 1):
            x = x[:, :, :: self.stride[0], :: self.stride[1]]
        self._per_member(x)
        n, _, hgt, wid = x.shape
        xm = x.permute(0, 2, 3, 1).reshape(self.members, -1, self.in_features)  # free if x is channels_last
        y = self._members_apply(xm).view(n, hgt, wid, self.out_features)
        return y.permute(0, 3, 1, 2)  # NCHW view in channels_last memory

    def to_dense(self, member: int) -> nn.Conv2d:
        """Member ``member`` as a plain 1x1 ``nn.Conv2d``."""
        conv = nn.Conv2d(
            self.in_features,
            self.out_features,
            1,
            stride=self.stride,
            bias=True,
            device=self.U.device,
            dtype=self.U.dtype,
        )
        with torch.no_grad():
            conv.weight.copy_(self.member_weights([member])[0].view(self.out_features, self.in_features, 1, 1))
            conv.bias.copy_(self.bias[member])
        return conv


def is_pointwise_conv(module: nn.Module) -> bool:
    """A plain ``nn.Conv2d`` (not a subclass with its own forward) with a 1x1 kernel, groups 1, padding 0."""
    return (
        isinstance(module, nn.Conv2d)
        and type(module).forward is nn.Conv2d.forward
        and tuple(module.kernel_size) == (1, 1)
        and module.groups == 1
        and module.padding in ((0, 0), "valid", "same")
    )


def is_adaptable(module: nn.Module) -> bool:
    """Layers SVE can adapt: ``nn.Linear`` and pointwise convolutions."""
    return isinstance(module, nn.Linear) or is_pointwise_conv(module)
