"""Retried attempts and the rate-limit layer: a 429 (or headers reporting nothing left) that
the retry layer retries pauses the source at once, for every caller; every retry takes its
own request from the RPM bucket; its tokens are the call's reservation unless the attempt
before it may have run. One injected clock drives both layers."""

from __future__ import annotations

import math

import anyio
import pytest

from polythink.config import Source
from polythink.errors import RateLimitedError, RequestTimeoutError, TransientError
from polythink.middleware.base import Chain, compose
from polythink.middleware.ratelimit import RateLimitMiddleware
from polythink.middleware.retry import RetryMiddleware
from polythink.providers import get_provider
from polythink.types import Message, RateLimit, Request, Response, Usage
from tests.limits_cache_support import FakeClock, FakeHandler, response

pytestmark = pytest.mark.anyio

FORTY = "x" * 40  # 10 tokens of text + 3 of framing = 13 estimated prompt tokens


def build(
    outcomes: list[object],
    *,
    clock: FakeClock,
    rpm: float | None = None,
    tpm: float | None = None,
    max_wait: float | None = None,
    retry_sleep: object | None = None,
) -> tuple[RateLimitMiddleware, list[float], Chain]:
    source = Source(
        "openai", "gpt-4o", api_key="sk-unused-0000000000", rpm=rpm, tpm=tpm, max_retries=2
    )
    limiter = RateLimitMiddleware(source, 0, get_provider("openai"), max_wait=max_wait, clock=clock)
    retry = RetryMiddleware(
        source,
        0,
        clock=clock.now,
        sleep=retry_sleep or clock.sleep,  # type: ignore[arg-type]
        random=lambda: 0.0,
        observer=limiter,
    )
    arrivals: list[float] = []

    async def answer(request: Request) -> Response:
        arrivals.append(clock.now())
        outcome = outcomes.pop(0) if outcomes else response("ok")
        if isinstance(outcome, Exception):
            raise outcome
        assert isinstance(outcome, Response)
        return outcome

    return limiter, arrivals, compose([limiter, retry], FakeHandler(answer))


def ask(**fields: object) -> Request:
    return Request(messages=(Message(role="user", content=FORTY),), **fields)  # type: ignore[arg-type]


async def test_a_retried_429_pauses_every_caller_from_the_first_attempt() -> None:
    clock = FakeClock()
    a_sleeping = anyio.Event()
    b_done = anyio.Event()
    seen: list[tuple[float, float]] = []
    limiter: RateLimitMiddleware | None = None

    async def retry_sleep(seconds: float) -> None:
        # A waits out its retry-after, ending at start + seconds on the one timeline; B is
        # sent (and answered) meanwhile.
        assert limiter is not None
        seen.append((seconds, limiter.paused_until))
        start = clock.now()
        a_sleeping.set()
        await b_done.wait()
        clock.t = max(clock.t, start + seconds)

    outcomes: list[object] = [RateLimitedError("slow down", status_code=429, retry_after=7.5)]
    limiter, arrivals, chain = build(outcomes, clock=clock, rpm=60, retry_sleep=retry_sleep)
    texts: list[str] = []

    async def call_a() -> None:
        texts.append((await chain.complete(ask())).text)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call_a)
        await a_sleeping.wait()
        # The pause is on before the retries give up (A's retry has not been sent).
        assert limiter.paused_until == 1007.5
        assert (await chain.complete(ask())).text == "ok"
        b_done.set()
    assert texts == ["ok"]
    assert seen == [(7.5, 1007.5)]
    # B slept exactly the pause; A's retry went when its own retry-after ended.
    assert clock.sleeps == [7.5]
    assert arrivals == [1000.0, 1007.5, 1007.5]
    # Three requests were sent, three taken: 60 - 1 at 1000.0, refilled to the cap by
    # 1007.5 (7.5 s at 1/s), then B and A's retry.
    assert limiter.requests is not None
    assert limiter.requests.level(1007.5) == 58.0
    assert limiter.in_flight == 0


async def test_a_retried_error_with_nothing_left_headers_pauses_until_their_reset() -> None:
    clock = FakeClock()
    error = TransientError("overloaded", status_code=503)
    error.rate_limit = RateLimit(requests_limit=60, requests_remaining=0, requests_reset=2.0)
    limiter, arrivals, chain = build([error], clock=clock, rpm=60)
    assert (await chain.complete(ask())).text == "ok"
    # Retry backoff 0.5 s (jitter 0), then the limiter waits out the rest of the 2 s pause.
    assert clock.sleeps == [0.5, 1.5]
    assert arrivals == [1000.0, 1002.0]
    assert limiter.paused_until == 1002.0
    # The headers' remaining 0 emptied the bucket at 1000.0; 2 s refilled 2; the retry took 1.
    assert limiter.requests is not None
    assert limiter.requests.level(1002.0) == 1.0


async def test_a_streamed_retry_is_paused_and_counted_like_a_complete_one() -> None:
    clock = FakeClock()
    outcomes: list[object] = [RateLimitedError("slow down", status_code=429, retry_after=3.0)]
    limiter, arrivals, chain = build(outcomes, clock=clock, rpm=60)
    events = [event async for event in chain.stream(ask(stream=True))]
    assert [event.type for event in events] == ["text", "done"]
    assert clock.sleeps == [3.0]
    assert arrivals == [1000.0, 1003.0]
    assert limiter.paused_until == 1003.0
    assert limiter.requests is not None
    # 60 - 1, refilled to the cap in 3 s, minus the retry's request.
    assert limiter.requests.level(1003.0) == 59.0


async def test_a_retry_the_budget_cannot_take_at_once_is_not_sent() -> None:
    clock = FakeClock()
    first = TransientError("bad gateway", status_code=502)
    limiter, arrivals, chain = build([first], clock=clock, rpm=1, tpm=1000, max_wait=0.0)
    with pytest.raises(RateLimitedError) as caught:
        await chain.complete(ask(max_tokens=100))
    refused = caught.value
    assert refused.error_type == "rpm_limit"
    assert refused.__cause__ is first
    assert refused.attempts == 1
    assert refused.retry_after == pytest.approx(59.5)
    assert refused.message == (
        "openai source 0 (gpt-4o) is at its limit of 1 requests per minute; it can take a "
        "call in 59.5 s, beyond this call's wait limit (0 s); the retry was not sent"
    )
    assert arrivals == [1000.0]
    assert clock.sleeps == [0.5]
    # A refusal of ours is no server pause; the 502 generated nothing, so the estimate
    # (13 + 100 tokens) came back, refilled to the cap.
    assert limiter.paused_until == -math.inf
    assert limiter.tokens is not None
    assert limiter.tokens.level(1000.5) == 1000.0
    assert limiter.in_flight == 0


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        # The provider answered: nothing ran, the call's reservation covers the retry.
        # 1000 - 113, +0.5 s of refill at 1000/60 per s, then the correction 113 - 50.
        (RateLimitedError("slow down", status_code=429), 1000 - 113 + 500 / 60 + 63),
        # It timed out: it may have run, so its estimate stays and the retry reserves its own.
        (RequestTimeoutError("timed out", error_type="deadline"), 1000 - 113 + 500 / 60 - 113 + 63),
    ],
)
async def test_a_retry_reserves_tokens_again_only_after_an_attempt_that_may_have_run(
    first: Exception, expected: float
) -> None:
    clock = FakeClock()
    done = response("ok", usage=Usage(input_tokens=13, output_tokens=37))
    limiter, arrivals, chain = build([first, done], clock=clock, tpm=1000)
    assert (await chain.complete(ask(max_tokens=100))).text == "ok"
    assert arrivals == [1000.0, 1000.5]
    assert limiter.tokens is not None
    assert limiter.tokens.level(1000.5) == pytest.approx(expected)
