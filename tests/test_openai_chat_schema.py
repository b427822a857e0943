"""Request bodies for the openai provider validate against OpenAI's own OpenAPI schema.

The schema is ``CreateChatCompletionRequest`` in ../shared/wire/specs/openai_openapi.yaml
(openai/openai-openapi f85dbe22, API 2.3.0, 2026-08-21), with ``$ref``s resolved inside the
document. The file still marks nullable fields with OpenAPI 3.0's ``nullable: true``; those are
read as ``type: [X, "null"]`` (what ``nullable`` means) so JSON Schema 2020-12 can check them.
The top level is closed (``unevaluatedProperties: false``): a field the API does not define,
such as another provider's ``reasoning`` or ``thinking``, fails validation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from polythink import Client, Effort, Message, Source, ThinkingUnsupportedError, Tool, ToolCall
from polythink.reasoning import all_capabilities
from tests.conftest import SPECS, cassette, shared_file

pytestmark = pytest.mark.fixture_replay

DOC_URI = "urn:openai-openapi"


def _nullable_to_json_schema(node: Any) -> Any:
    if isinstance(node, dict):
        node = {k: _nullable_to_json_schema(v) for k, v in node.items()}
        if node.pop("nullable", False):
            kind = node.get("type")
            if isinstance(kind, str):
                node["type"] = [kind, "null"]
            elif kind is None:
                node = {"anyOf": [node, {"type": "null"}]}
        return node
    if isinstance(node, list):
        return [_nullable_to_json_schema(v) for v in node]
    return node


@pytest.fixture(scope="session")
def chat_request_validator() -> jsonschema.protocols.Validator:
    path = shared_file(SPECS / "openai_openapi.yaml")
    # libyaml's loader parses the 3 MB file about ten times faster where it is available.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    document = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    document = _nullable_to_json_schema(document)
    registry: Registry[Any] = Registry().with_resource(
        DOC_URI, Resource.from_contents(document, default_specification=DRAFT202012)
    )
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": f"{DOC_URI}#/components/schemas/CreateChatCompletionRequest",
        "unevaluatedProperties": False,
    }
    return jsonschema.Draft202012Validator(schema, registry=registry)


ANSWER = {
    "id": "chatcmpl-1",
    "model": "gpt-5.5",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}\n\n'
    b"data: [DONE]\n\n"
)


class Capture:
    """An httpx client whose transport records every body and answers with a fixed reply."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.http = httpx.AsyncClient(transport=httpx.MockTransport(self._answer))

    def _answer(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        if body.get("stream"):
            return httpx.Response(
                200, content=STREAM, headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=ANSWER)


async def _body(model: str = "gpt-5.5", *, stream: bool = False, **call: Any) -> dict[str, Any]:
    capture = Capture()
    source = Source("openai", model, api_key="sk-schema-0000000000")
    async with capture.http, Client([source], http_client=capture.http) as client:
        messages = call.pop("messages", [{"role": "user", "content": "hi"}])
        if stream:
            async for _ in client.stream(messages, **call):
                pass
        else:
            await client.complete(messages, **call)
    assert len(capture.bodies) == 1
    return capture.bodies[0]


def _errors(validator: jsonschema.protocols.Validator, body: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]


WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    strict=True,
)
CALL_ARGS = '{"city":"Paris"}'


def _call(call_id: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, name="get_weather", arguments=arguments)


def _shapes() -> Iterator[tuple[str, dict[str, Any]]]:
    yield "plain", {}
    yield "streaming with usage", {"stream": True}
    yield (
        "system and developer turns",
        {
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "developer", "content": "answer in French"},
                {"role": "user", "content": "hi"},
            ]
        },
    )
    yield (
        "content parts",
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "describe"}]},
            ]
        },
    )
    for choice in (
        "auto",
        "required",
        "none",
        {"type": "function", "function": {"name": "get_weather"}},
    ):
        yield f"tools + tool_choice {choice}", {"tools": [WEATHER], "tool_choice": choice}
    yield (
        "tool dict in OpenAI shape",
        {
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "lookup",
                        "parameters": {"type": "object", "properties": {}},
                    },
                }
            ]
        },
    )
    yield (
        "multi-turn with tool calls and results",
        {
            "tools": [WEATHER],
            "messages": [
                {"role": "user", "content": "Weather in Paris and Rome?"},
                Message(
                    role="assistant",
                    tool_calls=(_call("call_1", CALL_ARGS), _call("call_2", '{"city":"Rome"}')),
                ),
                Message(role="tool", content="18C", tool_call_id="call_1"),
                {"role": "tool", "content": "24C", "tool_call_id": "call_2"},
                {"role": "assistant", "content": "Paris 18C, Rome 24C."},
                {"role": "user", "content": "Thanks"},
            ],
        },
    )
    yield (
        "assistant turn with reasoning from another provider",
        {
            "messages": [
                {"role": "user", "content": "hi"},
                Message(
                    role="assistant",
                    content="hello",
                    reasoning="thought",
                    reasoning_items=({"type": "reasoning.text", "text": "t"},),
                    reasoning_format="openrouter",
                ),
                {"role": "user", "content": "again"},
            ]
        },
    )
    yield "stop string", {"stop": "END"}
    yield "stop list", {"stop": ["END", "\n\n"]}
    # OpenAI takes sampling parameters only while the model does not reason.
    yield "temperature and top_p", {"temperature": 0.2, "top_p": 0.9, "reasoning_effort": "none"}
    yield "max tokens", {"max_tokens": 256}
    yield (
        "everything at once, streamed",
        {
            "stream": True,
            "tools": [WEATHER],
            "tool_choice": "auto",
            "stop": ["x"],
            "temperature": 1.0,
            "top_p": 1.0,
            "max_tokens": 1000,
            "reasoning_effort": "high",
        },
    )


@pytest.mark.anyio
@pytest.mark.parametrize(("label", "call"), list(_shapes()), ids=[s[0] for s in _shapes()])
async def test_body_shapes_validate(
    chat_request_validator: jsonschema.protocols.Validator, label: str, call: dict[str, Any]
) -> None:
    body = await _body(**call)
    assert _errors(chat_request_validator, body) == []
    assert "max_tokens" not in body
    for message in body["messages"]:
        assert set(message) <= {"role", "content", "tool_calls", "tool_call_id", "name"}


def _reasoning_cases() -> list[tuple[str, str]]:
    return [(cap.model, tier.value) for cap in all_capabilities("openai") for tier in Effort]


@pytest.mark.anyio
@pytest.mark.parametrize(("model", "tier"), _reasoning_cases())
async def test_every_reasoning_tier_on_every_openai_model_validates(
    chat_request_validator: jsonschema.protocols.Validator, model: str, tier: str
) -> None:
    try:
        body = await _body(model, reasoning_effort=tier, max_tokens=4000)
    except ThinkingUnsupportedError:
        return
    assert _errors(chat_request_validator, body) == []
    assert body["max_completion_tokens"] == 4000
    assert set(body) <= {"model", "messages", "stream", "max_completion_tokens", "reasoning_effort"}


# The api.openai.com recordings, replayed as in test_openai_chat_replay.py: (cassette,
# interaction, the call's keywords other than the recorded messages and tools).
OPENAI_RECORDINGS = [
    ("pai_openai_chat_o3mini_max_completion_tokens.yaml", 0, {"max_tokens": 100}),
    ("pai_openai_chat_reasoning_effort_and_responses.yaml", 1, {"reasoning_effort": "high"}),
    ("pai_openai_chat_plain_stream_include_usage.yaml", 0, {"stream": True}),
    ("pai_openai_chat_plain_stream_include_usage.yaml", 1, {"stream": True}),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "index", "call"), OPENAI_RECORDINGS)
async def test_replayed_openai_request_bodies_validate(
    chat_request_validator: jsonschema.protocols.Validator,
    name: str,
    index: int,
    call: dict[str, Any],
) -> None:
    recorded = cassette(name).interactions[index].request_body
    if "tools" in recorded:
        call = {**call, "tools": recorded["tools"], "tool_choice": recorded["tool_choice"]}
    body = await _body(recorded["model"], messages=recorded["messages"], **call)
    assert body == recorded
    assert _errors(chat_request_validator, body) == []


def test_the_closed_schema_rejects_foreign_fields(
    chat_request_validator: jsonschema.protocols.Validator,
) -> None:
    base = {"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}]}
    assert _errors(chat_request_validator, base) == []
    assert _errors(chat_request_validator, {**base, "reasoning": {"effort": "high"}}) != []
    assert _errors(chat_request_validator, {**base, "reasoning_effort": "ultra"}) != []
    assert _errors(chat_request_validator, {**base, "stop": 3}) != []
