"""Griffe extension (mkdocs.yml: mkdocstrings' ``extensions``): the package's docstrings are written with reST roles
(``:func:`x```) and double back-quotes; the API pages show them as Markdown code spans."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|obj|exc):`~?([^`]+)`")


def markdown(text: str) -> str:
    return ROLE.sub(r"`\1`", text).replace("``", "`")


class RstRoles(griffe.Extension):
    def on_package(self, *, pkg, **kwargs) -> None:
        todo = [pkg]
        while todo:
            obj = todo.pop()
            if obj.docstring is not None:
                obj.docstring.value = markdown(obj.docstring.value)
            todo.extend(m for m in obj.members.values() if not m.is_alias)
