"""A griffe extension: the reStructuredText roles of polythink's docstrings read as Markdown.

The docstrings cross-reference with Sphinx roles (``:class:`~polythink.Client```,
``:func:`resolve```), which Markdown would show as literal text; mkdocstrings (its
``extensions`` option in ``mkdocs.yml``) runs this on every object it loads, and
``hooks.markdown_roles`` rewrites each role.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import griffe

HOOKS = Path(__file__).resolve().parent / "hooks.py"


def _hooks() -> Any:
    """``hooks.py`` beside this file (griffe loads this one by path, not as a package)."""
    spec = importlib.util.spec_from_file_location("polythink_docs_hooks", HOOKS)
    assert spec is not None
    assert spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


class RolesAsMarkdown(griffe.Extension):
    """Rewrite each object's docstring once it is loaded."""

    def __init__(self) -> None:
        super().__init__()
        hooks = _hooks()
        self.rewrite = hooks.markdown_roles
        self.documented = {n for names in hooks.public_names().values() for n in names}

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = self.rewrite(obj.docstring.value, self.documented)
