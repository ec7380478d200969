"""Value axes that show where the methods are: far outliers go to the edge, with a note.

One barely trained model (say 22% accuracy, AURC 0.69) would otherwise put every
other point on the floor of the plot. :func:`robust_range` finds the range of
the non-outliers (Tukey's far-out fences, 3 IQR, and half the
non-outliers' span beyond them); :func:`clip_axis` sets it and
draws each outlier as a triangle on the edge it is beyond, naming it and its
value under the axes.
"""

from __future__ import annotations

import numpy as np

FENCE = 3.0  # IQRs beyond the quartiles: Tukey's "far out"
PAD = 0.08  # of the non-outlier span, on each side
GAP = 0.5  # an outlier is also this many non-outlier spans beyond the nearest non-outlier


def outliers(values, fence: float = FENCE) -> np.ndarray:
    """Mask of far outliers among the finite values (never more than a third of them)."""
    v = np.asarray(values, dtype=float)
    out = np.zeros(v.shape, dtype=bool)
    fin = np.isfinite(v)
    if fin.sum() < 4:
        return out
    q1, q3 = np.percentile(v[fin], [25, 75])
    iqr = q3 - q1
    if iqr <= 0:
        iqr = max(np.median(np.abs(v[fin] - np.median(v[fin]))), 1e-12)
    out[fin] = (v[fin] < q1 - fence * iqr) | (v[fin] > q3 + fence * iqr)
    if out.sum() > fin.sum() / 3:  # a spread-out cloud, not a few strays
        out[:] = False
    rest = v[fin & ~out]
    if out.any() and len(rest):  # a stray must also be far from the rest, not just past a narrow IQR
        lo, hi = rest.min(), rest.max()
        gap = np.where(v > hi, v - hi, lo - v)
        out &= gap > GAP * max(hi - lo, 1e-12)
    return out


def robust_range(values, lows=None, highs=None, pad: float = PAD) -> tuple[float, float, np.ndarray]:
    """``(lo, hi, outlier mask)``: the padded range of the non-outliers (and their intervals)."""
    v = np.asarray(values, dtype=float)
    out = outliers(v)
    keep = np.isfinite(v) & ~out
    if not keep.any():
        return 0.0, 1.0, out
    parts = [v[keep]]
    for b in (lows, highs):
        if b is not None:
            b = np.asarray(b, dtype=float)[keep]
            parts.append(b[np.isfinite(b)])
    allv = np.concatenate(parts)
    lo, hi = float(allv.min()), float(allv.max())
    span = hi - lo if hi > lo else max(abs(hi), 1e-3) * 0.1
    return lo - pad * span, hi + pad * span, out


def clip_axis(ax, values, names, *, lows=None, highs=None, x=None, axis: str = "y") -> list[str]:
    """Limit ``axis`` to the non-outliers; mark each outlier on the edge; return the note lines.

    ``x`` (the other coordinate of each point) places the edge markers; the
    note under the axes names each outlier and its value.
    """
    lo, hi, out = robust_range(values, lows, highs)
    v = np.asarray(values, dtype=float)
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)
    notes = []
    if out.any():
        pos = np.asarray(x, dtype=float) if x is not None else np.zeros(len(v))
        for i in np.flatnonzero(out):
            above = v[i] > hi
            edge = hi if above else lo
            xy = (pos[i], edge) if axis == "y" else (edge, pos[i])
            marker = ("^" if above else "v") if axis == "y" else (">" if above else "<")
            ax.scatter(*xy, marker=marker, s=60, color="0.35", edgecolor="black", lw=0.5, zorder=6, clip_on=False)
            notes.append(f"{names[i]}: {v[i]:.4g}")
        text = "outside the axis range, drawn as triangles on its edge: " + "; ".join(notes)
        ax.annotate(
            text.replace("$", r"\$"),
            xy=(0, 0),
            xycoords="axes fraction",
            xytext=(0, -34),
            textcoords="offset points",
            fontsize=6.5,
            color="0.3",
            va="top",
            wrap=True,
        )
    return notes
