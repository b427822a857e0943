"""Message dicts and tools that providers would misread are refused when they are built."""

from __future__ import annotations

from typing import Any

import pytest

from polythink import Message, Tool
from polythink.conversion import coerce_messages, coerce_tools

ACCEPTED = (
    "accepted: audio, audio_id, content, function_call, instructions, metadata, name, "
    "reasoning, reasoning_content, reasoning_details, reasoning_format, reasoning_items, "
    "refusal, role, tool_call_id, tool_calls"
)


def test_a_misspelt_message_key_is_named_with_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match=r"^messages\[0\]: user message has unknown key") as caught:
        coerce_messages([{"role": "user", "contnet": "hi"}])
    assert str(caught.value) == (
        f"messages[0]: user message has unknown key(s) 'contnet'; {ACCEPTED}"
    )


@pytest.mark.parametrize("role", ["system", "developer", "user", "tool"])
def test_a_message_without_content_is_refused(role: str) -> None:
    message: dict[str, Any] = {"role": role, "tool_call_id": "call_1"}
    with pytest.raises(ValueError, match="has no content") as caught:
        Message.coerce(message)
    assert str(caught.value) == (
        f"{role} message has no content: it needs 'content' (a string or a list of content parts)"
    )
    with pytest.raises(ValueError, match="has no content"):
        Message.coerce({**message, "content": None})


def test_an_assistant_message_needs_content_or_some_output() -> None:
    with pytest.raises(ValueError, match=r"^assistant message has no content: .*tool_calls"):
        Message.coerce({"role": "assistant"})
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    turn = Message.coerce({"role": "assistant", "content": None, "tool_calls": [call]})
    assert turn.tool_calls[0].name == "f"
    assert Message.coerce({"role": "assistant", "refusal": "no"}).content is None


def test_every_field_of_the_openai_chat_message_shape_is_accepted() -> None:
    # Every property of ChatCompletionRequest{System,Developer,User,Assistant,Tool}Message.
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = coerce_messages(
        [
            {"role": "system", "content": "be brief", "name": "ops"},
            {"role": "developer", "content": [{"type": "text", "text": "rules"}], "name": "d"},
            {"role": "user", "content": parts, "name": "ana"},
            {
                "role": "assistant",
                "content": "calling",
                "refusal": None,
                "name": "bot",
                "audio": {"id": "audio_1"},
                "tool_calls": [call],
                "function_call": {"name": "f", "arguments": "{}"},
                "reasoning_content": "think",
            },
            {"role": "tool", "content": "21", "tool_call_id": "c1"},
        ]
    )
    assert [m.role for m in messages] == ["system", "developer", "user", "assistant", "tool"]
    assert messages[2].content == parts
    assert messages[3].reasoning == "think"


def test_a_message_round_trips_through_its_own_field_names() -> None:
    data = {
        "role": "assistant",
        "content": "ok",
        "tool_calls": [],
        "tool_call_id": None,
        "name": None,
        "reasoning": "r",
        "reasoning_items": [{"type": "thinking", "thinking": "r", "signature": "s"}],
        "reasoning_format": "anthropic",
    }
    message = Message.coerce(data)
    assert message.reasoning_items == ({"type": "thinking", "thinking": "r", "signature": "s"},)
    assert message.reasoning_format == "anthropic"


@pytest.mark.parametrize(
    "name", ["get weather!", "", "x" * 65, "wetter.heute", "météo", "a b", "tool:call"]
)
def test_a_tool_name_providers_refuse_is_refused_at_construction(name: str) -> None:
    with pytest.raises(ValueError, match="is refused by providers") as caught:
        Tool(name=name)
    assert str(caught.value) == (
        f"tool name {name!r} is refused by providers: use 1 to 64 letters, digits, '_' or '-' "
        "(OpenAI and Gemini allow 64 characters, Anthropic 128; Gemini also '.' and ':'; only "
        "the common part works everywhere)"
    )


@pytest.mark.parametrize("name", ["get_weather", "x" * 64, "A-1_b", "7"])
def test_a_tool_name_every_provider_accepts_is_kept(name: str) -> None:
    assert Tool(name=name).name == name


@pytest.mark.parametrize(
    ("parameters", "got"),
    [
        ('{"type": "object"}', "a str"),
        ({"type": "string"}, "type 'string'"),
        ({"properties": {"city": {"type": "string"}}}, "type None"),
        ([{"type": "object"}], "a list"),
    ],
)
def test_parameters_must_be_a_json_schema_object(parameters: Any, got: str) -> None:
    with pytest.raises(ValueError, match="JSON Schema object") as caught:
        Tool(name="get_weather", parameters=parameters)
    assert str(caught.value) == (
        "tool 'get_weather': parameters must be a JSON Schema object, a dict with "
        f'"type": "object" (and usually "properties"); got {got}. OpenAI, Anthropic '
        "(input_schema) and Gemini (parameters) all take an object schema for the arguments"
    )


def test_tool_dicts_are_checked_the_same_way() -> None:
    with pytest.raises(ValueError, match="tool name 'get weather!' is refused"):
        coerce_tools([{"type": "function", "function": {"name": "get weather!"}}])
    with pytest.raises(ValueError, match="parameters must be a JSON Schema object"):
        coerce_tools([{"name": "f", "parameters": "{}"}])
    with pytest.raises(ValueError, match="unknown key") as caught:
        coerce_tools([{"name": "f", "paramters": {"type": "object"}}])
    assert str(caught.value) == (
        "tool 'f' has unknown key(s) 'paramters'; accepted: description, function, name, "
        "parameters, strict, type"
    )
    with pytest.raises(ValueError, match="properties must be a dict"):
        Tool(name="f", parameters={"type": "object", "properties": ["city"]})
    (tool,) = coerce_tools(
        [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    )
    assert tool.parameters == {"type": "object"}
