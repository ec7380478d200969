"""Kernel fingerprints: which CPU kernels give other bytes on another CPU kind, op by op.

A fingerprint is a SHA-256 prefix of the result of each of a fixed set of float32 operations, computed under the
pinned numerics (:mod:`benchmark.config.numerics`). Two machines whose fingerprints agree on every operation a
stage runs give that stage the same bytes; where they part, the first operation that differs names the kernel.
Records live in ``results/fingerprints/<kind>.json`` (kind: CPU vendor, family and model).

Two sets of operations:

* **ops** (:func:`ops`): the operations of ``../shared/tools/kernel-fingerprint.py`` with the same names, inputs
  and hashes, so that a record that tool made on another machine compares key by key: matrix products, the five
  convolutions of an EfficientNet/MobileNet forward and both backward passes, batch norm, activations,
  cross-entropy, AdamW, pools, resizing, the RNG and dropout; in the mode ``threads=T,onednn=on|off``.
  Those that go through MKL (:data:`MKL_ROUTED`) are what the pipeline no longer runs
  (:mod:`benchmark.models.portable`); the rest it relies on.
* **pipeline** (:func:`pipeline`): what the embedded default's stages run, with the project's own code: for each
  (architecture, input size) of the zoo, the model built as ``train@`` builds it (pretrained weights, portable
  linear layers, channels-last), two training steps of a batch of 64 with the fused AdamW and dropout, and the
  logits of 256, 5 and 1 images as ``logits@`` computes them; hashed per layer (each module's output of the first
  forward), per parameter (its first gradient) and as a whole (weights after two steps, logits). The first
  layer that differs is the operation where two CPU kinds part.

:func:`compare` judges a fingerprint against the records: a record of the same CPU kind must agree on every
shared operation (a torch upgrade or a changed kernel route shows here); a record of another kind must agree on
every operation that records of two vendors already agree on (the evidence that the pipeline's bytes hold across
kinds), and the other shared operations are reported. :func:`mkl_ops_in` lists the MKL-routed operations that the
pipeline's training step and logits pass call (there must be none). The CLI is ``python -m benchmark reproduce
fingerprint`` (:mod:`benchmark.cli.reproduce_commands`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmark.config import numerics

RECORDS = Path("results") / "fingerprints"
# tool keys computed through MKL (BLAS small products, VML exp/sqrt in torch's AdamW): parting across vendors,
# not run by the pipeline (benchmark.models.portable)
MKL_ROUTED = ("/mm 64x1280x10", "/mm 7x33x5", "/linear fwd+bwd 64x1280->10", "/elementwise exp", "/adamw 3 steps")
# ATen operators that reach MKL (BLAS, VML) or ATen's im2col + sgemm convolution
MKL_OPS = frozenset(f"aten::{n}" for n in (
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "_slow_conv2d_forward", "_slow_conv2d_backward", "thnn_conv2d",
    "sqrt", "exp", "log", "log2", "log10", "log1p", "expm1", "tanh", "erf", "erfc", "erfinv", "sin", "cos", "tan",
    "acos", "asin", "atan", "trunc", "pow"))


def h(*tensors) -> str:
    """SHA-256 prefix (16 hex digits) of the tensors' bytes, in order."""
    m = hashlib.sha256()
    for t in tensors:
        m.update(t.detach().contiguous().cpu().numpy().tobytes())
    return m.hexdigest()[:16]


def gen(seed: int, *shape) -> torch.Tensor:
    """A seeded standard-normal float32 tensor of ``shape``: the same numbers on every machine."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tag(threads: int, onednn: bool = True) -> str:
    """The mode of a fingerprint's operations, as its keys start: ``threads=T,onednn=on|off``."""
    return f"threads={threads},onednn={'on' if onednn else 'off'}"


# the convolutions of an EfficientNet-Lite / MobileNetV3 forward: (N, C, H, W, out, k, stride, pad, groups)
CONVS = {"stem 3x3 s2 3->32 28px": (8, 3, 28, 28, 32, 3, 2, 1, 1), "pointwise 1x1 32->96 14px": (8, 32, 14, 14, 96, 1, 1, 0, 1),
         "depthwise 3x3 96 14px": (8, 96, 14, 14, 96, 3, 1, 1, 96), "depthwise 5x5 s2 144 14px": (8, 144, 14, 14, 144, 5, 2, 2, 144),
         "pointwise 1x1 320->1280 1px": (8, 320, 1, 1, 1280, 1, 1, 0, 1)}


def ops(t: str) -> dict[str, str]:
    """The shared tool's operations (its ``ops`` without the random-weight models, and its ``primitives``) in the
    current mode, keyed ``<t>/<name>``."""
    out = {}
    for i, (m, k, n) in enumerate([(64, 1280, 10), (256, 512, 512), (1000, 1000, 1000), (7, 33, 5)]):
        out[f"{t}/mm {m}x{k}x{n}"] = h(gen(1 + i, m, k) @ gen(100 + i, k, n))
    a, w = gen(5, 64, 1280).requires_grad_(), gen(6, 10, 1280).requires_grad_()
    y = F.linear(a, w)
    y.backward(gen(7, 64, 10))
    out[f"{t}/linear fwd+bwd 64x1280->10"] = h(y, a.grad, w.grad)
    for j, (name, (n, c, hh, ww, o, k, s, p, g)) in enumerate(CONVS.items()):
        x, wt = gen(200 + j, n, c, hh, ww).requires_grad_(), gen(300 + j, o, c // g, k, k).mul_(0.1).requires_grad_()
        y = F.conv2d(x, wt, stride=s, padding=p, groups=g)
        out[f"{t}/conv fwd {name}"] = h(y)
        y.backward(gen(400 + j, *y.shape))
        out[f"{t}/conv bwd-input {name}"], out[f"{t}/conv bwd-weight {name}"] = h(x.grad), h(wt.grad)
    x, bn = gen(500, 16, 32, 14, 14).requires_grad_(), torch.nn.BatchNorm2d(32)
    y = bn(x)
    y.backward(gen(501, *y.shape))
    out[f"{t}/batchnorm train fwd+bwd"] = h(y, x.grad, bn.weight.grad, bn.running_var)
    x = gen(502, 4096)
    for name, fn in [("relu6", F.relu6), ("sigmoid", torch.sigmoid), ("silu", F.silu), ("exp", torch.exp),
                     ("log_softmax", lambda v: F.log_softmax(v.view(64, 64), -1)), ("sum", torch.sum), ("mean", torch.mean),
                     ("tanh", torch.tanh)]:
        out[f"{t}/elementwise {name}"] = h(fn(x))
    z = gen(503, 64, 10).requires_grad_()
    loss = F.cross_entropy(z, torch.arange(64) % 10, label_smoothing=0.1)
    loss.backward()
    out[f"{t}/cross_entropy fwd+bwd"] = h(loss.reshape(1), z.grad)
    p = torch.nn.Parameter(gen(504, 1000))
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.05)
    for i in range(3):
        p.grad = gen(505 + i, 1000)
        opt.step()
    out[f"{t}/adamw 3 steps"] = h(p)
    out.update(_primitives(t))
    return out


def _primitives(t: str) -> dict[str, str]:
    out = {}
    x = gen(700, 8, 96, 14, 14).requires_grad_()
    cols = F.unfold(x, 3, padding=1)
    out[f"{t}/unfold 3x3 96ch 14px"] = h(cols)
    w = gen(701, 96, 9, 1).mul_(0.1).requires_grad_()
    y = (cols.view(8, 96, 9, -1) * w).sum(2)  # a broadcast product summed over a dimension, and its autograd
    y.backward(gen(702, *y.shape))
    out[f"{t}/depthwise via unfold fwd+bwd"] = h(y, x.grad, w.grad)
    x2, w2 = gen(703, 8, 32, 196).requires_grad_(), gen(704, 96, 32).mul_(0.1).requires_grad_()
    y2 = torch.matmul(w2, x2)
    y2.backward(gen(705, *y2.shape))
    out[f"{t}/pointwise via matmul fwd+bwd"] = h(y2, x2.grad, w2.grad)
    xs = gen(706, 8, 32, 14, 14)
    out[f"{t}/pools avg/adaptive/max"] = h(F.avg_pool2d(xs, 2), F.adaptive_avg_pool2d(xs, 1), F.max_pool2d(xs, 2))
    v = gen(707, 4096)
    out[f"{t}/elementwise hardswish/hardsigmoid/gelu/softmax"] = h(F.hardswish(v), F.hardsigmoid(v), F.gelu(v),
                                                                   torch.softmax(v.view(64, 64), -1))
    out[f"{t}/sum of 1e6"] = h(gen(708, 1_000_000).sum().reshape(1))
    torch.manual_seed(0)
    out[f"{t}/rng randn/rand/randint/randperm + dropout"] = h(
        torch.randn(1000), torch.rand(1000), torch.randint(0, 5, (1000,)).float(), torch.randperm(1000).float(),
        F.dropout(torch.ones(4096), 0.2, training=True))
    img = gen(709, 4, 3, 28, 28)
    out[f"{t}/interpolate bilinear 28->48 (antialias off/on) and 48->24"] = h(
        F.interpolate(img, size=48, mode="bilinear", align_corners=False),
        F.interpolate(img, size=48, mode="bilinear", align_corners=False, antialias=True),
        F.interpolate(F.interpolate(img, size=48, mode="bilinear"), size=24, mode="bilinear", antialias=True))
    xc = gen(710, 8, 3, 28, 28).contiguous(memory_format=torch.channels_last).requires_grad_()
    wc = gen(711, 32, 3, 3, 3).mul_(0.1).requires_grad_()
    yc = F.conv2d(xc, wc, stride=2, padding=1)
    yc.backward(gen(712, *yc.shape).contiguous(memory_format=torch.channels_last))
    out[f"{t}/conv channels_last stem fwd+bwd"] = h(yc, xc.grad, wc.grad)
    return out


def pipeline(params, zoo: dict, t: str) -> dict[str, str]:
    """The pipeline's own operations (module docstring), for each distinct (architecture, init, input size, recipe)
    of ``zoo`` (typed zoo entries), with ``params``' recipes; keyed ``<t>/pipeline <arch> <px>px: <what>``."""
    from benchmark.core.members import member_cross_entropy
    from benchmark.models import factory, infer, portable

    out, seen = {}, set()
    for entry in zoo.values():
        recipe = params.recipes[entry.recipe]
        ident = (entry.arch, entry.init, entry.img_size, entry.recipe)
        if ident in seen or recipe.epochs == 0:
            continue
        seen.add(ident)
        # the key names the settings (a short hash of the architecture, init, size and recipe): records stay valid
        # when params change, their keys are then not shared
        settings = json.dumps([entry.arch, entry.init, entry.img_size, dataclasses.asdict(recipe)], sort_keys=True)
        px = entry.img_size
        key = f"{t}/pipeline {entry.arch} {px}px [{hashlib.sha256(settings.encode()).hexdigest()[:8]}]"
        model = infer.channels_last(factory.create(entry, 10, drop_rate=recipe.drop_rate))
        opt = portable.adamw(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
        names = {m: n for n, m in model.named_modules() if n and not any(True for _ in m.children())}
        first: dict[str, str] = {}

        def record(m, inputs, output) -> None:  # a forward hook that returns None leaves the output as it is
            first.setdefault(names[m], h(output))

        hooks = [m.register_forward_hook(record) for m in names]
        x = gen(800, 64, 3, px, px).contiguous(memory_format=torch.channels_last)
        y = torch.arange(64) % 10
        torch.manual_seed(1)
        model.train()
        for step in range(2):
            opt.zero_grad(set_to_none=True)
            member_cross_entropy(model(x), y, recipe.label_smoothing).backward()
            if step == 0:
                for hk in hooks:
                    hk.remove()
                out.update({f"{key}: forward {n}": v for n, v in first.items()})
                out.update({f"{key}: gradient {n}": h(p.grad) for n, p in model.named_parameters() if p.grad is not None})
            opt.step()
        out[f"{key}: weights after 2 steps"] = h(*model.parameters())
        out[f"{key}: logits of 256, 5 and 1 images"] = h(*(infer.predict_logits(model, gen(801 + n, n, 3, px, px), batch_size=256)
                                                           for n in (256, 5, 1)))
    return out


def mkl_ops_in(params, zoo: dict) -> dict[str, list[str]]:
    """``model -> [MKL-routed ATen operators]`` that one training step (batch 64) and the logits pass of each distinct
    architecture of ``zoo`` call, as the stages run them (:data:`MKL_OPS`; there should be none), at the params'
    ``threads`` (ATen sends a convolution to its MKL-backed ``slow_conv2d`` on one thread: the portable route needs
    two or more)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(getattr(params, "threads", None) or os.cpu_count() or 1)  # as stage_config.set_threads
    try:
        out, seen = {}, set()
        for name, entry in zoo.items():
            recipe = params.recipes[entry.recipe]
            if (entry.arch, entry.img_size) not in seen and recipe.epochs:
                seen.add((entry.arch, entry.img_size))
                out[name] = _mkl_ops_of(entry, recipe)
        return out
    finally:
        torch.set_num_threads(threads)


def _mkl_ops_of(entry, recipe) -> list[str]:
    """The MKL-routed operators of one training step and the logits pass of ``entry`` (:func:`mkl_ops_in`)."""
    from torch.profiler import ProfilerActivity, profile

    from benchmark.core.members import member_cross_entropy
    from benchmark.models import factory, infer, portable

    model = infer.channels_last(factory.create(entry, 10, load_weights=False, drop_rate=recipe.drop_rate))
    opt = portable.adamw(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    x = gen(0, 64, 3, entry.img_size, entry.img_size).contiguous(memory_format=torch.channels_last)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model.train()
        member_cross_entropy(model(x), torch.arange(64) % 10, recipe.label_smoothing).backward()
        opt.step()
        for n in (64, 5, 1):
            infer.predict_logits(model, x[:n], batch_size=256)
    return sorted({e.name for e in prof.events()} & MKL_OPS)


def machine() -> dict:
    """This CPU (:func:`benchmark.config.numerics.cpu`): its kind names a record."""
    return numerics.cpu()


def measure(params, zoo: dict, *, all_modes: bool = False, with_pipeline: bool = True) -> dict:
    """This machine's fingerprint record: :func:`ops` in the pipeline's mode (params ``threads``, oneDNN on), or in
    all four modes (1 and 2 threads, oneDNN on and off) with ``all_modes``; :func:`pipeline` in the pipeline's mode.
    The torch thread count and oneDNN switch are restored afterwards."""
    threads = params.threads or os.cpu_count() or 1
    before, onednn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    hashes: dict[str, str] = {}
    try:
        for th, on in ([(1, True), (1, False), (2, True), (2, False)] if all_modes else [(threads, True)]):
            torch.set_num_threads(th)
            torch.backends.mkldnn.enabled = on
            hashes.update(ops(tag(th, on)))
        torch.set_num_threads(threads)
        torch.backends.mkldnn.enabled = True
        if with_pipeline:
            hashes.update(pipeline(params, zoo, tag(threads)))
    finally:
        torch.set_num_threads(before)
        torch.backends.mkldnn.enabled = onednn
    state = numerics.state()
    return {"machine": machine(), "torch": torch.__version__, "cpu_capability": state["cpu_capability"],
            "pinned": state["pinned"], "env": {k: os.environ.get(k) for k in numerics.PINNED}, "hashes": hashes}


def evidence(records: list[dict]) -> set[str]:
    """Operations on which records of two CPU vendors agree (and no record disagrees): the bytes are known to hold
    across vendors there. Two kinds of one vendor agreeing (two AMD EPYC generations) is no evidence for the other
    vendor: an operation only they hold is reported on the other vendor's machine, not failed."""
    seen: dict[str, dict[str, str]] = {}  # key -> {kind: hash}
    for r in records:
        for k, v in r["hashes"].items():
            seen.setdefault(k, {})[r["machine"]["kind"]] = v
    return {k for k, by in seen.items() if len({kind.split("-")[0] for kind in by}) >= 2 and len(set(by.values())) == 1}


def compare(mine: dict, records: list[dict]) -> list[dict]:
    """One verdict per record: ``kind``, ``same_kind``, ``torch`` (the record's), ``shared``, ``equal``, ``differ``
    (the keys, in this machine's order), ``failing`` (those that must agree: every shared key of a record of this
    machine's own kind, and on another kind the keys of :func:`evidence`)."""
    agreed = evidence(records)
    out = []
    for r in records:
        same = r["machine"]["kind"] == mine["machine"]["kind"]
        shared = [k for k in mine["hashes"] if k in r["hashes"]]
        differ = [k for k in shared if mine["hashes"][k] != r["hashes"][k]]
        out.append({"kind": r["machine"]["kind"], "cpu": r["machine"].get("cpu", ""), "same_kind": same, "torch": r.get("torch"),
                    "shared": len(shared), "equal": len(shared) - len(differ), "differ": differ,
                    "failing": differ if same else [k for k in differ if k in agreed]})
    return out


def read_record(path) -> dict:
    """A fingerprint record (JSON: ``machine.kind``, ``torch``, ``hashes``); ``ValueError`` naming the file and what
    is wrong."""
    path = Path(path)
    try:
        r = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a readable JSON fingerprint record ({e})") from None
    ok = (isinstance(r, dict) and isinstance(r.get("machine"), dict) and isinstance(r["machine"].get("kind"), str)
          and isinstance(r.get("hashes"), dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in r["hashes"].items()))
    if not ok:
        raise ValueError(f"{path}: a fingerprint record needs machine.kind (a string) and hashes (names to hash strings)")
    return r


def read_records(folder=RECORDS) -> list[dict]:
    """Every ``*.json`` record of ``folder`` (sorted by name), each with its ``path``."""
    return [dict(read_record(p), path=str(p)) for p in sorted(Path(folder).glob("*.json"))]


def record_name(record: dict) -> str:
    """The file name of a record: its CPU kind, made safe for a path."""
    kind = "".join(c if c.isalnum() or c in "-_." else "-" for c in record["machine"]["kind"])
    return f"{kind}.json"
