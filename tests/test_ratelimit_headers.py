"""Rate-limit headers: parsed once at the transport boundary, carried on responses and errors."""

from __future__ import annotations

from contextlib import aclosing
from datetime import UTC, datetime

import httpx
import pytest
import respx

from polythink import Client, Source
from polythink.errors import RateLimitedError
from polythink.transports.error_map import error_from_status
from polythink.transports.headers import parse_duration, parse_rate_limit
from polythink.types import RateLimit
from tests.conftest import cassette
from tests.limits_cache_support import API_KEY, CHAT_URL, chat_json, chat_stream_chunks, sse


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("6m0s", 360.0),
        ("1s", 1.0),
        ("12ms", 0.012),
        ("4ms", 0.004),
        ("0s", 0.0),
        ("1h2m3.5s", 3723.5),
        ("2m59.56s", 179.56),
        ("500us", 0.0005),
        ("250µs", 0.00025),
        (".5s", 0.5),
        ("20", 20.0),
    ],
)
def test_go_durations_become_seconds(raw: str, seconds: float) -> None:
    assert parse_duration(raw) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize("raw", ["", "s", "1x", "1s2", "-1s", "1 s", "soon", "nan", "-3"])
def test_malformed_durations_are_none(raw: str) -> None:
    assert parse_duration(raw) is None


@pytest.mark.fixture_replay
def test_openai_headers_from_a_recorded_response() -> None:
    recorded = cassette("llm_openai_responses_plain_stream.yaml").interactions[0]
    headers = httpx.Headers({k: v[0] for k, v in recorded.response_headers.items()})
    assert parse_rate_limit(headers) == RateLimit(
        requests_limit=15000,
        requests_remaining=14999,
        requests_reset=0.004,
        tokens_limit=40000000,
        tokens_remaining=39999826,
        tokens_reset=0.0,
    )


@pytest.mark.fixture_replay
def test_anthropic_headers_from_a_recorded_response_reset_relative_to_now() -> None:
    recorded = cassette("llmanthropic_plain_stream.yaml").interactions[0]
    headers = httpx.Headers({k: v[0] for k, v in recorded.response_headers.items()})
    assert recorded.header("anthropic-ratelimit-requests-reset") == "2026-02-17T23:44:11Z"
    thirty_seconds_before = datetime(2026, 2, 17, 23, 43, 41, tzinfo=UTC).timestamp()
    assert parse_rate_limit(headers, now=lambda: thirty_seconds_before) == RateLimit(
        requests_limit=20000,
        requests_remaining=19999,
        requests_reset=30.0,
        tokens_limit=2400000,
        tokens_remaining=2400000,
        tokens_reset=30.0,
    )
    long_after = thirty_seconds_before + 3600.0
    late = parse_rate_limit(headers, now=lambda: long_after)
    assert late is not None
    assert late.requests_reset == 0.0


def test_no_rate_limit_headers_give_none() -> None:
    assert parse_rate_limit(httpx.Headers({"content-type": "application/json"})) is None


def test_negative_and_malformed_values_are_dropped() -> None:
    # Azure OpenAI has been seen sending -1 (WIRE.md §8.1).
    headers = httpx.Headers(
        {
            "x-ratelimit-limit-requests": "-1",
            "x-ratelimit-remaining-requests": "lots",
            "x-ratelimit-remaining-tokens": "0",
            "x-ratelimit-reset-tokens": "later",
        }
    )
    assert parse_rate_limit(headers) == RateLimit(tokens_remaining=0)


def test_an_anthropic_reset_without_a_time_zone_is_dropped() -> None:
    headers = httpx.Headers(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2026-02-17T23:44:11",
        }
    )
    assert parse_rate_limit(headers, now=lambda: 0.0) == RateLimit(
        requests_limit=50, requests_remaining=0
    )


def test_an_http_error_carries_its_rate_limit_headers() -> None:
    error = error_from_status(
        429,
        httpx.Headers(
            {
                "retry-after": "7",
                "x-ratelimit-limit-requests": "60",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "6m0s",
            }
        ),
        b'{"error": {"type": "rate_limit_exceeded", "message": "slow down"}}',
        provider="openai",
        source_index=0,
    )
    assert isinstance(error, RateLimitedError)
    assert error.retry_after == 7.0
    assert error.rate_limit == RateLimit(
        requests_limit=60, requests_remaining=0, requests_reset=360.0
    )


LIMIT_HEADERS = {
    "x-ratelimit-limit-requests": "500",
    "x-ratelimit-remaining-requests": "499",
    "x-ratelimit-reset-requests": "120ms",
    "x-ratelimit-limit-tokens": "30000",
    "x-ratelimit-remaining-tokens": "29950",
    "x-ratelimit-reset-tokens": "100ms",
}
EXPECTED = RateLimit(
    requests_limit=500,
    requests_remaining=499,
    requests_reset=0.12,
    tokens_limit=30000,
    tokens_remaining=29950,
    tokens_reset=0.1,
)


@pytest.mark.anyio
async def test_responses_and_streams_from_the_chat_transport_carry_the_headers() -> None:
    source = Source("openai", "gpt-4o", api_key=API_KEY, max_retries=0)
    with respx.mock() as router:
        route = router.post(CHAT_URL)
        route.side_effect = [
            httpx.Response(200, json=chat_json("hi"), headers=LIMIT_HEADERS),
            httpx.Response(
                200,
                content=sse(*chat_stream_chunks(["h", "i"])),
                headers={"content-type": "text/event-stream", **LIMIT_HEADERS},
            ),
            httpx.Response(
                429,
                json={"error": {"type": "rate_limit_exceeded", "message": "slow"}},
                headers={**LIMIT_HEADERS, "x-ratelimit-remaining-requests": "0"},
            ),
        ]
        async with Client([source]) as client:
            answer = await client.complete([{"role": "user", "content": "hi"}], cache=False)
            assert answer.rate_limit == EXPECTED
            async with aclosing(client.stream([{"role": "user", "content": "hi"}])) as events:
                done = [e async for e in events][-1]
            assert done.response is not None
            assert done.response.rate_limit == EXPECTED
            with pytest.raises(RateLimitedError) as caught:
                await client.complete([{"role": "user", "content": "hi"}])
            assert caught.value.rate_limit is not None
            assert caught.value.rate_limit.requests_remaining == 0


ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"


@pytest.mark.anyio
@pytest.mark.fixture_replay
async def test_a_recorded_anthropic_stream_carries_its_rate_limit_headers() -> None:
    recorded = cassette("llmanthropic_plain_stream.yaml").interactions[0]
    headers = {k: v[0] for k, v in recorded.response_headers.items() if k != "content-encoding"}
    source = Source("anthropic", "claude-sonnet-4-5", api_key="sk-ant-test-0123456789")
    with respx.mock() as router:
        router.post(ANTHROPIC_URL).respond(200, content=recorded.response_raw, headers=headers)
        async with Client([source]) as client:
            text = recorded.request_body["messages"][0]["content"][0]["text"]
            events = client.stream([{"role": "user", "content": text}], max_tokens=8192)
            async with aclosing(events) as iterator:
                done = [e async for e in iterator][-1]
    assert done.response is not None
    # The recorded resets lie in the past, so nothing is left to wait for.
    assert done.response.rate_limit == RateLimit(
        requests_limit=20000,
        requests_remaining=19999,
        requests_reset=0.0,
        tokens_limit=2400000,
        tokens_remaining=2400000,
        tokens_reset=0.0,
    )


@pytest.mark.anyio
async def test_an_anthropic_answer_and_error_carry_their_rate_limit_headers() -> None:
    source = Source(
        "anthropic", "claude-sonnet-4-5", api_key="sk-ant-test-0123456789", max_retries=0
    )
    limits = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-tokens-limit": "40000",
        "anthropic-ratelimit-tokens-remaining": "38000",
    }
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 8, "output_tokens": 1},
    }
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
    with respx.mock() as router:
        router.post(ANTHROPIC_URL).mock(
            side_effect=[
                httpx.Response(200, json=message, headers=limits),
                httpx.Response(
                    429,
                    json=error,
                    headers={**limits, "anthropic-ratelimit-requests-remaining": "0"},
                ),
            ]
        )
        async with Client([source]) as client:
            answer = await client.complete([{"role": "user", "content": "hi"}], max_tokens=64)
            with pytest.raises(RateLimitedError) as caught:
                await client.complete([{"role": "user", "content": "hi"}], max_tokens=64)
    assert answer.rate_limit == RateLimit(
        requests_limit=50, requests_remaining=49, tokens_limit=40000, tokens_remaining=38000
    )
    assert caught.value.rate_limit == RateLimit(
        requests_limit=50, requests_remaining=0, tokens_limit=40000, tokens_remaining=38000
    )


RESPONSES_JSON = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "gpt-5.5",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hi", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
}
RESPONSES_STREAM = [
    {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "hi"},
    {"type": "response.completed", "response": RESPONSES_JSON},
]
GEMINI_JSON = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "url", "stream_url", "body", "stream"),
    [
        (
            "openai-responses",
            "gpt-4o",
            "https://api.openai.com/v1/responses",
            "https://api.openai.com/v1/responses",
            RESPONSES_JSON,
            RESPONSES_STREAM,
        ),
        (
            "gemini",
            "gemini-2.5-flash",
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            GEMINI_JSON,
            [GEMINI_JSON],
        ),
    ],
)
async def test_responses_and_gemini_answers_carry_the_headers(
    provider: str,
    model: str,
    url: str,
    stream_url: str,
    body: dict[str, object],
    stream: list[dict[str, object]],
) -> None:
    source = Source(provider, model, api_key=API_KEY, max_retries=0)

    def answer(request: httpx.Request) -> httpx.Response:
        if b'"stream":true' in request.content or request.url.params.get("alt") == "sse":
            return httpx.Response(
                200,
                content=sse(*stream),
                headers={"content-type": "text/event-stream", **LIMIT_HEADERS},
            )
        return httpx.Response(200, json=body, headers=LIMIT_HEADERS)

    with respx.mock(assert_all_called=False) as router:
        router.post(url).mock(side_effect=answer)
        router.post(url__startswith=stream_url).mock(side_effect=answer)
        async with Client([source]) as client:
            answer = await client.complete([{"role": "user", "content": "hi"}], cache=False)
            assert answer.text == "hi"
            assert answer.rate_limit == EXPECTED
            async with aclosing(client.stream([{"role": "user", "content": "hi"}])) as events:
                done = [e async for e in events][-1]
            assert done.response is not None
            assert done.response.text == "hi"
            assert done.response.rate_limit == EXPECTED
