"""Sections of ``CONTRIBUTING.md`` written into the docs pages that show them, so that a page reads the same on
GitHub, as plain Markdown and on the docs site.

A page holds a generated block where a section goes::

    <!-- generated:contributing-add-a-method -->
    ## Add a method: one module, one test, one params entry
    ...
    <!-- /generated:contributing-add-a-method -->

The block's name is ``contributing-`` and the start of the section's heading as MkDocs slugs it (``## Add a method:
one module, ...`` -> ``add-a-method-one-module-...``; the name must match exactly one ``## `` heading, whole words).
Its body is that section, from its heading up to the next ``## ``, with its relative links rewritten for the page's
folder. ``CONTRIBUTING.md`` stays the one place the steps are edited; :func:`update` (``python -m
benchmark.docsgen.includes --write``) rewrites the blocks, :func:`stale` lists those that differ
(``tests/docs/test_includes.py`` fails on any). The blocks are rewritten with the README's helper
(:func:`benchmark.docsgen.readme.render`), so both kinds of generated block have one syntax.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from benchmark.docsgen.readme import render, stale_blocks
from benchmark.storage.atomic import write_text

SOURCES = {"contributing": "CONTRIBUTING.md"}  # block name prefix -> the file its sections come from
NAME = re.compile(r"<!-- generated:(?P<name>(?P<source>" + "|".join(SOURCES) + r")-(?P<slug>[\w-]+)) -->")
LINK = re.compile(r"(\]\()(?P<target>[^)\s#]+)(?P<rest>[^)]*\))")
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)


def slug(heading: str) -> str:
    """The anchor MkDocs' toc extension gives a heading (its default slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def section(root, file: str, name: str) -> tuple[int, str]:
    """``(line number, text)`` of the ``## `` section of ``root/file`` whose heading's slug is ``name`` or starts
    with ``name-``: the heading and what follows up to the next ``## `` heading; ``ValueError`` unless exactly one
    heading matches."""
    lines = Path(root, file).read_text(encoding="utf-8").splitlines()
    heads = [
        i
        for i, line in enumerate(lines)
        if line.startswith("## ") and (slug(line[3:]) == name or slug(line[3:]).startswith(name + "-"))
    ]
    if len(heads) != 1:
        found = ", ".join(repr(lines[i]) for i in heads) or "none"
        raise ValueError(
            f"{file}: {len(heads)} sections match {name!r} (a '## ' heading whose slug starts with it: {found})"
        )
    start = heads[0]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return start + 1, "\n".join(lines[start:end]).rstrip() + "\n"


def relink(text: str, source: str, page: str) -> str:
    """``text`` of file ``source`` with its relative Markdown links (outside code blocks) made relative to ``page``'s
    folder (both relative to the repository root)."""

    def one(m):
        target = m.group("target")
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            return m.group(0)
        moved = os.path.relpath(
            os.path.normpath(os.path.join(os.path.dirname(source), target)), os.path.dirname(page) or "."
        )
        return m.group(1) + Path(moved).as_posix() + m.group("rest")

    out, last = [], 0
    for fence in FENCE.finditer(text):
        out += [LINK.sub(one, text[last : fence.start()]), fence.group(0)]
        last = fence.end()
    return "".join(out + [LINK.sub(one, text[last:])])


def page_blocks(root, page: str) -> dict[str, str]:
    """``name -> body`` of every included section that ``root/page`` names, as it should read there."""
    text = Path(root, page).read_text(encoding="utf-8")
    out = {}
    for m in NAME.finditer(text):
        source = SOURCES[m.group("source")]
        _, body = section(root, source, m.group("slug"))
        out[m.group("name")] = (
            f"<!-- {source} section, written by `python -m benchmark.docsgen.includes --write`: "
            f"edit it there -->\n" + relink(body, source, page)
        )
    return out


def pages(root) -> list[str]:
    """The Markdown files under ``root/docs`` that hold an included section (relative, sorted)."""
    root = Path(root)
    return sorted(
        p.relative_to(root).as_posix()
        for p in (root / "docs").rglob("*.md")
        if NAME.search(p.read_text(encoding="utf-8"))
    )


def stale(root=".") -> list[str]:
    """``PAGE: NAME`` of every included section whose copy differs from its source."""
    return [
        f"{page}: {name}"
        for page in pages(root)
        for name in stale_blocks(Path(root, page).read_text(encoding="utf-8"), page_blocks(root, page))
    ]


def update(root=".") -> list[str]:
    """Rewrite the stale included sections; returns them as ``PAGE: NAME``."""
    changed = stale(root)
    for page in sorted({c.split(": ", 1)[0] for c in changed}):
        path = Path(root, page)
        write_text(path, render(path.read_text(encoding="utf-8"), page_blocks(root, page)))
    return changed


def main(argv=None) -> int:
    """``python -m benchmark.docsgen.includes [--write]``: check (exit 1 naming the stale sections) or rewrite the
    included sections of the docs pages."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmark.docsgen.includes",
        description="Write the CONTRIBUTING.md sections that docs pages show into those "
        "pages (their <!-- generated:contributing-... --> blocks), or check them.",
    )
    parser.add_argument(
        "--write", action="store_true", help="rewrite the stale blocks (default: list them, exit 1 if any)"
    )
    parser.add_argument("--root", default=".", help="the repository root (default: the current folder)")
    args = parser.parse_args(argv)
    try:
        done = update(args.root) if args.write else stale(args.root)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for line in done:
        print(("rewrote " if args.write else "stale: ") + line)
    if not args.write and done:
        print("run `python -m benchmark.docsgen.includes --write`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
