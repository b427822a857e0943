"""Value types: the effort vocabulary, message and tool coercion, usage, immutability."""

from __future__ import annotations

import dataclasses
import re

import pytest

from polythink import EFFORT_ORDER, Effort, Message, Request, Tool, ToolCall, Usage
from polythink.conversion import coerce_messages, coerce_tools


def test_effort_order_and_rank() -> None:
    assert [e.value for e in EFFORT_ORDER] == [
        "none",
        "minimal",
        "low",
        "medium",
        "high",
        "xhigh",
        "max",
    ]
    assert [e.rank for e in EFFORT_ORDER] == [0, 1, 2, 3, 4, 5, 6]
    assert Effort.AUTO.rank is None


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("none", Effort.NONE),
        ("Minimal", Effort.MINIMAL),
        ("  LOW ", Effort.LOW),
        ("medium", Effort.MEDIUM),
        ("high", Effort.HIGH),
        ("xhigh", Effort.XHIGH),
        ("max", Effort.MAX),
        ("auto", Effort.AUTO),
        ("off", Effort.NONE),
        ("on", Effort.AUTO),
        ("true", Effort.AUTO),
        ("FALSE", Effort.NONE),
        (True, Effort.AUTO),
        (False, Effort.NONE),
        (None, None),
        (Effort.XHIGH, Effort.XHIGH),
    ],
)
def test_effort_parse(raw: object, parsed: Effort | None) -> None:
    assert Effort.parse(raw) is parsed  # type: ignore[arg-type]


@pytest.mark.parametrize("raw", ["ultra", "", "x-high", "1", 3, 0.5])
def test_effort_parse_rejects_with_the_accepted_values(raw: object) -> None:
    message = (
        f"unknown reasoning effort {raw!r}; accepted: none, minimal, low, medium, high, xhigh, "
        "max, auto (aliases: off, on, true, false; or a bool, or None for unset)"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        Effort.parse(raw)  # type: ignore[arg-type]


def test_message_from_openai_dict_with_reasoning_fields() -> None:
    deepseek = Message.coerce(
        {
            "role": "assistant",
            "content": "4",
            "reasoning_content": "add",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": {"x": 1}},
                }
            ],
        }
    )
    assert deepseek == Message(
        role="assistant",
        content="4",
        reasoning="add",
        tool_calls=(ToolCall(id="call_1", name="f", arguments='{"x":1}'),),
    )
    details = [{"type": "reasoning.text", "text": "t", "signature": "s", "index": 0}]
    openrouter = Message.coerce(
        {"role": "assistant", "content": "ok", "reasoning": "t", "reasoning_details": details}
    )
    assert openrouter.reasoning == "t"
    assert openrouter.reasoning_items == tuple(details)
    assert openrouter.reasoning_format == "openrouter"
    tool = Message.coerce({"role": "tool", "content": "18C", "tool_call_id": "call_1"})
    assert (tool.role, tool.content, tool.tool_call_id) == ("tool", "18C", "call_1")
    assert Message.coerce(deepseek) is deepseek


@pytest.mark.parametrize("bad", [{}, {"role": ""}, {"role": 3, "content": "x"}])
def test_message_needs_a_role(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="a message needs a 'role' string"):
        Message.coerce(bad)


def test_message_text_from_parts() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}
    parts = [{"type": "text", "text": "a"}, image, {"type": "text", "text": "b"}]
    assert Message(role="user", content=parts).text() == "ab"
    call = ToolCall(id="c1", name="f", arguments="{}")
    assert Message(role="assistant", tool_calls=(call,)).text() == ""


def test_coerce_messages_and_tools() -> None:
    with pytest.raises(ValueError, match="messages must not be empty"):
        coerce_messages([])
    assert coerce_tools(None) == ()
    flat = Tool.coerce({"name": "f", "description": "d", "parameters": {"type": "object"}})
    nested = Tool.coerce(
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {"type": "object"},
                "strict": True,
            },
        }
    )
    assert (flat.name, flat.parameters, flat.strict) == ("f", {"type": "object"}, None)
    assert nested.strict is True
    assert Tool.coerce({"name": "g"}).parameters == {"type": "object", "properties": {}}
    with pytest.raises(ValueError, match="a tool needs a non-empty 'name'"):
        Tool.coerce({"function": {"description": "no name"}})


def test_tool_call_round_trip_keeps_arguments_verbatim() -> None:
    raw = {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1,}'}}
    call = ToolCall.from_openai(raw)
    assert call.arguments == '{"a": 1,}'
    assert call.to_openai() == raw


def test_usage_total_only_when_both_sides_are_known() -> None:
    assert Usage(10, 5).total_tokens == 15
    assert Usage(10, None).total_tokens is None
    assert Usage().reasoning_tokens is None


def test_request_is_immutable_and_with_returns_a_copy() -> None:
    request = Request(messages=(Message(role="user", content="hi"),), max_tokens=10)
    changed = request.with_(max_tokens=20, reasoning_effort=Effort.LOW)
    assert (request.max_tokens, request.reasoning_effort) == (10, None)
    assert (changed.max_tokens, changed.reasoning_effort) == (20, Effort.LOW)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.max_tokens = 5  # type: ignore[misc]
