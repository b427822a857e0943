"""Recursive schemas: the body each wire gets, the wires that refuse them, and the simulator's
answers to them.

pydantic gives a recursive model as ``{"$defs": {"Node": ...}, "$ref": "#/$defs/Node"}``: an
object behind a root ``$ref``. Facts (``../shared/wire/STRUCTURED.md``, read 2026-12-01):
OpenAI strict mode takes ``$defs`` + ``$ref`` recursion (§1.2), and openai-python's
``to_strict_json_schema`` unravels a ``$ref`` that has sibling keys (the root's ``$defs``) into
the node, keeping ``$defs`` (§1.4 rule 5); Anthropic takes no recursive schema (§3.2); Gemini's
``responseJsonSchema`` unrolls cyclic references only inside properties that are not required,
"Nullable properties are not sufficient" (§4.1, GEM-PROTO); xAI takes non-circular ``$ref``
only (§5.5).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from polythink import Client, ResponseFormat, Source
from polythink.conversion import coerce_messages
from polythink.errors import InvalidInputError, OutputFormatUnsupportedError
from polythink.providers import get_provider
from polythink.simulator import Settings, Simulator
from polythink.simulator.behaviour import example_value
from polythink.transports import anthropic, gemini, openai_chat, openai_responses
from polythink.types import Request


class Node(BaseModel):
    v: int
    children: list[Node] = []


class Tree(BaseModel):
    root: Node


class Strict(BaseModel):
    v: int
    children: list[Strict]


class Link(BaseModel):
    v: int
    next: Link | None


USER = [{"role": "user", "content": "Grow a tree"}]

# pydantic's schema of Node: the input every wire below starts from.
NODE_BODY = {
    "properties": {
        "v": {"title": "V", "type": "integer"},
        "children": {
            "default": [],
            "items": {"$ref": "#/$defs/Node"},
            "title": "Children",
            "type": "array",
        },
    },
    "required": ["v"],
    "title": "Node",
    "type": "object",
}
NODE_SCHEMA = {"$defs": {"Node": NODE_BODY}, "$ref": "#/$defs/Node"}

# OpenAI strict mode: the root $ref unravelled into the root, $defs kept so the recursion
# still resolves, every property required, additionalProperties false, no default.
OPENAI_NODE_BODY = {
    "properties": {
        "v": {"title": "V", "type": "integer"},
        "children": {"items": {"$ref": "#/$defs/Node"}, "title": "Children", "type": "array"},
    },
    "required": ["v", "children"],
    "title": "Node",
    "type": "object",
    "additionalProperties": False,
}
OPENAI_NODE = {**OPENAI_NODE_BODY, "$defs": {"Node": OPENAI_NODE_BODY}}

# Gemini responseJsonSchema: the same unravelled root, its documented keywords only
# (default is not one), required as given: children stays optional, which lets it recur.
GEMINI_NODE_BODY = {
    "properties": {
        "v": {"title": "V", "type": "integer"},
        "children": {"items": {"$ref": "#/$defs/Node"}, "title": "Children", "type": "array"},
    },
    "required": ["v"],
    "title": "Node",
    "type": "object",
}
GEMINI_NODE = {**GEMINI_NODE_BODY, "$defs": {"Node": GEMINI_NODE_BODY}}


def request(response_format: Any) -> Request:
    return Request(
        messages=coerce_messages(USER), response_format=ResponseFormat.coerce(response_format)
    )


def chat_body(provider: str, model: str, fmt: Any = Node) -> dict[str, Any]:
    return openai_chat.build_body(request(fmt), model=model, profile=get_provider(provider))


def test_pydantic_schema_is_an_object_behind_a_root_ref() -> None:
    assert Node.model_json_schema() == NODE_SCHEMA


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "gpt-5.5"),
        ("groq", "openai/gpt-oss-120b"),
        ("openrouter", "openai/gpt-5"),
        ("qwen", "qwen3-max-2025-09-23"),
    ],
)
def test_openai_strict_chat_wires_keep_the_recursion(provider: str, model: str) -> None:
    body = chat_body(provider, model)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Node", "schema": OPENAI_NODE, "strict": True},
    }


def test_responses_keeps_the_recursion() -> None:
    body = openai_responses.build_body(
        request(Node), model="gpt-5.5", profile=get_provider("openai-responses")
    )
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "Node", "schema": OPENAI_NODE, "strict": True}
    }


def test_a_self_reference_to_the_root_stays_as_written() -> None:
    schema = {
        "type": "object",
        "properties": {
            "v": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
    }
    body = chat_body("openai", "gpt-5.5", schema)
    assert body["response_format"]["json_schema"]["schema"] == {
        "type": "object",
        "properties": {
            "v": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
        "required": ["v", "children"],
        "additionalProperties": False,
    }


def test_gemini_keeps_recursion_through_an_optional_property() -> None:
    body = gemini.build_body(request(Node), profile=get_provider("gemini"), model="gemini-3-flash")
    assert body["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": GEMINI_NODE,
    }


@pytest.mark.parametrize("model", [Strict, Link])
def test_gemini_refuses_recursion_through_required_properties_only(model: type) -> None:
    # Link.next is nullable but required: "Nullable properties are not sufficient".
    name = model.__name__
    with pytest.raises(OutputFormatUnsupportedError) as caught:
        gemini.build_body(request(model), profile=get_provider("gemini"), model="gemini-3-flash")
    assert caught.value.message == (
        f"gemini model 'gemini-3-flash' cannot take this response_format: #/$defs/{name} "
        "refers back to itself through required properties only; Gemini takes a cyclic $ref "
        "only inside a property that is not required (a nullable one is not enough): give the "
        "recursive field a default (for example children: list[Node] = []) so it is not "
        "required"
    )
    assert caught.value.error_type == "unsupported_response_format"


@pytest.mark.parametrize(
    ("provider", "model", "build"),
    [
        (
            "anthropic",
            "claude-sonnet-4-5",
            lambda req: anthropic.build_body(
                req, model="claude-sonnet-4-5", profile=get_provider("anthropic")
            ),
        ),
        ("xai", "grok-4.3", lambda req: chat_body("xai", "grok-4.3", Node)),
    ],
)
def test_wires_without_recursion_refuse_it_saying_what_to_change(
    provider: str, model: str, build: Any
) -> None:
    with pytest.raises(OutputFormatUnsupportedError) as caught:
        build(request(Node))
    why = {
        "anthropic": "the schema is recursive, which Anthropic structured outputs do not support",
        "xai": "xAI takes no recursive schema (non-circular $ref only)",
    }[provider]
    assert caught.value.message == (
        f"{provider} model {model!r} cannot take this response_format: {why}: bound its depth "
        "(children as a list of ids, or a fixed number of levels), or use a source that takes "
        "recursive schemas (OpenAI, Gemini)"
    )


def test_anthropic_resolves_a_root_ref_that_is_not_recursive() -> None:
    point = {
        "type": "object",
        "properties": {"x": {"type": "number"}},
        "required": ["x"],
    }
    schema = {"$defs": {"Point": point}, "$ref": "#/$defs/Point"}
    body = anthropic.build_body(
        request(schema), model="claude-sonnet-4-5", profile=get_provider("anthropic")
    )
    closed = {**point, "additionalProperties": False}
    assert body["output_config"] == {
        "format": {"type": "json_schema", "schema": {**closed, "$defs": {"Point": closed}}}
    }


def test_a_root_ref_to_nothing_is_refused_naming_it() -> None:
    # Refused when the format is built, before any source is tried (nothing is paid).
    with pytest.raises(InvalidInputError) as caught:
        chat_body("openai", "gpt-5.5", {"$defs": {}, "$ref": "#/$defs/Gone"})
    assert type(caught.value) is InvalidInputError
    assert str(caught.value) == (
        "response_format schema root has $ref '#/$defs/Gone', which does not resolve within "
        "the schema: a local $ref is a JSON pointer to a part of it ('#/$defs/Name' with that "
        "name under '$defs', or '#' for the root)"
    )


# ---------------------------------------------------------------- the simulator's answers


def test_the_generator_unrolls_a_recursion_once_then_stops() -> None:
    # Inside a definition already being filled: required properties only, no array items.
    assert example_value(NODE_SCHEMA) == {"v": 1, "children": [{"v": 1}]}
    assert example_value(OPENAI_NODE) == {
        "v": 1,
        "children": [{"v": 1, "children": [{"v": 1, "children": []}]}],
    }
    assert example_value(Link.model_json_schema()) == {"v": 1, "next": {"v": 1, "next": None}}
    root_ref = {
        "type": "object",
        "properties": {
            "v": {"type": "integer"},
            "up": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
        },
    }
    # No property of root_ref is required: the second time in, none is filled.
    assert example_value(root_ref) == {"v": 1, "up": {"v": 1, "up": {}}}


THREE_LEVELS = Node(v=1, children=[Node(v=1, children=[Node(v=1, children=[])])])
TWO_LEVELS = Node(v=1, children=[Node(v=1, children=[])])


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(today="2026-06-01")) as simulator:
        yield simulator


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        # Wires that get the root unravelled (strict schema, Gemini, the schema quoted in
        # the prompt): the root is filled, then Node once, then Node again without items.
        ("openai", "gpt-5.5", THREE_LEVELS),
        ("openai-responses", "gpt-5.5", THREE_LEVELS),
        ("groq", "openai/gpt-oss-120b", THREE_LEVELS),
        ("openrouter", "openai/gpt-5", THREE_LEVELS),
        ("gemini", "gemini-3-flash", THREE_LEVELS),
        ("deepseek", "deepseek-v4-pro", THREE_LEVELS),
        ("minimax", "MiniMax-M3", THREE_LEVELS),
        ("qwen", "qwen3.7-plus", THREE_LEVELS),
        # Wires that take pydantic's schema as written: the root $ref is Node's first entry,
        # and children (optional there) is left out the second time.
        ("mistral", "mistral-small-latest", TWO_LEVELS),
        ("vllm", "qwen3-32b", TWO_LEVELS),
        ("ollama", "qwen3-32b", TWO_LEVELS),
    ],
)
async def test_a_recursive_model_is_answered_and_parsed(
    sim: Simulator, provider: str, model: str, expected: Node
) -> None:
    source = Source(provider, model, base_url=sim.base_url(provider), api_key="sim")
    async with Client([source]) as client:
        response = await client.complete(USER, response_format=Node)
        wrapped = await client.complete(USER, response_format=Tree)
    assert response.parsed == expected
    # Under Tree the root is not Node: Node is entered once, then again without items.
    assert wrapped.parsed == Tree(root=TWO_LEVELS)
