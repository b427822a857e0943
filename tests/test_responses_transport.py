"""The Responses transport on its own: body building, stream events, errors, history."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from polythink import (
    Client,
    Message,
    RateLimitedError,
    RequestRejectedError,
    Source,
    StreamEvent,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    Tool,
    ToolCall,
    ToolCallDelta,
    TransientError,
    Usage,
)
from polythink.providers import get_provider
from polythink.reasoning.resolve import resolve
from polythink.transports.openai_responses import build_body, finish_reason, parse_response
from polythink.types import Request

URL = "https://api.openai.com/v1/responses"
PROFILE = get_provider("openai-responses")


def sse(*events: dict[str, Any], event_lines: bool = True) -> bytes:
    """Encode events as a Responses stream (``event:`` lines as OpenAI sends them)."""
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if event_lines else ""
        out.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(out).encode()


async def collect(events: AsyncIterator[StreamEvent], into: list[str | None]) -> None:
    async for event in events:
        into.append(event.text)


def stream_answer(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


def completed(output: list[Any], usage: dict[str, Any] | None = None, **fields: Any) -> dict:
    response = {"id": "resp_1", "model": "gpt-5.5", "status": "completed", "output": output}
    response.update(fields)
    if usage is not None:
        response["usage"] = usage
    return {"type": "response.completed", "response": response}


USAGE = {
    "input_tokens": 20,
    "input_tokens_details": {"cached_tokens": 5, "cache_write_tokens": 7},
    "output_tokens": 30,
    "output_tokens_details": {"reasoning_tokens": 12},
    "total_tokens": 50,
}


def request(messages: list[Any], **fields: Any) -> Request:
    client = Client([Source("openai-responses", "gpt-5.5", api_key="sk-test")])
    return client.request(messages, **fields)


# --------------------------------------------------------------------------- request body


def test_body_tools_tool_choice_and_a_tool_loop_history() -> None:
    weather = Tool(
        name="weather",
        description="Weather for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    call = ToolCall(id="call_1", name="weather", arguments='{"city":"Paris"}')
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris?"},
        Message(role="assistant", content=None, tool_calls=(call,)),
        Message(role="tool", content='{"temp": 21}', tool_call_id="call_1"),
        {"role": "system", "content": "Answer in French."},
    ]
    body = build_body(
        request(
            messages,
            tools=[weather, {"name": "clock", "description": "Time", "strict": True}],
            tool_choice={"type": "function", "function": {"name": "weather"}},
            max_tokens=300,
            temperature=0.5,
            top_p=0.9,
        ),
        model="gpt-5.5",
        profile=PROFILE,
    )
    assert body == {
        "model": "gpt-5.5",
        "instructions": "Be brief.\n\nUse tools.",
        "input": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21}'},
            {"role": "system", "content": "Answer in French."},
        ],
        "stream": False,
        "max_output_tokens": 300,
        "temperature": 0.5,
        "top_p": 0.9,
        "tools": [
            {
                "type": "function",
                "name": "weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": False,
            },
            {
                "type": "function",
                "name": "clock",
                "description": "Time",
                "parameters": {"type": "object", "properties": {}},
                "strict": True,
            },
        ],
        "tool_choice": {"type": "function", "name": "weather"},
    }


def test_body_converts_chat_content_parts() -> None:
    body = build_body(
        request(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                        {
                            "type": "image_url",
                            "image_url": {"url": "https://x.test/b.png", "detail": "high"},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "A cat"}, {"type": "text", "text": "."}],
                },
            ]
        ),
        model="gpt-5.5",
        profile=PROFILE,
    )
    # input_image requires detail (InputImageContent: required [type, detail], auto by
    # default); an assistant's text is a string (EasyInputMessage content).
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "auto"},
                {"type": "input_image", "image_url": "https://x.test/b.png", "detail": "high"},
            ],
        },
        {"role": "assistant", "content": "A cat."},
    ]


def test_stop_is_rejected_before_any_http_call() -> None:
    with pytest.raises(RequestRejectedError) as caught:
        build_body(
            request([{"role": "user", "content": "hi"}], stop="END"), model="m", profile=PROFILE
        )
    assert "no stop sequences" in caught.value.message
    assert "drop_params=True" in caught.value.message


@pytest.mark.anyio
async def test_stop_dropped_with_drop_params_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = {"id": "r", "model": "gpt-5.5", "status": "completed", "output": []}
    source = Source("openai-responses", "gpt-5.5", api_key="sk-test", drop_params=True)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(return_value=httpx.Response(200, json=answer))
        async with Client([source]) as client:
            with caplog.at_level(logging.WARNING, logger="polythink.transports"):
                for _ in range(2):
                    await client.complete([{"role": "user", "content": "hi"}], stop=["END"])
    assert route.call_count == 2
    assert all("stop" not in json.loads(c.request.content) for c in route.calls)
    dropped = [r for r in caplog.records if "dropped stop" in r.getMessage()]
    assert len(dropped) == 1


def test_store_false_leaves_out_reasoning_items_without_encrypted_content() -> None:
    turn = Message(
        role="assistant",
        content="ok",
        reasoning_items=(
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAA"},
            {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        ),
        reasoning_format="openai-responses",
    )
    messages = [{"role": "user", "content": "a"}, turn, {"role": "user", "content": "b"}]
    stored = build_body(request(messages), model="m", profile=PROFILE)
    assert [i.get("id") for i in stored["input"]] == [None, "rs_1", "rs_2", "msg_1", None]
    stateless = build_body(
        request(messages), model="m", profile=PROFILE, extra_body={"store": False}
    )
    assert [i.get("id") for i in stateless["input"]] == [None, "rs_2", "msg_1", None]
    assert stateless["store"] is False


@pytest.mark.parametrize(
    ("model", "effort", "include", "reasoning"),
    [
        ("gpt-5.5", None, True, None),
        ("gpt-5.5", "high", True, {"effort": "high"}),
        ("gpt-5.1", "none", True, {"effort": "none"}),
        ("gpt-4o", None, False, None),
        ("gpt-4o", "none", False, None),
        ("my-private-model", None, False, None),
        ("my-private-model", "high", True, {"effort": "high"}),
        ("my-private-model", "none", False, {"effort": "none"}),
    ],
)
@pytest.mark.anyio
async def test_include_encrypted_only_for_models_that_reason(
    model: str, effort: str | None, include: bool, reasoning: Any
) -> None:
    answer = {"id": "r", "model": model, "status": "completed", "output": []}
    source = Source("openai-responses", model, api_key="sk-test")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(return_value=httpx.Response(200, json=answer))
        async with Client([source]) as client:
            await client.complete([{"role": "user", "content": "hi"}], reasoning_effort=effort)
    body = json.loads(route.calls.last.request.content)
    assert ("include" in body) is include
    if include:
        assert body["include"] == ["reasoning.encrypted_content"]
    assert body.get("reasoning") == reasoning


def test_openrouter_profile_never_asks_for_encrypted_reasoning() -> None:
    profile = get_provider("openrouter-responses")
    assert profile.wire == "openai_responses"
    assert profile.base_url == "https://openrouter.ai/api/v1"
    assert profile.encrypted_reasoning is False
    resolution = resolve("high", provider=profile, model="openai/gpt-oss-20b")
    req = request([{"role": "user", "content": "hi"}]).with_(resolution=resolution)
    assert build_body(req, model="openai/gpt-oss-20b", profile=profile) == {
        "model": "openai/gpt-oss-20b",
        "input": [{"role": "user", "content": "hi"}],
        "stream": False,
        "reasoning": {"effort": "high"},
    }


# --------------------------------------------------------------------------- parsing


def test_parse_function_calls_finish_and_usage_with_cache_write() -> None:
    data = {
        "id": "resp_9",
        "model": "gpt-5.5-2026-04-23",
        "status": "completed",
        "output": [
            {
                "type": "reasoning",
                "id": "rs_9",
                "summary": [{"type": "summary_text", "text": "plan"}],
                "content": [{"type": "reasoning_text", "text": "raw"}],
                "encrypted_content": "gAAA9",
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_a",
                "name": "weather",
                "arguments": '{"city":"Oslo"}',
                "status": "completed",
            },
            {
                "type": "function_call",
                "id": "fc_2",
                "call_id": "call_b",
                "name": "clock",
                "arguments": "",
                "status": "completed",
            },
        ],
        "usage": USAGE,
    }
    response = parse_response(data, profile=PROFILE, source_index=3, model="gpt-5.5")
    assert response.tool_calls == [
        ToolCall(id="call_a", name="weather", arguments='{"city":"Oslo"}'),
        ToolCall(id="call_b", name="clock", arguments="{}"),
    ]
    assert response.finish_reason == "tool_calls"
    assert response.reasoning == "plan\n\nraw"
    assert response.text == ""
    assert response.message.content is None
    assert response.message.tool_calls == tuple(response.tool_calls)
    assert response.usage == Usage(20, 30, 12, 5, 7)
    assert response.source_index == 3
    assert response.message.reasoning_items == tuple(data["output"])


@pytest.mark.parametrize(
    ("status", "details", "calls", "refused", "expected"),
    [
        ("completed", None, False, False, "stop"),
        ("completed", None, True, False, "tool_calls"),
        ("completed", None, False, True, "content_filter"),
        ("incomplete", {"reason": "max_output_tokens"}, False, False, "length"),
        ("incomplete", {"reason": "content_filter"}, False, False, "content_filter"),
        ("incomplete", {"reason": "something_new"}, False, False, "error"),
        ("failed", None, False, False, "error"),
        ("cancelled", None, False, False, "error"),
        ("weird_failure", None, False, False, "error"),
        ("in_progress", None, True, False, "error"),
        (None, None, False, False, "stop"),
    ],
)
def test_finish_reason(
    status: str, details: Any, calls: bool, refused: bool, expected: str
) -> None:
    assert finish_reason(status, details, has_tool_calls=calls, refused=refused) == expected


def test_incomplete_response_is_output_limited() -> None:
    data = {
        "id": "r",
        "model": "o3-mini",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "reasoning", "id": "rs", "summary": []}],
        "usage": {
            "input_tokens": 5,
            "output_tokens": 16,
            "output_tokens_details": {"reasoning_tokens": 16},
        },
    }
    response = parse_response(data, profile=PROFILE, source_index=0, model="o3-mini")
    assert response.finish_reason == "length"
    assert response.output_limited is True
    assert response.usage == Usage(5, 16, 16, None, None)


def test_refusal_counts_as_text_and_content_filter() -> None:
    data = {
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": "No."}],
            }
        ],
    }
    response = parse_response(data, profile=PROFILE, source_index=0, model="m")
    assert (response.text, response.finish_reason, response.usage) == (
        "No.",
        "content_filter",
        None,
    )


# --------------------------------------------------------------------------- streaming


def call_events() -> list[dict[str, Any]]:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": "",
    }
    done = {**item, "arguments": '{"city":"Rome"}', "status": "completed"}
    return [
        {"type": "response.created", "response": {"id": "resp_s", "model": "gpt-5.5"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"city":'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '"Rome"}'},
        {
            "type": "response.function_call_arguments.done",
            "output_index": 0,
            "arguments": '{"city":"Rome"}',
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        completed([done], USAGE),
    ]


@pytest.mark.anyio
async def test_stream_yields_a_tool_call_once_when_its_arguments_are_complete() -> None:
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=stream_answer(sse(*call_events())))
        async with Client([Source("openai-responses", "gpt-5.5", api_key="sk-test")]) as client:
            received = [
                e
                async for e in client.stream(
                    [{"role": "user", "content": "hi"}], tools=[Tool(name="weather")]
                )
            ]
    assert [e.type for e in received] == [
        "tool_call_delta",
        "tool_call_delta",
        "tool_call_delta",
        "tool_call",
        "usage",
        "done",
    ]
    assert [e.tool_call_delta for e in received[:3]] == [
        ToolCallDelta(index=0, id="call_1", name="weather", arguments=piece)
        for piece in ("", '{"city":', '"Rome"}')
    ]
    assert received[3].tool_call == ToolCall(
        id="call_1", name="weather", arguments='{"city":"Rome"}'
    )
    final = received[-1].response
    assert final is not None
    assert final.finish_reason == "tool_calls"
    assert final.native_finish_reason == "completed"
    assert final.tool_calls == [received[3].tool_call]
    assert final.usage == Usage(20, 30, 12, 5, 7)
    assert final.id == "resp_s"


@pytest.mark.anyio
async def test_stream_text_that_only_arrives_in_the_done_item_is_yielded() -> None:
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "late"}],
    }
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
    }
    body = sse(
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.done", "output_index": 1, "item": message},
        completed([reasoning, message]),
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=stream_answer(body))
        async with Client([Source("openai-responses", "gpt-5.5", api_key="sk-test")]) as client:
            received = [e async for e in client.stream([{"role": "user", "content": "hi"}])]
    assert [(e.type, e.text) for e in received[:-1]] == [
        ("reasoning", "a"),
        ("reasoning", "\n\nb"),
        ("text", "late"),
    ]
    final = received[-1].response
    assert final is not None
    whole = parse_response(
        completed([reasoning, message])["response"], profile=PROFILE, source_index=0, model="m"
    )
    assert (final.text, final.reasoning) == (whole.text, whole.reasoning) == ("late", "a\n\nb")
    assert final.usage is None


@pytest.mark.anyio
async def test_error_event_before_output_raises_the_typed_error() -> None:
    body = sse(
        {"type": "response.created", "response": {"id": "r", "model": "gpt-5.5"}},
        {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": None},
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=stream_answer(body))
        async with Client([Source("openai-responses", "gpt-5.5", api_key="sk-test")]) as client:
            with pytest.raises(RateLimitedError) as caught:
                async for _ in client.stream([{"role": "user", "content": "hi"}]):
                    pass
    assert caught.value.error_type == "rate_limit_exceeded"
    assert caught.value.status_code == 200
    assert "Slow down" in caught.value.message


@pytest.mark.anyio
async def test_failed_response_after_output_raises_stream_interrupted_with_partial() -> None:
    body = sse(
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "lo"},
        {
            "type": "response.failed",
            "response": {
                "id": "r",
                "status": "failed",
                "error": {"code": "server_error", "message": "boom"},
            },
        },
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=stream_answer(body))
        async with Client([Source("openai-responses", "gpt-5.5", api_key="sk-test")]) as client:
            seen: list[str | None] = []
            with pytest.raises(StreamInterruptedError) as caught:
                await collect(client.stream([{"role": "user", "content": "hi"}]), seen)
    assert seen == ["Hel", "lo"]
    assert caught.value.partial.text == "Hello"
    assert caught.value.partial.finish_reason == "error"
    assert isinstance(caught.value.__cause__, TransientError)
    assert caught.value.error_type == "server_error"


@pytest.mark.anyio
async def test_stream_cut_before_completion_is_transient() -> None:
    body = sse({"type": "response.created", "response": {"id": "r", "model": "gpt-5.5"}})
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=stream_answer(body))
        async with Client([Source("openai-responses", "gpt-5.5", api_key="sk-test")]) as client:
            with pytest.raises(TransientError) as caught:
                async for _ in client.stream([{"role": "user", "content": "hi"}]):
                    pass
    assert caught.value.error_type == "stream_incomplete"


@pytest.mark.anyio
async def test_incomplete_stream_event_gives_length() -> None:
    body = sse(
        {"type": "response.output_text.delta", "output_index": 0, "delta": "cut"},
        {
            "type": "response.incomplete",
            "response": {
                "id": "r",
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [],
                "usage": {"input_tokens": 3, "output_tokens": 9},
            },
        },
        event_lines=False,
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=stream_answer(body))
        async with Client([Source("openai-responses", "gpt-5.5", api_key="sk-test")]) as client:
            received = [
                e async for e in client.stream([{"role": "user", "content": "hi"}], max_tokens=9)
            ]
    final = received[-1].response
    assert final is not None
    assert (final.text, final.finish_reason, final.output_limited) == ("cut", "length", True)
    assert final.usage == Usage(3, 9, None, None, None)


@pytest.mark.anyio
async def test_nonstream_failed_body_and_unsupported_tier_errors() -> None:
    failed = {
        "id": "r",
        "status": "failed",
        "error": {"code": "server_error", "message": "x"},
        "output": [],
    }
    rejected = {
        "error": {
            "message": "Unsupported value: 'reasoning.effort' does not support 'minimal'.",
            "type": "invalid_request_error",
            "param": "reasoning.effort",
            "code": "unsupported_value",
        }
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(
            side_effect=[httpx.Response(200, json=failed), httpx.Response(400, json=rejected)]
        )
        async with Client(
            [Source("openai-responses", "gpt-5.5", api_key="sk-secret-key", max_retries=0)]
        ) as client:
            with pytest.raises(TransientError) as first:
                await client.complete([{"role": "user", "content": "hi"}])
            with pytest.raises(ThinkingUnsupportedError) as second:
                await client.complete([{"role": "user", "content": "hi"}])
    assert first.value.error_type == "server_error"
    assert second.value.status_code == 400
    assert second.value.error_type == "unsupported_value"
    assert "sk-secret-key" not in repr(second.value) + str(second.value.body)
