"""The cases of ../shared/cases/CASES.md that apply to the Chat Completions wire.

C01 (an effort the model does not accept never reaches the wire), C03 (reasoning-only stream
chunks), C16/C17/C19 (SSE control events, keep-alive comments, multi-line data) through the
transport for several providers, and the usage cases (g): cached tokens are already inside
``prompt_tokens``, fields not reported stay ``None``, streaming and non-streaming agree. Also the
recorded OpenAI 400 for ``max_tokens`` on a reasoning model, and the 400 for an unsupported
``reasoning_effort`` value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Effort, Source, StreamEvent, ThinkingObservation, Usage
from polythink.errors import (
    RequestRejectedError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.transports.openai_chat import parse_usage
from tests.chatwire import ODD_SIZES, collect, sent_json, sse, sse_response
from tests.conftest import REAL, cassette, shared_file

HI = [{"role": "user", "content": "hi"}]


def _source(provider: str, model: str, **kwargs: Any) -> Source:
    return Source(provider, model, api_key="sk-case-0123456789ab", **kwargs)


def _url(source: Source) -> str:
    return f"{source.endpoint}/chat/completions"


def _completion(message: dict[str, Any], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


# ---------------------------------------------------------------- C01


@pytest.mark.anyio
async def test_c01_gpt51_minimal_never_reaches_the_wire_under_nearest() -> None:
    source = _source("openai", "gpt-5.1")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(source)).mock(
            return_value=httpx.Response(200, json=_completion({"content": "hi"}))
        )
        async with Client([source]) as client:
            response = await client.complete(
                [{"role": "user", "content": "hi"}], reasoning_effort="minimal"
            )
    body = sent_json(route.calls[0])
    assert body == {
        "model": "gpt-5.1",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": False,
        "reasoning_effort": "low",
    }
    assert body["reasoning_effort"] in {"none", "low", "medium", "high"}
    assert (response.requested_effort, response.applied_effort) == (Effort.MINIMAL, Effort.LOW)


@pytest.mark.anyio
async def test_c01_gpt51_minimal_under_error_is_a_typed_error_with_no_http_call() -> None:
    source = _source("openai", "gpt-5.1", effort_fallback="error")
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(_url(source)).mock(
            return_value=httpx.Response(200, json=_completion({"content": "hi"}))
        )
        async with Client([source]) as client:
            with pytest.raises(ThinkingUnsupportedError) as info:
                await client.complete(HI, reasoning_effort="minimal")
            with pytest.raises(ThinkingUnsupportedError):
                await collect(client.stream(HI, reasoning_effort="minimal"))
    assert route.call_count == 0
    assert info.value.source_index == 0
    assert "accepted tiers: none, low, medium, high" in str(info.value)


def test_c01_a_source_configured_with_minimal_under_error_fails_at_build() -> None:
    with pytest.raises(ThinkingUnsupportedError, match=r"'gpt-5\.1' does not accept"):
        Client([_source("openai", "gpt-5.1", reasoning_effort="minimal", effort_fallback="error")])


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "tier", "reasoning_tokens"), [("gpt-5.4", "xhigh", 640), ("gpt-5.1", "none", 0)]
)
async def test_c01_supported_values_pass_unchanged(
    model: str, tier: str, reasoning_tokens: int
) -> None:
    source = _source("openai", model, effort_fallback="error")
    usage = {
        "prompt_tokens": 8,
        "completion_tokens": 700,
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(source)).mock(
            return_value=httpx.Response(200, json=_completion({"content": "hi"}, usage))
        )
        async with Client([source]) as client:
            response = await client.complete(HI, reasoning_effort=tier)
    assert sent_json(route.calls[0])["reasoning_effort"] == tier
    assert response.applied_effort == Effort(tier)
    assert response.warnings == []


@pytest.mark.anyio
async def test_c01_upstream_unsupported_value_maps_to_thinking_unsupported_and_fails_over() -> None:
    first = _source("openai", "gpt-5.1")
    second = _source("openrouter", "openai/gpt-5.1")
    upstream = {
        "error": {
            "type": "invalid_request_error",
            "param": "reasoning_effort",
            "code": "unsupported_value",
            "message": "Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model. "
            "Supported values are: 'none', 'low', 'medium', and 'high'.",
        }
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(first)).mock(return_value=httpx.Response(400, json=upstream))
        fallback = mock.post(_url(second)).mock(
            return_value=httpx.Response(200, json=_completion({"content": "ok"}))
        )
        async with Client([first, second]) as client:
            response = await client.complete(HI, reasoning_effort="low")
    assert response.source_index == 1
    assert fallback.call_count == 1

    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(first)).mock(return_value=httpx.Response(400, json=upstream))
        async with Client([first]) as client:
            with pytest.raises(ThinkingUnsupportedError) as info:
                await client.complete(HI, reasoning_effort="low")
    error = info.value
    assert isinstance(error, RequestRejectedError)
    assert (error.status_code, error.error_type, error.provider) == (
        400,
        "unsupported_value",
        "openai",
    )
    assert error.message == f"openai answered HTTP 400: {upstream['error']['message']}"


# ---------------------------------------------------------------- C03


def _reasoning_chunks(key: str) -> bytes:
    return sse(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": None, key: "Add 2 and 2."}}
            ],
        },
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": "4"}, "finish_reason": "stop"}],
        },
    )


@pytest.mark.anyio
@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("deepseek", "deepseek-reasoner"),
        ("qwen", "qwen3.7-plus"),
        ("glm", "glm-4.6"),
        ("kimi", "kimi-k2.5"),
        ("xai", "grok-3-mini"),
        ("openrouter", "deepseek/deepseek-r1"),
        ("ollama", "qwen3:8b"),
        ("vllm", "Qwen/Qwen3-8B"),
        ("groq", "qwen3-32b"),
    ],
)
async def test_c03_reasoning_only_chunks_stream_before_content(
    provider: str, model: str, key: str
) -> None:
    source = _source(provider, model)
    non_stream = _completion({"content": "4", key: "Add 2 and 2."})
    for sizes in (None, ODD_SIZES):
        with respx.mock(assert_all_called=True) as mock:
            route = mock.post(_url(source))
            route.side_effect = [
                sse_response(_reasoning_chunks(key), sizes),
                httpx.Response(200, json=non_stream),
            ]
            async with Client([source]) as client:
                events = await collect(client.stream(HI))
                whole = await client.complete(HI)
        assert [(e.type, e.text) for e in events[:-1]] == [
            ("reasoning", "Add 2 and 2."),
            ("text", "4"),
        ]
        streamed = events[-1].response
        assert streamed is not None
        assert "".join(e.text or "" for e in events if e.type == "reasoning") == whole.reasoning
        assert (
            (streamed.text, streamed.reasoning)
            == (whole.text, whole.reasoning)
            == ("4", "Add 2 and 2.")
        )
        assert streamed.thinking is whole.thinking is ThinkingObservation.OBSERVED


# ---------------------------------------------------------------- C16, C17, C19 via the transport

C16_BODY = (
    b"retry: 3000\n\n"
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    b'{"content":"Hi"}}]}\nid: 7\n\n'
    b": ping\n\n"
    b"data: [DONE]\n\n"
)
C17_BODY = (
    b": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n"
    b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
    b"data: [DONE]\n\n"
)
# The same keep-alives after a gateway wrapped each comment in data: (C17's gateway fault).
C17_GATEWAY_BODY = (
    b"data: : OPENROUTER PROCESSING\n\ndata: : OPENROUTER PROCESSING\n\n"
    b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
    b"data: [DONE]\n\n"
)
C19_ERROR = b'event: error\ndata: {"error":\ndata: {"message":"bad key"}}\n\n'
C19_CONTENT = b'data: {"choices":[{"index":0,\ndata: "delta":{"content":"ok"}}]}\n\n'
SOURCES = [
    ("openai", "gpt-4o-mini"),
    ("openrouter", "anthropic/claude-sonnet-4.5"),
    ("deepseek", "deepseek-v4-flash"),
    ("groq", "qwen3-32b"),
]


async def _stream(
    source: Source,
    body: bytes,
    sizes: tuple[int, ...] | None,
    into: list[StreamEvent] | None = None,
) -> list[StreamEvent]:
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=sse_response(body, sizes))
        async with Client([source]) as client:
            return await collect(client.stream(HI), into)


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), SOURCES)
@pytest.mark.parametrize("sizes", [None, (1,), ODD_SIZES])
async def test_c16_control_events_and_ping_give_exactly_one_chunk(
    provider: str, model: str, sizes: tuple[int, ...] | None
) -> None:
    events = await _stream(_source(provider, model), C16_BODY, sizes)
    assert [(e.type, e.text) for e in events] == [("text", "Hi"), ("done", None)]
    response = events[-1].response
    assert response is not None
    assert (response.text, response.finish_reason, response.usage) == ("Hi", "stop", None)


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), SOURCES)
@pytest.mark.parametrize("sizes", [None, (1,), ODD_SIZES])
async def test_c17_keepalive_comments_are_ignored(
    provider: str, model: str, sizes: tuple[int, ...] | None
) -> None:
    events = await _stream(_source(provider, model), C17_BODY, sizes)
    assert [(e.type, e.text) for e in events] == [("text", "ok"), ("done", None)]


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), SOURCES)
@pytest.mark.parametrize("sizes", [None, (1,), ODD_SIZES])
async def test_c17_keepalive_comments_wrapped_in_data_are_ignored(
    provider: str, model: str, sizes: tuple[int, ...] | None
) -> None:
    source = _source(provider, model)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(source)).mock(return_value=sse_response(C17_GATEWAY_BODY, sizes))
        async with Client([source]) as client:
            events = await collect(client.stream(HI))
    assert [(e.type, e.text) for e in events] == [("text", "ok"), ("done", None)]
    assert route.call_count == 1  # not a malformed event, so nothing to retry


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), SOURCES)
async def test_c19_multi_line_error_event_raises_with_its_message(
    provider: str, model: str
) -> None:
    seen: list[StreamEvent] = []
    with pytest.raises(TransientError) as info:
        await _stream(_source(provider, model), C19_ERROR + C19_CONTENT, ODD_SIZES, seen)
    assert seen == []
    assert not isinstance(info.value, StreamInterruptedError)
    assert info.value.message == f"{provider} sent an in-stream error: bad key"
    assert info.value.status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), SOURCES)
async def test_c19_multi_line_content_then_error_keeps_the_partial_output(
    provider: str, model: str
) -> None:
    seen: list[StreamEvent] = []
    with pytest.raises(StreamInterruptedError) as info:
        await _stream(_source(provider, model), C19_CONTENT + C19_ERROR, ODD_SIZES, seen)
    assert [(e.type, e.text) for e in seen] == [("text", "ok")]
    assert info.value.partial is not None
    assert (info.value.partial.text, info.value.partial.finish_reason) == ("ok", "error")
    assert isinstance(info.value.__cause__, TransientError)
    assert "bad key" in str(info.value.__cause__)


# ---------------------------------------------------------------- (g) usage


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # C13/C20 OpenAI control: prompt_tokens already include the cached tokens.
        (
            {
                "prompt_tokens": 10007,
                "completion_tokens": 50,
                "prompt_tokens_details": {"cached_tokens": 9800},
            },
            Usage(10007, 50, None, 9800, None),
        ),
        (
            {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 60}},
            Usage(100, None, None, 60, None),
        ),
        # DeepSeek reports cache hits in its own field; prompt_tokens = hit + miss already.
        (
            {
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "prompt_cache_hit_tokens": 60,
                "prompt_cache_miss_tokens": 40,
            },
            Usage(100, 20, None, 60, None),
        ),
        # Moonshot's top-level cached_tokens.
        (
            {"prompt_tokens": 90, "completion_tokens": 9, "cached_tokens": 30},
            Usage(90, 9, None, 30, None),
        ),
        (
            {
                "prompt_tokens": 12,
                "completion_tokens": 30,
                "completion_tokens_details": {"reasoning_tokens": 0},
                "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            },
            Usage(12, 30, 0, 0, 0),
        ),
        (
            {
                "prompt_tokens": 12,
                "completion_tokens": 30,
                "prompt_tokens_details": {"cache_write_tokens": 512},
            },
            Usage(12, 30, None, None, 512),
        ),
        (
            {
                "prompt_tokens": 5,
                "completion_tokens": 2,
                "completion_tokens_details": None,
                "prompt_tokens_details": None,
            },
            Usage(5, 2, None, None, None),
        ),
        (
            {
                "prompt_tokens": None,
                "completion_tokens": "7",
                "completion_tokens_details": {"reasoning_tokens": -1},
            },
            Usage(None, None, None, None, None),
        ),
        ({}, Usage(None, None, None, None, None)),
        (None, None),
    ],
)
def test_usage_normalisation(usage: Any, expected: Usage | None) -> None:
    assert parse_usage(usage) == expected


def test_groq_recorded_usage_has_no_reasoning_count_not_zero() -> None:
    recorded = cassette("pai_groq_reasoning_format_raw_and_parsed.yaml").interactions[0]
    usage = parse_usage(recorded.response_json["usage"])
    assert usage == Usage(21, 1414, None, None, None)
    assert usage is not None
    assert usage.reasoning_tokens is None
    assert usage.total_tokens == 1435 == recorded.response_json["usage"]["total_tokens"]


EXCHANGE_USAGE = {
    "prompt_tokens": 10007,
    "completion_tokens": 50,
    "total_tokens": 10057,
    "prompt_tokens_details": {"cached_tokens": 9800, "cache_write_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 32},
}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model"),
    [("openai", "o3-mini"), ("openrouter", "openai/o3-mini"), ("deepseek", "deepseek-reasoner")],
)
async def test_streaming_and_non_streaming_usage_are_identical(provider: str, model: str) -> None:
    source = _source(provider, model)
    chunks = sse(
        {
            "id": "c1",
            "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}],
            "usage": None,
        },
        {
            "id": "c1",
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}],
            "usage": None,
        },
        {"id": "c1", "model": "m", "choices": [], "usage": EXCHANGE_USAGE},
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).side_effect = [
            sse_response(chunks, ODD_SIZES),
            httpx.Response(200, json=_completion({"content": "Hello"}, EXCHANGE_USAGE)),
        ]
        async with Client([source]) as client:
            events = await collect(client.stream(HI))
            whole = await client.complete(HI)
    streamed = events[-1].response
    assert streamed is not None
    assert streamed.usage == whole.usage == Usage(10007, 50, 32, 9800, 0)
    assert [e.usage for e in events if e.type == "usage"] == [whole.usage]
    assert (streamed.text, streamed.finish_reason, streamed.thinking) == (
        whole.text,
        whole.finish_reason,
        whole.thinking,
    )


@pytest.mark.anyio
async def test_recorded_stream_usage_equals_the_same_usage_non_streamed() -> None:
    recorded = cassette("pai_openrouter_chat_reasoning_details_stream.yaml").interactions[0]
    final = [
        json.loads(line.removeprefix(b"data: "))
        for line in recorded.response_raw.splitlines()
        if line.startswith(b"data: {") and b'"usage"' in line
    ][-1]
    source = _source("openrouter", "anthropic/claude-sonnet-4.5")
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).side_effect = [
            sse_response(recorded.response_raw, ODD_SIZES),
            httpx.Response(200, json=_completion({"content": "2 + 2 = 4"}, final["usage"])),
        ]
        async with Client([source]) as client:
            events = await collect(client.stream(HI, reasoning_effort="auto"))
            whole = await client.complete(HI, reasoning_effort="auto")
    assert events[-1].response is not None
    assert events[-1].response.usage == whole.usage == Usage(43, 36, 13, 0, None)


# ---------------------------------------------------------------- recorded 400s


def _vercel_error() -> bytes:
    return shared_file(REAL / "vercel_openai_chat_reasoning_max_tokens_error.json").read_bytes()


@pytest.mark.anyio
async def test_openai_source_never_sends_max_tokens() -> None:
    source = _source("openai", "o3-mini")
    stream = sse({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]})
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(source))
        route.side_effect = [
            httpx.Response(200, json=_completion({"content": "ok"})),
            sse_response(stream),
        ]
        async with Client([source]) as client:
            await client.complete(HI, max_tokens=512)
            await collect(client.stream(HI, max_tokens=512))
    for call in route.calls:
        body = sent_json(call)
        assert body["max_completion_tokens"] == 512
        assert "max_tokens" not in body


@pytest.mark.anyio
async def test_recorded_max_tokens_400_is_request_rejected_and_does_not_fail_over() -> None:
    error_body = _vercel_error()
    first = _source("openai", "o3-mini")
    second = _source("openrouter", "openai/o3-mini")
    with respx.mock(assert_all_called=False) as mock:
        mock.post(_url(first)).mock(
            return_value=httpx.Response(
                400, content=error_body, headers={"x-request-id": "req_abc"}
            )
        )
        other = mock.post(_url(second)).mock(
            return_value=httpx.Response(200, json=_completion({"content": "ok"}))
        )
        async with Client([first, second]) as client:
            with pytest.raises(RequestRejectedError) as info:
                await client.complete(HI)
    assert other.call_count == 0
    error = info.value
    assert type(error) is RequestRejectedError
    assert error.error_type == "unsupported_parameter"
    assert error.status_code == 400
    assert error.request_id == "req_abc"
    assert error.source_index == 0
    assert error.message == (
        "openai answered HTTP 400: Unsupported parameter: 'max_tokens' is not supported with "
        "this model. Use 'max_completion_tokens' instead."
    )
    assert json.loads(error.body or "") == json.loads(error_body)
    assert error.previous == []


@pytest.mark.anyio
async def test_a_stream_of_only_done_is_an_error_and_is_not_cached(tmp_path: Path) -> None:
    source = Source("openai", "gpt-4o", api_key="sk-test-key-0000000000", max_retries=0)
    with respx.mock() as router:
        route = router.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(
                200, content=b"data: [DONE]\n\n", headers={"content-type": "text/event-stream"}
            )
        )
        async with Client([source], cache=tmp_path / "cache") as client:
            for _ in range(2):
                with pytest.raises(TransientError) as caught:
                    async for _event in client.stream([{"role": "user", "content": "hi"}]):
                        pass
                assert caught.value.error_type == "stream_incomplete"
    assert route.call_count == 2
