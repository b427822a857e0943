"""The rate-limit layer: buckets, the TPM estimate and its correction, the concurrency cap,
server pauses, deadlines and cancellation."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

import anyio
import anyio.lowlevel
import pytest

from polythink.config import Source
from polythink.errors import (
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.middleware.base import Chain, compose
from polythink.middleware.ratelimit import RateLimitMiddleware, TokenBucket, estimate_tokens
from polythink.providers import get_provider
from polythink.types import (
    Message,
    RateLimit,
    Request,
    Response,
    StreamEvent,
    Tool,
    ToolCall,
    Usage,
)
from tests.limits_cache_support import FakeClock, FakeHandler, response

pytestmark = pytest.mark.anyio

FORTY = "x" * 40  # 10 tokens of text + 3 of framing = 13 estimated prompt tokens


def make(
    *,
    rpm: float | None = None,
    tpm: float | None = None,
    max_concurrency: int | None = None,
    clock: object | None = None,
    handler: FakeHandler | None = None,
    max_wait: float | None = None,
    provider: str = "openai",
) -> tuple[RateLimitMiddleware, FakeHandler, Chain]:
    source = Source(
        provider,
        "gpt-4o",
        api_key="sk-unused-0000000000",
        rpm=rpm,
        tpm=tpm,
        max_concurrency=max_concurrency,
    )
    layer = RateLimitMiddleware(
        source,
        0,
        get_provider(provider),
        max_wait=max_wait,
        clock=clock,  # type: ignore[arg-type]
    )
    inner = handler or FakeHandler()
    return layer, inner, compose([layer], inner)


def ask(text: str = FORTY, **fields: object) -> Request:
    return Request(messages=(Message(role="user", content=text),), **fields)  # type: ignore[arg-type]


# --- TokenBucket -------------------------------------------------------------------------


def test_bucket_starts_full_refills_at_the_per_minute_pace_and_caps_at_capacity() -> None:
    bucket = TokenBucket(60, now=0.0)
    assert bucket.capacity == 60.0
    assert bucket.rate == 1.0
    assert bucket.level(0.0) == 60.0
    bucket.take(60, 0.0)
    assert bucket.level(0.0) == 0.0
    assert bucket.wait(1, 0.0) == 1.0
    assert bucket.level(0.5) == 0.5
    assert bucket.wait(1, 0.5) == 0.5
    assert bucket.level(500.0) == 60.0


def test_bucket_lets_an_oversized_cost_through_when_full_and_then_waits_out_the_debt() -> None:
    bucket = TokenBucket(10, now=0.0)
    assert bucket.wait(25, 0.0) == 0.0
    bucket.take(25, 0.0)
    assert bucket.level(0.0) == -15.0
    assert bucket.wait(25, 0.0) == pytest.approx(150.0)
    assert bucket.wait(5, 0.0) == pytest.approx(120.0)


def test_bucket_give_never_exceeds_capacity_and_shrink_only_lowers() -> None:
    bucket = TokenBucket(100, now=0.0)
    bucket.take(70, 0.0)
    bucket.give(50, 0.0)
    assert bucket.level(0.0) == 80.0
    bucket.give(500, 0.0)
    assert bucket.level(0.0) == 100.0
    bucket.shrink(30, 0.0)
    assert bucket.level(0.0) == 30.0
    bucket.shrink(90, 0.0)
    assert bucket.level(0.0) == 30.0
    bucket.give(-40, 0.0)
    assert bucket.level(0.0) == -10.0


# --- estimate_tokens ---------------------------------------------------------------------


def test_estimate_counts_four_characters_per_token_three_per_message_and_the_ceiling() -> None:
    assert estimate_tokens(ask(FORTY, max_tokens=100)) == 10 + 3 + 100
    assert estimate_tokens(ask(FORTY)) == 13
    assert estimate_tokens(ask(FORTY), default_max_tokens=4096) == 13 + 4096
    assert estimate_tokens(ask("abcde", max_tokens=7), default_max_tokens=4096) == 2 + 3 + 7


def test_estimate_includes_reasoning_tool_calls_and_tool_definitions() -> None:
    call = ToolCall(id="c1", name="lookup", arguments='{"q":"x"}')  # 6 + 9 characters
    tool = Tool(name="get", description="d", parameters={"type": "object"})
    # {"type":"object"} is 17 characters of compact JSON; with name and description: 21.
    request = Request(
        messages=(
            Message(role="user", content=FORTY),
            Message(role="assistant", content=None, tool_calls=(call,), reasoning="r" * 9),
        ),
        tools=(tool,),
    )
    chars = 40 + 15 + 9 + 21
    assert estimate_tokens(request) == -(-chars // 4) + 2 * 3


# --- RPM -----------------------------------------------------------------------------------


async def test_rpm_admits_a_full_minute_at_once_then_paces_at_exactly_sixty_over_rpm() -> None:
    clock = FakeClock()
    layer, inner, chain = make(rpm=6, clock=clock)
    for _ in range(6):
        await chain.complete(ask())
    assert clock.sleeps == []
    await chain.complete(ask())
    assert clock.sleeps == [10.0]
    await chain.complete(ask())
    assert clock.sleeps == [10.0, 10.0]
    assert len(inner.requests) == 8
    assert layer.in_flight == 0


async def test_rpm_achieved_rate_is_within_five_percent_of_the_limit() -> None:
    # Eight callers on one fake clock (it moves only when the limiter sleeps, so the loop's
    # load cannot change the result): 300 rpm is 5 calls per clock second after the burst.
    clock = FakeClock()
    admitted: list[float] = []

    async def record(request: Request) -> Response:
        admitted.append(clock.now())
        await anyio.lowlevel.checkpoint()
        return response()

    layer, _, chain = make(rpm=300, clock=clock, handler=FakeHandler(record))

    async def worker() -> None:
        while len(admitted) < 1100:
            await chain.complete(ask())

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(worker)
    start = admitted[0]
    window = [t for t in admitted if 30.0 <= t - start < 150.0]
    rate = len(window) / 120.0 * 60.0
    assert abs(rate - 300.0) <= 0.05 * 300.0, (rate, len(admitted))
    # The burst is the whole bucket at once, then one call every 0.2 s.
    assert admitted[:300] == [start] * 300
    assert admitted[300] - start == pytest.approx(0.2)
    assert admitted[-1] - start == pytest.approx(0.2 * (len(admitted) - 300))
    assert layer.in_flight == 0


# --- TPM -----------------------------------------------------------------------------------


async def test_tpm_reserves_the_estimate_and_corrects_to_the_real_usage_exactly() -> None:
    clock = FakeClock()
    seen: list[float] = []

    async def answer(request: Request) -> Response:
        seen.append(layer.tokens.level(clock.now()))  # type: ignore[union-attr]
        return response(usage=Usage(input_tokens=30, output_tokens=20))

    layer, _, chain = make(tpm=1000, clock=clock, handler=FakeHandler(answer))
    assert layer.tokens is not None
    await chain.complete(ask(max_tokens=100))
    assert seen == [1000.0 - 113]
    assert layer.tokens.level(clock.now()) == 950.0

    async with aclosing(chain.stream(ask(max_tokens=100, stream=True))) as events:
        kinds = [event.type async for event in events]
    assert kinds == ["text", "usage", "done"]
    assert seen == [887.0, 950.0 - 113]
    assert layer.tokens.level(clock.now()) == 900.0
    assert clock.sleeps == []


async def test_tpm_keeps_the_estimate_when_usage_is_unknown_or_the_call_timed_out() -> None:
    clock = FakeClock()
    outcomes: list[object] = [response(usage=None), RequestTimeoutError("slow", error_type="read")]

    async def answer(request: Request) -> Response:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        assert isinstance(outcome, Response)
        return outcome

    layer, _, chain = make(tpm=1000, clock=clock, handler=FakeHandler(answer))
    assert layer.tokens is not None
    await chain.complete(ask())
    assert layer.tokens.level(clock.now()) == 1000.0 - 13
    with pytest.raises(RequestTimeoutError):
        await chain.complete(ask())
    assert layer.tokens.level(clock.now()) == 1000.0 - 26


async def test_tpm_refunds_refused_calls_keeps_lost_ones_and_counts_a_partial_stream() -> None:
    clock = FakeClock()
    partial = response("half", usage=Usage(input_tokens=5, output_tokens=2), finish_reason="error")
    outcomes: list[Exception] = [
        RequestRejectedError("bad", status_code=400),
        ThinkingUnsupportedError("refused before sending"),
        TransientError("connection reset", error_type="connection_error"),
        StreamInterruptedError("cut", partial=partial),
    ]

    async def answer(request: Request) -> Response:
        raise outcomes.pop(0)

    layer, _, chain = make(tpm=1000, clock=clock, handler=FakeHandler(answer))
    assert layer.tokens is not None
    with pytest.raises(RequestRejectedError):
        await chain.complete(ask(max_tokens=100))
    assert layer.tokens.level(clock.now()) == 1000.0
    with pytest.raises(ThinkingUnsupportedError):
        await chain.complete(ask(max_tokens=100))
    assert layer.tokens.level(clock.now()) == 1000.0
    with pytest.raises(TransientError):
        await chain.complete(ask(max_tokens=100))
    assert layer.tokens.level(clock.now()) == 1000.0 - 113
    with pytest.raises(StreamInterruptedError):
        await chain.complete(ask(max_tokens=100))
    assert layer.tokens.level(clock.now()) == 1000.0 - 113 - 7


class FrozenClock(FakeClock):
    """Time never moves; a sleep lasts until it is cancelled."""

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await anyio.sleep_forever()


async def test_a_waiting_call_is_admitted_as_soon_as_a_finished_call_returns_tokens() -> None:
    clock = FrozenClock()
    release_first = anyio.Event()

    async def answer(request: Request) -> Response:
        if len(inner.requests) == 1:
            await release_first.wait()
            return response("first", usage=Usage(input_tokens=3, output_tokens=1))
        return response("second")

    inner = FakeHandler(answer)
    layer, _, chain = make(tpm=100, clock=clock, handler=inner)
    results: list[str] = []

    async def call() -> None:
        results.append((await chain.complete(ask(max_tokens=80))).text)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        while len(inner.requests) < 1:
            await anyio.lowlevel.checkpoint()
        tg.start_soon(call)
        while not clock.sleeps:
            await anyio.lowlevel.checkpoint()
        # 93 tokens reserved by the first call leave 7; the second needs 93: (93-7)/(100/60).
        assert clock.sleeps == [pytest.approx(51.6)]
        release_first.set()
    assert results == ["first", "second"]
    assert clock.t == 1000.0
    assert layer.tokens is not None
    assert layer.tokens.level(clock.now()) == 100.0 - 4 - 93


# --- concurrency ---------------------------------------------------------------------------


async def test_the_concurrency_cap_is_reached_and_never_exceeded() -> None:
    async def slow(request: Request) -> Response:
        await anyio.sleep(0.003)
        return response()

    layer, inner, chain = make(max_concurrency=3, handler=FakeHandler(slow))
    done: list[str] = []

    async def call() -> None:
        done.append((await chain.complete(ask())).text)

    async with anyio.create_task_group() as tg:
        for _ in range(40):
            tg.start_soon(call)
    assert len(done) == 40
    assert inner.peak == 3
    assert layer.in_flight == 0


class HangingHandler(FakeHandler):
    """``max_tokens=1``: hang (a stream after its first event); otherwise time out.
    ``hanging`` counts the calls hanging now."""

    hanging = 0

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        if request.max_tokens != 1:
            async with aclosing(super().stream(request)) as events:
                async for event in events:
                    yield event
            return
        self.active += 1
        self.hanging += 1
        try:
            yield StreamEvent("text", text="partial")
            await anyio.sleep_forever()
        finally:
            self.active -= 1
            self.hanging -= 1

    async def hang_or_time_out(self, request: Request) -> Response:
        if request.max_tokens == 1:
            self.hanging += 1
            try:
                await anyio.sleep_forever()
            finally:
                self.hanging -= 1
        try:
            # A real anyio timeout that fires at the first checkpoint, however loaded the
            # loop is (no race with the caller's cancellation).
            with anyio.fail_after(0):
                await anyio.sleep_forever()
        except TimeoutError:
            raise RequestTimeoutError("deadline", error_type="deadline") from None
        raise AssertionError("unreachable")


async def test_no_slot_leaks_after_200_cancelled_and_timed_out_calls() -> None:
    inner = HangingHandler()
    inner.behaviour = inner.hang_or_time_out
    layer, _, chain = make(max_concurrency=4, handler=inner)
    outcomes = {"cancelled": 0, "timed_out": 0}
    scopes: list[anyio.CancelScope] = []

    async def call(i: int) -> None:
        streamed = i % 4 >= 2
        request = ask(max_tokens=1 + i % 2, stream=streamed)
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            try:
                if streamed:
                    async with aclosing(chain.stream(request)) as events:
                        async for _ in events:
                            pass
                else:
                    await chain.complete(request)
            except RequestTimeoutError:
                outcomes["timed_out"] += 1
        if scope.cancelled_caught:
            outcomes["cancelled"] += 1

    async with anyio.create_task_group() as tg:
        for i in range(200):
            tg.start_soon(call, i)
        # Wait (no fixed sleep) until every call has started and hanging calls hold all
        # four slots: the timed-out calls that got a slot are done, the rest are queued.
        with anyio.fail_after(30):
            while not (len(scopes) == 200 and inner.hanging == 4 and layer.in_flight == 4):  # noqa: ASYNC110
                await anyio.sleep(0.001)
        # Cancel hanging calls (mid-call, mid-stream) and queued ones (waiting for a slot).
        for scope in scopes:
            scope.cancel()
    assert outcomes["cancelled"] + outcomes["timed_out"] == 200
    assert outcomes["timed_out"] >= 2  # at least the first two calls that time out
    assert outcomes["cancelled"] >= 100  # every hanging call, plus queued ones
    assert layer.in_flight == 0
    assert inner.active == 0
    assert inner.hanging == 0
    inner.behaviour = None
    texts: list[str] = []

    async def healthy() -> None:
        texts.append((await chain.complete(ask(timeout=1.0))).text)

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(healthy)
    assert texts == ["ok"] * 5
    assert inner.peak == 4
    assert layer.in_flight == 0


async def test_a_stream_releases_its_slot_before_done_reaches_the_caller() -> None:
    layer, _, chain = make(max_concurrency=1)
    seen: list[tuple[str, int]] = []
    async with aclosing(chain.stream(ask(stream=True))) as events:
        async for event in events:
            seen.append((event.type, layer.in_flight))
    assert seen == [("text", 1), ("done", 0)]


async def test_a_stream_closed_early_releases_its_slot() -> None:
    layer, inner, chain = make(max_concurrency=1)
    inner.stream_events = [
        StreamEvent("text", text="a"),
        StreamEvent("text", text="b"),
        StreamEvent("done", response=response("ab")),
    ]
    async with aclosing(chain.stream(ask(stream=True))) as events:
        async for event in events:
            assert event.text == "a"
            assert layer.in_flight == 1
            break
    assert layer.in_flight == 0


# --- server pauses -------------------------------------------------------------------------


async def test_a_429_retry_after_pauses_the_source_for_exactly_that_long() -> None:
    clock = FakeClock()
    arrivals: list[float] = []
    outcomes: list[object] = [
        RateLimitedError("slow down", status_code=429, retry_after=7.5),
        response("after the pause"),
    ]

    async def answer(request: Request) -> Response:
        arrivals.append(clock.now())
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        assert isinstance(outcome, Response)
        return outcome

    layer, _, chain = make(clock=clock, handler=FakeHandler(answer))
    with pytest.raises(RateLimitedError):
        await chain.complete(ask())
    assert layer.paused_until == 1007.5
    result = await chain.complete(ask())
    assert result.text == "after the pause"
    assert clock.sleeps == [7.5]
    assert arrivals == [1000.0, 1007.5]


async def test_headers_reporting_nothing_left_pause_until_their_reset() -> None:
    clock = FakeClock()
    limits = RateLimit(requests_limit=60, requests_remaining=0, requests_reset=1.25)
    replies = [response(rate_limit=limits), response("next")]

    async def answer(request: Request) -> Response:
        return replies.pop(0)

    _, _, chain = make(clock=clock, handler=FakeHandler(answer))
    await chain.complete(ask())
    assert (await chain.complete(ask())).text == "next"
    assert clock.sleeps == [1.25]


async def test_an_error_carrying_headers_with_nothing_left_pauses_too() -> None:
    clock = FakeClock()
    error = RequestRejectedError("too big", status_code=400)
    error.rate_limit = RateLimit(tokens_remaining=0, tokens_reset=360.0)
    layer, _, chain = make(clock=clock, handler=FakeHandler(lambda r: _raise(error)))
    with pytest.raises(RequestRejectedError):
        await chain.complete(ask())
    assert layer.paused_until == 1360.0


async def _raise(error: Exception) -> Response:
    raise error


async def test_remaining_counts_in_headers_shrink_the_buckets() -> None:
    clock = FakeClock()
    limits = RateLimit(requests_remaining=2, tokens_remaining=300, tokens_reset=6.0)
    reply = response(usage=Usage(input_tokens=30, output_tokens=20), rate_limit=limits)

    async def answer(request: Request) -> Response:
        return reply

    layer, _, chain = make(rpm=100, tpm=1000, clock=clock, handler=FakeHandler(answer))
    await chain.complete(ask())
    assert layer.tokens is not None
    assert layer.requests is not None
    assert layer.tokens.level(clock.now()) == 300.0
    assert layer.requests.level(clock.now()) == 2.0
    assert layer.paused_until < clock.now()


async def test_a_streamed_answer_applies_its_headers_when_done_passes() -> None:
    clock = FakeClock()
    layer, inner, chain = make(clock=clock)
    limits = RateLimit(requests_remaining=0, requests_reset=2.0)
    inner.stream_events = [StreamEvent("done", response=response(rate_limit=limits))]
    async with aclosing(chain.stream(ask(stream=True))) as events:
        assert [e.type async for e in events] == ["done"]
    assert layer.paused_until == 1002.0


# --- deadlines, max_wait and cancellation --------------------------------------------------


async def test_a_wait_longer_than_the_deadline_is_refused_at_once_without_sleeping() -> None:
    clock = FakeClock()
    layer, inner, chain = make(rpm=1, max_concurrency=1, clock=clock)
    await chain.complete(ask())
    with pytest.raises(RateLimitedError) as caught:
        await chain.complete(ask(timeout=30.0))
    error = caught.value
    assert error.retry_after == 60.0
    assert error.error_type == "rpm_limit"
    assert error.status_code is None
    assert error.source_index == 0
    assert error.provider == "openai"
    assert clock.sleeps == []
    assert len(inner.requests) == 1
    assert layer.in_flight == 0


async def test_a_call_that_waited_is_sent_with_the_rest_of_its_deadline() -> None:
    clock = FakeClock()
    _, inner, chain = make(rpm=1, clock=clock)
    await chain.complete(ask(timeout=90.0))
    await chain.complete(ask(timeout=90.0))
    assert clock.sleeps == [60.0]
    assert [r.timeout for r in inner.requests] == [90.0, 30.0]


async def test_max_wait_zero_refuses_instead_of_waiting() -> None:
    clock = FakeClock()
    _, _, chain = make(tpm=100, max_wait=0.0, clock=clock)
    await chain.complete(ask(max_tokens=80))
    with pytest.raises(RateLimitedError) as caught:
        await chain.complete(ask(max_tokens=80))
    assert caught.value.error_type == "tpm_limit"
    assert caught.value.retry_after == pytest.approx((93 - 7) / (100 / 60))
    assert clock.sleeps == []


async def test_max_wait_zero_refuses_when_every_slot_is_busy() -> None:
    gate = anyio.Event()

    async def hold(request: Request) -> Response:
        await gate.wait()
        return response()

    layer, _, chain = make(max_concurrency=1, max_wait=0.0, handler=FakeHandler(hold))
    async with anyio.create_task_group() as tg:
        tg.start_soon(chain.complete, ask())
        while layer.in_flight == 0:
            await anyio.lowlevel.checkpoint()
        with pytest.raises(RateLimitedError) as caught:
            await chain.complete(ask())
        assert caught.value.error_type == "concurrency_limit"
        assert caught.value.retry_after is None
        gate.set()
    assert layer.in_flight == 0


async def test_waiting_for_a_slot_ends_at_the_deadline() -> None:
    gate = anyio.Event()

    async def hold(request: Request) -> Response:
        await gate.wait()
        return response()

    layer, _, chain = make(max_concurrency=1, handler=FakeHandler(hold))
    async with anyio.create_task_group() as tg:
        tg.start_soon(chain.complete, ask())
        while layer.in_flight == 0:
            await anyio.lowlevel.checkpoint()
        with pytest.raises(RateLimitedError) as caught:
            await chain.complete(ask(timeout=0.02))
        assert caught.value.error_type == "concurrency_limit"
        assert layer.in_flight == 1
        gate.set()
    assert layer.in_flight == 0


async def test_waiting_for_budget_is_cancellable_and_leaves_nothing_behind() -> None:
    clock = FrozenClock()
    layer, inner, chain = make(rpm=1, max_concurrency=2, clock=clock)
    await chain.complete(ask())
    with anyio.move_on_after(0.02) as scope:
        await chain.complete(ask())
    assert scope.cancelled_caught
    assert clock.sleeps == [60.0]
    assert layer.in_flight == 0
    clock.t += 60.0
    result = await chain.complete(ask())
    assert result.text == "ok"
    assert len(inner.requests) == 2
    assert layer.in_flight == 0


async def test_calls_queued_behind_a_waiting_call_are_served_in_order() -> None:
    clock = FakeClock()
    order: list[str] = []

    async def answer(request: Request) -> Response:
        text = request.messages[0].text()
        order.append(text)
        return response(text)

    _, _, chain = make(rpm=1, clock=clock, handler=FakeHandler(answer))
    await chain.complete(ask("first"))
    async with anyio.create_task_group() as tg:
        for name in ("second", "third", "fourth"):
            tg.start_soon(chain.complete, ask(name))
            await anyio.lowlevel.checkpoint()
    assert order == ["first", "second", "third", "fourth"]
    assert clock.sleeps == [60.0, 60.0, 60.0]


async def test_a_transient_error_keeps_its_slot_accounting_straight() -> None:
    layer, _, chain = make(
        max_concurrency=2,
        handler=FakeHandler(lambda r: _raise(TransientError("x", status_code=503))),
    )
    for _ in range(5):
        with pytest.raises(TransientError):
            await chain.complete(ask())
    assert layer.in_flight == 0


def test_a_negative_max_wait_is_refused() -> None:
    source = Source("openai", "gpt-4o", api_key="sk-unused-0000000000")
    with pytest.raises(ValueError, match="max_wait"):
        RateLimitMiddleware(source, 0, get_provider("openai"), max_wait=-1.0)
