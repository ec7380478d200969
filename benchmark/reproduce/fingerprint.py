"""Kernel fingerprints: which CPU kernels give other bytes on another CPU kind, op by op.

A fingerprint is a SHA-256 prefix of the result of each of a fixed set of float32 operations, computed under the
pinned numerics (:mod:`benchmark.config.numerics`). Two machines whose fingerprints agree on every operation a
stage runs give that stage the same bytes; where they part, the first operation that differs names the kernel.
Records live in ``results/fingerprints/<kind>.json`` (kind: CPU vendor, family and model; ``QEMU-<model>`` for an
emulated one).

Two sets of operations:

* **ops** (:func:`ops`): the operations of ``../shared/tools/kernel-fingerprint.py`` with the same names, inputs
  and hashes, so that a record that tool made on another machine compares key by key: matrix products, the five
  convolutions of an EfficientNet/MobileNet forward and both backward passes, batch norm, activations,
  cross-entropy, AdamW, pools, resizing, the RNG and dropout; in the mode ``threads=T,onednn=on|off``.
  Those that go through MKL (:data:`MKL_ROUTED`) are what the pipeline no longer runs
  (:mod:`benchmark.models.portable`); the rest it relies on.
* **pipeline** (:func:`pipeline`): what the embedded default's stages run, through the very functions they call
  (:func:`benchmark.models.train.training_model`, ``make_optimizer`` and ``train_step``, and
  :func:`benchmark.models.distributed.predict_logits`): for each (architecture, input size) of the zoo, the model
  built as ``train@`` builds it (pretrained weights, portable linear layers, channels-last), two training steps of
  a batch of 64 with the fused AdamW and dropout, and the logits of 256, 5 and 1 images as ``logits@`` computes
  them; hashed per layer (each module's output of the first forward), per parameter (its first gradient) and as a
  whole (weights after two steps, logits). The first layer that differs is the operation where two CPU kinds part.

The records of CPU kinds (``results/fingerprints/``) and the rules that judge a fingerprint by them are in
:mod:`benchmark.reproduce.fingerprint_records`; an emulated CPU kind's fingerprint (QEMU user mode) is made by
:mod:`benchmark.reproduce.emulate`. :func:`mkl_ops_in` lists the MKL-routed operations that the
pipeline's training step and logits pass call (there must be none). The CLI is ``python -m benchmark reproduce
fingerprint`` (:mod:`benchmark.cli.reproduce_cpu`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import torch
import torch.nn.functional as F

from benchmark.config import numerics
from benchmark.models.recipe import recipe_of
from benchmark.reproduce.fingerprint_records import tag

NUM_CLASSES = 10  # the head of every profiled model (the embedded suite's classes)
# tool keys computed through MKL (BLAS small products, VML exp/sqrt in torch's AdamW): parting across vendors,
# not run by the pipeline (benchmark.models.portable)
MKL_ROUTED = ("/mm 64x1280x10", "/mm 7x33x5", "/linear fwd+bwd 64x1280->10", "/elementwise exp", "/adamw 3 steps")
# ATen operators that reach MKL (BLAS, VML) or ATen's im2col + sgemm convolution
MKL_OPS = frozenset(
    f"aten::{n}"
    for n in (
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "addbmm",
        "matmul",
        "_slow_conv2d_forward",
        "_slow_conv2d_backward",
        "thnn_conv2d",
        "dot",
        "vdot",
        "mv",
        "addmv",
        "addmv_",
        "_linalg_eigh",
        "_linalg_svd",
        "sqrt",
        "exp",
        "exp_",
        "log",
        "log_",
        "log2",
        "log10",
        "log1p",
        "expm1",
        "tanh",
        "erf",
        "erfc",
        "erfinv",
        "sin",
        "cos",
        "tan",
        "acos",
        "asin",
        "atan",
        "trunc",
        "pow",
    )
)


def h(*tensors) -> str:
    """SHA-256 prefix (16 hex digits) of the tensors' bytes, in order."""
    m = hashlib.sha256()
    for t in tensors:
        m.update(t.detach().contiguous().cpu().numpy().tobytes())
    return m.hexdigest()[:16]


def gen(seed: int, *shape) -> torch.Tensor:
    """A seeded standard-normal float32 tensor of ``shape``: the same numbers on every machine."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# the convolutions of an EfficientNet-Lite / MobileNetV3 forward: (N, C, H, W, out, k, stride, pad, groups)
CONVS = {
    "stem 3x3 s2 3->32 28px": (8, 3, 28, 28, 32, 3, 2, 1, 1),
    "pointwise 1x1 32->96 14px": (8, 32, 14, 14, 96, 1, 1, 0, 1),
    "depthwise 3x3 96 14px": (8, 96, 14, 14, 96, 3, 1, 1, 96),
    "depthwise 5x5 s2 144 14px": (8, 144, 14, 14, 144, 5, 2, 2, 144),
    "pointwise 1x1 320->1280 1px": (8, 320, 1, 1, 1280, 1, 1, 0, 1),
}


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
    for name, fn in [
        ("relu6", F.relu6),
        ("sigmoid", torch.sigmoid),
        ("silu", F.silu),
        ("exp", torch.exp),
        ("log_softmax", lambda v: F.log_softmax(v.view(64, 64), -1)),
        ("sum", torch.sum),
        ("mean", torch.mean),
        ("tanh", torch.tanh),
    ]:
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
    out[f"{t}/elementwise hardswish/hardsigmoid/gelu/softmax"] = h(
        F.hardswish(v), F.hardsigmoid(v), F.gelu(v), torch.softmax(v.view(64, 64), -1)
    )
    out[f"{t}/sum of 1e6"] = h(gen(708, 1_000_000).sum().reshape(1))
    torch.manual_seed(0)
    out[f"{t}/rng randn/rand/randint/randperm + dropout"] = h(
        torch.randn(1000),
        torch.rand(1000),
        torch.randint(0, 5, (1000,)).float(),
        torch.randperm(1000).float(),
        F.dropout(torch.ones(4096), 0.2, training=True),
    )
    img = gen(709, 4, 3, 28, 28)
    out[f"{t}/interpolate bilinear 28->48 (antialias off/on) and 48->24"] = h(
        F.interpolate(img, size=48, mode="bilinear", align_corners=False),
        F.interpolate(img, size=48, mode="bilinear", align_corners=False, antialias=True),
        F.interpolate(F.interpolate(img, size=48, mode="bilinear"), size=24, mode="bilinear", antialias=True),
    )
    xc = gen(710, 8, 3, 28, 28).contiguous(memory_format=torch.channels_last).requires_grad_()
    wc = gen(711, 32, 3, 3, 3).mul_(0.1).requires_grad_()
    yc = F.conv2d(xc, wc, stride=2, padding=1)
    yc.backward(gen(712, *yc.shape).contiguous(memory_format=torch.channels_last))
    out[f"{t}/conv channels_last stem fwd+bwd"] = h(yc, xc.grad, wc.grad)
    return out


def _distinct(params, zoo: dict, names=None):
    """``(name, entry, recipe)`` of each distinct (architecture, init, input size, recipe) of ``zoo`` (typed zoo
    entries) that trains (``epochs`` > 0), first entry of each; only the entries ``names`` when given."""
    seen = set()
    for name, entry in zoo.items():
        recipe = recipe_of(params.recipes, entry.recipe, f"zoo entry {name!r}")
        ident = (entry.arch, entry.init, entry.img_size, entry.recipe)
        if (names is None or name in names) and ident not in seen and recipe.epochs:
            seen.add(ident)
            yield name, entry, recipe


def pipeline_key(entry, recipe, t: str) -> str:
    """The key prefix of one architecture's pipeline operations: ``<t>/pipeline <arch> <px>px [<settings hash>]``;
    the short hash of the architecture, init, size and recipe keeps records valid when params change (their keys are
    then not shared)."""
    settings = json.dumps([entry.arch, entry.init, entry.img_size, dataclasses.asdict(recipe)], sort_keys=True)
    return f"{t}/pipeline {entry.arch} {entry.img_size}px [{hashlib.sha256(settings.encode()).hexdigest()[:8]}]"


def pipeline(params, zoo: dict, t: str, *, names=None, progress=None) -> dict[str, str]:
    """The pipeline's own operations (module docstring), for each distinct (architecture, init, input size, recipe)
    of ``zoo`` (typed zoo entries; only ``names`` when given), with ``params``' recipes; keyed
    ``<t>/pipeline <arch> <px>px [<settings>]: <what>``. The model, optimizer, training step and logits pass are
    the functions ``train@`` and ``logits@`` call (:func:`benchmark.models.train.training_model`, ``make_optimizer``,
    ``train_step``; :func:`benchmark.models.distributed.predict_logits`). ``progress(name)`` is called before each."""
    out = {}
    for name, entry, recipe in _distinct(params, zoo, names):
        if progress is not None:
            progress(name)
        out.update(_pipeline_of(params, entry, recipe, pipeline_key(entry, recipe, t)))
    return out


def _pipeline_of(params, entry, recipe, key: str) -> dict[str, str]:
    """One architecture's pipeline operations (:func:`pipeline`), keyed ``<key>: <what>``."""
    from benchmark.models import distributed, train

    out, px = {}, entry.img_size
    model = train.training_model(entry, NUM_CLASSES, recipe)
    opt = train.make_optimizer(model.parameters(), recipe)
    names_of = {m: n for n, m in model.named_modules() if n and not any(True for _ in m.children())}
    first: dict[str, str] = {}

    def record(m, inputs, output) -> None:  # a forward hook that returns None leaves the output as it is
        first.setdefault(names_of[m], h(output))

    hooks = [m.register_forward_hook(record) for m in names_of]

    def gradients() -> None:  # after the first backward: every layer's first output and every gradient
        for hk in hooks:
            hk.remove()
        out.update({f"{key}: forward {n}": v for n, v in first.items()})
        out.update({f"{key}: gradient {n}": h(p.grad) for n, p in model.named_parameters() if p.grad is not None})

    x = gen(800, 64, 3, px, px).contiguous(memory_format=torch.channels_last)
    y = torch.arange(64) % NUM_CLASSES
    torch.manual_seed(1)
    model.train()
    for step in range(2):
        train.train_step(model, opt, x, y, recipe, after_backward=gradients if step == 0 else None)
    out[f"{key}: weights after 2 steps"] = h(*model.parameters())
    out[f"{key}: logits of 256, 5 and 1 images"] = h(
        *(
            distributed.predict_logits(
                model, gen(801 + n, n, 3, px, px), to_all=False, batch_size=params.logits.batch_size
            )
            for n in (256, 5, 1)
        )
    )
    return out


def mkl_ops_in(params, zoo: dict) -> dict[str, list[str]]:
    """``model -> [MKL-routed ATen operators]`` that one training step (batch 64) and the logits pass of each distinct
    architecture of ``zoo`` call, as the stages run them (:data:`MKL_OPS`; there should be none), at the params'
    ``threads`` (ATen sends a convolution to its MKL-backed ``slow_conv2d`` on one thread: the portable route needs
    two or more)."""
    from benchmark.stages import stage_config

    threads = torch.get_num_threads()
    stage_config.set_threads(params)
    try:
        out, seen = {}, set()
        for name, entry, recipe in _distinct(params, zoo):
            if (entry.arch, entry.img_size) not in seen:
                seen.add((entry.arch, entry.img_size))
                out[name] = _mkl_ops_of(params, entry, recipe)
        return out
    finally:
        torch.set_num_threads(threads)


def cpu_profile():
    """torch's profiler of the CPU operators (``with cpu_profile() as prof: ...; prof.events()``), without its
    library's log lines on standard error: kineto writes ``profiler_start`` and ``profiler_stop`` marks and, in a CUDA
    build on a machine without a GPU, ``ERROR: ... gpuGetDeviceCount failed``, which tell a reader nothing and look like
    a failure. ``KINETO_LOG_LEVEL`` 6 (above its highest level) unless already set; kineto reads it when a profiler
    first starts in the process."""
    from torch.profiler import ProfilerActivity, profile

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    return profile(activities=[ProfilerActivity.CPU])


def _mkl_ops_of(params, entry, recipe) -> list[str]:
    """The MKL-routed operators of one training step and the logits pass of ``entry`` (:func:`mkl_ops_in`), through
    the functions the stages call."""
    from benchmark.models import distributed, train

    model = train.training_model(entry, NUM_CLASSES, recipe, load_weights=False)
    opt = train.make_optimizer(model.parameters(), recipe)
    x = gen(0, 64, 3, entry.img_size, entry.img_size).contiguous(memory_format=torch.channels_last)
    with cpu_profile() as prof:
        model.train()
        train.train_step(model, opt, x, torch.arange(64) % NUM_CLASSES, recipe)
        for n in (64, 5, 1):
            distributed.predict_logits(model, x[:n], to_all=False, batch_size=params.logits.batch_size)
    return sorted({e.name for e in prof.events()} & MKL_OPS)


def machine() -> dict:
    """This CPU (:func:`benchmark.config.numerics.cpu`): its kind names a record."""
    return numerics.cpu()


MODES = [(1, True), (1, False), (2, True), (2, False)]  # the tool's four modes: torch threads, oneDNN on/off


def measure(
    params,
    zoo: dict,
    *,
    all_modes: bool = False,
    with_pipeline: bool = True,
    with_ops: bool = True,
    names=None,
    progress=None,
) -> dict:
    """This machine's fingerprint record: :func:`ops` in the pipeline's mode (params ``threads``, oneDNN on), or in
    all four modes (:data:`MODES`) with ``all_modes`` (none without ``with_ops``); :func:`pipeline` (only the zoo
    entries ``names`` when given) in the pipeline's mode. The torch thread count and oneDNN switch are restored
    afterwards. ``progress(what)`` is called before each part."""
    from benchmark.stages import stage_config

    before, onednn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    hashes: dict[str, str] = {}
    try:
        stage_config.set_threads(params)
        threads = torch.get_num_threads()
        modes = (MODES if all_modes else [(threads, True)]) if with_ops else []
        for th, on in modes:
            if progress is not None:
                progress(f"the tool's operations, {tag(th, on)}")
            torch.set_num_threads(th)
            torch.backends.mkldnn.enabled = on
            hashes.update(ops(tag(th, on)))
        torch.set_num_threads(threads)
        torch.backends.mkldnn.enabled = True
        if with_pipeline:
            hashes.update(
                pipeline(
                    params,
                    zoo,
                    tag(threads),
                    names=names,
                    progress=None if progress is None else lambda n: progress(f"the pipeline's {n}"),
                )
            )
    finally:
        torch.set_num_threads(before)
        torch.backends.mkldnn.enabled = onednn
    state = numerics.state()
    return {
        "machine": machine(),
        "torch": torch.__version__,
        "cpu_capability": state["cpu_capability"],
        "pinned": state["pinned"],
        "env": {k: os.environ.get(k) for k in numerics.PINNED},
        "hashes": hashes,
    }


def measure_as_asked(params, zoo, args, progress=None) -> dict:
    """:func:`measure` as the fingerprint commands' flags ask it (``--all-modes``, ``--no-ops``, ``--no-pipeline``,
    ``--models``): ``reproduce fingerprint`` here and its emulated run (:mod:`benchmark.reproduce.emulate`)."""
    return measure(
        params,
        zoo,
        all_modes=args.all_modes,
        with_ops=not args.no_ops,
        with_pipeline=not args.no_pipeline,
        names=args.models,
        progress=progress,
    )
