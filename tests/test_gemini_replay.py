"""Replay the recorded Gemini traffic through Client, including both two-turn conversations.

The recorded client (google-genai under pydantic-ai) spells some proto fields in snake_case
(``include_thoughts``, ``parameters_json_schema``); the API reads both spellings (proto3 JSON
mapping), and polythink sends lowerCamelCase throughout. Bodies are therefore compared after
turning proto field names into lowerCamelCase (never inside free-form JSON values: schemas,
arguments, function responses). Every other difference is declared in the test with its
reason; the most visible one is the thought signature, which polythink sends back exactly as
received (standard base64) while the recorded client re-encoded it URL-safe.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

import httpx
import pytest
import respx

from polythink import (
    Client,
    Effort,
    Message,
    Source,
    ThinkingObservation,
    Tool,
    ToolCallDelta,
    Usage,
)
from polythink.providers import get_provider
from polythink.transports.gemini import GeminiStreamAssembler
from polythink.transports.sse import SSEDecoder
from tests.cassettes import Interaction
from tests.conftest import cassette

pytestmark = [pytest.mark.anyio, pytest.mark.fixture_replay]

BASE = "https://generativelanguage.googleapis.com/v1beta/models"
_FREE_FORM = frozenset({"parametersJsonSchema", "args", "response", "parameters"})


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def proto_camel(value: Any) -> Any:
    """Proto field names in lowerCamelCase; free-form JSON values left untouched."""
    if isinstance(value, list):
        return [proto_camel(v) for v in value]
    if not isinstance(value, Mapping):
        return value
    out = {}
    for key, item in value.items():
        name = camel(key)
        out[name] = copy.deepcopy(item) if name in _FREE_FORM else proto_camel(item)
    return out


def recorded_answer(interaction: Interaction) -> httpx.Response:
    content_type = interaction.header("content-type") or "application/json"
    return httpx.Response(
        interaction.status, content=interaction.response_raw, headers={"content-type": content_type}
    )


def sent_body(route: respx.Route, call: int = -1) -> Any:
    return json.loads(route.calls[call].request.content)


def signatures(body: Mapping[str, Any]) -> list[str]:
    return [
        part["thoughtSignature"]
        for content in body["contents"]
        for part in content["parts"]
        if "thoughtSignature" in part
    ]


def without_signatures(body: Mapping[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(dict(body))
    for content in stripped["contents"]:
        for part in content["parts"]:
            part.pop("thoughtSignature", None)
    return stripped


def same_signature(sent: str, recorded: str) -> bool:
    """Whether two base64 spellings (standard or URL-safe) carry the same bytes."""
    return base64.b64decode(sent) == base64.urlsafe_b64decode(recorded)


async def test_thinking_nonstream_two_turns_gemini_3_pro() -> None:
    recording = cassette("pai_gemini_thinking_nonstream.yaml")
    first_call, second_call = recording.interactions
    system = "You are a helpful assistant."
    dummy = Tool(
        name="dummy",
        description="",
        parameters={"additionalProperties": False, "properties": {}, "type": "object"},
    )
    modalities = {"generationConfig": {"responseModalities": ["TEXT"]}}
    source = Source(
        "gemini", "gemini-3-pro-preview", api_key="gm-test-key", reasoning_effort="auto"
    )
    question = "How do I cross the street?"
    follow_up = "Considering the way to cross the street, analogously, how do I cross the river?"
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(f"{BASE}/gemini-3-pro-preview:generateContent").mock(
            side_effect=[recorded_answer(first_call), recorded_answer(second_call)]
        )
        async with Client([source]) as client:
            history: list[Any] = [
                {"role": "system", "content": system},
                {"role": "user", "content": question},
            ]
            first = await client.complete(history, tools=[dummy], extra_body=modalities)
            history += [first.message, {"role": "user", "content": follow_up}]
            second = await client.complete(history, tools=[dummy], extra_body=modalities)

    assert route.calls[0].request.headers["x-goog-api-key"] == "gm-test-key"
    assert sent_body(route, 0) == proto_camel(first_call.request_body)

    parts = first_call.response_json["candidates"][0]["content"]["parts"]
    assert first.reasoning == parts[0]["text"]
    assert first.reasoning.startswith("**A Safe Street-Crossing Guide: My Thought Process**")
    assert first.text == parts[1]["text"]
    assert first.finish_reason == "stop"
    assert first.usage == Usage(29, 1737, 1001, None, None)
    assert first.usage.total_tokens == 1766
    assert first.model == "gemini-3-pro-preview"
    assert first.id == "ON4gaYT4Gc20qtsP2bSiiQ0"
    assert first.applied_effort is Effort.AUTO
    assert first.thinking is ThinkingObservation.OBSERVED
    assert first.message.reasoning_format == "gemini"
    assert list(first.message.reasoning_items) == parts

    # Turn two: the model turn goes back verbatim. Its signature is the received standard
    # base64 string; the recorded client sent the same bytes URL-safe.
    sent = sent_body(route, 1)
    recorded = proto_camel(second_call.request_body)
    assert without_signatures(sent) == without_signatures(recorded)
    assert signatures(sent) == [parts[1]["thoughtSignature"]]
    assert "+" in signatures(sent)[0]
    assert "/" in signatures(sent)[0]
    assert "-" in signatures(recorded)[0]
    assert "_" in signatures(recorded)[0]
    assert same_signature(signatures(sent)[0], signatures(recorded)[0])

    reply = second_call.response_json["candidates"][0]["content"]["parts"]
    assert second.reasoning == reply[0]["text"]
    assert second.text == reply[1]["text"]
    assert second.text.startswith("Crossing a river is deceptively similar")
    assert second.usage == Usage(1280, 2073, 1115, None, None)
    assert second.usage.total_tokens == 3353


async def test_thinking_stream_sse_gemini_2_5_pro_crlf() -> None:
    interaction = cassette("pai_gemini_thinking_stream_sse.yaml").interactions[0]
    raw = interaction.response_raw
    assert raw.count(b"\r\n\r\n") == 23
    assert b"\n\n" not in raw.replace(b"\r\n\r\n", b"")
    chunks = [json.loads(block[len(b"data: ") :]) for block in raw.split(b"\r\n\r\n") if block]
    parts = [chunk["candidates"][0]["content"]["parts"][0] for chunk in chunks]
    thoughts = "".join(p["text"] for p in parts if p.get("thought"))
    answer = "".join(p["text"] for p in parts if not p.get("thought"))
    signature = parts[4]["thoughtSignature"]

    source = Source("gemini", "gemini-2.5-pro", api_key="gm-test-key", reasoning_effort="auto")
    dummy = Tool(name="dummy", description="", parameters={"type": "object", "properties": {}})
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(f"{BASE}/gemini-2.5-pro:streamGenerateContent?alt=sse").mock(
            return_value=recorded_answer(interaction)
        )
        async with Client([source]) as client:
            received = [
                event
                async for event in client.stream(
                    [
                        {"role": "system", "content": "You are a helpful assistant."},
                        {"role": "user", "content": "How do I cross the street?"},
                    ],
                    tools=[dummy],
                )
            ]
    # The 2025 recording's client declared the tool in the OpenAPI-subset `parameters`
    # (type OBJECT); polythink sends the tool's JSON Schema as `parametersJsonSchema`.
    expected = proto_camel(interaction.request_body)
    declaration = expected["tools"][0]["functionDeclarations"][0]
    assert declaration.pop("parameters") == {"properties": {}, "type": "OBJECT"}
    declaration["parametersJsonSchema"] = {"type": "object", "properties": {}}
    assert sent_body(route) == expected
    assert expected["generationConfig"] == {"thinkingConfig": {"includeThoughts": True}}

    assert [e.type for e in received].count("reasoning") == 4
    assert [e.type for e in received].count("text") == 19
    assert [e.type for e in received][-2:] == ["usage", "done"]
    final = received[-1].response
    assert final is not None
    assert "".join(e.text or "" for e in received if e.type == "reasoning") == thoughts
    assert "".join(e.text or "" for e in received if e.type == "text") == answer
    assert final.reasoning == thoughts
    assert final.text == answer
    assert final.finish_reason == "stop"
    assert final.usage == Usage(34, 1256, 787, None, None)
    assert final.usage.total_tokens == 1290
    assert final.model == "gemini-2.5-pro"
    # Streamed parts are rebuilt as one thought part and one answer part; the signature
    # stays on the answer part it arrived with.
    assert list(final.message.reasoning_items) == [
        {"text": thoughts, "thought": True},
        {"text": answer, "thoughtSignature": signature},
    ]


def test_crlf_stream_split_at_every_third_byte_assembles_the_same() -> None:
    interaction = cassette("pai_gemini_thinking_stream_sse.yaml").interactions[0]
    raw = interaction.response_raw
    results = []
    for size in (len(raw), 3):
        decoder = SSEDecoder()
        assembler = GeminiStreamAssembler(get_provider("gemini"), 0, "gemini-2.5-pro")
        for start in range(0, len(raw), size):
            for _, data in decoder.feed(raw[start : start + size]):
                assembler.feed(json.loads(data))
        response = assembler.response()
        results.append(
            (response.text, response.reasoning, response.usage, response.message.reasoning_items)
        )
    assert results[0] == results[1]
    assert results[0][2] == Usage(34, 1256, 787, None, None)


async def test_function_call_stream_two_turns_with_thought_signature() -> None:
    recording = cassette("pai_gemini_stream_function_call_thought_signature.yaml")
    first_call, second_call = recording.interactions
    get_country = Tool(
        name="get_country",
        description="",
        parameters={"additionalProperties": False, "properties": {}, "type": "object"},
    )
    modalities = {"generationConfig": {"responseModalities": ["TEXT"]}}
    url = f"{BASE}/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    question = "What is the capital of the user country? Call the tool"
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(
            side_effect=[recorded_answer(first_call), recorded_answer(second_call)]
        )
        async with Client([Source("gemini", "gemini-3-pro-preview", api_key="k")]) as client:
            first = [
                e
                async for e in client.stream(
                    [{"role": "user", "content": question}],
                    tools=[get_country],
                    extra_body=modalities,
                )
            ]
            turn = first[-1].response
            assert turn is not None
            call = turn.tool_calls[0]
            history = [
                {"role": "user", "content": question},
                turn.message,
                Message(role="tool", tool_call_id=call.id, content='{"return_value": "Mexico"}'),
            ]
            second = [
                e async for e in client.stream(history, tools=[get_country], extra_body=modalities)
            ]

    assert sent_body(route, 0) == proto_camel(first_call.request_body)
    received_part = json.loads(first_call.response_raw.split(b"\r\n\r\n")[0][len(b"data: ") :])[
        "candidates"
    ][0]["content"]["parts"][0]
    assert [e.type for e in first] == ["tool_call_delta", "tool_call", "usage", "done"]
    assert first[0].tool_call_delta == ToolCallDelta(
        index=0, id="call_c4c04ab5e827f50cd6efb3b2", name="get_country", arguments="{}"
    )
    assert first[1].tool_call == call
    assert call.name == "get_country"
    assert call.arguments == "{}"
    assert call.id == "call_c4c04ab5e827f50cd6efb3b2"
    assert turn.finish_reason == "tool_calls"
    assert turn.text == ""
    assert turn.reasoning is None
    assert turn.usage == Usage(29, 212, 202, None, None)
    assert turn.usage.total_tokens == 241
    assert turn.thinking is ThinkingObservation.OBSERVED
    # The closing empty text part carries nothing and is not kept (the recorded client
    # drops it too); the function call part keeps its signature.
    assert list(turn.message.reasoning_items) == [received_part]

    sent = sent_body(route, 1)
    recorded = proto_camel(second_call.request_body)
    # Gemini sent the call without an id; polythink sends it back as received, so neither the
    # call nor its response carries the id the recorded client made up ("pyd_ai_…").
    recorded_call = recorded["contents"][1]["parts"][0]["functionCall"]
    recorded_answer_part = recorded["contents"][2]["parts"][0]["functionResponse"]
    assert recorded_call.pop("id").startswith("pyd_ai_")
    assert recorded_answer_part.pop("id") == recorded_call_id(second_call)
    assert without_signatures(sent) == without_signatures(recorded)
    assert signatures(sent) == [received_part["thoughtSignature"]]
    assert same_signature(signatures(sent)[0], signatures(recorded)[0])

    final = second[-1].response
    assert final is not None
    assert [e.text for e in second if e.type == "text"] == [
        "The capital of Mexico",
        " is Mexico City.",
    ]
    assert final.text == "The capital of Mexico is Mexico City."
    assert final.finish_reason == "stop"
    assert final.usage == Usage(257, 8, None, None, None)
    assert final.thinking is ThinkingObservation.UNKNOWN
    assert final.requested_effort is None


def recorded_call_id(interaction: Interaction) -> str:
    return str(interaction.request_body["contents"][1]["parts"][0]["functionCall"]["id"])
