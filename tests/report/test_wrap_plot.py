"""The outlier note under a value axis is wrapped like matplotlib's ``wrap=True``, with fewer measurements.

:func:`benchmark.report.plotaxes.wrap_words` finds each line break by bisection;
the reference here is matplotlib's own ``Text._get_wrapped_text`` (every prefix in
turn) on the same text, and a plain re-statement of that greedy rule.
"""
from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from benchmark.report.plotaxes import _WrappedNote, clip_axis, wrap_words
from benchmark.report.plots import RC_PARAMS, _META

NOTE = ("outside the axis range, drawn as triangles on its edge: single · ts (lcnet035): 0.6567; single · ts "
        "(mnv3s050): 0.07166; duo · unweighted (mnv3s050+lcnet035): 0.07557; duo · uq_only (mnv3s050+lcnet035): "
        "0.07027; soup · uniform (lite0-s0+lite0-s1+lite0-s2+lite0-s3+lite0-s4): 0.03052; a-very-long-unbreakable-"
        "name-that-is-wider-than-the-whole-figure-on-its-own-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx: 1\n"
        "a second paragraph  with two spaces")


def _greedy(text: str, width: float, measure) -> str:
    """Matplotlib's rule restated: add words while the line fits; at least one word per line."""
    out = []
    for para in text.split("\n"):
        words = para.split(" ")
        while words:
            take = 1
            while take < len(words) and measure(" ".join(words[:take + 1])) <= width:
                take += 1
            out.append(" ".join(words[:take]))
            words = words[take:]
    return "\n".join(out)


@pytest.mark.parametrize("width", [1, 10, 37, 80, 200, 10_000])
def test_same_lines_as_the_greedy_rule(width):
    calls = []

    def measure(s):
        calls.append(s)
        return len(s)

    got = wrap_words(NOTE, width, measure)
    assert got == _greedy(NOTE, width, len)
    if width == 10_000:
        assert got == NOTE
    assert all(len(line) <= width or " " not in line for line in got.split("\n"))


def test_bisection_measures_far_fewer_prefixes():
    n = []
    wrap_words(NOTE * 3, 120, lambda s: n.append(s) or len(s))
    linear = []
    _greedy(NOTE * 3, 120, lambda s: linear.append(s) or len(s))
    assert len(n) < len(linear) / 2, (len(n), len(linear))


def _note_figure(cls, figsize, dpi):
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    a = ax.annotate(NOTE, xy=(0, 0), xycoords="axes fraction", xytext=(0, -34), textcoords="offset points",
                    fontsize=6.5, va="top", wrap=True)
    a.__class__ = cls
    fig.draw_without_rendering()
    return fig, a


@pytest.mark.filterwarnings("ignore:constrained_layout not applied")  # the unbreakable word on the small figure
@pytest.mark.parametrize("figsize,dpi", [((6.6, 4.4), 110), ((6.6, 4.4), 72), ((4.5, 3.5), 100), ((12, 3), 60)])
def test_same_lines_as_matplotlib_wrap(figsize, dpi):
    with matplotlib.rc_context(RC_PARAMS):
        _, ref = _note_figure(Annotation, figsize, dpi)
        _, ours = _note_figure(_WrappedNote, figsize, dpi)
        expected = Annotation._get_wrapped_text(ref)  # matplotlib's own: every prefix in turn
        assert ours._get_wrapped_text() == expected
        assert expected.count("\n") >= 2  # the note really is wrapped at this size


def _outlier_figure():
    fig = Figure(figsize=(6.6, 4.4), layout="constrained")
    ax = fig.add_subplot()
    v = np.r_[np.linspace(0.8, 0.85, 12), 0.1, 0.12]
    ax.scatter(np.arange(len(v)), v)
    clip_axis(ax, v, [f"method number {i} (model-{i}+sidekick-{i})" for i in range(len(v))], x=np.arange(len(v)))
    return fig


def test_clip_axis_note_draws_the_same_bytes_as_a_plain_wrapped_annotation():
    outs = {}
    with matplotlib.rc_context(RC_PARAMS):
        for cls in (_WrappedNote, Annotation):
            fig = _outlier_figure()
            notes = [t for t in fig.axes[0].texts if t.get_wrap()]
            assert len(notes) == 1 and type(notes[0]) is _WrappedNote
            notes[0].__class__ = cls
            for fmt in ("png", "svg"):
                buf = io.BytesIO()
                fig.savefig(buf, format=fmt, dpi=110, metadata=_META[fmt], facecolor="white")
                outs[cls, fmt] = buf.getvalue()
    for fmt in ("png", "svg"):
        assert outs[_WrappedNote, fmt] == outs[Annotation, fmt], fmt
