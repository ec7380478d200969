"""Portable CPU kernels: training and inference whose bytes do not depend on the CPU vendor.

Pinning the instruction set (:mod:`benchmark.config.numerics`) makes ATen's own kernels and oneDNN's
convolutions give the same bytes on an Intel and an AMD CPU; it does not do so for MKL, which picks code paths by
vendor whatever its ``MKL_CBWR`` mode. A kernel fingerprint of both vendors
(:mod:`benchmark.reproduce.fingerprint`, records in ``results/fingerprints/``) named the MKL routes a fine-tune
takes, and nothing else, as where the bytes part:

* **BLAS** (``sgemm``): the classifier's ``nn.Linear`` (``addmm``/``mm``: a 64 x 1280 @ 1280 x 10 product parts,
  large square ones agree), and ATen's own convolution fallback (``_slow_conv2d``: im2col + ``sgemm``), which
  ATen picks instead of oneDNN for a batch of one image;
* **VML** (``vsSqrt``, ``vsExp``, ...): ``torch.sqrt``, ``exp``, ``log``, ``tanh``... of float tensors go through
  MKL's vector math library; AdamW's ``exp_avg_sq.sqrt()`` is one of them (on an AMD EPYC, 15 % of
  ``torch.sqrt``'s results are not the correctly rounded square root).

So, on the CPU and under pinned numerics, the pipeline avoids them:

* :class:`Linear` (what :func:`make_portable` puts in place of every ``nn.Linear``, same parameters and
  ``state_dict``) computes ``y_n = sum_c x_nc W_oc + b_o`` as a broadcast product summed over ``c`` with ATen's
  own reduction: no BLAS call, forward or backward (autograd's backward of the product is again a product and a
  sum). Traced (fvcore's FLOP count), on CUDA and under ``UQ_NUMERICS=native`` it is ``F.linear``.
* :func:`adamw` is ``torch.optim.AdamW(fused=True)`` on CPU parameters: the fused CPU kernel computes the update
  with ATen's vectorised IEEE operations (``sqrt`` included: correctly rounded), elementwise, so neither the
  vendor nor the thread count changes a byte (``tests/models/test_portable.py`` checks it against an IEEE float32
  emulation in NumPy).
* :func:`forward` runs a batch of one image as a batch of two (the image twice; eval mode, so the two rows are
  computed independently) so that ATen keeps oneDNN's convolutions.

The convolutions stay oneDNN's (at the pinned AVX2 ISA and the pinned thread count): every convolution of the
fingerprint, forward and both backward passes, gave the same bytes on both vendors. Cost on the embedded default:
none measurable (the fused AdamW is faster than the per-tensor loop; the head is 0.01 % of the FLOPs).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from benchmark.config import numerics

MAX_PRODUCT = 1 << 24  # elements of one broadcast product (64 MiB of float32); larger inputs go in row chunks


def active(t: torch.Tensor) -> bool:
    """Whether the portable route applies to ``t``: a CPU tensor, pinned numerics, not traced (fvcore counts FLOPs
    on the usual ops)."""
    return t.device.type == "cpu" and numerics.requested_mode() == "pinned" and not torch.jit.is_tracing()


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` as ``(x[..., None, :] * weight).sum(-1) + bias``: ATen's own product and
    reduction, whose bytes depend on neither the CPU vendor nor a BLAS library (see the module docstring); inputs
    with many rows are computed in chunks of rows so that one product holds at most :data:`MAX_PRODUCT` elements."""
    lead, c = x.shape[:-1], x.shape[-1]
    rows = x.reshape(-1, c)
    step = max(1, MAX_PRODUCT // max(1, weight.shape[0] * c))
    parts = [(rows[i : i + step, None, :] * weight).sum(-1) for i in range(0, rows.shape[0], step)]
    y = parts[0] if len(parts) == 1 else torch.cat(parts)
    y = y if bias is None else y + bias
    return y.reshape(*lead, weight.shape[0])


class Linear(nn.Linear):
    """``nn.Linear`` computed by :func:`linear` on the CPU under pinned numerics, by ``F.linear`` elsewhere."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W.T + b``: through :func:`linear` (no BLAS) where the portable kernels are on, else ATen's linear."""
        if active(x):
            return linear(x, self.weight, self.bias)
        return F.linear(x, self.weight, self.bias)


def _plain_linears() -> tuple[type, ...]:
    """The linear layer classes whose forward is ``F.linear(x, weight, bias)``: PyTorch's, and timm's (which casts
    the weights only when scripted)."""
    try:
        from timm.layers import Linear as TimmLinear
    except ImportError:  # timm is a dependency; a model without it has PyTorch's only
        return (nn.Linear,)
    return nn.Linear, TimmLinear


def make_portable(model: nn.Module) -> nn.Module:
    """``model`` with every plain linear layer (PyTorch's or timm's) turned into a :class:`Linear` (in place: the
    same parameter tensors, so the ``state_dict`` and the optimizer's parameters are unchanged); returned. Linear
    layers of other classes (a method's own, with another forward) are left as they are."""
    plain = _plain_linears()
    for m in model.modules():
        if type(m) in plain:
            m.__class__ = Linear
    return model


def adamw(params, *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW (PyTorch's, decoupled weight decay) with the fused kernel where every parameter is a CPU float tensor
    (the portable update, see the module docstring), PyTorch's default implementation otherwise."""
    params = list(params)
    groups = [g for p in params for g in (p["params"] if isinstance(p, dict) else [p])]
    cpu = bool(groups) and all(p.device.type == "cpu" and p.is_floating_point() for p in groups)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True if cpu else None)


def forward(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``model(x)`` in eval mode; a CPU batch of one image under pinned numerics runs as a batch of two (the image
    twice) and returns the first row: ATen computes a one-image convolution with MKL, two with oneDNN."""
    if x.shape[0] == 1 and active(x) and not model.training:
        return model(torch.cat([x, x])).narrow(-2, 0, 1)
    return model(x)
