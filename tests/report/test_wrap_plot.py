"""The outlier note under a value axis keeps its ``wrap=True`` lines between draws (:class:`_WrappedNote`).

The reference is matplotlib's own ``Text._get_wrapped_text`` on the same text,
and figures saved with a plain wrapped annotation (the same bytes).
"""
from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from benchmark.report.plotaxes import _WrappedNote, clip_axis
from benchmark.report.plots import RC_PARAMS, _META

NOTE = ("outside the axis range, drawn as triangles on its edge: single · ts (lcnet035): 0.6567; single · ts "
        "(mnv3s050): 0.07166; duo · unweighted (mnv3s050+lcnet035): 0.07557; duo · uq_only (mnv3s050+lcnet035): "
        "0.07027; soup · uniform (lite0-s0+lite0-s1+lite0-s2+lite0-s3+lite0-s4): 0.03052; a-very-long-unbreakable-"
        "name-that-is-wider-than-the-whole-figure-on-its-own-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx: 1\n"
        "a second paragraph  with two spaces")


def test_lines_are_kept_until_text_or_width_changes(monkeypatch):
    with matplotlib.rc_context(RC_PARAMS):
        fig, note = _note_figure(_WrappedNote, (6.6, 4.4), 110)
        measured = []
        real = note._get_rendered_text_width
        monkeypatch.setattr(note, "_get_rendered_text_width", lambda s: measured.append(s) or real(s))
        first = note._get_wrapped_text()
        n = len(measured)
        assert note._get_wrapped_text() == first and len(measured) == n  # kept: nothing measured again
        note.set_text(NOTE.replace("0.6567", "0.65"))
        assert note._get_wrapped_text() != first and len(measured) > n  # another text: wrapped again
        assert note._get_wrapped_text() == Annotation._get_wrapped_text(note)
        fig.set_size_inches(3.3, 4.4)  # narrower: more lines
        assert note._get_wrapped_text().count("\n") > first.count("\n")
        assert note._get_wrapped_text() == Annotation._get_wrapped_text(note)


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
        expected = Annotation._get_wrapped_text(ref)  # matplotlib's own
        assert ours._get_wrapped_text() == expected == Annotation._get_wrapped_text(ours)
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
