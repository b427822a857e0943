"""``tool_choice`` is checked before anything is sent: what it may be, and what it becomes."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Source, Tool

HI = [{"role": "user", "content": "hi"}]
TOOLS = [Tool(name="weather"), Tool(name="time")]
CHAT = {"type": "function", "function": {"name": "weather"}}
ACCEPTED = (
    'tool_choice must be "auto", "none", "required", the name of a declared tool '
    "(declared: {declared}), "
    '{{"type": "function", "function": {{"name": ...}}}}, {{"type": "function", "name": ...}} '
    'or Anthropic\'s {{"type": "auto" | "none" | "any"}} / {{"type": "tool", "name": ...}}; '
    "got {got}"
)


def _client() -> Client:
    return Client([Source("openai", "gpt-4o", api_key="sk-test-choice-0123456789")])


@pytest.mark.parametrize(
    ("choice", "kept"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("weather", CHAT),
        (CHAT, CHAT),
        ({"type": "function", "name": "time"}, {"type": "function", "function": {"name": "time"}}),
        ({"type": "auto"}, "auto"),
        ({"type": "none"}, "none"),
        ({"type": "any"}, "required"),
        ({"type": "tool", "name": "time"}, {"type": "function", "function": {"name": "time"}}),
    ],
)
def test_accepted_values_and_what_they_become(choice: Any, kept: Any) -> None:
    assert _client().request(HI, tools=TOOLS, tool_choice=choice).tool_choice == kept


@pytest.mark.parametrize(
    ("choice", "tools", "declared"),
    [
        ("sometimes", TOOLS, "'weather', 'time'"),
        ("Auto", TOOLS, "'weather', 'time'"),
        ("any", TOOLS, "'weather', 'time'"),
        ("weather", None, "none"),
        (
            {"type": "tool", "name": "weather", "disable_parallel_tool_use": True},
            TOOLS,
            "'weather', 'time'",
        ),
        ({"type": "tool"}, TOOLS, "'weather', 'time'"),
        ({"type": "function", "function": {}}, TOOLS, "'weather', 'time'"),
        (7, TOOLS, "'weather', 'time'"),
    ],
)
def test_other_values_are_refused_listing_the_accepted_ones(
    choice: Any, tools: Any, declared: str
) -> None:
    with pytest.raises(ValueError, match=r"^tool_choice") as caught:
        _client().request(HI, tools=tools, tool_choice=choice)
    assert str(caught.value) == ACCEPTED.format(declared=declared, got=repr(choice))


def test_a_forced_tool_must_be_declared() -> None:
    with pytest.raises(ValueError, match=r"^tool_choice") as caught:
        _client().request(HI, tools=TOOLS, tool_choice={"type": "function", "name": "search"})
    assert str(caught.value) == (
        "tool_choice forces the tool 'search', which is not declared; "
        "declared tools: 'weather', 'time'"
    )


@pytest.mark.parametrize(
    ("choice", "message"),
    [
        ("required", 'tool_choice="required" needs at least one tool in tools='),
        (
            {"type": "any"},
            'tool_choice {"type": "any"} (= "required") needs at least one tool in tools=',
        ),
    ],
)
def test_required_needs_a_tool(choice: Any, message: str) -> None:
    with pytest.raises(ValueError, match=r"^tool_choice") as caught:
        _client().request(HI, tool_choice=choice)
    assert str(caught.value) == message


@pytest.mark.anyio
async def test_a_refused_tool_choice_sends_nothing_and_a_name_goes_out_as_the_chat_shape() -> None:
    answer = {
        "id": "c",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=answer)
        )
        async with _client() as client:
            with pytest.raises(ValueError, match=r"^tool_choice must be"):
                await client.complete(HI, tools=TOOLS, tool_choice="sometimes")
            assert route.call_count == 0
            await client.complete(HI, tools=TOOLS, tool_choice="time")
    sent = json.loads(route.calls[0].request.content)
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "time"}}
