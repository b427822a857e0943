"""Replay every recorded Chat Completions exchange in ../shared/fixtures/real through ``Client``.

For each recording the same call is built through the public API; respx serves the recorded
response at the recorded URL (streams whole and re-fed in small odd-sized chunks). The tests
assert that

(a) the body polythink sends equals the recorded request body on every field, except the fields
    only the recording client added (listed per recording in ``CLIENT_ONLY``), and
(b) the parsed response carries the recorded text, reasoning, tool calls, finish reason and the
    exact usage numbers (``None`` where the provider did not report a field).

Recordings with two interactions replay as a conversation: the first response's ``message``
(and the tool result) is appended and the second request must equal the recorded one. The
provider comes from the URL host; the effort is the one that yields the recorded reasoning
fields (OpenRouter ``{effort: high, enabled: true}`` <- ``high``, ``{enabled: true}`` <-
``auto``; OpenAI ``reasoning_effort: high`` <- ``high``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import respx

from polythink import (
    Client,
    Effort,
    Message,
    Response,
    Source,
    StreamEvent,
    ThinkingObservation,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from tests.cassettes import Interaction
from tests.chatwire import ODD_SIZES, collect, sent_json, sse_response
from tests.conftest import cassette

pytestmark = pytest.mark.fixture_replay

PROVIDER_BY_HOST = {
    "api.openai.com": "openai",
    "openrouter.ai": "openrouter",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
}
# Fields the recording client (pydantic-ai) adds that polythink does not: ``n`` defaults to 1.
CLIENT_ONLY = {
    "pai_deepseek_reasoner_nonstream.yaml": {"n"},
    "pai_groq_reasoning_format_raw_and_parsed.yaml": {"n"},
}
CHUNKINGS = [None, ODD_SIZES, (1,)]
KEY = "sk-replay-0123456789abcdef"


def _interaction(name: str, index: int = 0) -> Interaction:
    recorded = cassette(name).interactions[index]
    assert recorded.method == "POST"
    assert recorded.status == 200
    return recorded


def _source(recorded: Interaction) -> Source:
    provider = PROVIDER_BY_HOST[urlsplit(recorded.uri).hostname or ""]
    source = Source(provider, recorded.request_body["model"], api_key=KEY)
    assert f"{source.endpoint}/chat/completions" == recorded.uri
    return source


def _served(recorded: Interaction, sizes: tuple[int, ...] | None = None) -> httpx.Response:
    if recorded.streamed:
        return sse_response(recorded.response_raw, sizes)
    return httpx.Response(
        200, content=recorded.response_raw, headers={"content-type": "application/json"}
    )


def _assert_body(sent: dict[str, Any], recorded: Interaction, name: str) -> None:
    only = CLIENT_ONLY.get(name, set())
    assert only <= set(recorded.request_body)
    expected = {k: v for k, v in recorded.request_body.items() if k not in only}
    assert sent == expected


async def _complete(
    name: str, index: int, sizes: tuple[int, ...] | None = None, **call: Any
) -> tuple[Response, dict[str, Any]]:
    recorded = _interaction(name, index)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(recorded.uri).mock(return_value=_served(recorded, sizes))
        async with Client([_source(recorded)]) as client:
            response = await client.complete(**call)
    assert route.call_count == 1
    request = route.calls[0].request
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    sent = sent_json(route.calls[0])
    _assert_body(sent, recorded, name)
    return response, sent


async def _stream(
    name: str, index: int, sizes: tuple[int, ...] | None, **call: Any
) -> tuple[list[StreamEvent], Response]:
    recorded = _interaction(name, index)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(recorded.uri).mock(return_value=_served(recorded, sizes))
        async with Client([_source(recorded)]) as client:
            events = await collect(client.stream(**call))
    assert route.call_count == 1
    assert route.calls[0].request.headers["accept"] == "text/event-stream"
    _assert_body(sent_json(route.calls[0]), recorded, name)
    assert [e.type for e in events].count("done") == 1
    assert events[-1].type == "done"
    response = events[-1].response
    assert response is not None
    assert "".join(e.text or "" for e in events if e.type == "text") == response.text
    streamed_reasoning = "".join(e.text or "" for e in events if e.type == "reasoning")
    assert streamed_reasoning == (response.reasoning or "")
    assert [e.tool_call for e in events if e.type == "tool_call"] == response.tool_calls
    return events, response


def _recorded_message(recorded: Interaction) -> dict[str, Any]:
    message: dict[str, Any] = recorded.response_json["choices"][0]["message"]
    return message


# ---------------------------------------------------------------- OpenAI


@pytest.mark.anyio
async def test_openai_o3mini_max_completion_tokens() -> None:
    name = "pai_openai_chat_o3mini_max_completion_tokens.yaml"
    response, sent = await _complete(
        name, 0, messages=[{"role": "user", "content": "hello"}], max_tokens=100
    )
    assert "max_tokens" not in sent
    assert response.text == "Hello there! How can I help you today?"
    assert response.reasoning is None
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.usage == Usage(
        input_tokens=7,
        output_tokens=87,
        reasoning_tokens=64,
        cache_read_tokens=0,
        cache_write_tokens=None,
    )
    assert response.model == "o3-mini-2025-01-31"
    assert response.id == "chatcmpl-Dr3KNfXKBS1oDOrhqYDuLYdjX9PM4"
    assert (response.provider, response.source_index) == ("openai", 0)
    assert (response.requested_effort, response.applied_effort) == (None, None)
    assert response.thinking is ThinkingObservation.OBSERVED
    assert response.warnings == []
    assert response.output_limited is False


@pytest.mark.anyio
async def test_openai_reasoning_effort_high_with_prior_history() -> None:
    name = "pai_openai_chat_reasoning_effort_and_responses.yaml"
    recorded = _interaction(name, 1)
    history = [dict(m) for m in recorded.request_body["messages"]]
    response, sent = await _complete(name, 1, messages=history, reasoning_effort="high")
    assert sent["reasoning_effort"] == "high"
    assert response.text == _recorded_message(recorded)["content"]
    assert response.text.startswith("When it comes to crossing a river safely")
    assert response.reasoning is None
    assert response.finish_reason == "stop"
    assert response.usage == Usage(
        input_tokens=577,
        output_tokens=2320,
        reasoning_tokens=1792,
        cache_read_tokens=0,
        cache_write_tokens=None,
    )
    assert (response.requested_effort, response.applied_effort) == (Effort.HIGH, Effort.HIGH)
    assert response.thinking is ThinkingObservation.OBSERVED
    assert response.warnings == []


CAPITAL_TOOL = {
    "type": "function",
    "function": {
        "name": "get_capital",
        "description": "",
        "parameters": {
            "additionalProperties": False,
            "properties": {"country": {"type": "string"}},
            "required": ["country"],
            "type": "object",
        },
        "strict": True,
    },
}


@pytest.mark.anyio
@pytest.mark.parametrize("sizes", CHUNKINGS)
async def test_openai_plain_stream_two_turn_tool_conversation(
    sizes: tuple[int, ...] | None,
) -> None:
    name = "pai_openai_chat_plain_stream_include_usage.yaml"
    question = {
        "role": "user",
        "content": "What is the capital of the UK? Use the tool, then answer.",
    }
    events, first = await _stream(
        name, 0, sizes, messages=[question], tools=[CAPITAL_TOOL], tool_choice="auto"
    )
    call = ToolCall(
        id="call_ZR5UUuTt3pf61kjwAJIYdVMj", name="get_capital", arguments='{"country":"UK"}'
    )
    assert [e.type for e in events] == [*["tool_call_delta"] * 6, "tool_call", "usage", "done"]
    cid, name_ = "call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital"
    assert [e.tool_call_delta for e in events[:6]] == [
        ToolCallDelta(index=0, id=cid, name=name_, arguments=piece)
        for piece in ("", '{"', "country", '":"', "UK", '"}')
    ]
    assert events[6].tool_call == call
    assert first.text == ""
    assert first.reasoning is None
    assert first.tool_calls == [call]
    assert first.finish_reason == "tool_calls"
    assert first.usage == Usage(53, 15, 0, 0, None)
    assert events[7].usage == first.usage
    assert first.model == "gpt-4o-mini-2024-07-18"
    assert first.message == Message(role="assistant", content=None, tool_calls=(call,))
    assert first.thinking is ThinkingObservation.ABSENT

    history = [
        question,
        first.message,
        Message(role="tool", content="London", tool_call_id=call.id),
    ]
    events, second = await _stream(
        name, 1, sizes, messages=history, tools=[CAPITAL_TOOL], tool_choice="auto"
    )
    assert [e.text for e in events if e.type == "text"] == [
        "The",
        " capital",
        " of",
        " the",
        " UK",
        " is",
        " London",
        ".",
    ]
    assert second.text == "The capital of the UK is London."
    assert second.tool_calls == []
    assert second.finish_reason == "stop"
    assert second.usage == Usage(78, 9, 0, 0, None)
    assert second.id == "chatcmpl-Dx0Xq5Xx9rHB2ehcHZCRDsnuymUXc"


# ---------------------------------------------------------------- OpenRouter

OR_SIGNATURE = (
    "Et0BCkgIChACGAIqQA2s7h7tA7IG35fbwVkou9PM2hANVJNUwcEM4q12fTRDK6y3v6YoEvJ+7bko8wnW/GLsQFXadaJPAE"
    "MCpLkhI9ISDLjFkeR1aVUIvdCtyBoMrUTovh0jwk+wpnZWIjANV3e6VVdgbGSsEyyTHO6KMmVtqqs79f9blnVdJmmMIwMy"
    "Ti6bEtG59+jTU7v1zlsqQ2IKGZILOlr6adh0Aam7zYttvisys+wjyZZXU1y/Srz0nmp1cFgVOJe1BLKQI3SSRrjsqQC0uAE"
    "UZy0GX0Rq1AXjvIcYAQ=="
)


async def _next_turn_body(source_name: str, index: int, history: list[Any]) -> dict[str, Any]:
    """Send ``history`` to the same endpoint (any valid answer); return the body sent."""
    recorded = _interaction(source_name, index)
    answer = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "5"}, "finish_reason": "stop"}
        ]
    }
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(recorded.uri).mock(return_value=httpx.Response(200, json=answer))
        async with Client([_source(recorded)]) as client:
            await client.complete(history)
    body: dict[str, Any] = sent_json(route.calls[0])
    return body


@pytest.mark.anyio
@pytest.mark.parametrize("sizes", CHUNKINGS)
async def test_openrouter_stream_reasoning_details_merged_and_sent_back(
    sizes: tuple[int, ...] | None,
) -> None:
    name = "pai_openrouter_chat_reasoning_details_stream.yaml"
    question = {"role": "user", "content": "What is 2+2?"}
    events, response = await _stream(name, 0, sizes, messages=[question], reasoning_effort="auto")
    kinds = [e.type for e in events]
    assert kinds == ["reasoning", "reasoning", "reasoning", "text", "text", "usage", "done"]
    assert [e.text for e in events[:5]] == [
        "This",
        " is a simple arithmetic question. ",
        "2+2 equals 4.",
        "2 ",
        "+ 2 = 4",
    ]
    assert response.text == "2 + 2 = 4"
    assert response.reasoning == "This is a simple arithmetic question. 2+2 equals 4."
    details = {
        "type": "reasoning.text",
        "text": "This is a simple arithmetic question. 2+2 equals 4.",
        "signature": OR_SIGNATURE,
        "format": "anthropic-claude-v1",
        "index": 0,
    }
    assert [dict(d) for d in response.message.reasoning_items] == [details]
    assert response.message.reasoning_format == "openrouter"
    assert response.finish_reason == "stop"
    assert response.usage == Usage(43, 36, 13, 0, None)
    assert response.model == "anthropic/claude-sonnet-4.5"
    assert (response.requested_effort, response.applied_effort) == (Effort.AUTO, Effort.AUTO)
    assert response.thinking is ThinkingObservation.OBSERVED

    body = await _next_turn_body(
        name, 0, [question, response.message, {"role": "user", "content": "And 3+3?"}]
    )
    assert body["messages"] == [
        question,
        {"role": "assistant", "content": "2 + 2 = 4", "reasoning_details": [details]},
        {"role": "user", "content": "And 3+3?"},
    ]


@pytest.mark.anyio
async def test_openrouter_effort_high_reasoning_details_kept_verbatim() -> None:
    name = "pai_openrouter_chat_reasoning_effort_high.yaml"
    recorded = _interaction(name)
    question = {"role": "user", "content": "Reply with the single word: ok"}
    response, sent = await _complete(name, 0, messages=[question], reasoning_effort="high")
    assert sent["reasoning"] == {"effort": "high", "enabled": True}
    message = _recorded_message(recorded)
    assert response.text == "ok"
    assert response.reasoning == message["reasoning"]
    assert response.reasoning is not None
    assert response.reasoning.startswith(
        'The user is asking me to reply with the single word "ok".'
    )
    assert [dict(d) for d in response.message.reasoning_items] == message["reasoning_details"]
    assert response.message.reasoning_items[0]["signature"].startswith("EugCCkgIDRABGAIqQPO/")
    assert response.finish_reason == "stop"
    assert response.usage == Usage(43, 53, 48, 0, 0)
    assert response.model == "anthropic/claude-4.5-sonnet-20250929"
    assert (response.requested_effort, response.applied_effort) == (Effort.HIGH, Effort.HIGH)

    body = await _next_turn_body(
        name, 0, [question, response.message, {"role": "user", "content": "Again"}]
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "ok",
        "reasoning_details": message["reasoning_details"],
    }


# ---------------------------------------------------------------- DeepSeek


@pytest.mark.anyio
async def test_deepseek_reasoner_reasoning_content() -> None:
    name = "pai_deepseek_reasoner_nonstream.yaml"
    recorded = _interaction(name)
    response, sent = await _complete(
        name, 0, messages=[{"role": "user", "content": "How do I cross the street?"}]
    )
    assert "n" not in sent
    message = _recorded_message(recorded)
    assert response.text == message["content"]
    assert response.reasoning == message["reasoning_content"]
    assert response.reasoning is not None
    assert response.reasoning.startswith("Okay, the user is asking how to cross the street.")
    assert response.finish_reason == "stop"
    assert response.usage == Usage(12, 789, 415, 0, None)
    assert response.model == "deepseek-reasoner"
    assert response.thinking is ThinkingObservation.OBSERVED
    # DeepSeek takes reasoning_content back only on tool-call turns (DS-DOC), so a plain
    # answer goes back without it.
    body = await _next_turn_body(
        name,
        0,
        [
            {"role": "user", "content": "How do I cross the street?"},
            response.message,
            {"role": "user", "content": "And a river?"},
        ],
    )
    assert body["messages"][1] == {"role": "assistant", "content": message["content"]}


# ---------------------------------------------------------------- Groq


@pytest.mark.anyio
async def test_groq_raw_then_parsed_reasoning_format_conversation() -> None:
    name = "pai_groq_reasoning_format_raw_and_parsed.yaml"
    first_recorded = _interaction(name, 0)
    second_recorded = _interaction(name, 1)
    opening = [
        {"role": "system", "content": "You are a chef."},
        {"role": "user", "content": "I want a recipe to cook Uruguayan alfajores."},
    ]
    first, sent = await _complete(name, 0, messages=opening, extra_body={"reasoning_format": "raw"})
    assert "n" not in sent
    raw = _recorded_message(first_recorded)["content"]
    think, _, after = raw.partition("</think>")
    assert first.reasoning == think.removeprefix("<think>").strip()
    assert first.reasoning.startswith("Okay, so I want to make Uruguayan alfajores.")
    assert first.text == after
    assert first.text.startswith("\n\nTo make Uruguayan alfajores")
    assert first.finish_reason == "stop"
    assert first.usage == Usage(21, 1414, None, None, None)
    assert first.thinking is ThinkingObservation.OBSERVED

    follow_up = {
        "role": "user",
        "content": "Considering the Uruguayan recipe, how can I cook the Argentinian one?",
    }
    second, _ = await _complete(
        name,
        1,
        messages=[*opening, first.message, follow_up],
        extra_body={"reasoning_format": "parsed"},
    )
    message = _recorded_message(second_recorded)
    assert second.text == message["content"]
    assert second.reasoning == message["reasoning"]
    assert second.usage == Usage(524, 1590, None, None, None)
    assert second.usage.reasoning_tokens is None


# ---------------------------------------------------------------- streaming equals non-streaming


@pytest.mark.anyio
async def test_openrouter_stream_split_points_do_not_change_the_response() -> None:
    name = "pai_openrouter_chat_reasoning_details_stream.yaml"
    question = {"role": "user", "content": "What is 2+2?"}
    responses = []
    for sizes in (None, (2,), (5,), (64,), ODD_SIZES):
        _, response = await _stream(name, 0, sizes, messages=[question], reasoning_effort="auto")
        responses.append(response)
    assert all(r == responses[0] for r in responses)
