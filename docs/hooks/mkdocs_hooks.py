"""MkDocs hooks (``hooks:`` in mkdocs.yml): the generated reference pages are expanded from this checkout's code
while the site is built (:mod:`reference`). The CONTRIBUTING.md sections some pages show are in their Markdown
already (benchmark/docsgen/includes.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import reference  # docs/hooks/reference.py: MkDocs puts this folder on sys.path while it loads the hook

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the docs describe this checkout's package
    sys.path.insert(0, str(ROOT))


def on_page_markdown(markdown: str, page, config, files) -> str:
    return reference.expand(markdown, ROOT)
