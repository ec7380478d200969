"""Markdown helpers of the generated reference pages (:mod:`reference`, :mod:`cli_reference`)."""

from __future__ import annotations

import re


def _cell(text) -> str:
    """One Markdown table cell: pipes escaped, one line, ``<`` outside code spans as text."""
    return _text(" ".join(str(text).split())).replace("|", "\\|")


def _text(markdown: str) -> str:
    """``<`` and ``>`` outside code spans escaped (``<name>`` in a docstring is a placeholder, not an HTML tag)."""
    parts = re.split(r"(`[^`]*`)", markdown)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts)


def _code(text) -> str:
    return f"`{text}`" if "`" not in str(text) else f"`` {text} ``"


def _slug(text: str) -> str:
    """The anchor MkDocs' toc extension gives a heading (its default slugify)."""
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)
