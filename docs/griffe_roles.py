"""A griffe extension: the reStructuredText roles of polythink's docstrings read as Markdown.

The docstrings cross-reference with Sphinx roles (``:class:`~polythink.Client```,
``:func:`resolve```). mkdocstrings renders docstrings as Markdown, where such a role would
show as literal text: each becomes an inline code span of the name it shows (the last dotted
part after ``~``, else the whole target), and a link to the reference when the target is a
documented public name (``polythink.X`` or ``polythink.errors.X``).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import griffe

HOOKS = Path(__file__).resolve().parent / "hooks.py"

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def _documented() -> set[str]:
    """Every identifier the reference renders (the pages of ``hooks.py`` beside this file)."""
    spec = importlib.util.spec_from_file_location("polythink_docs_hooks", HOOKS)
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return {name for names in hooks.public_names().values() for name in names}


def markdown_roles(text: str, documented: set[str]) -> str:
    """``text`` with every role replaced by a code span, linked when ``documented``."""

    def replace(match: re.Match[str]) -> str:
        short, target = match[1] == "~", match[2].strip()
        shown = target.rsplit(".", 1)[-1] if short else target
        if target in documented:
            return f"[`{shown}`][{target}]"
        return f"`{shown}`"

    return _ROLE.sub(replace, text)


class RolesAsMarkdown(griffe.Extension):
    """Rewrite each object's docstring once it is loaded."""

    def __init__(self) -> None:
        super().__init__()
        self.documented = _documented()

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_roles(obj.docstring.value, self.documented)
