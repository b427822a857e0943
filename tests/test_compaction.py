"""``polythink.compact`` and ``polythink.should_compact``.

Against the simulator on every wire, streamed and not: the summary comes back as the new
conversation's start, a summary cut by the ceiling is flagged ``truncated``, an empty one
raises, and the original list is never changed. The exact request (tools declared but not
callable, the summary request merged into the last user turn, the 4,000-token budget, the
no-tools note as a system suffix) is checked on the wire with respx.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

import polythink.conversation
from polythink import (
    Capability,
    Client,
    Message,
    Response,
    Source,
    Tool,
    ToolCall,
    Usage,
    compact,
    get_capability,
    should_compact,
)
from polythink.conversation import (
    COMPACT_PROMPT,
    COMPACT_SYSTEM_SUFFIX,
    EmptySummaryError,
    compact_threshold,
)
from polythink.simulator import Settings, Simulator

pytestmark = pytest.mark.anyio

SHELL = Tool(
    name="shell",
    description="Run a command",
    parameters={"type": "object", "properties": {"cmd": {"type": "string"}}},
)
CALL = ToolCall(id="call_1", name="shell", arguments='{"cmd":"make test"}')
CONVERSATION: list[Any] = [
    {"role": "system", "content": "You are a careful coding assistant."},
    {"role": "user", "content": "The build fails in parser.py; fix it."},
    Message(role="assistant", tool_calls=(CALL,)),
    Message(role="tool", tool_call_id="call_1", name="shell", content="1 failed: test_parse"),
    {"role": "assistant", "content": "test_parse fails on empty input; I will guard it."},
    {"role": "user", "content": "Good, go ahead."},
]
WIRES = [
    ("openai", "gpt-4o"),
    ("openai-responses", "gpt-4o"),
    ("anthropic", "claude-haiku-4-5"),
    ("gemini", "gemini-2.5-flash-lite"),
]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(answer_words=12)) as simulator:
        yield simulator


def _source(sim: Simulator, provider: str, model: str) -> Source:
    return Source(provider, model, base_url=sim.base_url(provider), api_key="sim-key")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("provider", "model"), WIRES)
async def test_compact_returns_the_conversation_that_starts_from_the_summary(
    sim: Simulator, provider: str, model: str, stream: bool
) -> None:
    original = copy.deepcopy(CONVERSATION)
    async with Client([_source(sim, provider, model)]) as client:
        result = await compact(
            client, CONVERSATION, tools=[SHELL], stream=stream, reasoning_effort="none"
        )
    assert original == CONVERSATION
    assert result.summary.startswith(f"Simulated {model} answer")
    assert result.summary == result.response.text.strip()
    assert len(result.summary.split()) == 12
    assert result.truncated is False
    assert result.response.finish_reason == "stop"
    assert result.response.tool_calls == []
    assert result.messages == [
        Message(role="system", content="You are a careful coding assistant."),
        Message(role="user", content="Summary of the conversation so far:\n\n" + result.summary),
    ]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("provider", "model"), WIRES)
async def test_a_summary_cut_by_the_ceiling_is_flagged_truncated(
    sim: Simulator, provider: str, model: str, stream: bool
) -> None:
    async with Client([_source(sim, provider, model)]) as client:
        result = await compact(
            client,
            CONVERSATION,
            tools=[SHELL],
            summary_tokens=5,
            stream=stream,
            reasoning_effort="none",
        )
    assert result.truncated is True
    assert result.response.finish_reason == "length"
    assert len(result.summary.split()) == 5
    assert result.messages[-1].text().endswith(result.summary)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("provider", ["openai", "openai-responses"])
async def test_an_empty_summary_raises_and_leaves_the_conversation_alone(
    sim: Simulator, provider: str, stream: bool
) -> None:
    # At high effort the simulated model spends 320 reasoning tokens: a 100-token budget
    # leaves no room for any summary text.
    original = copy.deepcopy(CONVERSATION)
    async with Client([_source(sim, provider, "gpt-5.5")]) as client:
        with pytest.raises(EmptySummaryError, match="returned an empty summary") as caught:
            await compact(
                client,
                CONVERSATION,
                summary_tokens=100,
                reasoning_effort="high",
                stream=stream,
            )
    assert caught.value.response.text == ""
    assert caught.value.response.finish_reason == "length"
    assert original == CONVERSATION


ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
CHAT_URL = "https://api.openai.com/v1/chat/completions"


def _anthropic_answer(text: str, stop: str = "end_turn") -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop,
            "usage": {"input_tokens": 900, "output_tokens": 40},
        },
    )


async def test_the_compaction_request_on_the_anthropic_wire() -> None:
    source = Source("anthropic", "claude-sonnet-4-5", api_key="sk-ant-test-0123")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).mock(return_value=_anthropic_answer("  ## Goal\n- fix  "))
        async with Client([source]) as client:
            result = await compact(client, CONVERSATION, tools=[SHELL])
    body = json.loads(route.calls[0].request.content)
    # The system prompt and the turns already sent are the prefix; the request follows them
    # (claude-sonnet-4-5 takes no mid-conversation system message: a user message).
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4000,
        "system": "You are a careful coding assistant.",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "The build fails in parser.py; fix it."}],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "shell",
                        "input": {"cmd": "make test"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_1",
                        "content": "1 failed: test_parse",
                    }
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "test_parse fails on empty input; I will guard it.",
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Good, go ahead."},
                    {"type": "text", "text": COMPACT_PROMPT},
                ],
            },
            {"role": "user", "content": COMPACT_SYSTEM_SUFFIX},
        ],
        "stream": False,
        "tools": [
            {
                "name": "shell",
                "description": "Run a command",
                "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
            }
        ],
        "tool_choice": {"type": "none"},
    }
    assert result.summary == "## Goal\n- fix"
    assert result.truncated is False
    assert result.response.usage == Usage(900, 40, None, None, None)


async def test_a_conversation_ending_with_the_assistant_gets_a_new_user_turn() -> None:
    ending = CONVERSATION[:-1]
    answer = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "## Current goal\n- fix"},
                "finish_reason": "length",
            }
        ]
    }
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(CHAT_URL).mock(return_value=httpx.Response(200, json=answer))
        async with Client([Source("openai", "gpt-4o", api_key="sk-test-0123")]) as client:
            result = await compact(client, ending, prompt="Summarise.", summary_tokens=300)
    body = json.loads(route.calls[0].request.content)
    assert body["messages"][0] == {
        "role": "system",
        "content": "You are a careful coding assistant.",
    }
    assert body["messages"][-2:] == [
        {"role": "user", "content": "Summarise."},
        {"role": "system", "content": COMPACT_SYSTEM_SUFFIX},
    ]
    assert body["max_completion_tokens"] == 300
    # No tools given: none declared and no tool_choice.
    assert "tools" not in body
    assert "tool_choice" not in body
    assert result.truncated is True


async def test_bad_budgets_fail_before_any_call() -> None:
    async with Client([Source("openai", "gpt-4o", api_key="sk-test-0123")]) as client:
        for bad in (0, -5, 1.5):
            with pytest.raises(ValueError, match="summary_tokens must be a positive int"):
                await compact(client, CONVERSATION, summary_tokens=bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------- should_compact


def test_threshold_is_the_window_less_summary_and_margin() -> None:
    assert compact_threshold(200_000) == 195_500
    assert compact_threshold(10_000, summary_tokens=1_000, margin=0) == 9_000


def test_should_compact_from_the_registry_window() -> None:
    assert get_capability("claude-sonnet-4-5").context_window == 200_000  # type: ignore[union-attr]
    assert should_compact(195_500, model="claude-sonnet-4-5") is False
    assert should_compact(195_501, model="claude-sonnet-4-5") is True
    # 4,600 - (4,000 + 500) = 100.
    assert should_compact(101, context_window=4_600) is True
    assert should_compact(100, context_window=4_600) is False


def test_should_compact_never_when_the_threshold_makes_no_sense() -> None:
    # A window no larger than summary + margin (4,500) has no threshold above 0.
    assert should_compact(4_400, context_window=4_500) is False
    assert should_compact(10**9, context_window=1_000) is False
    # No known window: never.
    assert should_compact(10**9, model="not-a-registered-model") is False
    assert should_compact(10**9) is False


def test_should_compact_reads_a_response(monkeypatch: pytest.MonkeyPatch) -> None:
    small = Capability(
        model="compact-test-small-window",
        supported_efforts=("none",),
        context_window=8_000,
        evidence="test entry",
    )
    monkeypatch.setattr(
        polythink.conversation,
        "get_capability",
        lambda m: small if m == small.model else get_capability(m),
    )
    response = Response(
        text="",
        reasoning=None,
        tool_calls=[],
        finish_reason="stop",
        usage=Usage(input_tokens=3_400, output_tokens=101),
        model="compact-test-small-window",
        provider="openai",
        source_index=0,
        message=Message(role="assistant", content=""),
    )
    assert should_compact(response) is True  # 3,501 > 8,000 - 4,500
    assert should_compact(response, context_window=100_000) is False
    without_usage = Response(
        text="",
        reasoning=None,
        tool_calls=[],
        finish_reason="stop",
        usage=None,
        model="compact-test-small-window",
        provider="openai",
        source_index=0,
        message=Message(role="assistant", content=""),
    )
    assert should_compact(without_usage) is False


def test_should_compact_rejects_a_bad_count() -> None:
    with pytest.raises(ValueError, match="context must be a token count"):
        should_compact(-1, context_window=100_000)
