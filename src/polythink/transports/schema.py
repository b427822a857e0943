"""Structured output on each wire: the schema transforms, and what each source sends.

Pure functions, no I/O. A :class:`~polythink.types.ResponseFormat` becomes an
:class:`OutputPlan` per source: the body fields to set, an instruction for the system prompt
where the provider has no schema field, and the notes that go into ``response.warnings``.
Transforms and plans are computed once per (wire, provider, model, format) and remembered;
the transformed schemas are shared between calls and must be treated as read-only (see
:func:`merge_output`).

Per wire (facts: ``../shared/wire/STRUCTURED.md``, all sources read 2026-12-01):

- OpenAI Chat Completions: ``response_format`` ``json_schema`` (``name``, ``schema``,
  ``strict``, ``description``) or ``json_object`` (§1.1). Responses: ``text.format`` with the
  same fields, flat (§2). Strict mode takes a subset of JSON Schema (§1.2):
  :func:`openai_strict_schema`.
- Anthropic: ``output_config.format`` ``{"type": "json_schema", "schema"}`` (GA, no beta
  header, §3.1) with its own subset (§3.2), without recursion: :func:`anthropic_schema`.
  Models without it (``structured_output.toml``) answer through one forced tool (§3.5), which
  manual thinking rejects. There is no schema-less JSON mode: ``json_object`` becomes an
  instruction.
- Gemini: ``generationConfig.responseMimeType`` ``application/json`` with
  ``responseJsonSchema`` (§4.1), which takes JSON Schema as is on every current model
  (``responseSchema``, the OpenAPI subset, is not needed): :func:`gemini_schema` keeps the
  keywords it documents; recursion only through properties that are not required. Models
  before Gemini 3 refuse JSON output beside function tools (§4.2). Neither Anthropic nor
  Gemini has a field for the format's name or description: the description goes into the
  schema's root ``description``, the name is not sent.
- Compatible providers (§5): OpenRouter passes ``response_format`` on with
  ``provider.require_parameters`` so it is routed only where it is supported; DeepSeek, GLM
  and Kimi document ``json_object`` only, and Qwen ``json_schema`` on listed models only, so
  a schema goes into the prompt with ``json_object``; MiniMax documents neither, so it gets
  the instruction alone; xAI, Mistral, vLLM and Ollama take ``json_schema`` as given; Groq
  decodes strictly only on its listed models.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from polythink.errors import OutputFormatUnsupportedError
from polythink.reasoning.capabilities import normalise_model_name
from polythink.transports.base import deep_merge
from polythink.types import Message, ResponseFormat
from polythink.wire_json import loads_json

__all__ = [
    "OutputPlan",
    "SchemaChanges",
    "UnsupportedSchema",
    "anthropic_output",
    "anthropic_schema",
    "chat_output",
    "for_call",
    "gemini_output",
    "gemini_schema",
    "json_instruction",
    "listed",
    "mentions_json",
    "merge_output",
    "openai_strict_schema",
    "responses_output",
]


class UnsupportedSchema(ValueError):
    """A schema a wire cannot express; the message says where and what to change."""


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """What one source sends for a :class:`~polythink.types.ResponseFormat`.

    Attributes:
        fields: top-level body fields (``response_format``, ``text``, ``output_config``,
            ``generationConfig``, ``tools``, ``tool_choice``, ``provider``), shared between
            calls: put them with :func:`merge_output`.
        instruction: text to append to the system prompt, or ``None``.
        notes: what was sent differently from what was asked, for ``response.warnings``.
        tool: Anthropic's forced-tool fallback: the output tool's name (its input is the
            answer), else ``None``.
        json_word: the provider refuses JSON mode unless a message says "json"; the
            transport adds :func:`json_instruction` when none does.
    """

    fields: Mapping[str, Any]
    instruction: str | None = None
    notes: tuple[str, ...] = ()
    tool: str | None = None
    json_word: bool = False


# ---------------------------------------------------------------- per-model facts


@functools.cache
def _table() -> Mapping[str, Any]:
    text = resources.files("polythink.transports").joinpath("structured_output.toml")
    return tomllib.loads(text.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1024)
def listed(section: str, key: str, model: str) -> bool:
    """Whether ``model`` is in ``structured_output.toml``'s ``[section] key`` list (exact
    lookup form, or a prefix for an entry ending in ``*``)."""
    name = normalise_model_name(model)
    for entry in _table().get(section, {}).get(key, ()):
        if name == entry or (entry.endswith("*") and name.startswith(entry[:-1])):
            return True
    return False


# ---------------------------------------------------------------- walking a schema

_CHILD_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_CHILD_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_CHILD_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")

Visit = Callable[[dict[str, Any], tuple[str, ...]], dict[str, Any]]


def _where(path: tuple[str, ...]) -> str:
    return "/".join(path) if path else "the root"


def _walk(node: Any, path: tuple[str, ...], visit: Visit) -> Any:
    """Rebuild ``node``: ``visit`` rewrites each schema's own keywords, then its subschemas
    are walked. Booleans (``true``/``false`` schemas) are given to ``visit`` wrapped as
    ``{"$bool": value}``."""
    if isinstance(node, bool):
        node = {"$bool": node}
    if not isinstance(node, Mapping):
        raise UnsupportedSchema(f"{_where(path)} is not a schema: {node!r}")
    out = visit(dict(node), path)
    for key in _CHILD_MAPS:
        children = out.get(key)
        if isinstance(children, Mapping):
            out[key] = {
                name: _walk(child, (*path, key, name), visit) for name, child in children.items()
            }
    for key in _CHILD_LISTS:
        children = out.get(key)
        if isinstance(children, list):
            out[key] = [
                _walk(child, (*path, key, str(i)), visit) for i, child in enumerate(children)
            ]
    for key in _CHILD_ONE:
        child = out.get(key)
        if isinstance(child, Mapping):
            out[key] = _walk(child, (*path, key), visit)
    return out


def _definitions(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Local definitions by their ``$ref`` (``#/$defs/X``, ``#/definitions/X``)."""
    found: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        for name, value in (schema.get(key) or {}).items():
            found[f"#/{key}/{name}"] = value
    return found


def _refs(node: Any) -> set[str]:
    """Every ``$ref`` under ``node``."""
    out: set[str] = set()
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str):
            out.add(ref)
        for value in node.values():
            out |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            out |= _refs(value)
    return out


def _own(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The root schema without its definitions."""
    return {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}


def _recursive(schema: Mapping[str, Any]) -> set[str]:
    """The refs that take part in a cycle (``"#"`` when the root refers to itself)."""
    edges = {ref: _refs(body) for ref, body in _definitions(schema).items()}
    edges["#"] = _refs(_own(schema))
    return _cyclic(edges)


def _cyclic(edges: Mapping[str, set[str]]) -> set[str]:
    """The nodes of ``edges`` (ref -> refs it reaches) that lie on a cycle."""
    cyclic: set[str] = set()
    for start in edges:
        stack, seen = list(edges.get(start, ())), set()
        while stack:
            ref = stack.pop()
            if ref == start:
                cyclic.add(start)
                break
            if ref in seen:
                continue
            seen.add(ref)
            stack.extend(edges.get(ref, ()))
    return cyclic


def _root_resolved(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with a root ``$ref`` to a local definition replaced by that definition.

    pydantic gives a recursive model as ``{"$defs": {...}, "$ref": "#/$defs/Node"}``: an
    object behind a ``$ref``. The definition's keywords come into the root, the root's own
    (``$defs``, a ``description``) win, and ``$defs`` stays, so references inside it still
    resolve: what openai-python's ``to_strict_json_schema`` does with a ``$ref`` that has
    sibling keys (STRUCTURED.md §1.4 rule 5). A ``$ref`` to ``#`` or to nothing local is
    left as it is.
    """
    defs = _definitions(schema)
    seen: set[str] = set()
    out = schema
    while isinstance(ref := out.get("$ref"), str) and ref in defs and ref not in seen:
        seen.add(ref)
        target = defs[ref]
        if not isinstance(target, Mapping):
            break
        out = {**target, **{k: v for k, v in out.items() if k != "$ref"}}
    return out


def _described(schema: Mapping[str, Any], description: str | None) -> Mapping[str, Any]:
    """``schema`` (its root ``$ref`` resolved) with ``description`` as its root
    ``description``, before any the schema has (a model's docstring), for the wires that
    have no field of their own for it (Anthropic's ``output_config.format``, Gemini)."""
    root = _root_resolved(schema)
    if description is None:
        return root
    own = root.get("description")
    text = f"{description}\n\n{own}" if isinstance(own, str) and own else description
    return {**root, "description": text}


def _close(node: dict[str, Any], path: tuple[str, ...], wire: str, remedy: str) -> None:
    """Give an object schema ``additionalProperties: false``, which both strict wires
    require (§1.2, §3.2).

    Raises:
        UnsupportedSchema: the object allows other keys (``true`` or a schema, as a
            ``dict[str, X]`` field makes).
    """
    extra = node.get("additionalProperties", False)
    if extra is not False:
        raise UnsupportedSchema(
            f"{_where(path)} allows keys beyond its properties (additionalProperties "
            f"{json.dumps(extra)}; a dict[str, X] field does this), which {wire} does not "
            f"support: use a list of key/value objects{remedy}"
        )
    node["additionalProperties"] = False


def _note(node: dict[str, Any], moved: Mapping[str, Any]) -> None:
    """Keep keywords a wire cannot take as words in the description (the answer is still
    validated against the original schema, where polythink has it)."""
    if not moved:
        return
    text = ", ".join(
        f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in moved.items()
    )
    description = node.get("description")
    node["description"] = f"{description} ({text})" if description else f"({text})"


_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$anchor",
        "$comment",
        "title",
        "description",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "discriminator",
    }
)
"""Keywords that constrain nothing: a wire that does not take them changes nothing the
provider enforces, so their loss is not reported."""
_LISTED_PATHS = 5


class SchemaChanges:
    """What a transform changed in a schema that the provider then enforces differently,
    by kind, each with the JSON paths (``$.properties.b``) where; rendered by
    :meth:`notes` into ``response.warnings``. Built once per schema and wire, with the
    transform, and remembered with it.

    Kinds: ``dropped`` (keywords not sent), ``described`` (keywords sent as words in a
    ``description``), ``required`` (optional properties made required), ``any_of``
    (``oneOf`` sent as ``anyOf``). Annotations (``title``, ``examples``, ``$comment`` …)
    and ``default: null`` (pydantic's mark of an optional field) are not recorded.
    """

    __slots__ = ("_found",)

    def __init__(self) -> None:
        self._found: dict[str, dict[str, list[str]]] = {}

    def add(self, kind: str, keyword: str, path: tuple[str, ...]) -> None:
        """Record ``keyword`` changed in the ``kind`` way at the schema ``path``."""
        paths = self._found.setdefault(kind, {}).setdefault(keyword, [])
        where = _json_path(path)
        if where not in paths:
            paths.append(where)

    def keywords(
        self, kind: str, node: Mapping[str, Any], keys: Any, path: tuple[str, ...]
    ) -> None:
        """Record those of ``keys`` (taken from ``node``) that constrain the answer."""
        for key in keys:
            if key in _ANNOTATIONS or (key == "default" and node.get(key) is None):
                continue
            self.add(kind, key, path)

    def notes(self, wire: str) -> tuple[str, ...]:
        """One warning per kind of change, ``wire`` naming the provider's schema dialect:
        ``response_format: gemini does not take pattern, default (at $.properties.b): not
        sent; the answer is validated locally against them``."""
        out: list[str] = []
        against = "the answer is validated locally against them"
        for kind, found in self._found.items():
            if kind == "dropped":
                out.append(f"{wire} does not take {_grouped(found)}: not sent; {against}")
            elif kind == "described":
                out.append(
                    f"{wire} does not take {_grouped(found)}: sent as words in the "
                    f"description; {against}"
                )
            elif kind == "required":
                paths = [path for paths in found.values() for path in paths]
                out.append(
                    f"{wire} requires every property: made {_paths(paths)} required, so the "
                    f"model always fills {'it' if len(paths) == 1 else 'them'}"
                )
            else:
                out.append(
                    f"{wire} does not take oneOf (at {_paths(found['oneOf'])}): sent as anyOf; "
                    "the answer is validated locally against oneOf"
                )
        return tuple(f"response_format: {note}" for note in out)


def _json_path(path: tuple[str, ...]) -> str:
    """A schema path as JSONPath: ``("properties", "b")`` -> ``$.properties.b``, list
    indexes in brackets, other names quoted."""
    out = "$"
    for i, part in enumerate(path):
        if part.isdigit() and i and path[i - 1] in _CHILD_LISTS:
            out += f"[{part}]"
        elif part.replace("$", "_").replace("-", "_").isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def _paths(paths: Sequence[str]) -> str:
    listed = ", ".join(paths[:_LISTED_PATHS])
    if len(paths) > _LISTED_PATHS:
        listed += f", ... ({len(paths)} in all)"
    return listed


def _grouped(found: Mapping[str, list[str]]) -> str:
    """``{"minimum": [a], "pattern": [b], "default": [b]}`` as ``minimum (at a), pattern,
    default (at b)``: keywords found at the same paths are named together."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for keyword, paths in found.items():
        groups.setdefault(tuple(paths), []).append(keyword)
    return ", ".join(f"{', '.join(names)} (at {_paths(paths)})" for paths, names in groups.items())


_cache: dict[tuple[str, str], Any] = {}
_CACHE_SIZE = 512


def _remember(kind: str, fmt: ResponseFormat[Any], build: Callable[[], Any]) -> Any:
    """``build()`` once per ``(kind, fmt.key)``; an :class:`UnsupportedSchema` is
    remembered and raised again."""
    key = (kind, fmt.key)
    found = _cache.get(key)
    if found is None:
        try:
            found = build()
        except UnsupportedSchema as exc:
            found = exc
        if len(_cache) >= _CACHE_SIZE:
            del _cache[next(iter(_cache))]
        _cache[key] = found
    if isinstance(found, UnsupportedSchema):
        raise found
    return found


# ---------------------------------------------------------------- OpenAI strict mode

_OPENAI_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_OPENAI_REFUSED = ("not", "if", "then", "else", "dependentRequired", "dependentSchemas")
_OPENAI_MAX_DEPTH = 10
_OPENAI_MAX_PROPERTIES = 5000
_OPENAI_MAX_ENUM = 1000


def openai_strict_schema(
    schema: Mapping[str, Any], changes: SchemaChanges | None = None
) -> dict[str, Any]:
    """The schema as OpenAI's strict mode takes it (STRUCTURED.md §1.2, OAI-DOC-SO 2026-07).

    Every object gets ``additionalProperties: false`` and lists every property in
    ``required`` (an optional field becomes one the model always fills; a nullable one
    keeps its ``null`` branch). Two rewrites openai-python's ``to_strict_json_schema``
    lacks (§1.4): every ``default`` is removed, since the API answers ``'default' is not
    permitted`` (openai-python drops only ``default: None``); and ``oneOf`` becomes
    ``anyOf`` with pydantic's ``discriminator`` dropped, since the API answers ``'oneOf' is
    not permitted`` (livekit/agents#5302). A root ``$ref`` (pydantic's recursive models)
    is resolved into the root with ``$defs`` kept, so recursion through ``$defs`` stays
    (strict mode supports it, §1.2). A one-element ``allOf`` is inlined; a ``$ref``
    with sibling keywords (which the API refuses) is inlined when its definition is not
    recursive, else loses the siblings; a ``format`` outside the supported list moves into
    the description. ``changes`` records what the provider will enforce differently.

    Raises:
        UnsupportedSchema: a keyword strict mode refuses (``not``, ``if``/``then``/``else``,
            ``dependentRequired``, ``dependentSchemas``, an ``allOf`` of several schemas,
            tuple ``prefixItems``, a boolean schema), an object that allows extra keys
            (``additionalProperties`` other than false, as ``dict[str, X]`` fields make), a
            root that is not an object, or more than 10 levels, 5000 properties or 1000
            enum values.
    """
    schema = _root_resolved(schema)
    defs = _definitions(schema)
    cyclic = _recursive(schema)
    counts = {"properties": 0, "enum": 0}
    record = changes if changes is not None else SchemaChanges()

    def visit(node: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        if "$bool" in node:
            raise UnsupportedSchema(
                f"{_where(path)} is a boolean schema ({str(node['$bool']).lower()}): give it "
                "an explicit type"
            )
        for key in _OPENAI_REFUSED:
            if key in node:
                raise UnsupportedSchema(
                    f"{_where(path)} uses {key!r}, which OpenAI strict mode does not support: "
                    "express it without it, or pass strict=False"
                )
        if "default" in node:
            record.keywords("dropped", node, ("default",), path)
            del node["default"]
        node.pop("discriminator", None)
        if "oneOf" in node:
            record.add("any_of", "oneOf", path)
            node["anyOf"] = [*node.get("anyOf", ()), *node.pop("oneOf")]
        all_of = node.pop("allOf", None)
        if all_of is not None:
            if not isinstance(all_of, list) or len(all_of) != 1:
                raise UnsupportedSchema(
                    f"{_where(path)} uses 'allOf' with several schemas, which OpenAI strict "
                    "mode does not support: merge them into one object schema"
                )
            node = {**all_of[0], **node} if isinstance(all_of[0], Mapping) else node
            return visit(node, path)
        ref = node.get("$ref")
        if isinstance(ref, str) and len(node) > 1:
            target = defs.get(ref)
            if isinstance(target, Mapping) and ref not in cyclic:
                inlined = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
                return visit(inlined, path)
            record.keywords("dropped", node, [key for key in node if key != "$ref"], path)
            node = {"$ref": ref}
        if "prefixItems" in node:
            raise UnsupportedSchema(
                f"{_where(path)} is a tuple (prefixItems), which OpenAI strict mode does not "
                "support: use a list or an object"
            )
        fmt = node.get("format")
        if fmt is not None and fmt not in _OPENAI_FORMATS:
            record.add("described", "format", path)
            _note(node, {"format": node.pop("format")})
        if isinstance(node.get("enum"), list):
            counts["enum"] += len(node["enum"])
        properties = node.get("properties")
        if node.get("type") == "object" or isinstance(properties, Mapping):
            _close(node, path, "OpenAI strict mode", ", or pass strict=False")
            names = list(properties) if isinstance(properties, Mapping) else []
            node["properties"] = dict(properties) if isinstance(properties, Mapping) else {}
            given = node.get("required")
            for name in names:
                if not isinstance(given, list) or name not in given:
                    record.add("required", name, (*path, "properties", name))
            node["required"] = names
            counts["properties"] += len(names)
            depth = sum(1 for part in path if part in ("properties", "items"))
            if depth >= _OPENAI_MAX_DEPTH:
                raise UnsupportedSchema(
                    f"{_where(path)} is nested {depth + 1} levels deep; OpenAI strict mode "
                    f"takes at most {_OPENAI_MAX_DEPTH}: flatten the schema"
                )
        return node

    root: dict[str, Any] = _walk(schema, (), visit)
    if root.get("type") != "object":
        if "anyOf" in root:
            got = "anyOf"
        elif "$ref" in root:
            got = f"$ref {root['$ref']!r}, which names no local definition"
        else:
            got = repr(root.get("type"))
        raise UnsupportedSchema(
            f"the root must be an object schema in OpenAI strict mode (got {got}): wrap it in "
            "an object with one property"
        )
    if counts["properties"] > _OPENAI_MAX_PROPERTIES:
        raise UnsupportedSchema(
            f"the schema has {counts['properties']} object properties; OpenAI strict mode "
            f"takes at most {_OPENAI_MAX_PROPERTIES}"
        )
    if counts["enum"] > _OPENAI_MAX_ENUM:
        raise UnsupportedSchema(
            f"the schema has {counts['enum']} enum values; OpenAI strict mode takes at most "
            f"{_OPENAI_MAX_ENUM}"
        )
    return root


# ---------------------------------------------------------------- Anthropic

_ANTHROPIC_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
_ANTHROPIC_KEEP = frozenset(
    {
        "type",
        "enum",
        "const",
        "description",
        "title",
        "properties",
        "required",
        "items",
        "anyOf",
        "allOf",
        "$ref",
        "$defs",
        "definitions",
        "additionalProperties",
    }
)
_TYPED = ("type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const")
_ANTHROPIC_MAX_OPTIONAL = 24
_ANTHROPIC_MAX_UNIONS = 16
_RECURSION_REMEDY = (
    "bound its depth (children as a list of ids, or a fixed number of levels), or use a "
    "source that takes recursive schemas (OpenAI, Gemini)"
)


def anthropic_schema(
    schema: Mapping[str, Any], changes: SchemaChanges | None = None
) -> dict[str, Any]:
    """The schema as Anthropic's structured outputs take it (STRUCTURED.md §3.2, ANT-DOC-SO
    2026-08).

    Every object gets ``additionalProperties: false``; ``required`` stays as given (optional
    properties are allowed, unlike OpenAI); ``oneOf`` becomes ``anyOf``; a ``$ref`` keeps no
    sibling keywords; a root ``$ref`` is resolved into the root. Kept: ``type``, ``enum``,
    ``const``, ``description``, ``title``, ``properties``, ``required``, ``items``,
    ``anyOf``, ``allOf``, ``$ref``, ``$defs``,
    ``additionalProperties``, ``format`` when supported, ``minItems`` of 0 or 1; every
    other keyword (``minimum``, ``maxLength``, ``pattern``, ``default`` …) moves into the
    description as words, as anthropic-sdk-python's ``transform_schema`` does (§3.6).
    ``changes`` records what the provider will enforce differently.

    Raises:
        UnsupportedSchema: a recursive schema, an object that allows extra keys, a
            subschema without a type (an ``Any`` field), or more than 24 optional
            properties or 16 union-typed ones (the API answers "Schema is too complex for
            compilation").
    """
    if _recursive(schema):
        raise UnsupportedSchema(
            "the schema is recursive, which Anthropic structured outputs do not support: "
            + _RECURSION_REMEDY
        )
    schema = _root_resolved(schema)
    counts = {"optional": 0, "unions": 0}
    record = changes if changes is not None else SchemaChanges()

    def visit(node: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        if "$bool" in node or not any(key in node for key in _TYPED):
            raise UnsupportedSchema(
                f"{_where(path)} has no type (an Any field has none), which Anthropic "
                "structured outputs do not support: give it one"
            )
        if "oneOf" in node:
            record.add("any_of", "oneOf", path)
            node["anyOf"] = [*node.get("anyOf", ()), *node.pop("oneOf")]
        if isinstance(node.get("$ref"), str):
            record.keywords("dropped", node, [key for key in node if key != "$ref"], path)
            return {"$ref": node["$ref"]}
        moved: dict[str, Any] = {}
        for key in list(node):
            value = node[key]
            if key in _ANTHROPIC_KEEP:
                continue
            if key == "format" and value in _ANTHROPIC_FORMATS:
                continue
            if key == "minItems" and value in (0, 1):
                continue
            del node[key]
            if key != "discriminator" and not (key == "default" and value is None):
                moved[key] = value
        record.keywords("described", moved, moved, path)
        _note(node, moved)
        properties = node.get("properties")
        if node.get("type") == "object" or isinstance(properties, Mapping):
            _close(node, path, "Anthropic structured outputs", "")
            if isinstance(properties, Mapping):
                required = set(node.get("required") or ())
                counts["optional"] += sum(1 for name in properties if name not in required)
                counts["unions"] += sum(
                    1
                    for child in properties.values()
                    if isinstance(child, Mapping)
                    and (
                        "anyOf" in child or "oneOf" in child or isinstance(child.get("type"), list)
                    )
                )
        return node

    out: dict[str, Any] = _walk(schema, (), visit)
    if counts["optional"] > _ANTHROPIC_MAX_OPTIONAL:
        raise UnsupportedSchema(
            f"the schema has {counts['optional']} optional properties; Anthropic compiles at "
            f"most {_ANTHROPIC_MAX_OPTIONAL}: make some required"
        )
    if counts["unions"] > _ANTHROPIC_MAX_UNIONS:
        raise UnsupportedSchema(
            f"the schema has {counts['unions']} properties with a union type (anyOf, or a "
            f"type list such as [string, null]); Anthropic compiles at most "
            f"{_ANTHROPIC_MAX_UNIONS}: make some non-nullable"
        )
    return out


# ---------------------------------------------------------------- Gemini

_GEMINI_KEEP = frozenset(
    {
        "$id",
        "$defs",
        "$ref",
        "$anchor",
        "type",
        "format",
        "title",
        "description",
        "enum",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "properties",
        "additionalProperties",
        "required",
        "propertyOrdering",
    }
)


def gemini_schema(
    schema: Mapping[str, Any],
    changes: SchemaChanges | None = None,
    *,
    property_ordering: bool = False,
) -> dict[str, Any]:
    """The schema as Gemini's ``responseJsonSchema`` takes it (STRUCTURED.md §4.1, GEM-PROTO).

    Keeps the keywords the field documents (``$id``, ``$defs``, ``$ref``, ``$anchor``,
    ``type``, ``format``, ``title``, ``description``, ``enum``, ``items``, ``prefixItems``,
    ``minItems``, ``maxItems``, ``minimum``, ``maximum``, ``anyOf``, ``properties``,
    ``additionalProperties``, ``required``, ``propertyOrdering``); the model ignores others,
    so they are dropped rather than sent. ``oneOf`` becomes ``anyOf``, ``definitions``
    ``$defs``, a ``const`` a one-value ``enum``; a ``$ref`` keeps only its ``$`` keywords.
    With ``property_ordering`` (Gemini 2.0) each object lists its properties in
    ``propertyOrdering``, in schema order. A root ``$ref`` is resolved into the root.
    ``changes`` records what the provider will enforce differently.

    Recursion is kept: "Cyclic references are unrolled to a limited degree and, as such,
    may only be used within non-required properties. (Nullable properties are not
    sufficient.)" (GEM-PROTO ``response_json_schema``).

    Raises:
        UnsupportedSchema: a ``false`` schema (nothing may match it); a cycle of
            references that passes through required properties only.
    """

    record = changes if changes is not None else SchemaChanges()

    def visit(node: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        if "$bool" in node:
            if not node["$bool"]:
                raise UnsupportedSchema(f"{_where(path)} is the false schema: nothing fits it")
            return {}
        if "oneOf" in node:
            record.add("any_of", "oneOf", path)
            node["anyOf"] = [*node.get("anyOf", ()), *node.pop("oneOf")]
        if "definitions" in node:
            node["$defs"] = {**node.pop("definitions"), **node.get("$defs", {})}
        if "const" in node and "enum" not in node:
            node["enum"] = [node.pop("const")]
        if isinstance(node.get("$ref"), str):
            record.keywords("dropped", node, [key for key in node if key[:1] != "$"], path)
            return {key: value for key, value in node.items() if key.startswith("$")}
        record.keywords("dropped", node, [key for key in node if key not in _GEMINI_KEEP], path)
        node = {key: value for key, value in node.items() if key in _GEMINI_KEEP}
        properties = node.get("properties")
        if property_ordering and isinstance(properties, Mapping) and len(properties) > 1:
            node.setdefault("propertyOrdering", list(properties))
        return node

    text = json.dumps(_root_resolved(schema)).replace('"#/definitions/', '"#/$defs/')
    renamed = loads_json(text)
    edges = {ref: _required_refs(body) for ref, body in _definitions(renamed).items()}
    edges["#"] = _required_refs(_own(renamed))
    looping = sorted(_cyclic(edges))
    if looping:
        raise UnsupportedSchema(
            f"{', '.join(looping)} refers back to itself through required properties only; "
            "Gemini takes a cyclic $ref only inside a property that is not required (a "
            "nullable one is not enough): give the recursive field a default (for example "
            "children: list[Node] = []) so it is not required"
        )
    out: dict[str, Any] = _walk(renamed, (), visit)
    return out


def _required_refs(node: Any) -> set[str]:
    """The ``$ref`` under ``node`` reached without passing a property that is not in its
    object's ``required`` (through required properties, ``items`` and unions)."""
    out: set[str] = set()
    if not isinstance(node, Mapping):
        return out
    ref = node.get("$ref")
    if isinstance(ref, str):
        out.add(ref)
    required = node.get("required")
    properties = node.get("properties")
    if isinstance(properties, Mapping) and isinstance(required, list):
        for name in required:
            out |= _required_refs(properties.get(name))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for child in node.get(key) or ():
            out |= _required_refs(child)
    out |= _required_refs(node.get("items"))
    return out


# ---------------------------------------------------------------- instructions

_OBJECT_ONLY = "Answer with one JSON object and nothing else."


def json_instruction(fmt: ResponseFormat[Any]) -> str:
    """The system-prompt text that asks for ``fmt`` where no body field can (it names JSON,
    which JSON modes require of the messages: STRUCTURED.md §1.1, §5.1, §5.2). The schema is
    quoted with its root ``$ref`` resolved and the format's ``description`` as its own."""
    if fmt.schema is None:
        return _OBJECT_ONLY
    schema = json.dumps(
        _described(fmt.schema, fmt.description), separators=(",", ":"), ensure_ascii=False
    )
    return f"{_OBJECT_ONLY[:-1]}, valid against this JSON Schema:\n{schema}"


def mentions_json(messages: Sequence[Message], *extra: str | None) -> bool:
    """Whether a message (or one of ``extra``) says "json", in any case."""
    for text in extra:
        if text and "json" in text.lower():
            return True
    return any("json" in message.text().lower() for message in messages)


def for_call(
    plan: OutputPlan, fmt: ResponseFormat[Any], messages: Sequence[Message], *extra: str | None
) -> OutputPlan:
    """``plan`` as this call sends it: with :func:`json_instruction` added (and a note) when
    the provider's JSON mode needs a message that says "json" and none of ``messages`` or
    ``extra`` (the system suffix) does. Only JSON-mode calls read the messages."""
    if not plan.json_word or mentions_json(messages, *extra):
        return plan
    return dataclasses.replace(
        plan,
        instruction=json_instruction(fmt),
        notes=(
            *plan.notes,
            "JSON mode needs the word JSON in a message and none had it: added "
            f"{_OBJECT_ONLY!r} to the system prompt",
        ),
        json_word=False,
    )


def merge_output(
    body: dict[str, Any], fields: Mapping[str, Any], overrides: Sequence[Mapping[str, Any] | None]
) -> None:
    """Put a plan's ``fields`` into ``body`` without letting later merges change them.

    Each field's top level is a fresh dict (or list) merged with what ``body`` already holds
    there (``generationConfig`` with ``maxOutputTokens``), so the reasoning fragment can add
    to it; the transformed schema inside stays shared. When an ``extra_body`` in
    ``overrides`` sets the same field, the field is copied whole first, so the caller's
    override never reaches the shared value.
    """
    for key, value in fields.items():
        if any(override is not None and key in override for override in overrides):
            deep_merge(body, {key: json.loads(json.dumps(value))})
            continue
        current = body.get(key)
        if isinstance(value, Mapping):
            body[key] = {**current, **value} if isinstance(current, dict) else dict(value)
        elif isinstance(value, list):
            body[key] = list(value)
        else:
            body[key] = value


# ---------------------------------------------------------------- plans

_plans: dict[tuple[Any, ...], OutputPlan] = {}


def _plan(key: tuple[Any, ...], build: Callable[[], OutputPlan]) -> OutputPlan:
    found = _plans.get(key)
    if found is None:
        found = build()
        if len(_plans) >= _CACHE_SIZE:
            del _plans[next(iter(_plans))]
        _plans[key] = found
    return found


def _refused(
    provider: str, model: str, why: str, source_index: int | None
) -> OutputFormatUnsupportedError:
    return OutputFormatUnsupportedError(
        f"{provider} model {model!r} cannot take this response_format: {why}",
        provider=provider,
        source_index=source_index,
        error_type="unsupported_response_format",
    )


def _transformed(
    kind: str,
    fmt: ResponseFormat[Any],
    build: Callable[[Mapping[str, Any], SchemaChanges], dict[str, Any]],
    provider: str,
    model: str,
    source_index: int | None,
    *,
    described: bool = False,
) -> tuple[dict[str, Any], SchemaChanges]:
    """``build(schema, changes)`` and its changes, remembered per ``(kind, fmt)``; with
    ``described`` the format's ``description`` goes into the schema's root first
    (:func:`_described`), for wires without a field of their own for it."""
    schema = fmt.schema or {}
    if described:
        schema = _described(schema, fmt.description)
        kind += ":described"

    def run() -> tuple[dict[str, Any], SchemaChanges]:
        changes = SchemaChanges()
        return build(schema, changes), changes

    try:
        found: tuple[dict[str, Any], SchemaChanges] = _remember(kind, fmt, run)
    except UnsupportedSchema as exc:
        raise _refused(provider, model, str(exc), source_index) from None
    return found


_CHAT_DIALECTS: Mapping[str, str] = {
    "deepseek": "json_object",
    "glm": "json_object",
    "kimi": "json_object",
    "minimax": "prompt",
    "xai": "as_given",
    "mistral": "as_given",
    "vllm": "as_given",
    "ollama": "as_given",
    "groq": "groq",
    "qwen": "qwen",
}
"""How a Chat Completions provider takes a schema (others, OpenRouter and unknown ids
included: OpenAI's way). ``json_object``: DeepSeek ("only json_object", DS-DOC-JSON; 400
"This response_format type is unavailable now" for json_schema, 2026), GLM (GLM-DOC-SO) and
Kimi (KIMI-DOC-JSON) document JSON mode only. ``prompt``: MiniMax documents no JSON mode on
its OpenAI-compatible API (not in STRUCTURED.md; polythink sends no field it would have to
guess). ``as_given``: xAI (its own subset, optional fields allowed, XAI-DOC-SO), Mistral
(MISTRAL-DOC-SO), vLLM (xgrammar/guidance, VLLM-DOC-SO) and Ollama (its compatible
endpoint turns json_schema into its native ``format``, OLLAMA) constrain to the schema as
written."""

_JSON_WORD = frozenset({"openai", "openrouter", "deepseek", "qwen"})
"""Providers whose JSON mode answers 400 unless a message says "json" (OAI-DOC-SO, §1.1;
DeepSeek §5.1; Qwen §5.2; OpenRouter passes it on to them)."""


def _json_object_note(provider: str) -> str:
    return (
        f"{provider} has no json_schema mode here: sent response_format json_object with the "
        "schema in the system prompt; the answer is validated locally"
    )


def chat_output(
    fmt: ResponseFormat[Any],
    *,
    provider: str,
    model: str,
    has_tools: bool,
    source_index: int | None = None,
) -> OutputPlan:
    """The plan for a Chat Completions source.

    OpenAI and unknown providers: ``json_schema`` with ``strict`` (``None`` -> true) and,
    when strict, :func:`openai_strict_schema`; OpenRouter adds ``provider:
    {"require_parameters": true}`` so only endpoints that support it are used (OR-DOC-SO).
    JSON-mode-only providers get ``json_object`` plus the schema in the system prompt, with
    a note. Groq: strict only on its listed models.

    Raises:
        OutputFormatUnsupportedError: ``strict=True`` where the source cannot decode
            strictly; JSON mode with tools on Groq (refused by the API, §5.7); a schema
            strict mode cannot express.
    """
    dialect = _CHAT_DIALECTS.get(provider, "openai")
    if dialect == "qwen":
        dialect = "openai" if listed("qwen", "json_schema", model) else "json_object"
    strict_offered = dialect in ("openai", "as_given") or (
        dialect == "groq" and listed("groq", "strict", model)
    )

    def build() -> OutputPlan:
        extra: dict[str, Any] = {}
        if provider == "openrouter":
            extra["provider"] = {"require_parameters": True}
        if fmt.kind == "json_object" or dialect in ("json_object", "prompt"):
            if fmt.strict and fmt.kind == "json_schema":
                raise _refused(
                    provider,
                    model,
                    "it has no json_schema mode (only JSON mode), so strict=True cannot be "
                    "honoured; leave strict unset to accept JSON mode with the schema in the "
                    "prompt",
                    source_index,
                )
            if dialect == "groq" and has_tools:
                raise _refused(
                    provider,
                    model,
                    "Groq rejects JSON mode together with tool calling; drop the tools or "
                    "pass a JSON Schema",
                    source_index,
                )
            if dialect == "prompt":
                return OutputPlan(
                    fields=extra,
                    instruction=json_instruction(fmt),
                    notes=(
                        f"{provider} documents no JSON mode: the format was asked for in the "
                        "system prompt only; the answer is validated locally",
                    ),
                )
            fields = {"response_format": {"type": "json_object"}, **extra}
            if fmt.kind == "json_schema":
                return OutputPlan(
                    fields=fields,
                    instruction=json_instruction(fmt),
                    notes=(_json_object_note(provider),),
                )
            return OutputPlan(fields=fields, json_word=provider in _JSON_WORD)
        strict = fmt.strict if fmt.strict is not None else strict_offered
        if strict and not strict_offered:
            raise _refused(
                provider,
                model,
                "strict decoding is offered only on "
                f"{', '.join(_table()['groq']['strict'])}; pass strict=None or False for "
                "best-effort JSON",
                source_index,
            )
        schema: Mapping[str, Any] | None = fmt.schema
        notes: tuple[str, ...] = ()
        if strict and dialect in ("openai", "groq"):
            schema, changes = _transformed(
                "openai", fmt, openai_strict_schema, provider, model, source_index
            )
            notes = changes.notes(f"{provider} strict mode")
        elif provider == "xai" and schema is not None and _recursive(schema):
            raise _refused(
                provider,
                model,
                f"xAI takes no recursive schema (non-circular $ref only): {_RECURSION_REMEDY}",
                source_index,
            )
        envelope: dict[str, Any] = {"name": fmt.name, "schema": schema, "strict": strict}
        if fmt.description is not None:
            envelope["description"] = fmt.description
        return OutputPlan(
            fields={"response_format": {"type": "json_schema", "json_schema": envelope}, **extra},
            notes=notes,
        )

    return _plan(("chat", provider, model, has_tools, fmt.key), build)


def responses_output(
    fmt: ResponseFormat[Any], *, provider: str, model: str, source_index: int | None = None
) -> OutputPlan:
    """The plan for a Responses source: ``text.format`` ``{"type": "json_schema", "name",
    "schema", "strict", "description"?}`` (strict unless ``strict=False``, with
    :func:`openai_strict_schema`), or ``{"type": "json_object"}``, which needs "json" in an
    input message (``instructions`` alone did not satisfy it, §1.1).

    Raises:
        OutputFormatUnsupportedError: a schema strict mode cannot express.
    """

    def build() -> OutputPlan:
        if fmt.kind == "json_object":
            return OutputPlan(fields={"text": {"format": {"type": "json_object"}}}, json_word=True)
        strict = fmt.strict is not False
        schema = fmt.schema
        notes: tuple[str, ...] = ()
        if strict:
            schema, changes = _transformed(
                "openai", fmt, openai_strict_schema, provider, model, source_index
            )
            notes = changes.notes(f"{provider} strict mode")
        spec: dict[str, Any] = {
            "type": "json_schema",
            "name": fmt.name,
            "schema": schema,
            "strict": strict,
        }
        if fmt.description is not None:
            spec["description"] = fmt.description
        return OutputPlan(fields={"text": {"format": spec}}, notes=notes)

    return _plan(("responses", provider, model, fmt.key), build)


_OUTPUT_TOOL_DESCRIPTION = "Give the answer as this tool's input."


def anthropic_output(
    fmt: ResponseFormat[Any],
    *,
    model: str,
    has_tools: bool,
    prefill: bool,
    provider: str = "anthropic",
    source_index: int | None = None,
) -> OutputPlan:
    """The plan for an Anthropic source.

    ``output_config.format`` ``{"type": "json_schema", "schema": anthropic_schema(...)}`` on
    models that have it (no ``name`` or ``description`` field there, §3.1: the format's
    ``description`` becomes the schema's root ``description``, its ``name`` is not sent); on
    the others (``structured_output.toml``) one tool named and described after the format,
    forced with ``tool_choice: {"type": "tool"}``, whose input is the answer
    (``tool``; the transport turns it back into text). ``json_object`` becomes an
    instruction: the API has no schema-less JSON mode (§3.1). Manual thinking rejects a
    forced tool; the transport checks that once the body holds the thinking fragment.

    Raises:
        OutputFormatUnsupportedError: a prefilled last assistant turn (incompatible with
            ``output_config.format``, §3.1); the forced-tool fallback beside the caller's
            own tools or ``tool_choice``; a schema Anthropic cannot express.
    """
    if prefill and fmt.kind == "json_schema":
        raise _refused(
            provider,
            model,
            "structured outputs cannot continue a prefilled assistant turn (the last message "
            "is the assistant's): end the conversation with a user turn",
            source_index,
        )
    fallback = listed("anthropic", "no_output_format", model)
    if fallback and fmt.kind == "json_schema" and has_tools:
        raise _refused(
            provider,
            model,
            "it has no output_config.format (Claude 4.5 and later have it), and its fallback "
            "forces one output tool, which leaves no room for your tools or tool_choice: drop "
            "them, or use a newer model",
            source_index,
        )

    def build() -> OutputPlan:
        if fmt.kind == "json_object":
            return OutputPlan(
                fields={},
                instruction=json_instruction(fmt),
                notes=(
                    "anthropic has no schema-less JSON mode: the JSON object was asked for in "
                    "the system prompt; the answer is checked locally",
                ),
            )
        schema, changes = _transformed(
            "anthropic",
            fmt,
            anthropic_schema,
            provider,
            model,
            source_index,
            described=not fallback,
        )
        notes = changes.notes(provider)
        if not fallback:
            return OutputPlan(
                fields={"output_config": {"format": {"type": "json_schema", "schema": schema}}},
                notes=notes,
            )
        if schema.get("type") != "object":
            raise _refused(
                provider,
                model,
                "its forced-tool fallback needs an object schema (a tool's input_schema): "
                "wrap the answer in an object",
                source_index,
            )
        tool = {
            "name": fmt.name,
            "description": fmt.description or _OUTPUT_TOOL_DESCRIPTION,
            "input_schema": schema,
        }
        return OutputPlan(
            fields={"tools": [tool], "tool_choice": {"type": "tool", "name": fmt.name}},
            tool=fmt.name,
            notes=(
                f"{provider} model {model!r} has no output_config.format: the answer was "
                f"requested as the input of a forced tool {fmt.name!r}",
                *notes,
            ),
        )

    return _plan(("anthropic", provider, model, fmt.key), build)


def gemini_output(
    fmt: ResponseFormat[Any],
    *,
    model: str,
    has_tools: bool,
    provider: str = "gemini",
    source_index: int | None = None,
) -> OutputPlan:
    """The plan for a Gemini source: ``generationConfig.responseMimeType``
    ``application/json``, with ``responseJsonSchema`` (:func:`gemini_schema`) for a schema.
    ``GenerationConfig`` has no name or description for it (GEM-PROTO): the format's
    ``description`` becomes the schema's root ``description``; its ``name`` is not sent.

    Raises:
        OutputFormatUnsupportedError: function tools on a model before Gemini 3
            (``structured_output.toml``), which answers 400 "Function calling with a
            response mime type: 'application/json' is unsupported" (§4.2).
    """
    if has_tools and listed("gemini", "no_json_with_tools", model):
        raise _refused(
            provider,
            model,
            "Gemini models before Gemini 3 reject JSON output together with function tools "
            "(400 \"Function calling with a response mime type: 'application/json' is "
            'unsupported"): drop the tools for this call, or use a Gemini 3 model',
            source_index,
        )

    def build() -> OutputPlan:
        config: dict[str, Any] = {"responseMimeType": "application/json"}
        notes: tuple[str, ...] = ()
        if fmt.kind == "json_schema":
            ordering = listed("gemini", "property_ordering", model)
            config["responseJsonSchema"], changes = _transformed(
                f"gemini:{ordering}",
                fmt,
                functools.partial(gemini_schema, property_ordering=ordering),
                provider,
                model,
                source_index,
                described=True,
            )
            notes = changes.notes(provider)
        return OutputPlan(fields={"generationConfig": config}, notes=notes)

    return _plan(("gemini", provider, model, fmt.key), build)
