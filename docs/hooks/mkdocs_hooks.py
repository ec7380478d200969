"""MkDocs hooks (``hooks:`` in mkdocs.yml): the generated reference pages and the included sections of
CONTRIBUTING.md are expanded from this checkout's code while the site is built (:mod:`reference`)."""
from __future__ import annotations

import sys
from pathlib import Path

import reference  # docs/hooks/reference.py: MkDocs puts this folder on sys.path while it loads the hook

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the docs describe this checkout's package
    sys.path.insert(0, str(ROOT))


def on_page_markdown(markdown: str, page, config, files) -> str:
    return reference.expand(markdown, ROOT)
