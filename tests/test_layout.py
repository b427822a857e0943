"""The package's layout holds: ``types`` imports nothing of the package, and names that moved
to modules of their own still resolve where code written before found them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import polythink.types
from polythink import conversion, wire_json

SRC = Path(polythink.types.__file__).resolve().parent


def _module_level_imports(path: Path) -> list[str]:
    """The modules a file imports in statements that run (or are read by a type checker)
    when it is loaded: its top level, ``if``/``try`` blocks included, not function bodies."""
    found: list[str] = []

    def visit(statements: list[ast.stmt]) -> None:
        for statement in statements:
            if isinstance(statement, ast.Import):
                found.extend(alias.name for alias in statement.names)
            elif isinstance(statement, ast.ImportFrom):
                found.append("." * statement.level + (statement.module or ""))
            elif isinstance(statement, ast.If):
                visit(statement.body)
                visit(statement.orelse)
            elif isinstance(statement, ast.Try):
                visit(statement.body)
                for handler in statement.handlers:
                    visit(handler.body)
                visit(statement.orelse)
                visit(statement.finalbody)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def test_types_imports_nothing_of_the_package() -> None:
    imported = _module_level_imports(SRC / "types.py")
    assert "orjson" in imported  # the scan sees the module's imports
    assert [name for name in imported if name.startswith(("polythink", "."))] == []


MOVED = {
    "PrefixStates": conversion,
    "coerce_messages": conversion,
    "coerce_tools": conversion,
    "tools_memo": conversion,
    "MANAGED_BODY_FIELDS": wire_json,
    "check_extra_body": wire_json,
    "loads_json": wire_json,
}


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_name_that_moved_out_of_types_resolves_there_to_the_same_object(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from polythink.types import {name}", namespace)
    assert namespace[name] is getattr(MOVED[name], name)
    assert name in MOVED[name].__all__
    assert name not in polythink.types.__all__


def test_types_still_refuses_a_name_it_never_had() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'coerce_message'"):
        _ = polythink.types.coerce_message
    with pytest.raises(ImportError, match="coerce_message"):
        exec("from polythink.types import coerce_message", {})
