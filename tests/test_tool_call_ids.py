"""Tool calls that a compatible server sent without an ``id`` (older Ollama, llama.cpp, some
vLLM tool parsers) get one of polythink's, so the tool loop can answer them by id."""

from __future__ import annotations

import itertools
import re
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Message, Source, Tool, ToolCall, ToolCallDelta
from polythink.transports import openai_chat
from tests.chatwire import collect, sent_json, sse, sse_response

HI = Message(role="user", content="hi")
TOOL = Tool(name="f", description="d", parameters={"type": "object"})
SOURCE = Source("ollama", "qwen3:8b", base_url="http://mock.test/v1")
URL = "http://mock.test/v1/chat/completions"


@pytest.fixture
def ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the generated ids predictable: call_gen1, call_gen2, ..."""
    counter = itertools.count(1)
    monkeypatch.setattr(openai_chat, "new_tool_call_id", lambda: f"call_gen{next(counter)}")


def _answer(message: dict[str, Any], finish: str = "tool_calls") -> httpx.Response:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
    return httpx.Response(200, json={"id": "c1", "choices": [choice]})


NO_ID_CALLS = [
    {"type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
    {"id": "call_srv", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    {"type": "function", "function": {"name": "f", "arguments": ""}},
]


@pytest.mark.anyio
async def test_complete_gives_calls_without_an_id_their_own_and_the_loop_sends_it_back(
    ids: None,
) -> None:
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL)
        route.side_effect = [
            _answer({"content": None, "tool_calls": NO_ID_CALLS}),
            _answer({"content": "done"}, "stop"),
        ]
        async with Client([SOURCE]) as client:
            messages = [HI]
            response = await client.complete(messages, tools=[TOOL])
            messages.append(response.message)
            for call in response.tool_calls:
                messages.append(Message(role="tool", tool_call_id=call.id, content="ok"))
            final = await client.complete(messages, tools=[TOOL])
    assert response.tool_calls == [
        ToolCall(id="call_gen1", name="f", arguments='{"a":1}'),
        ToolCall(id="call_srv", name="f", arguments="{}"),
        ToolCall(id="call_gen2", name="f", arguments="{}"),
    ]
    assert response.message.tool_calls == tuple(response.tool_calls)
    assert final.text == "done"
    sent = sent_json(route.calls[1])["messages"]
    assert sent[1]["tool_calls"] == [
        {"id": "call_gen1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
        {"id": "call_srv", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "call_gen2", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    ]
    assert [m["tool_call_id"] for m in sent[2:]] == ["call_gen1", "call_srv", "call_gen2"]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "s1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


@pytest.mark.anyio
async def test_a_streamed_call_without_an_id_keeps_one_id_everywhere(ids: None) -> None:
    body = sse(
        _chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"a":'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"name": "g", "arguments": "{}"}}]}),
        _chunk({}, "tool_calls"),
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=sse_response(body))
        async with Client([SOURCE]) as client:
            events = await collect(client.stream([HI], tools=[TOOL, Tool(name="g")]))
    assert [e.tool_call_delta for e in events if e.type == "tool_call_delta"] == [
        ToolCallDelta(index=0, id="call_gen1", name="f", arguments='{"a":'),
        ToolCallDelta(index=0, id="call_gen1", name="f", arguments="1}"),
        ToolCallDelta(index=1, id="call_gen2", name="g", arguments="{}"),
    ]
    calls = [
        ToolCall(id="call_gen1", name="f", arguments='{"a":1}'),
        ToolCall(id="call_gen2", name="g", arguments="{}"),
    ]
    assert [e.tool_call for e in events if e.type == "tool_call"] == calls
    done = events[-1].response
    assert done is not None
    assert done.tool_calls == calls
    assert done.message.tool_calls == tuple(calls)


@pytest.mark.anyio
async def test_generated_ids_are_call_and_24_hex_digits_and_unique() -> None:
    calls = [{"type": "function", "function": {"name": "f", "arguments": "{}"}}] * 3
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=_answer({"content": None, "tool_calls": calls}))
        async with Client([SOURCE]) as client:
            response = await client.complete([HI], tools=[TOOL])
    made = [call.id for call in response.tool_calls]
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", made_id) for made_id in made), made
    assert len(set(made)) == 3
