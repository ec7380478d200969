"""Image corruptions at 5 severities, MNIST-C / CIFAR-10-C style (pure numpy/scipy).

Every corruption maps uint8 (N, H, W) grayscale images to uint8 (N, H, W):
pixels are scaled to ``x = images / 255``, corrupted, clipped to [0, 1] and
rounded back to 0..255. Parameters per severity 1..5 live in
:data:`SEVERITY_PARAMS` (Hendrycks & Dietterich's ImageNet-C values for the three
noises; blur, contrast, pixelate and rotate chosen for 28x28 digits so that
the distance to the clean image grows with severity).

Randomness is per image: image ``i`` draws from a generator seeded by
``(seed, corruption, severity, hash of the image's pixels)``, so the same image
gets the same pixels whatever batch, position or order it comes in (and two
identical images get identical noise).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np
from scipy import ndimage

from benchmark.data.resample import resize

SEVERITIES = (1, 2, 3, 4, 5)

SEVERITY_PARAMS: dict[str, tuple] = {
    "gaussian_noise": (0.08, 0.12, 0.18, 0.26, 0.38),  # std of additive N(0, s^2)
    "shot_noise": (60, 25, 12, 5, 3),  # photons per unit intensity: Poisson(x*c)/c
    "impulse_noise": (0.03, 0.06, 0.09, 0.17, 0.27),  # fraction of pixels set to 0 or 1
    "gaussian_blur": (0.6, 0.9, 1.2, 1.5, 1.8),  # Gaussian sigma in px
    "motion_blur": (3, 5, 7, 9, 11),  # length in px of a line kernel at a random angle
    "contrast": (0.6, 0.45, 0.3, 0.2, 0.1),  # x -> (x - mean) * c + mean
    "pixelate": (14, 10, 8, 6, 5),  # box-downsample to this many px per 28 px, nearest back up
    "rotate": (10, 20, 30, 40, 50),  # degrees, random sign, bilinear
}

Rngs = Sequence[np.random.Generator]


def _gaussian_noise(x: np.ndarray, severity: int, rngs: Rngs) -> np.ndarray:
    s = SEVERITY_PARAMS["gaussian_noise"][severity - 1]
    return x + np.stack([r.normal(0.0, s, size=x.shape[1:]) for r in rngs]) if len(x) else x


def _shot_noise(x: np.ndarray, severity: int, rngs: Rngs) -> np.ndarray:
    c = SEVERITY_PARAMS["shot_noise"][severity - 1]
    return np.stack([r.poisson(xi * c) / c for xi, r in zip(x, rngs)]) if len(x) else x


def _impulse_noise(x: np.ndarray, severity: int, rngs: Rngs) -> np.ndarray:
    amount = SEVERITY_PARAMS["impulse_noise"][severity - 1]
    out = x.copy()
    for xi, r in zip(out, rngs):
        u = r.random(size=(2, *xi.shape))
        hit = u[0] < amount
        xi[hit] = (u[1][hit] < 0.5).astype(np.float64)  # salt or pepper, half each
    return out


def _gaussian_blur(x: np.ndarray, severity: int, rngs: Rngs) -> np.ndarray:
    s = SEVERITY_PARAMS["gaussian_blur"][severity - 1]
    return ndimage.gaussian_filter(x, sigma=(0, s, s), mode="constant")


def _line_kernel(length: int, angle_deg: float) -> np.ndarray:
    """Normalised kernel of a centred line segment (``length`` samples) at ``angle_deg``."""
    t = np.linspace(-(length - 1) / 2, (length - 1) / 2, 4 * length)
    a = np.deg2rad(angle_deg)
    half = length // 2
    k = np.zeros((2 * half + 1, 2 * half + 1))
    np.add.at(k, (np.rint(-t * np.sin(a)).astype(int) + half, np.rint(t * np.cos(a)).astype(int) + half), 1.0)
    return k / k.sum()


def _motion_blur(x: np.ndarray, severity: int, rngs: Rngs) -> np.ndarray:
    length = SEVERITY_PARAMS["motion_blur"][severity - 1]
    out = [ndimage.convolve(xi, _line_kernel(length, r.uniform(-90, 90)), mode="constant") for xi, r in zip(x, rngs)]
    return np.stack(out) if out else x


def _contrast(x: np.ndarray, severity: int, rngs: Rngs) -> np.ndarray:
    c = SEVERITY_PARAMS["contrast"][severity - 1]
    mean = x.mean(axis=(1, 2), keepdims=True)
    return (x - mean) * c + mean


def _pixelate(x: np.ndarray, severity: int, rngs: Rngs) -> np.ndarray:
    px = SEVERITY_PARAMS["pixelate"][severity - 1]
    h, w = x.shape[1:]
    small = resize(x, (max(1, round(h * px / 28)), max(1, round(w * px / 28))), kind="area")
    return resize(small, (h, w), kind="nearest")


def _rotate(x: np.ndarray, severity: int, rngs: Rngs) -> np.ndarray:
    deg = SEVERITY_PARAMS["rotate"][severity - 1]
    out = [
        ndimage.rotate(xi, deg * r.choice((-1, 1)), reshape=False, order=1, mode="constant") for xi, r in zip(x, rngs)
    ]
    return np.stack(out) if out else x


_KERNELS: dict[str, Callable[[np.ndarray, int, Rngs], np.ndarray]] = {
    "gaussian_noise": _gaussian_noise,
    "shot_noise": _shot_noise,
    "impulse_noise": _impulse_noise,
    "gaussian_blur": _gaussian_blur,
    "motion_blur": _motion_blur,
    "contrast": _contrast,
    "pixelate": _pixelate,
    "rotate": _rotate,
}  # name -> fn(x float (N, H, W) in [0, 1], severity, per-image rngs) -> float (N, H, W), unclipped


def check_corruption(name: str, severity: int, where: str = "") -> None:
    """Raise ValueError unless ``name`` is registered and ``severity`` in 1..5."""
    at = f"{where}: " if where else ""
    if name not in _KERNELS:
        raise ValueError(f"{at}unknown corruption {name!r}; choose from {sorted(_KERNELS)}")
    if isinstance(severity, bool) or not isinstance(severity, (int, np.integer)) or severity not in SEVERITIES:
        raise ValueError(f"{at}corruption severity must be an integer in 1..5, got {severity!r}")


def _name_key(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


def image_rngs(images: np.ndarray, name: str, severity: int, seed: int) -> list[np.random.Generator]:
    """One generator per image, seeded by (seed, name, severity, blake2b of the image's bytes)."""
    nk = _name_key(name)
    return [
        np.random.default_rng(
            [seed, nk, severity, int.from_bytes(hashlib.blake2b(img.tobytes(), digest_size=8).digest(), "little")]
        )
        for img in images
    ]


def corrupt(images: np.ndarray, name: str, severity: int, seed: int) -> np.ndarray:
    """Apply corruption ``name`` at ``severity`` (1..5) to uint8 images (N, H, W); returns uint8 (N, H, W)."""
    check_corruption(name, severity)
    images = np.asarray(images)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"corrupt: images must be uint8 (N, H, W), got {images.dtype} {images.shape}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"corrupt: seed must be a non-negative integer, got {seed!r}")
    x = images.astype(np.float64) / 255.0
    y = _KERNELS[name](x, int(severity), image_rngs(images, name, int(severity), int(seed)))
    return np.clip(np.rint(y * 255.0), 0, 255).astype(np.uint8)


def _registered(name: str) -> Callable[[np.ndarray, int, int], np.ndarray]:
    def fn(images: np.ndarray, severity: int, seed: int) -> np.ndarray:
        return corrupt(images, name, severity, seed)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``corrupt(images, {name!r}, severity, seed)``; parameters by severity: {SEVERITY_PARAMS[name]}."
    return fn


CORRUPTIONS: dict[str, Callable[[np.ndarray, int, int], np.ndarray]] = {name: _registered(name) for name in _KERNELS}
"""Registry: name -> ``fn(images uint8 (N, H, W), severity 1..5, seed) -> uint8 (N, H, W)``."""
