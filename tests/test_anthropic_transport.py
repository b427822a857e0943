"""The Anthropic transport on hand-written inputs: request shapes, thinking parameter rules,
stream edge cases, error mapping, and cases C02, C18, C20, C21 and C22 of CASES.md."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Effort, Message, Source, StreamEvent, Tool, ToolCall, Usage
from polythink.conversion import coerce_messages, coerce_tools
from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    StreamInterruptedError,
    TransientError,
)
from polythink.providers import get_provider
from polythink.reasoning import Capability, register_capability
from polythink.reasoning.resolve import resolve
from polythink.transports.anthropic import (
    build_body,
    finish_reason,
    parse_message,
    parse_usage,
    thinking_conflicts,
)
from polythink.types import Request

URL = "https://api.anthropic.com/v1/messages"
KEY = "sk-ant-unit-0123456789"
PROFILE = get_provider("anthropic")


def _request(messages: list[Any], **kwargs: Any) -> Request:
    if "tools" in kwargs:
        kwargs["tools"] = coerce_tools(kwargs["tools"])
    return Request(messages=coerce_messages(messages), **kwargs)


def _body(messages: list[Any], model: str = "claude-sonnet-4-5", **kwargs: Any) -> dict[str, Any]:
    return build_body(_request(messages, **kwargs), model=model, profile=PROFILE)


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _start(usage: dict[str, Any], model: str = "claude-x") -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": model,
            "stop_reason": None,
            "usage": usage,
        },
    }


def _block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def _message_delta(stop_reason: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": usage}


MESSAGE_STOP = {"type": "message_stop"}
HI = [{"role": "user", "content": "hi"}]


OLD = "2023-06-01"
"""The API version that still takes sampling parameters: the thinking rules about them are
tested there (on 2026-10-21 every sampling parameter is refused, whatever the thinking)."""


def _client(model: str = "claude-sonnet-4-5", **kwargs: Any) -> Client:
    return Client([Source("anthropic", model, api_key=KEY, **kwargs)])


async def _events(client: Client, *args: Any, **kwargs: Any) -> list[StreamEvent]:
    return [event async for event in client.stream(*args, **kwargs)]


def _sse_response(raw: bytes) -> httpx.Response:
    return httpx.Response(200, content=raw, headers={"content-type": "text/event-stream"})


# ------------------------------------------------------------------ request body


def test_body_minimal_shape_and_default_max_tokens() -> None:
    assert _body(HI) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": False,
    }
    assert _body(HI, max_tokens=300, stream=True)["max_tokens"] == 300


def test_body_system_developer_and_sampling() -> None:
    body = _body(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": "Answer in French."},
            {"role": "user", "content": "hi"},
        ],
        temperature=0.2,
        top_p=0.9,
        stop=("END", "STOP"),
    )
    assert body["system"] == "Be brief.\n\nAnswer in French."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert (body["temperature"], body["top_p"], body["stop_sequences"]) == (
        0.2,
        0.9,
        ["END", "STOP"],
    )


def test_body_system_blocks_keep_cache_control() -> None:
    part = {"type": "text", "text": "Long context", "cache_control": {"type": "ephemeral"}}
    body = _body([{"role": "system", "content": [part]}, *HI])
    assert body["system"] == [part]


def test_body_tool_loop_history() -> None:
    call_a = ToolCall(id="toolu_a", name="weather", arguments='{"city": "Paris"}')
    call_b = ToolCall(id="toolu_b", name="time", arguments="")
    body = _body(
        [
            {"role": "user", "content": "weather and time in Paris?"},
            Message(role="assistant", content="Checking.", tool_calls=(call_a, call_b)),
            {"role": "tool", "tool_call_id": "toolu_a", "content": "sunny"},
            {"role": "tool", "tool_call_id": "toolu_b", "content": [{"type": "text", "text": "9"}]},
            {"role": "user", "content": "thanks"},
        ]
    )
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_b", "name": "time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": [{"type": "text", "text": "9"}],
                },
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]


def test_body_assistant_without_text_sends_only_tool_use() -> None:
    call = ToolCall(id="toolu_a", name="f", arguments="{}")
    body = _body([*HI, Message(role="assistant", content=None, tool_calls=(call,))])
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}
    ]


def test_body_sends_anthropic_reasoning_items_verbatim_and_ignores_other_formats() -> None:
    blocks = (
        {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {"x": 1}, "caller": {}},
    )
    call = ToolCall(id="toolu_a", name="f", arguments='{"x":1}')
    ours = Message(
        role="assistant",
        content="Calling.",
        tool_calls=(call,),
        reasoning="plan",
        reasoning_items=blocks,
        reasoning_format="anthropic",
    )
    assert _body([*HI, ours])["messages"][1]["content"] == list(blocks)
    foreign = Message(
        role="assistant",
        content="Calling.",
        tool_calls=(call,),
        reasoning_items=({"type": "reasoning.text", "text": "plan"},),
        reasoning_format="openrouter",
    )
    assert _body([*HI, foreign])["messages"][1]["content"] == [
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {"x": 1}},
    ]


def test_body_images() -> None:
    body = _body(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
                ],
            }
        ]
    )
    assert body["messages"][0]["content"][1:] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
    ]


def test_body_tools() -> None:
    tool = Tool(name="f", description="does f", parameters={"type": "object", "properties": {}})
    assert _body(HI, tools=[tool])["tools"] == [
        {"name": "f", "description": "does f", "input_schema": {"type": "object", "properties": {}}}
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ({"type": "function", "function": {"name": "f"}}, {"type": "tool", "name": "f"}),
        ({"type": "tool", "name": "f"}, {"type": "tool", "name": "f"}),
        (
            {"type": "any", "disable_parallel_tool_use": True},
            {"type": "any", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_tool_choice_mapping(choice: Any, wire: dict[str, Any]) -> None:
    assert _body(HI, tools=[Tool(name="f")], tool_choice=choice)["tool_choice"] == wire


@pytest.mark.parametrize(
    ("messages", "kwargs", "fragment"),
    [
        (HI, {"tool_choice": "sometimes"}, "unknown tool_choice 'sometimes'"),
        (HI, {"tool_choice": {"type": "function", "function": {}}}, "names no function"),
        (
            [
                *HI,
                Message(role="assistant", tool_calls=(ToolCall(id="t", name="f", arguments="[1"),)),
            ],
            {},
            "not a JSON object",
        ),
    ],
)
def test_body_rejects_what_anthropic_cannot_take(
    messages: list[Any], kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(RequestRejectedError) as info:
        _body(messages, **kwargs)
    assert fragment in info.value.message


def test_body_merge_order_reasoning_then_source_then_call() -> None:
    resolution = resolve("low", provider="anthropic", model="claude-sonnet-4-5", max_tokens=1000)
    request = _request(HI, max_tokens=1000, resolution=resolution, extra_body={"top_k": 5})
    body = build_body(
        request,
        model="claude-sonnet-4-5",
        profile=PROFILE,
        extra_body={"metadata": {"user_id": "u1"}, "top_k": 3},
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 3048
    assert (body["metadata"], body["top_k"]) == ({"user_id": "u1"}, 5)


# ------------------------------------------------------------------ reasoning fragments


@pytest.mark.parametrize(
    ("model", "effort", "max_tokens", "payload"),
    [
        (
            "claude-sonnet-4-5",
            "high",
            None,
            {"thinking": {"type": "enabled", "budget_tokens": 16384}, "max_tokens": 20480},
        ),
        # 64000-token ceiling: the answer keeps at most half of it (32000 of the caller's
        # 60000), the budget the rest, so "max" is not squeezed to the 1024 floor.
        (
            "claude-sonnet-4-5",
            "max",
            60000,
            {"thinking": {"type": "enabled", "budget_tokens": 32000}, "max_tokens": 64000},
        ),
        # A tier that fits beside half the ceiling keeps its whole budget.
        (
            "claude-sonnet-4-5",
            "low",
            64000,
            {"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 64000},
        ),
        (
            "claude-sonnet-4-6",
            "low",
            None,
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}},
        ),
        ("claude-opus-4-6", "auto", None, {"thinking": {"type": "adaptive"}}),
        (
            "claude-opus-4-7",
            "xhigh",
            None,
            {
                "thinking": {"type": "adaptive", "display": "summarized"},
                "output_config": {"effort": "xhigh"},
            },
        ),
        (
            "claude-sonnet-5-5",
            "auto",
            None,
            {"thinking": {"type": "adaptive", "display": "summarized"}},
        ),
        ("claude-opus-4-7", "none", None, {}),
        ("claude-sonnet-4-5", "none", None, {}),
        ("claude-opus-5", "none", None, {"thinking": {"type": "disabled"}}),
    ],
)
def test_anthropic_reasoning_fragments(
    model: str, effort: str, max_tokens: int | None, payload: dict[str, Any]
) -> None:
    assert (
        resolve(effort, provider="anthropic", model=model, max_tokens=max_tokens).payload == payload
    )


def test_a_budget_or_answer_made_smaller_by_the_ceiling_is_reported() -> None:
    squeezed = resolve("max", provider="anthropic", model="claude-sonnet-4-5", max_tokens=63000)
    assert squeezed.applied_effort is Effort.MAX
    assert squeezed.budget_tokens == 32000
    assert squeezed.warnings == (
        "the 'max' thinking budget for model 'claude-sonnet-4-5' is 32000 tokens, not 32768: "
        "the model's maximum output (64000) also holds the answer",
        "max_tokens=63000 cannot all go to the answer on model 'claude-sonnet-4-5': its "
        "maximum output (64000) less the 32000-token thinking budget leaves 32000",
    )
    roomy = resolve("high", provider="anthropic", model="claude-sonnet-4-5", max_tokens=4096)
    assert roomy.warnings == ()


def test_effort_alone_never_stands_for_a_tier() -> None:
    for model in ("claude-sonnet-4-6", "claude-opus-4-6", "claude-opus-5", "claude-fable-5"):
        for effort in ("low", "medium", "high", "max"):
            payload = resolve(effort, provider="anthropic", model=model).payload
            assert "output_config" not in payload or payload["thinking"]["type"] == "adaptive"


# ------------------------------------------------------------------ thinking parameter rules


@pytest.mark.parametrize(
    ("body", "conflicts"),
    [
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "temperature": 0},
            ["temperature"],
        ),
        (
            {"thinking": {"type": "adaptive"}, "temperature": 0.7, "top_k": 5},
            ["temperature", "top_k"],
        ),
        ({"thinking": {"type": "adaptive"}, "temperature": 1, "top_p": 0.95}, []),
        ({"thinking": {"type": "adaptive"}, "top_p": 0.9}, ["top_p"]),
        ({"thinking": {"type": "enabled"}, "tool_choice": {"type": "any"}}, ["tool_choice"]),
        (
            {"thinking": {"type": "enabled"}, "tool_choice": {"type": "tool", "name": "f"}},
            ["tool_choice"],
        ),
        ({"thinking": {"type": "enabled"}, "tool_choice": {"type": "auto"}}, []),
        ({"thinking": {"type": "adaptive"}, "tool_choice": {"type": "any"}}, []),
        ({"thinking": {"type": "disabled"}, "temperature": 0, "top_k": 3}, []),
        ({"temperature": 0, "top_k": 3}, []),
    ],
)
def test_thinking_conflicts(body: dict[str, Any], conflicts: list[str]) -> None:
    assert [name for name, _ in thinking_conflicts(body)] == conflicts


def test_thinking_conflicts_on_models_that_think_by_default() -> None:
    assert [n for n, _ in thinking_conflicts({"temperature": 0.5}, thinking_by_default=True)] == [
        "temperature"
    ]
    disabled = {"thinking": {"type": "disabled"}, "temperature": 0.5}
    assert thinking_conflicts(disabled, thinking_by_default=True) == []


@pytest.mark.anyio
async def test_c02_temperature_with_thinking_is_refused_before_any_http_call() -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(URL).mock(return_value=httpx.Response(200, json={}))
        async with _client("claude-haiku-4-5", api_version=OLD) as client:
            with pytest.raises(RequestRejectedError) as info:
                await client.complete(
                    [{"role": "user", "content": "classify: ok"}],
                    reasoning_effort="minimal",
                    max_tokens=2048,
                    temperature=0,
                )
            with pytest.raises(RequestRejectedError):
                await _events(client, HI, reasoning_effort="low", temperature=0)
    assert route.call_count == 0
    error = info.value
    assert "temperature" in error.message
    assert "drop_params=True" in error.message
    assert (error.provider, error.source_index, error.error_type, error.status_code) == (
        "anthropic",
        0,
        "thinking_parameter_conflict",
        None,
    )


@pytest.mark.anyio
async def test_a_thinking_parameter_conflict_fails_over_to_the_next_source() -> None:
    # The conflict belongs to this source (another provider takes temperature=0), so it is
    # a ThinkingUnsupportedError and failover moves on instead of failing the call.
    chat_answer = {
        "id": "chatcmpl-1",
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
    sources = [
        Source(
            "anthropic", "claude-haiku-4-5", api_key=KEY, reasoning_effort="low", api_version=OLD
        ),
        Source("openai", "gpt-4o", api_key=KEY),
    ]
    with respx.mock(assert_all_called=False) as mock:
        anthropic = mock.post(URL).mock(return_value=httpx.Response(200, json={}))
        openai = mock.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=chat_answer)
        )
        async with Client(sources) as client:
            answer = await client.complete(HI, temperature=0)
    assert anthropic.call_count == 0
    assert openai.call_count == 1
    assert (answer.text, answer.source_index, answer.provider) == ("ok", 1, "openai")
    assert json.loads(openai.calls.last.request.content)["temperature"] == 0


@pytest.mark.anyio
async def test_c02_control_without_thinking_temperature_passes() -> None:
    answer = {
        "id": "msg_1",
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(return_value=httpx.Response(200, json=answer))
        async with _client("claude-haiku-4-5", api_version=OLD) as client:
            response = await client.complete(
                [{"role": "user", "content": "classify: ok"}], max_tokens=2048, temperature=0
            )
    sent = json.loads(route.calls[0].request.content)
    assert sent["temperature"] == 0
    assert "thinking" not in sent
    assert response.text == "ok"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"extra_body": {"top_k": 40}}, "top_k"),
        ({"top_p": 0.5}, "top_p"),
        ({"tools": [Tool(name="f")], "tool_choice": "required"}, "tool_choice"),
        (
            {
                "tools": [Tool(name="f")],
                "tool_choice": {"type": "function", "function": {"name": "f"}},
            },
            "tool_choice",
        ),
    ],
)
async def test_other_thinking_conflicts_are_refused(kwargs: dict[str, Any], parameter: str) -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(URL)
        async with _client("claude-haiku-4-5", api_version=OLD) as client:
            with pytest.raises(RequestRejectedError) as info:
                await client.complete(HI, reasoning_effort="low", **kwargs)
    assert route.call_count == 0
    assert f"rejects {parameter} while thinking is on" in info.value.message


@pytest.mark.anyio
async def test_model_thinking_by_default_refuses_temperature_when_unset(
    isolated_registry: None,
) -> None:
    # A model that thinks by default and otherwise takes any sampling value (every current
    # Claude model that thinks by default takes only the defaults, so this one is made up).
    register_capability(
        Capability(
            "claude-thinks-by-default",
            ("none", "low", "medium", "high"),
            default_effort="high",
            provider="anthropic",
            thinking="adaptive",
        )
    )
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(URL).mock(
            return_value=httpx.Response(
                200,
                json={"content": [], "stop_reason": "end_turn", "usage": {"input_tokens": 1}},
            )
        )
        async with _client("claude-thinks-by-default", api_version=OLD) as client:
            with pytest.raises(RequestRejectedError, match="thinking on by default"):
                await client.complete(HI, temperature=0.5)
            assert route.call_count == 0
            await client.complete(HI, temperature=0.5, reasoning_effort="none")
    sent = json.loads(route.calls[0].request.content)
    assert (sent["thinking"], sent["temperature"]) == ({"type": "disabled"}, 0.5)


@pytest.mark.anyio
async def test_drop_params_drops_and_warns_once_per_parameter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = {
        "id": "msg_1",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "text", "text": "ok"},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 9},
    }
    caplog.set_level(logging.INFO, logger="polythink.transport")
    with respx.mock(assert_all_called=True) as mock:
        streamed = _sse(
            _start({"input_tokens": 5, "output_tokens": 1}),
            _block_start(0, {"type": "text", "text": ""}),
            _delta(0, {"type": "text_delta", "text": "ok"}),
            _stop(0),
            _message_delta("end_turn", {"output_tokens": 9}),
            MESSAGE_STOP,
        )
        route = mock.post(URL).mock(
            side_effect=[
                httpx.Response(200, json=answer),
                httpx.Response(200, json=answer),
                _sse_response(streamed),
            ]
        )
        async with _client("claude-sonnet-4-5", drop_params=True, api_version=OLD) as client:
            first = await client.complete(HI, reasoning_effort="low", temperature=0.3)
            second = await client.complete(
                HI, reasoning_effort="low", temperature=0.3, extra_body={"top_k": 4}
            )
            events = await _events(client, HI, reasoning_effort="low", temperature=0.3)
    for call in route.calls:
        sent = json.loads(call.request.content)
        assert "temperature" not in sent
        assert "top_k" not in sent
        assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert dropped == [
        "source 0: dropped temperature=0.3 (only 1 or unset with thinking.type=enabled) for "
        "anthropic model 'claude-sonnet-4-5' (drop_params=True)",
        "source 0: dropped top_k=4 (not accepted with thinking.type=enabled) for anthropic "
        "model 'claude-sonnet-4-5' (drop_params=True)",
    ]
    note = (
        "dropped temperature=0.3 (only 1 or unset with thinking.type=enabled) for anthropic "
        "model 'claude-sonnet-4-5' (drop_params=True)"
    )
    assert first.warnings == [note]
    assert second.warnings[0] == note
    assert len(second.warnings) == 2
    done = events[-1].response
    assert done is not None
    assert done.warnings[0] == note
    assert done.warnings[1].startswith("could not confirm that model 'claude-sonnet-4-5' reasoned")


# ------------------------------------------------------------------ non-streaming parse


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "stop"),
        (None, "stop"),
    ],
)
def test_finish_reasons(stop_reason: str | None, finish: str) -> None:
    assert finish_reason(stop_reason, has_tool_calls=False) == finish
    response = parse_message(
        {"content": [{"type": "text", "text": "x"}], "stop_reason": stop_reason},
        profile=PROFILE,
        source_index=0,
        model="m",
    )
    assert response.finish_reason == finish
    assert response.output_limited is (finish == "length")


def test_parse_multiple_thinking_blocks_and_tool_input_compact() -> None:
    data = {
        "id": "msg_9",
        "model": "claude-opus-4-6",
        "content": [
            {"type": "thinking", "thinking": "First.", "signature": "a"},
            {"type": "text", "text": "Let me "},
            {"type": "text", "text": "look."},
            {"type": "thinking", "thinking": "", "signature": "b"},
            {"type": "thinking", "thinking": "Second.", "signature": "c"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"q": "é", "n": [1, 2]}},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 3,
            "output_tokens": 40,
            "output_tokens_details": {"thinking_tokens": 25},
        },
    }
    response = parse_message(data, profile=PROFILE, source_index=2, model="claude-opus-4-6")
    assert response.reasoning == "First.\n\nSecond."
    assert response.text == "Let me look."
    assert response.tool_calls == [ToolCall(id="t1", name="f", arguments='{"q":"é","n":[1,2]}')]
    assert response.message.reasoning_items == tuple(data["content"])  # type: ignore[arg-type]
    assert response.usage == Usage(3, 40, 25, None, None)
    assert (response.source_index, response.finish_reason) == (2, "tool_calls")


def test_parse_without_content_is_transient() -> None:
    with pytest.raises(TransientError, match="without a content list"):
        parse_message({"id": "x"}, profile=PROFILE, source_index=0, model="m")


# ------------------------------------------------------------------ usage (C20, C21, C22)


def test_c20_input_tokens_include_cache_reads_and_writes() -> None:
    usage = parse_usage(
        {
            "input_tokens": 10,
            "cache_read_input_tokens": 60,
            "cache_creation_input_tokens": 30,
            "output_tokens": 20,
        }
    )
    assert usage == Usage(
        input_tokens=100,
        output_tokens=20,
        reasoning_tokens=None,
        cache_read_tokens=60,
        cache_write_tokens=30,
    )
    assert usage.total_tokens == 120


def test_usage_fields_not_sent_stay_none() -> None:
    assert parse_usage({"input_tokens": 7, "output_tokens": 2}) == Usage(7, 2, None, None, None)
    assert parse_usage(None) is None
    zero = parse_usage(
        {"input_tokens": 7, "output_tokens": 2, "output_tokens_details": {"thinking_tokens": 0}}
    )
    assert zero is not None
    assert zero.reasoning_tokens == 0


async def _stream_and_complete(
    stream_events: list[dict[str, Any]], final: dict[str, Any]
) -> tuple[list[StreamEvent], Any]:
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(
            side_effect=[_sse_response(_sse(*stream_events)), httpx.Response(200, json=final)]
        )
        async with _client() as client:
            events = await _events(client, HI)
            response = await client.complete(HI)
    return events, response


@pytest.mark.anyio
async def test_c21_streamed_usage_with_cache_reads_equals_non_stream() -> None:
    start_usage = {
        "input_tokens": 4,
        "cache_read_input_tokens": 2455,
        "cache_creation_input_tokens": 0,
        "output_tokens": 1,
    }
    events, response = await _stream_and_complete(
        [
            _start(start_usage),
            _block_start(0, {"type": "text", "text": ""}),
            _delta(0, {"type": "text_delta", "text": "Hello"}),
            _stop(0),
            _message_delta("end_turn", {"output_tokens": 23}),
            MESSAGE_STOP,
        ],
        {
            "id": "msg_1",
            "model": "claude-x",
            "content": [{"type": "text", "text": "Hello"}],
            "stop_reason": "end_turn",
            "usage": {**start_usage, "output_tokens": 23},
        },
    )
    streamed = events[-1].response
    assert streamed is not None
    assert streamed.usage == response.usage == Usage(2459, 23, None, 2455, 0)
    usage = streamed.usage
    assert usage is not None
    assert usage.input_tokens is not None
    assert usage.cache_read_tokens is not None
    uncached = usage.input_tokens - usage.cache_read_tokens - (usage.cache_write_tokens or 0)
    input_price, cache_price, output_price = 3e-6, 0.3e-6, 15e-6
    cost = uncached * input_price + usage.cache_read_tokens * cache_price
    cost += (usage.output_tokens or 0) * output_price
    assert cost == pytest.approx(4 * input_price + 2455 * cache_price + 23 * output_price, abs=1e-9)


@pytest.mark.anyio
async def test_c22_streamed_input_tokens_come_from_message_start() -> None:
    events, response = await _stream_and_complete(
        [
            _start({"input_tokens": 25, "output_tokens": 1}),
            _block_start(0, {"type": "text", "text": ""}),
            _delta(0, {"type": "text_delta", "text": "a"}),
            _delta(0, {"type": "text_delta", "text": "b"}),
            _stop(0),
            _message_delta("end_turn", {"output_tokens": 12}),
            MESSAGE_STOP,
        ],
        {
            "id": "msg_1",
            "model": "claude-x",
            "content": [{"type": "text", "text": "ab"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 25, "output_tokens": 12},
        },
    )
    streamed = events[-1].response
    assert streamed is not None
    assert streamed.usage == response.usage == Usage(25, 12, None, None, None)
    assert streamed.usage is not None
    assert streamed.usage.total_tokens == 37
    assert [e.usage for e in events if e.type == "usage"] == [Usage(25, 12, None, None, None)]


@pytest.mark.anyio
async def test_message_delta_usage_is_cumulative_latest_wins() -> None:
    events, _ = await _stream_and_complete(
        [
            _start({"input_tokens": 10, "output_tokens": 1}),
            _message_delta("end_turn", {"output_tokens": 30}),
            _message_delta(
                "end_turn",
                {
                    "input_tokens": 12,
                    "output_tokens": 42,
                    "output_tokens_details": {"thinking_tokens": 17},
                },
            ),
            MESSAGE_STOP,
        ],
        {"content": [], "usage": {}},
    )
    done = events[-1].response
    assert done is not None
    assert done.usage == Usage(12, 42, 17, None, None)


# ------------------------------------------------------------------ stream assembly


@pytest.mark.anyio
async def test_stream_thinking_redacted_and_tool_use() -> None:
    raw = _sse(
        _start({"input_tokens": 9, "output_tokens": 1}),
        _block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        {"type": "ping"},
        _delta(0, {"type": "thinking_delta", "thinking": "Plan"}),
        _delta(0, {"type": "thinking_delta", "thinking": ""}),
        _delta(0, {"type": "thinking_delta", "thinking": " it."}),
        _delta(0, {"type": "signature_delta", "signature": "SIG0"}),
        _stop(0),
        _block_start(1, {"type": "redacted_thinking", "data": "OPAQUE"}),
        _stop(1),
        _block_start(2, {"type": "thinking", "thinking": "", "signature": ""}),
        _delta(2, {"type": "thinking_delta", "thinking": "More."}),
        _delta(2, {"type": "signature_delta", "signature": "SIG2"}),
        _stop(2),
        _block_start(3, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        _delta(3, {"type": "input_json_delta", "partial_json": ""}),
        _delta(3, {"type": "input_json_delta", "partial_json": '{"city": "Pa'}),
        _delta(3, {"type": "input_json_delta", "partial_json": 'ris"}'}),
        _stop(3),
        _message_delta("tool_use", {"output_tokens": 50}),
        MESSAGE_STOP,
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=_sse_response(raw))
        async with _client() as client:
            events = await _events(client, HI)
    assert [(e.type, e.text) for e in events if e.type == "reasoning"] == [
        ("reasoning", "Plan"),
        ("reasoning", " it."),
        ("reasoning", "\n\nMore."),
    ]
    call = ToolCall(id="toolu_1", name="f", arguments='{"city": "Paris"}')
    assert [e.tool_call for e in events if e.type == "tool_call"] == [call]
    done = events[-1].response
    assert done is not None
    assert done.reasoning == "Plan it.\n\nMore."
    assert done.tool_calls == [call]
    assert done.finish_reason == "tool_calls"
    assert done.message.content is None
    assert done.message.reasoning_items == (
        {"type": "thinking", "thinking": "Plan it.", "signature": "SIG0"},
        {"type": "redacted_thinking", "data": "OPAQUE"},
        {"type": "thinking", "thinking": "More.", "signature": "SIG2"},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"city": "Paris"}},
    )


@pytest.mark.anyio
async def test_stream_split_across_chunks_with_padding_and_crlf() -> None:
    events = [
        _start({"input_tokens": 2, "output_tokens": 1}),
        _block_start(0, {"type": "text", "text": ""}),
        _delta(0, {"type": "text_delta", "text": "héllo wörld"}),
        _stop(0),
        _message_delta("end_turn", {"output_tokens": 3}),
        MESSAGE_STOP,
    ]
    raw = b"".join(
        f"event: {e['type']}\r\ndata: {json.dumps(e, ensure_ascii=False)}      \r\n\r\n".encode()
        for e in events
    )

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), 5):
            yield raw[start : start + 5]

    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(
            return_value=httpx.Response(
                200, content=pieces(), headers={"content-type": "text/event-stream"}
            )
        )
        async with _client() as client:
            result = await _events(client, HI)
    done = result[-1].response
    assert done is not None
    assert done.text == "héllo wörld"
    assert done.usage == Usage(2, 3, None, None, None)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error_type", "error_class"),
    [
        ("overloaded_error", TransientError),
        ("api_error", TransientError),
        ("timeout_error", TransientError),
        ("rate_limit_error", RateLimitedError),
        ("invalid_request_error", RequestRejectedError),
        ("not_found_error", RequestRejectedError),
        ("authentication_error", AuthError),
        ("permission_error", AuthError),
    ],
)
async def test_c18_in_band_error_is_typed_by_error_type(
    error_type: str, error_class: type[PolythinkError]
) -> None:
    error_event = {"type": "error", "error": {"type": error_type, "message": "Overloaded"}}
    before = _sse(_start({"input_tokens": 5, "output_tokens": 1}), error_event)
    after = _sse(
        _start({"input_tokens": 5, "output_tokens": 1}),
        _block_start(0, {"type": "text", "text": ""}),
        _delta(0, {"type": "text_delta", "text": "Par"}),
        error_event,
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(side_effect=[_sse_response(before), _sse_response(after)])
        async with _client(max_retries=0) as client:
            with pytest.raises(error_class) as first:
                await _events(client, HI)
            seen: list[StreamEvent] = []

            async def consume() -> None:
                async for event in client.stream(HI):
                    seen.append(event)

            with pytest.raises(StreamInterruptedError) as second:
                await consume()
    assert type(first.value) is error_class
    assert (first.value.error_type, first.value.status_code) == (error_type, 200)
    assert first.value.provider == "anthropic"
    assert "Overloaded" in first.value.message
    assert [(e.type, e.text) for e in seen] == [("text", "Par")]
    interrupted = second.value
    assert type(interrupted.__cause__) is error_class
    assert interrupted.error_type == error_type
    assert interrupted.partial is not None
    assert (interrupted.partial.text, interrupted.partial.finish_reason) == ("Par", "error")


@pytest.mark.anyio
async def test_stream_cut_keeps_only_finished_blocks_for_the_next_turn() -> None:
    raw = _sse(
        _start({"input_tokens": 5, "output_tokens": 1}),
        _block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        _delta(0, {"type": "thinking_delta", "thinking": "Half a thou"}),
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=_sse_response(raw))
        async with _client() as client:
            with pytest.raises(StreamInterruptedError) as info:
                await _events(client, HI)
    partial = info.value.partial
    assert partial is not None
    assert partial.reasoning == "Half a thou"
    assert partial.message.reasoning_items == ()
    assert isinstance(info.value.__cause__, TransientError)
    assert info.value.error_type == "stream_incomplete"


@pytest.mark.anyio
async def test_stream_cut_before_content_is_retryable_transient() -> None:
    raw = _sse(_start({"input_tokens": 5, "output_tokens": 1}), {"type": "ping"})
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=_sse_response(raw))
        async with _client() as client:
            with pytest.raises(TransientError) as info:
                await _events(client, HI)
    assert type(info.value) is TransientError
    assert info.value.error_type == "stream_incomplete"


@pytest.mark.anyio
async def test_stream_event_that_is_not_json() -> None:
    raw = b"event: message_start\ndata: {not json\n\n"
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=_sse_response(raw))
        async with _client() as client:
            with pytest.raises(TransientError, match="not JSON") as info:
                await _events(client, HI)
    assert info.value.body == "{not json"


# ------------------------------------------------------------------ HTTP errors


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "error_type", "error_class"),
    [
        (400, "invalid_request_error", RequestRejectedError),
        (401, "authentication_error", AuthError),
        (429, "rate_limit_error", RateLimitedError),
        (529, "overloaded_error", TransientError),
    ],
)
async def test_http_errors_are_mapped(
    status: int, error_type: str, error_class: type[PolythinkError]
) -> None:
    body = {
        "type": "error",
        "error": {"type": error_type, "message": f"bad thing for key {KEY}"},
        "request_id": "req_1",
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(
            return_value=httpx.Response(
                status, json=body, headers={"request-id": "req_1", "retry-after": "7"}
            )
        )
        # One attempt: a retried 429 would wait out the 7 s pause it sets (in real time).
        async with _client(max_retries=0) as client:
            with pytest.raises(error_class) as info:
                await client.complete(HI)
        assert mock.calls.call_count == 1
    error = info.value
    assert type(error) is error_class
    assert (error.status_code, error.error_type, error.request_id, error.retry_after) == (
        status,
        error_type,
        "req_1",
        7.0,
    )
    assert KEY not in str(error)
    assert error.body is not None
    assert KEY not in error.body
