"""Numbers from the other side, held to what they can mean: pauses a provider's headers ask
for (in this process and on Redis) and usage a provider reports."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import respx

from polythink import Budget, Client, Source
from polythink.backends.base import MAX_SERVER_PAUSE, server_pause
from polythink.backends.local import LocalLimits
from polythink.backends.redis import RedisLimitStore
from polythink.errors import RateLimitedError
from polythink.reasoning.observe import bounded_usage
from polythink.types import RateLimit, Usage
from tests.budget_support import fresh_budgets, nano, table_price
from tests.limits_cache_support import API_KEY, CHAT_URL, FakeClock, chat_json, sse
from tests.redis_support import RedisServer

PROMPT = [{"role": "user", "content": "Name three primes"}]
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"


def test_no_header_pauses_a_source_longer_than_the_ceiling() -> None:
    assert MAX_SERVER_PAUSE == 600.0
    assert server_pause(None, 99999999999.0) == 600.0
    assert server_pause(None, math.inf) == 600.0
    assert server_pause(None, 12.5) == 12.5
    huge = RateLimit(tokens_remaining=0, tokens_reset=99999999 * 3600.0)
    assert server_pause(huge, None) == 600.0
    assert server_pause(RateLimit(requests_remaining=0, requests_reset=42.0), None) == 42.0


@pytest.mark.anyio
async def test_an_in_process_pause_from_a_huge_retry_after_lasts_the_ceiling() -> None:
    clock = FakeClock()
    limits = LocalLimits(60, None, None, clock)
    await limits.settle(0, None, 99999999999.0)
    assert limits.paused_until == clock.now() + 600.0
    assert await limits.take(1) == (600.0, "server_pause")


def source(**kwargs: Any) -> Source:
    return Source("openai", "gpt-5.5", api_key=API_KEY, max_retries=0, **kwargs)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(429, headers={"retry-after": "99999999999"}, json={"error": {}}),
        httpx.Response(
            200,
            headers={
                "x-ratelimit-limit-tokens": "1000",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "99999999h",
            },
            json=chat_json("ok"),
        ),
    ],
    ids=["retry-after", "x-ratelimit-reset-tokens"],
)
async def test_one_answer_pauses_a_source_for_at_most_the_ceiling(answer: httpx.Response) -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(CHAT_URL).mock(return_value=answer)
        async with Client([source(rpm=1000)], cache=False) as client:
            with contextlib.suppress(RateLimitedError):
                await client.complete(PROMPT)
            with pytest.raises(RateLimitedError) as caught:
                await client.complete(PROMPT, timeout=5)
    assert route.call_count == 1
    assert caught.value.error_type == "server_pause"
    assert caught.value.retry_after is not None
    assert 590 < caught.value.retry_after <= 600


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.mark.anyio
async def test_a_redis_pause_never_outlasts_the_ceiling(redis_server: RedisServer) -> None:
    store = RedisLimitStore(redis_server.url)
    limits = store.for_source(
        "openai",
        "https://example.test/v1",
        "sk-pause-0001",
        rpm=60,
        tpm=None,
        max_concurrency=None,
        fallback=LocalLimits(60, None, None, FakeClock()),
    )
    raw = redis.Redis(port=redis_server.port)
    pause_key = limits.keys[2]
    # The ceiling is 600 s; a busy machine may spend seconds between a write and its read,
    # so each reading allows up to a minute of that (millennia is what it guards against).
    try:
        await limits.settle(0, None, 99999999999.0)
        assert 540_000 < raw.pttl(pause_key) <= 600_000
        huge = RateLimit(requests_remaining=0, requests_reset=99999999 * 3600.0)
        await limits.settle(0, huge, None)
        assert 540_000 < raw.pttl(pause_key) <= 600_000
        # A pause key left with a longer expiry (by an older build) is cut when read.
        raw.set(pause_key, "1", px=10**12)
        wait, reason = await limits.take(1)
        assert reason == "server_pause"
        assert 540.0 < wait <= 600.0
        assert 540_000 < raw.pttl(pause_key) <= 600_000
    finally:
        await store.aclose()


def test_usage_above_what_the_call_allowed_is_counted_as_the_bound() -> None:
    usage = Usage(
        input_tokens=10**15,
        output_tokens=10**15,
        reasoning_tokens=10**15,
        cache_read_tokens=10**15,
    )
    bounded, notes = bounded_usage(usage, output=100, output_why="max_tokens", window=400_000)
    assert bounded == Usage(
        input_tokens=400_000,
        output_tokens=100,
        reasoning_tokens=100,
        cache_read_tokens=400_000,
    )
    assert notes == [
        f"the provider reported {10**15} output tokens, more than this call allowed (100: "
        f"max_tokens); counted as 100",
        f"the provider reported {10**15} input tokens, more than the model's context window "
        "(400000); counted as 400000",
    ]
    plain = Usage(input_tokens=9, output_tokens=100, reasoning_tokens=60)
    assert bounded_usage(plain, output=100, output_why="x", window=None) == (plain, [])


def gpt55_cost(input_tokens: int, output_tokens: int) -> int:
    return nano(
        table_price("gpt-5.5", "openai", input_tokens=input_tokens, output_tokens=output_tokens)
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_an_impossible_usage_is_bounded_before_cost_and_budgets_see_it(
    stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    budgets = fresh_budgets(monkeypatch)
    usage = {"prompt_tokens": 9, "completion_tokens": 10**15}
    with respx.mock(assert_all_called=False) as mock:
        if stream:
            base = {"id": "c", "object": "chat.completion.chunk", "model": "gpt-5.5"}
            chunks: list[dict[str, Any] | str] = [
                {**base, "choices": [{"index": 0, "delta": {"content": "2, 3, 5"}}]},
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {**base, "choices": [], "usage": usage},
                "[DONE]",
            ]
            headers = {"content-type": "text/event-stream"}
            mock.post(CHAT_URL).mock(
                return_value=httpx.Response(200, headers=headers, content=sse(*chunks))
            )
        else:
            body = chat_json("2, 3, 5", prompt_tokens=9, completion_tokens=10**15)
            body["model"] = "gpt-5.5"
            mock.post(CHAT_URL).mock(return_value=httpx.Response(200, json=body))
        async with Client([source()], budgets=[Budget(10.0)], cache=False) as client:
            if stream:
                response = None
                async for event in client.stream(PROMPT, max_tokens=100):
                    if event.type == "done":
                        response = event.response
                assert response is not None
            else:
                response = await client.complete(PROMPT, max_tokens=100)
    assert response.usage is not None
    assert response.usage.output_tokens == 100
    assert response.usage.input_tokens == 9
    assert (
        f"the provider reported {10**15} output tokens, more than this call allowed (100: the "
        "output ceiling sent); counted as 100"
    ) in response.warnings
    assert response.cost is not None
    assert nano(response.cost.total) == gpt55_cost(9, 100)
    assert await budgets.spent("day:all") == gpt55_cost(9, 100)


@pytest.mark.anyio
async def test_an_anthropic_usage_is_bounded_by_the_default_ceiling_it_was_sent() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": [{"type": "text", "text": "2, 3, 5"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 12, "output_tokens": 10**12},
    }
    with respx.mock() as mock:
        route = mock.post(ANTHROPIC_URL).mock(return_value=httpx.Response(200, json=body))
        src = Source("anthropic", "claude-sonnet-5-5", api_key=API_KEY, max_retries=0)
        async with Client([src], cache=False) as client:
            response = await client.complete(PROMPT)
    sent = route.calls.last.request
    assert b'"max_tokens":4096' in sent.content
    assert response.usage is not None
    assert response.usage.output_tokens == 4096
    assert response.usage.input_tokens == 12


def test_the_docs_document_the_pause_ceiling() -> None:
    guide = Path(__file__).resolve().parent.parent / "docs" / "guides" / "reliability.md"
    text = " ".join(guide.read_text().split())
    assert MAX_SERVER_PAUSE == 10 * 60
    assert "at most 10 minutes (`polythink.backends.base.MAX_SERVER_PAUSE`)" in text
