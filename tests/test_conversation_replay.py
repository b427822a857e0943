"""Every recorded multi-turn conversation, saved to JSON lines and resumed by a new client.

Each test plays the recording's first turn with one client, saves the conversation (the
first answer's ``message`` included) with :func:`save_conversation`, reloads it with
:func:`load_conversation` as another process would on another day, and sends the next turn
from the reloaded messages with a new client. The body of that turn must equal the recorded
second request (with the same declared adjustments as the per-wire replay tests), so the
opaque reasoning items — Anthropic signatures and redacted thinking, Gemini thought
signatures, OpenAI encrypted reasoning — survive the file byte for byte, and the recorded
metadata (provider, model as served, source index, timing) never reaches the wire.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import respx

import polythink.client
from polythink import Client, Message, MessageMetadata, Source, Tool, ToolCall
from polythink.conversation import load_conversation, save_conversation
from tests.cassettes import Interaction
from tests.chatwire import collect, sent_json
from tests.conftest import cassette
from tests.test_anthropic_replay import URL as ANTHROPIC_URL
from tests.test_anthropic_replay import _answer as anthropic_answer
from tests.test_gemini_replay import (
    BASE as GEMINI_BASE,
)
from tests.test_gemini_replay import (
    proto_camel,
    recorded_answer,
    same_signature,
    signatures,
    without_signatures,
)
from tests.test_openai_chat_replay import CAPITAL_TOOL, _served, _source

pytestmark = [pytest.mark.anyio, pytest.mark.fixture_replay]

ANT_KEY = "sk-ant-replay-0123456789"


def reloaded(tmp_path: Path, messages: list[Any]) -> list[Message]:
    """Save ``messages`` to a JSON-lines file and load them back; check the file's shape."""
    path = tmp_path / "conversation.jsonl"
    save_conversation(path, messages)
    loaded = load_conversation(path)
    originals = [Message.coerce(m) for m in messages]
    assert loaded == originals
    assert [m.metadata for m in loaded] == [m.metadata for m in originals]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [m.to_dict() for m in originals]
    return loaded


STARTED_AT = 1_796_000_000.5
"""The wall clock the client reads when a call starts (Unix seconds)."""
STEP = 0.25
"""Seconds the monotonic clock advances per reading: each call takes exactly STEP."""


@pytest.fixture(autouse=True)
def clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter(range(1_000_000))
    monkeypatch.setattr(polythink.client, "_wall_clock", lambda: STARTED_AT)
    monkeypatch.setattr(polythink.client, "_monotonic", lambda: next(readings) * STEP)


def check_metadata(message: Message, provider: str, model: str) -> None:
    assert message.metadata == MessageMetadata(
        provider=provider, model=model, source_index=0, started_at=STARTED_AT, duration=STEP
    )


def _user(interaction: Interaction, index: int = 0) -> str:
    text = interaction.request_body["messages"][index]["content"][0]["text"]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("pai_anthropic_thinking_nonstream.yaml", "claude-sonnet-4-5"),
        ("pai_anthropic_redacted_thinking_nonstream.yaml", "claude-sonnet-4-5-20250929"),
    ],
)
async def test_anthropic_thinking_conversations_resume_from_file(
    tmp_path: Path, name: str, model: str
) -> None:
    first, second = cassette(name).interactions
    question = _user(first)
    with respx.mock(assert_all_called=True) as mock:
        mock.post(ANTHROPIC_URL).mock(return_value=anthropic_answer(first))
        async with Client([Source("anthropic", model, api_key=ANT_KEY)]) as client:
            r1 = await client.complete(
                [{"role": "user", "content": question}], reasoning_effort="minimal", max_tokens=3072
            )
    check_metadata(r1.message, "anthropic", "claude-sonnet-4-5-20250929")
    history = reloaded(tmp_path, [{"role": "user", "content": question}, r1.message])
    assert history[1].reasoning_items == tuple(first.response_json["content"])

    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).mock(return_value=anthropic_answer(second))
        async with Client([Source("anthropic", model, api_key=ANT_KEY)]) as client:
            r2 = await client.complete(
                [*history, {"role": "user", "content": _user(second, 2)}],
                reasoning_effort="minimal",
                max_tokens=3072,
            )
    assert json.loads(route.calls[0].request.content) == second.request_body
    assert r2.message.reasoning_items == tuple(second.response_json["content"])


async def test_anthropic_tool_use_with_thinking_resumes_from_file(tmp_path: Path) -> None:
    first, second = cassette("pai_anthropic_tool_use_with_thinking.yaml").interactions
    question = _user(first)
    tool = Tool(
        name="get_user_country",
        description="",
        parameters={"additionalProperties": False, "properties": {}, "type": "object"},
    )
    call_options: dict[str, Any] = {
        "tools": [tool],
        "tool_choice": "auto",
        "max_tokens": 4096,
        "extra_body": {"thinking": {"type": "enabled", "budget_tokens": 3000}},
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post(ANTHROPIC_URL).mock(return_value=anthropic_answer(first))
        async with Client([Source("anthropic", "claude-sonnet-4-0", api_key=ANT_KEY)]) as c:
            r1 = await c.complete([{"role": "user", "content": question}], **call_options)
    call = r1.tool_calls[0]
    history = reloaded(
        tmp_path,
        [
            {"role": "user", "content": question},
            r1.message,
            Message(role="tool", tool_call_id=call.id, content="Mexico"),
        ],
    )
    assert history[1].tool_calls == (
        ToolCall(id="toolu_01YGzqpRE16Vricda3Aqcejo", name="get_user_country", arguments="{}"),
    )
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).mock(return_value=anthropic_answer(second))
        async with Client([Source("anthropic", "claude-sonnet-4-0", api_key=ANT_KEY)]) as c:
            r2 = await c.complete(history, **call_options)
    expected = copy.deepcopy(second.request_body)
    # The recording client adds is_error: false to tool results (the API's default).
    del expected["messages"][2]["content"][0]["is_error"]
    assert json.loads(route.calls[0].request.content) == expected
    assert r2.finish_reason == "stop"


async def test_anthropic_prompt_cache_conversation_resumes_from_file(tmp_path: Path) -> None:
    first, second = cassette("pai_anthropic_plain_prompt_cache_usage.yaml").interactions
    cache_control = {"cache_control": {"type": "ephemeral", "ttl": "5m"}}
    opening: list[Any] = [
        {"role": "system", "content": first.request_body["system"]},
        {"role": "user", "content": _user(first)},
    ]

    def source() -> Source:
        return Source("anthropic", "claude-sonnet-4-5", api_key=ANT_KEY, extra_body=cache_control)

    with respx.mock(assert_all_called=True) as mock:
        mock.post(ANTHROPIC_URL).mock(return_value=anthropic_answer(first))
        async with Client([source()]) as client:
            r1 = await client.complete(opening)
    history = reloaded(tmp_path, [*opening, r1.message])
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).mock(return_value=anthropic_answer(second))
        async with Client([source()]) as client:
            await client.complete([*history, {"role": "user", "content": _user(second, 2)}])
    assert json.loads(route.calls[0].request.content) == second.request_body


async def test_gemini_thinking_conversation_resumes_from_file(tmp_path: Path) -> None:
    first_call, second_call = cassette("pai_gemini_thinking_nonstream.yaml").interactions
    dummy = Tool(
        name="dummy",
        description="",
        parameters={"additionalProperties": False, "properties": {}, "type": "object"},
    )
    options: dict[str, Any] = {
        "tools": [dummy],
        "extra_body": {"generationConfig": {"responseModalities": ["TEXT"]}},
    }
    url = f"{GEMINI_BASE}/gemini-3-pro-preview:generateContent"

    def source() -> Source:
        return Source("gemini", "gemini-3-pro-preview", api_key="gm-key", reasoning_effort="auto")

    opening: list[Any] = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "How do I cross the street?"},
    ]
    with respx.mock(assert_all_called=True) as mock:
        mock.post(url).mock(return_value=recorded_answer(first_call))
        async with Client([source()]) as client:
            first = await client.complete(opening, **options)
    check_metadata(first.message, "gemini", "gemini-3-pro-preview")
    history = reloaded(tmp_path, [*opening, first.message])
    follow_up = "Considering the way to cross the street, analogously, how do I cross the river?"
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(return_value=recorded_answer(second_call))
        async with Client([source()]) as client:
            await client.complete([*history, {"role": "user", "content": follow_up}], **options)
    sent = json.loads(route.calls[0].request.content)
    recorded = proto_camel(second_call.request_body)
    assert without_signatures(sent) == without_signatures(recorded)
    parts = first_call.response_json["candidates"][0]["content"]["parts"]
    assert signatures(sent) == [parts[1]["thoughtSignature"]]
    assert same_signature(signatures(sent)[0], signatures(recorded)[0])


async def test_gemini_function_call_stream_resumes_from_file(tmp_path: Path) -> None:
    recording = cassette("pai_gemini_stream_function_call_thought_signature.yaml")
    first_call, second_call = recording.interactions
    get_country = Tool(
        name="get_country",
        description="",
        parameters={"additionalProperties": False, "properties": {}, "type": "object"},
    )
    options: dict[str, Any] = {
        "tools": [get_country],
        "extra_body": {"generationConfig": {"responseModalities": ["TEXT"]}},
    }
    url = f"{GEMINI_BASE}/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    question = "What is the capital of the user country? Call the tool"
    with respx.mock(assert_all_called=True) as mock:
        mock.post(url).mock(return_value=recorded_answer(first_call))
        async with Client([Source("gemini", "gemini-3-pro-preview", api_key="k")]) as client:
            events = await collect(
                client.stream([{"role": "user", "content": question}], **options)
            )
    turn = events[-1].response
    assert turn is not None
    check_metadata(turn.message, "gemini", "gemini-3-pro-preview")
    call = turn.tool_calls[0]
    history = reloaded(
        tmp_path,
        [
            {"role": "user", "content": question},
            turn.message,
            Message(role="tool", tool_call_id=call.id, content='{"return_value": "Mexico"}'),
        ],
    )
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(return_value=recorded_answer(second_call))
        async with Client([Source("gemini", "gemini-3-pro-preview", api_key="k")]) as client:
            second = await collect(client.stream(history, **options))
    sent = json.loads(route.calls[0].request.content)
    recorded = proto_camel(second_call.request_body)
    # As in the per-wire replay: the recording client made up call ids Gemini never sent.
    recorded["contents"][1]["parts"][0]["functionCall"].pop("id")
    recorded["contents"][2]["parts"][0]["functionResponse"].pop("id")
    assert without_signatures(sent) == without_signatures(recorded)
    assert same_signature(signatures(sent)[0], signatures(recorded)[0])
    final = second[-1].response
    assert final is not None
    assert final.text == "The capital of Mexico is Mexico City."


async def test_openai_chat_tool_conversation_resumes_from_file(tmp_path: Path) -> None:
    name = "pai_openai_chat_plain_stream_include_usage.yaml"
    first_recorded, second_recorded = cassette(name).interactions
    question = {
        "role": "user",
        "content": "What is the capital of the UK? Use the tool, then answer.",
    }
    options: dict[str, Any] = {"tools": [CAPITAL_TOOL], "tool_choice": "auto"}
    with respx.mock(assert_all_called=True) as mock:
        mock.post(first_recorded.uri).mock(return_value=_served(first_recorded))
        async with Client([_source(first_recorded)]) as client:
            events = await collect(client.stream([question], **options))
    first = events[-1].response
    assert first is not None
    check_metadata(first.message, "openai", "gpt-4o-mini-2024-07-18")
    call = first.tool_calls[0]
    history = reloaded(
        tmp_path,
        [question, first.message, Message(role="tool", content="London", tool_call_id=call.id)],
    )
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(second_recorded.uri).mock(return_value=_served(second_recorded))
        async with Client([_source(second_recorded)]) as client:
            second = await collect(client.stream(history, **options))
    assert sent_json(route.calls[0]) == second_recorded.request_body
    final = second[-1].response
    assert final is not None
    assert final.text == "The capital of the UK is London."


async def test_groq_conversation_resumes_from_file(tmp_path: Path) -> None:
    name = "pai_groq_reasoning_format_raw_and_parsed.yaml"
    first_recorded, second_recorded = cassette(name).interactions
    opening: list[Any] = [
        {"role": "system", "content": "You are a chef."},
        {"role": "user", "content": "I want a recipe to cook Uruguayan alfajores."},
    ]
    with respx.mock(assert_all_called=True) as mock:
        mock.post(first_recorded.uri).mock(return_value=_served(first_recorded))
        async with Client([_source(first_recorded)]) as client:
            first = await client.complete(opening, extra_body={"reasoning_format": "raw"})
    history = reloaded(tmp_path, [*opening, first.message])
    assert history[2].reasoning == first.reasoning
    follow_up = {
        "role": "user",
        "content": "Considering the Uruguayan recipe, how can I cook the Argentinian one?",
    }
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(second_recorded.uri).mock(return_value=_served(second_recorded))
        async with Client([_source(second_recorded)]) as client:
            await client.complete([*history, follow_up], extra_body={"reasoning_format": "parsed"})
    expected = {k: v for k, v in second_recorded.request_body.items() if k != "n"}
    assert sent_json(route.calls[0]) == expected


async def test_responses_encrypted_reasoning_resumes_from_file(tmp_path: Path) -> None:
    recording = cassette("pai_openai_chat_reasoning_effort_and_responses.yaml")
    interaction = recording.interactions[0]
    url = "https://api.openai.com/v1/responses"
    question = interaction.request_body["input"][0]["content"]
    options: dict[str, Any] = {"extra_body": {"reasoning": {"summary": "detailed"}}}

    def source() -> Source:
        return Source("openai-responses", "o3-mini", api_key="sk-test", reasoning_effort="high")

    with respx.mock(assert_all_called=True) as mock:
        mock.post(url).mock(return_value=recorded_answer(interaction))
        async with Client([source()]) as client:
            first = await client.complete([{"role": "user", "content": question}], **options)
    check_metadata(first.message, "openai-responses", "o3-mini-2025-01-31")
    history = reloaded(tmp_path, [{"role": "user", "content": question}, first.message])
    follow_up = "Considering the way to cross the street, analogously, how do I cross the river?"
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(return_value=recorded_answer(interaction))
        async with Client([source()]) as client:
            await client.complete([*history, {"role": "user", "content": follow_up}], **options)
    output = interaction.response_json["output"]
    sent = json.loads(route.calls[0].request.content)
    assert sent["input"] == [
        {"role": "user", "content": question},
        output[0],
        output[1],
        {"role": "user", "content": follow_up},
    ]
    assert sent["input"][1]["encrypted_content"] == output[0]["encrypted_content"]


async def test_a_provider_switch_mid_conversation_reads_back_from_the_file(
    tmp_path: Path,
) -> None:
    """Turn one on Anthropic, turn two on Gemini: the saved turns say who answered."""
    anthropic_first = cassette("pai_anthropic_thinking_nonstream.yaml").interactions[0]
    gemini_first = cassette("pai_gemini_thinking_nonstream.yaml").interactions[0]
    question = _user(anthropic_first)
    with respx.mock(assert_all_called=True) as mock:
        mock.post(ANTHROPIC_URL).mock(return_value=anthropic_answer(anthropic_first))
        mock.post(f"{GEMINI_BASE}/gemini-3-pro-preview:generateContent").mock(
            return_value=recorded_answer(gemini_first)
        )
        async with Client([Source("anthropic", "claude-sonnet-4-5", api_key=ANT_KEY)]) as a:
            r1 = await a.complete([{"role": "user", "content": question}])
        conversation: list[Any] = [{"role": "user", "content": question}, r1.message]
        conversation.append({"role": "user", "content": "And a river?"})
        async with Client([Source("gemini", "gemini-3-pro-preview", api_key="k")]) as g:
            r2 = await g.complete(conversation)
        conversation.append(r2.message)
    loaded = reloaded(tmp_path, conversation)
    assert [(m.role, m.metadata.provider if m.metadata else None) for m in loaded] == [
        ("user", None),
        ("assistant", "anthropic"),
        ("user", None),
        ("assistant", "gemini"),
    ]
    check_metadata(loaded[1], "anthropic", "claude-sonnet-4-5-20250929")
    check_metadata(loaded[3], "gemini", "gemini-3-pro-preview")
