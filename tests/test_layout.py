"""The package's layout holds: no two modules import each other, ``types`` imports nothing of
the package, the reasoning decisions and the layers keep to their side (the rules of
``docs/architecture.md``), and names that moved to modules of their own still resolve where
code written before found them.

Imports are read from the source, as a module states them when it is loaded: its top level,
``if`` blocks (``TYPE_CHECKING`` ones included: the type checker follows them) and ``try``
blocks. An import inside a function is not counted: it runs when the function does, which is
how a module loads something heavy or optional only when used.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import polythink.types
from polythink import conversion, wire_json

SRC = Path(polythink.types.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its ``__init__.py``)."""
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = ["polythink", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _statements(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``body`` that run when it does, blocks included."""
    for statement in body:
        if isinstance(statement, ast.Import | ast.ImportFrom):
            yield statement
        elif isinstance(statement, ast.If | ast.With | ast.ClassDef):
            yield from _statements(statement.body)
            if isinstance(statement, ast.If):
                yield from _statements(statement.orelse)
        elif isinstance(statement, ast.Try):
            yield from _statements(statement.body)
            for handler in statement.handlers:
                yield from _statements(handler.body)
            yield from _statements(statement.orelse)
            yield from _statements(statement.finalbody)


def _imported(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The modules of the package that module ``name`` imports when it is loaded."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for statement in _statements(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                parts = alias.name.split(".")
                known = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
                found.update(next(([m] for m in known if m in modules), []))
            continue
        base = statement.module or ""
        if statement.level:
            anchor = package.rsplit(".", statement.level - 1)[0] if statement.level > 1 else package
            base = f"{anchor}.{base}" if base else anchor
        for alias in statement.names:
            if f"{base}.{alias.name}" in modules:
                found.add(f"{base}.{alias.name}")  # a submodule, as in `from pkg import mod`
            elif base in modules:
                found.add(base)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports (read once; not
    to be changed)."""
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One circle of imports (``[a, b, a]``) for each group of modules that reach each other,
    each from its first module in name order; ``[]`` when the imports point one way."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    found = []
    for group in groups:
        start = min(group)
        paths = [[start]]
        while paths:  # breadth first: the shortest way back to the start
            path = paths.pop(0)
            targets = sorted(graph[path[-1]] & group)
            if start in targets:
                found.append([*path, start])
                break
            paths += [[*path, t] for t in targets if t not in path]
    return sorted(found)


def test_the_circle_finder_finds_each_circle_and_only_those() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"a"}}
    assert circles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = import_graph()
    # The scan reads what each module imports, for the type checker too.
    assert {"polythink.types", "polythink.batch"} <= graph["polythink.client"]
    assert "polythink.backends.share" in graph["polythink.backends.local"]
    assert circles(graph) == []


def _outside(graph: Mapping[str, set[str]], prefix: str) -> set[str]:
    """What the modules under ``prefix`` import from the rest of the package."""
    inside = [m for m in graph if m == prefix or m.startswith(prefix + ".")]
    return {t for m in inside for t in graph[m] if t != prefix and not t.startswith(prefix + ".")}


def test_types_imports_nothing_of_the_package() -> None:
    imported = [
        alias.name if isinstance(s, ast.Import) else "." * s.level + (s.module or "")
        for s in _statements(ast.parse((SRC / "types.py").read_text(encoding="utf-8")).body)
        for alias in (s.names if isinstance(s, ast.Import) else [s.names[0]])
    ]
    assert "orjson" in imported  # the scan sees the module's imports
    assert [name for name in imported if name.startswith(("polythink", "."))] == []


def test_reasoning_decides_from_types_errors_and_providers_only() -> None:
    assert _outside(import_graph(), "polythink.reasoning") <= {
        "polythink.types",
        "polythink.errors",
        "polythink.providers",
        "polythink.wire_json",
    }


def test_layers_and_transports_never_import_each_other() -> None:
    graph = import_graph()
    assert "polythink.config" in _outside(graph, "polythink.middleware")
    assert [m for m in _outside(graph, "polythink.middleware") if ".transports" in m] == []
    assert [m for m in _outside(graph, "polythink.transports") if ".middleware" in m] == []


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
