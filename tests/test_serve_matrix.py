"""The official SDKs through ``polythink serve`` in front of the simulator: every front door
against every upstream wire, complete and streamed, a three-turn tool loop with reasoning on;
the reasoning of turn 1 reaches the provider again on turn 3, which accepts it (the simulator
checks Anthropic signatures, Responses encrypted content, Gemini thought signatures and
DeepSeek's reasoning_content as the providers do).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from polythink.serve.envelope import open_envelope
from tests.conftest import sdk_module
from tests.gateway_support import SOURCES, GatewayServer, Recorder, gateway, recorder, sim

openai = sdk_module("openai")
anthropic = sdk_module("anthropic")

__all__ = ["gateway", "recorder", "sim"]

TOOL = {
    "name": "lookup",
    "description": "Look a city up.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
PROMPT = "Which city is larger, Lyon or Lille? Use the tool."

ARTIFACT = {
    "anthropic": re.compile(rb'"signature": ?"(sim2\.[^"]+)"'),
    "responses": re.compile(rb'"encrypted_content": ?"([^"]{40,})"'),
    "gemini": re.compile(rb'"thoughtSignature": ?"([^"]+)"'),
}
"""How each provider's opaque reasoning reads in its answer: it must come back verbatim."""


def _openai(gateway: GatewayServer) -> Any:
    return openai.OpenAI(base_url=gateway.v1, api_key="caller-key-0123456789", max_retries=0)


def _anthropic(gateway: GatewayServer) -> Any:
    return anthropic.Anthropic(
        base_url=gateway.root, api_key="caller-key-0123456789", max_retries=0
    )


def _chat_turn(client: Any, model: str, messages: list[Any], stream: bool) -> tuple[Any, str]:
    """One Chat call: the message to append (as the SDK gives it), its finish reason."""
    kwargs = {
        "model": model,
        "messages": messages,
        "tools": [{"type": "function", "function": TOOL}],
        "reasoning_effort": "high",
    }
    if not stream:
        choice = client.chat.completions.create(**kwargs).choices[0]
        return choice.message, choice.finish_reason
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for chunk in client.chat.completions.create(**kwargs, stream=True):
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta.model_dump(exclude_none=True)
        message["content"] += delta.get("content") or ""
        if delta.get("reasoning_content"):
            message["reasoning_content"] = (
                message.get("reasoning_content", "") + delta["reasoning_content"]
            )
        if delta.get("reasoning_details"):
            message.setdefault("reasoning_details", []).extend(delta["reasoning_details"])
        for piece in delta.get("tool_calls") or ():
            call = calls.setdefault(
                piece["index"],
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] = piece.get("id") or call["id"]
            function = piece.get("function") or {}
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""
        finish = choice.finish_reason or finish
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, finish


def _chat_loop(gateway: GatewayServer, wire: str, stream: bool) -> list[tuple[Any, str]]:
    client = _openai(gateway)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    turns = []
    for _ in range(3):
        message, finish = _chat_turn(client, f"to-{wire}", messages, stream)
        turns.append((message, finish))
        messages.append(message)
        calls = message.get("tool_calls") if isinstance(message, dict) else message.tool_calls
        for call in calls or ():
            call_id = call["id"] if isinstance(call, dict) else call.id
            messages.append({"role": "tool", "tool_call_id": call_id, "content": "Lyon: 520,000"})
    return turns


def _responses_turn(
    client: Any, model: str, items: list[Any], stream: bool
) -> tuple[list[Any], str]:
    kwargs = {
        "model": model,
        "input": items,
        "tools": [{"type": "function", **TOOL}],
        "reasoning": {"effort": "high", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "store": False,
    }
    if not stream:
        response = client.responses.create(**kwargs)
        return [item.model_dump(exclude_none=True) for item in response.output], response.status
    done: list[Any] = []
    status = None
    numbers = []
    for event in client.responses.create(**kwargs, stream=True):
        numbers.append(event.sequence_number)
        if event.type == "response.output_item.done":
            done.append(event.item.model_dump(exclude_none=True))
        elif event.type == "response.completed":
            status = event.response.status
    # Codex reads the items of output_item.done, and every event is numbered from 0.
    assert numbers == list(range(len(numbers)))
    return done, status


def _responses_loop(gateway: GatewayServer, wire: str, stream: bool) -> list[tuple[Any, str]]:
    client = _openai(gateway)
    items: list[Any] = [{"role": "user", "content": PROMPT}]
    turns = []
    for _ in range(3):
        output, status = _responses_turn(client, f"to-{wire}", items, stream)
        turns.append((output, status))
        items.extend(output)
        for item in output:
            if item["type"] == "function_call":
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": item["call_id"],
                        "output": "520,000",
                    }
                )
    return turns


def _messages_turn(
    client: Any, model: str, messages: list[Any], stream: bool
) -> tuple[list[Any], str]:
    kwargs = {
        "model": model,
        "max_tokens": 4000,
        "messages": messages,
        "tools": [
            {
                "name": TOOL["name"],
                "description": TOOL["description"],
                "input_schema": TOOL["parameters"],
            }
        ],
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
    }
    if stream:
        with client.messages.stream(**kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    return [block.model_dump(exclude_none=True) for block in message.content], message.stop_reason


def _messages_loop(gateway: GatewayServer, wire: str, stream: bool) -> list[tuple[Any, str]]:
    client = _anthropic(gateway)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    turns = []
    for _ in range(3):
        content, stop = _messages_turn(client, f"to-{wire}", messages, stream)
        turns.append((content, stop))
        messages.append({"role": "assistant", "content": content})
        results = [
            {"type": "tool_result", "tool_use_id": block["id"], "content": "520,000"}
            for block in content
            if block["type"] == "tool_use"
        ]
        if results:
            messages.append({"role": "user", "content": results})
    return turns


LOOPS = {"chat": _chat_loop, "responses": _responses_loop, "messages": _messages_loop}
FINISHED = {
    "chat": ("tool_calls", "stop"),
    "responses": ("completed", "completed"),
    "messages": ("tool_use", "end_turn"),
}


def _reasoning_text(door: str, turn: Any) -> str | None:
    """The readable reasoning of an answer, where its door carries it."""
    answer = turn[0]
    if door == "chat":
        return (
            answer.get("reasoning_content")
            if isinstance(answer, dict)
            else getattr(answer, "reasoning_content", None)
        )
    if door == "responses":
        texts = [
            p["text"] for i in answer if i["type"] == "reasoning" for p in i.get("summary", [])
        ]
        return "\n\n".join(texts) or None
    texts = [b["thinking"] for b in answer if b["type"] == "thinking" and b["thinking"]]
    return "\n\n".join(texts) or None


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("wire", list(SOURCES))
@pytest.mark.parametrize("door", list(LOOPS))
def test_a_tool_loop_replays_turn_one_reasoning_on_turn_three(
    gateway: GatewayServer, recorder: Recorder, door: str, wire: str, stream: bool
) -> None:
    start = len(recorder.exchanges)
    turns = LOOPS[door](gateway, wire, stream)
    calls = recorder.exchanges[start:]
    # One upstream call per turn: nothing was refused and retried.
    assert len(calls) == 3
    tool_turn, final = FINISHED[door]
    assert [finish for _, finish in turns] == [tool_turn, tool_turn, final]
    first, third = calls[0], calls[2]
    if wire in ARTIFACT:
        # The provider's opaque reasoning of turn 1, verbatim in the request of turn 3.
        found = ARTIFACT[wire].findall(bytes(first.answer))
        assert found, f"no reasoning artifact in {wire}'s first answer"
        assert found[-1] in third.body
    else:
        # DeepSeek: turn 1's reasoning_content goes back on its tool-call turn.
        sent = json.loads(third.body)["messages"]
        assistant = next(m for m in sent if m["role"] == "assistant")
        assert assistant["reasoning_content"] == _reasoning_text(door, turns[0])
        assert assistant["reasoning_content"].startswith("Step 1:")


def test_reasoning_rides_in_each_doors_own_fields(gateway: GatewayServer) -> None:
    """DeepSeek's reasoning through the Chat door is its own reasoning_content (the body
    went as written); Anthropic's through Chat is reasoning_content plus the envelope in
    reasoning_details; through Responses a reasoning item whose encrypted_content is the
    envelope; through Messages a thinking block and a redacted_thinking envelope."""
    client = _openai(gateway)
    own = (
        client.chat.completions.create(
            model="to-chat", messages=[{"role": "user", "content": "hi"}], reasoning_effort="high"
        )
        .choices[0]
        .message
    )
    assert own.reasoning_content.startswith("Step 1:")
    assert getattr(own, "reasoning_details", None) is None
    other = (
        client.chat.completions.create(
            model="to-anthropic",
            messages=[{"role": "user", "content": "hi"}],
            reasoning_effort="high",
        )
        .choices[0]
        .message
    )
    (detail,) = other.reasoning_details
    assert (detail["type"], detail["format"]) == ("reasoning.encrypted", "polythink-v1")
    sealed = open_envelope(detail["data"])
    assert sealed is not None
    assert sealed.reasoning_format == "anthropic"
    assert [b["type"] for b in sealed.reasoning_items] == ["thinking", "text"]
    assert sealed.reasoning == other.reasoning_content
    response = client.responses.create(model="to-gemini", input="hi", reasoning={"effort": "high"})
    reasoning = next(i for i in response.output if i.type == "reasoning")
    assert open_envelope(reasoning.encrypted_content).reasoning_format == "gemini"
    message = _anthropic(gateway).messages.create(
        model="to-responses",
        max_tokens=2000,
        messages=[{"role": "user", "content": "hi"}],
        output_config={"effort": "high"},
    )
    kinds = [block.type for block in message.content]
    assert kinds[-1] == "redacted_thinking"
    assert open_envelope(message.content[-1].data).reasoning_format == "openai-responses"
