"""Replay every recorded Anthropic exchange through polythink's Client.

Each test rebuilds the recorded call with polythink's own vocabulary, serves the recorded
answer through respx, and checks two things: the body polythink sends equals the recorded
body, and what polythink parses out of the recorded answer (text, reasoning, signatures,
tool calls, finish reason, exact usage). Two-interaction recordings run as real two-turn
conversations: the second request is built from the first response's ``message``, so its
history (thinking blocks with signatures, redacted thinking, tool use) must come back
byte-for-byte as the recording shows.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Source, StreamEvent, ThinkingObservation, Tool, ToolCall, Usage
from tests.cassettes import Interaction
from tests.conftest import cassette

pytestmark = [pytest.mark.anyio, pytest.mark.fixture_replay]

URL = "https://api.anthropic.com/v1/messages"
KEY = "sk-ant-replay-0123456789"


def _answer(interaction: Interaction, chunk: int | None = None) -> httpx.Response:
    content_type = "text/event-stream" if interaction.streamed else "application/json"
    raw = interaction.response_raw
    if chunk is None:
        return httpx.Response(
            interaction.status, content=raw, headers={"content-type": content_type}
        )

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), chunk):
            yield raw[start : start + chunk]

    return httpx.Response(
        interaction.status, content=pieces(), headers={"content-type": content_type}
    )


def _sent(route: respx.Route, index: int) -> Any:
    return json.loads(route.calls[index].request.content)


def _client(model: str, **kwargs: Any) -> Client:
    # The recordings were made on anthropic-version 2023-06-01, and some send temperature.
    kwargs.setdefault("api_version", "2023-06-01")
    return Client([Source("anthropic", model, api_key=KEY, **kwargs)])


def _user(interaction: Interaction, index: int = 0) -> str:
    text = interaction.request_body["messages"][index]["content"][0]["text"]
    assert isinstance(text, str)
    return text


async def test_thinking_nonstream_two_turns() -> None:
    recording = cassette("pai_anthropic_thinking_nonstream.yaml")
    first, second = recording.interactions
    question = _user(first)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(side_effect=[_answer(first), _answer(second)])
        async with _client("claude-sonnet-4-5") as client:
            # minimal = Anthropic's 1024-token floor; 3072 answer tokens + 1024 = max_tokens 4096.
            r1 = await client.complete(
                [{"role": "user", "content": question}], reasoning_effort="minimal", max_tokens=3072
            )
            r2 = await client.complete(
                [
                    {"role": "user", "content": question},
                    r1.message,
                    {"role": "user", "content": _user(second, 2)},
                ],
                reasoning_effort="minimal",
                max_tokens=3072,
            )
    assert _sent(route, 0) == first.request_body
    assert _sent(route, 1) == second.request_body
    headers = route.calls[0].request.headers
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers

    recorded = first.response_json["content"]
    assert r1.reasoning == (
        "This is a straightforward question about pedestrian safety. I should provide clear, "
        "practical advice about crossing the street safely."
    )
    assert r1.text == recorded[1]["text"]
    assert r1.text.startswith("Here's how to cross the street safely:\n\n## Basic Steps")
    assert r1.message.reasoning_items == tuple(recorded)
    assert r1.message.reasoning_items[0]["signature"].startswith("Eq8CCkYICxgCKkDdadQOXMzNBqjr")
    assert r1.message.reasoning_format == "anthropic"
    assert r1.usage == Usage(
        input_tokens=43,
        output_tokens=321,
        reasoning_tokens=None,
        cache_read_tokens=0,
        cache_write_tokens=0,
        cache_write_1h_tokens=0,
    )
    assert (r1.finish_reason, r1.model, r1.id) == (
        "stop",
        "claude-sonnet-4-5-20250929",
        "msg_01TGA8SWcHTTn5674cmicbnJ",
    )
    assert r1.applied_effort == "minimal"
    assert r1.thinking is ThinkingObservation.OBSERVED
    assert r1.tool_calls == []

    assert r2.reasoning is not None
    assert r2.reasoning.startswith("This is an interesting analogy question.")
    assert r2.text.startswith("# How to Cross a River (Using the Street-Crossing Analogy)")
    assert r2.usage == Usage(354, 525, None, 0, 0, 0)
    assert r2.id == "msg_016Vg1RgKdfLjsCLybGjd8Xo"


async def test_redacted_thinking_two_turns() -> None:
    recording = cassette("pai_anthropic_redacted_thinking_nonstream.yaml")
    first, second = recording.interactions
    question = _user(first)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(side_effect=[_answer(first), _answer(second)])
        async with _client("claude-sonnet-4-5-20250929") as client:
            r1 = await client.complete(
                [{"role": "user", "content": question}], reasoning_effort="minimal", max_tokens=3072
            )
            r2 = await client.complete(
                [
                    {"role": "user", "content": question},
                    r1.message,
                    {"role": "user", "content": _user(second, 2)},
                ],
                reasoning_effort="minimal",
                max_tokens=3072,
            )
    assert _sent(route, 0) == first.request_body
    assert _sent(route, 1) == second.request_body
    redacted = r1.message.reasoning_items[0]
    assert redacted["type"] == "redacted_thinking"
    assert redacted["data"].startswith("EvgFCkYIBxgCKkBmxKtCnM3xlr1zpw0Ik4FY0bnznKLdj7TH")
    assert redacted["data"].endswith("/NyJXEjDLMdB6OosO0nmiVWAgZhgB")
    assert redacted == first.response_json["content"][0]
    # Redacted thinking carries no readable text and this answer no thinking-token count, but
    # the redacted block itself is evidence that the model reasoned.
    assert r1.reasoning is None
    assert r1.thinking is ThinkingObservation.OBSERVED
    assert not any("could not confirm" in w for w in r1.warnings)
    assert r1.text.startswith("I notice that your message appears to contain a command")
    assert r1.usage == Usage(92, 196, None, 0, 0, 0)
    assert r2.usage == Usage(168, 232, None, 0, 0, 0)
    assert r2.message.reasoning_items[0]["data"].startswith("EtUFCkYIBxgCKkAE46qlfUcG4eBdm3DIVpKC")


async def test_tool_use_with_thinking_two_turns() -> None:
    recording = cassette("pai_anthropic_tool_use_with_thinking.yaml")
    first, second = recording.interactions
    question = _user(first)
    tool = Tool(
        name="get_user_country",
        description="",
        parameters={"additionalProperties": False, "properties": {}, "type": "object"},
    )
    # budget_tokens 3000 is no tier's budget (tiers give 1024, 2048, 8192, ...), so the
    # recorded thinking object comes in through extra_body with the effort left unset.
    recorded_thinking = {"thinking": {"type": "enabled", "budget_tokens": 3000}}
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(side_effect=[_answer(first), _answer(second)])
        async with _client("claude-sonnet-4-0") as client:
            r1 = await client.complete(
                [{"role": "user", "content": question}],
                tools=[tool],
                tool_choice="auto",
                max_tokens=4096,
                extra_body=recorded_thinking,
            )
            call = r1.tool_calls[0]
            r2 = await client.complete(
                [
                    {"role": "user", "content": question},
                    r1.message,
                    {"role": "tool", "tool_call_id": call.id, "content": "Mexico"},
                ],
                tools=[tool],
                tool_choice="auto",
                max_tokens=4096,
                extra_body=recorded_thinking,
            )
    assert _sent(route, 0) == first.request_body
    expected = copy.deepcopy(second.request_body)
    # The recording client adds is_error: false to tool results; polythink leaves it unset
    # (the API's default), so that one field is removed before comparing.
    del expected["messages"][2]["content"][0]["is_error"]
    assert _sent(route, 1) == expected

    assert r1.tool_calls == [
        ToolCall(id="toolu_01YGzqpRE16Vricda3Aqcejo", name="get_user_country", arguments="{}")
    ]
    assert r1.finish_reason == "tool_calls"
    assert r1.text == (
        "I'll help you find the largest city in your country. First, let me determine which "
        "country you're from."
    )
    assert r1.reasoning is not None
    assert r1.reasoning.endswith("Let me call the get_user_country function first.")
    assert [item["type"] for item in r1.message.reasoning_items] == [
        "thinking",
        "text",
        "tool_use",
    ]
    assert r1.message.reasoning_items[0]["signature"].endswith("XKVa+SkcXhw9EK5/JwYAQ==")
    assert r1.usage == Usage(398, 155, None, 0, 0, 0)
    assert r2.finish_reason == "stop"
    assert r2.text.startswith(
        "Based on the information that you're from Mexico, the largest city in your country is "
        "**Mexico City**"
    )
    assert r2.usage == Usage(566, 126, None, 0, 0, 0)


async def test_adaptive_thinking_with_forced_tool() -> None:
    recording = cassette("pai_anthropic_count_tokens_adaptive_thinking.yaml")
    interaction = recording.interactions[1]
    assert interaction.uri.startswith("https://api.anthropic.com/v1/messages?")
    recorded_tool = interaction.request_body["tools"][0]
    tool = Tool(
        name=recorded_tool["name"],
        description=recorded_tool["description"],
        parameters={
            "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
            "required": ["city", "country"],
            "type": "object",
        },
    )
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(return_value=_answer(interaction))
        async with _client("claude-opus-4-6") as client:
            response = await client.complete(
                [{"role": "user", "content": _user(interaction)}],
                reasoning_effort="auto",
                tools=[tool],
                tool_choice="required",
            )
    # Adaptive thinking with tool_choice "any" went through (HTTP 200): polythink does not
    # refuse a forced tool with adaptive thinking, only with manual thinking.
    assert _sent(route, 0) == interaction.request_body
    assert response.tool_calls == [
        ToolCall(
            id="toolu_015Fq9KhDoiPRuBpiGf2L5bm",
            name="final_result",
            arguments='{"city":"Paris","country":"France"}',
        )
    ]
    assert response.finish_reason == "tool_calls"
    assert response.text == ""
    assert response.message.content is None
    assert response.message.reasoning_items == ()
    assert response.usage == Usage(671, 55, 0, 0, 0, 0)
    # The model skipped thinking under the forced tool, and said so with thinking_tokens: 0.
    assert response.thinking is ThinkingObservation.ABSENT
    assert response.warnings == [
        "model 'claude-opus-4-6' reported 0 reasoning tokens although reasoning_effort='auto' "
        "was sent"
    ]


async def test_prompt_cache_usage_two_turns() -> None:
    recording = cassette("pai_anthropic_plain_prompt_cache_usage.yaml")
    first, second = recording.interactions
    system = first.request_body["system"]
    question = _user(first)
    cache_control = {"cache_control": {"type": "ephemeral", "ttl": "5m"}}
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(side_effect=[_answer(first), _answer(second)])
        async with _client("claude-sonnet-4-5", extra_body=cache_control) as client:
            history: list[Any] = [
                {"role": "system", "content": system},
                {"role": "user", "content": question},
            ]
            r1 = await client.complete(history)
            r2 = await client.complete(
                [*history, r1.message, {"role": "user", "content": _user(second, 2)}]
            )
    assert _sent(route, 0) == first.request_body
    assert _sent(route, 1) == second.request_body
    assert first.request_body["system"] == "You are a helpful assistant."
    # C20 on real numbers: uncached 3 + cache read 1111 (+ cache write 0 / 418).
    assert r1.usage == Usage(1114, 406, None, 1111, 0, 0)
    assert r2.usage == Usage(1532, 33, None, 1111, 418, 0)
    assert r2.text == (
        "Python is a beginner-friendly, versatile programming language widely used for web "
        "development, data science, machine learning, automation, and scientific computing."
    )
    assert r1.message.reasoning_items == ()
    assert r1.thinking is ThinkingObservation.UNKNOWN
    assert r1.applied_effort is None


def _recorded_deltas(raw: bytes, kind: str, field: str) -> list[str]:
    """Delta values read straight from the recorded SSE text, independently of polythink."""
    values = []
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and f'"type":"{kind}"' in line:
            values.append(json.loads(line[6:])["delta"][field])
    return values


async def _stream(client: Client, *args: Any, **kwargs: Any) -> list[StreamEvent]:
    return [event async for event in client.stream(*args, **kwargs)]


async def test_thinking_stream_in_small_chunks() -> None:
    interaction = cassette("pai_anthropic_thinking_stream.yaml").interactions[0]
    raw = interaction.response_raw
    # The recorded quirk: JSON on data: lines followed by padding spaces.
    assert re.search(rb'"signature":""\}\s{3,}\}\n', raw)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(return_value=_answer(interaction, chunk=13))
        async with _client("claude-sonnet-4-0") as client:
            events = await _stream(
                client,
                [{"role": "user", "content": _user(interaction)}],
                reasoning_effort="minimal",
                max_tokens=3072,
            )
    assert _sent(route, 0) == interaction.request_body
    assert route.calls[0].request.headers["accept"] == "text/event-stream"
    thinking = [e.text for e in events if e.type == "reasoning"]
    text = [e.text for e in events if e.type == "text"]
    recorded_thinking = [t for t in _recorded_deltas(raw, "thinking_delta", "thinking") if t]
    assert thinking == recorded_thinking
    assert text == _recorded_deltas(raw, "text_delta", "text")
    assert [e.type for e in events[:2]] == ["reasoning", "reasoning"]
    assert events[-2].type == "usage"
    assert events[-1].type == "done"
    response = events[-1].response
    assert response is not None
    assert response.reasoning == (
        "This is a straightforward question about pedestrian safety. I should provide clear, "
        "helpful advice about how to safely cross a street. This is basic safety information "
        "that could help prevent accidents."
    )
    assert response.text == "".join(text)
    assert response.text.endswith("Always prioritize safety over speed when crossing streets.")
    (signature,) = _recorded_deltas(raw, "signature_delta", "signature")
    assert signature.startswith("EvMCCkYICxgCKkCHP2cSuEdcJK/0rFwq")
    assert response.message.reasoning_items == (
        {"type": "thinking", "thinking": response.reasoning, "signature": signature},
        {"type": "text", "text": response.text},
    )
    assert response.usage == Usage(43, 282, None, 0, 0, 0)
    assert events[-2].usage == response.usage
    assert (response.model, response.id, response.finish_reason) == (
        "claude-sonnet-4-20250514",
        "msg_01ALwQ87pTS7hH1PjSdC9wJD",
        "stop",
    )


@pytest.mark.parametrize(
    ("name", "model", "text", "usage", "model_reported"),
    [
        (
            "llmanthropic_plain_stream.yaml",
            "claude-sonnet-4-5",
            "- Captain\n- Scoop",
            Usage(17, 10, None, 0, 0, 0),
            "claude-sonnet-4-5-20250929",
        ),
        (
            "llmanthropic_effort_no_thinking_stream.yaml",
            "claude-sonnet-4-6",
            "**Pete** and **Scoop**",
            Usage(17, 12, None, 0, 0, 0),
            "claude-sonnet-4-6",
        ),
    ],
)
async def test_llm_anthropic_streams(
    name: str, model: str, text: str, usage: Usage, model_reported: str
) -> None:
    interaction = cassette(name).interactions[0]
    recorded = interaction.request_body
    # The effort recording sends output_config.effort without thinking. polythink never
    # puts that on the wire for a tier (on Sonnet 4.6 it does not switch thinking on, as this
    # very recording shows), so it comes in through extra_body here.
    extra = {"output_config": recorded["output_config"]} if "output_config" in recorded else None
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(return_value=_answer(interaction))
        async with _client(model) as client:
            events = await _stream(
                client,
                [{"role": "user", "content": _user(interaction)}],
                max_tokens=8192,
                temperature=1.0,
                extra_body=extra,
            )
    assert _sent(route, 0) == recorded
    assert (
        route.calls[0].request.headers["anthropic-version"]
        == (interaction.request_headers["anthropic-version"][0])
    )
    response = events[-1].response
    assert response is not None
    assert "".join(e.text or "" for e in events if e.type == "text") == text
    assert response.text == text
    assert response.reasoning is None
    assert not [e for e in events if e.type == "reasoning"]
    assert response.usage == usage
    assert response.model == model_reported
    assert response.finish_reason == "stop"
