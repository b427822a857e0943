"""Failover order, what fails over and what does not, the circuit breaker's timing (injected
clock), the per-call deadline across sources, and streams."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import httpx
import pytest
import respx

from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.middleware.failover import CircuitBreaker, Failover, counts_against
from polythink.types import Message, Request, Response, StreamEvent
from tests.resilience_helpers import (
    MESSAGES,
    FakeClock,
    client_with,
    collect,
    completion,
    mock_http,
    source,
)

REQUEST = Request(messages=(Message(role="user", content="hi"),))


def _response(index: int, text: str = "ok") -> Response:
    return Response(
        text=text,
        reasoning=None,
        tool_calls=[],
        finish_reason="stop",
        usage=None,
        model="m",
        provider="openai",
        source_index=index,
        message=Message(role="assistant", content=text),
    )


class _Source:
    """A fake per-source handler: raises the queued errors in turn, then answers."""

    def __init__(
        self,
        index: int,
        errors: list[BaseException] | None = None,
        *,
        always: BaseException | None = None,
        clock: FakeClock | None = None,
        spend: float = 0.0,
    ) -> None:
        self.index = index
        self.errors = list(errors or [])
        self.always = always
        self.clock = clock
        self.spend = spend
        self.calls = 0
        self.timeouts: list[float | None] = []

    def _fail(self) -> None:
        self.calls += 1
        if self.clock is not None:
            self.clock.now += self.spend
        if self.always is not None:
            raise self.always
        if self.errors:
            raise self.errors.pop(0)

    async def complete(self, request: Request) -> Response:
        self.timeouts.append(request.timeout)
        self._fail()
        return _response(self.index)

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        self.timeouts.append(request.timeout)
        self._fail()
        yield StreamEvent("text", text=f"from {self.index}")
        yield StreamEvent("done", response=_response(self.index, f"from {self.index}"))


def _rate(index: int, retry_after: float | None = None) -> RateLimitedError:
    return RateLimitedError(
        "slow down",
        provider="openai",
        source_index=index,
        status_code=429,
        error_type="rate_limit_exceeded",
        retry_after=retry_after,
    )


def _down(index: int) -> TransientError:
    return TransientError(
        "down", provider="openai", source_index=index, status_code=503, error_type="server_error"
    )


@pytest.mark.anyio
async def test_sources_are_tried_in_order_and_the_answer_says_why() -> None:
    sources = [_Source(0, [_rate(0)]), _Source(1, [_down(1)]), _Source(2)]
    failover = Failover(sources, names=["openai gpt-4o", "openai gpt-4o-mini", "deepseek chat"])
    response = await failover.complete(REQUEST)
    assert response.source_index == 2
    assert [s.calls for s in sources] == [1, 1, 1]
    assert response.warnings == [
        "failover: source 0 (openai gpt-4o) failed (RateLimitedError, HTTP 429, "
        "rate_limit_exceeded); tried the next source",
        "failover: source 1 (openai gpt-4o-mini) failed (TransientError, HTTP 503, "
        "server_error); tried the next source",
    ]
    again = await failover.complete(REQUEST)
    assert again.source_index == 0
    assert again.warnings == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error",
    [
        AuthError("bad key", source_index=0, status_code=401),
        AuthError("billing", source_index=0, status_code=402),
        ThinkingUnsupportedError("no 'none' on this model", source_index=0),
        TransientError("reset", source_index=0, error_type="connection_error"),
    ],
)
async def test_what_fails_over(error: PolythinkError) -> None:
    sources = [_Source(0, [error]), _Source(1)]
    response = await Failover(sources).complete(REQUEST)
    assert response.source_index == 1


@pytest.mark.anyio
async def test_a_rejected_request_is_raised_at_once() -> None:
    rejected = RequestRejectedError("bad request", source_index=1, status_code=400)
    sources = [_Source(0, [_rate(0)]), _Source(1, [rejected]), _Source(2)]
    with pytest.raises(RequestRejectedError) as caught:
        await Failover(sources).complete(REQUEST)
    assert caught.value is rejected
    assert [type(e) for e in caught.value.previous] == [RateLimitedError]
    assert sources[2].calls == 0


@pytest.mark.anyio
async def test_when_all_fail_the_last_error_is_raised_with_the_earlier_ones() -> None:
    first, second, last = _down(0), _rate(1, 2.0), _rate(2, 7.5)
    sources = [_Source(0, [first]), _Source(1, [second]), _Source(2, [last])]
    with pytest.raises(RateLimitedError) as caught:
        await Failover(sources).complete(REQUEST)
    assert caught.value is last
    assert caught.value.status_code == 429
    assert caught.value.retry_after == 7.5
    assert caught.value.previous == [first, second]


def test_breaker_opens_at_the_threshold_and_probes_after_the_cooldown() -> None:
    clock = FakeClock(start=0.0)
    breaker = CircuitBreaker(threshold=3, cooldown=10.0, clock=clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.failure(_down(0))
    assert breaker.state == "closed"
    assert breaker.allow()
    breaker.failure(_down(0))
    assert breaker.state == "open"
    assert breaker.opened_at == 0.0
    clock.now = 9.999
    assert not breaker.allow()
    assert breaker.remaining() == pytest.approx(0.001)
    clock.now = 10.0
    assert breaker.state == "half_open"
    assert breaker.allow()
    assert not breaker.allow()
    breaker.failure(_down(0))
    assert breaker.opened_at == 10.0
    assert breaker.state == "open"
    clock.now = 20.0
    assert breaker.allow()
    breaker.release()
    assert breaker.allow()
    breaker.success()
    assert breaker.state == "closed"
    assert breaker.failures == 0
    assert breaker.allow()


def test_a_success_resets_the_count() -> None:
    breaker = CircuitBreaker(threshold=2, cooldown=1.0, clock=FakeClock())
    breaker.failure(_down(0))
    breaker.success()
    breaker.failure(_down(0))
    assert breaker.state == "closed"


@pytest.mark.parametrize(("threshold", "cooldown"), [(0, 1.0), (True, 1.0), (1, 0), (1, -2.0)])
def test_breaker_rejects_bad_settings(threshold: int, cooldown: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        CircuitBreaker(threshold, cooldown)


@pytest.mark.anyio
async def test_failover_skips_an_open_source_and_probes_it_after_the_cooldown() -> None:
    clock = FakeClock(start=100.0)
    bad = _Source(0, always=_down(0))
    good = _Source(1)
    failover = Failover([bad, good], names=["a", "b"], threshold=2, cooldown=30.0, clock=clock)
    for _ in range(2):
        assert (await failover.complete(REQUEST)).source_index == 1
    assert bad.calls == 2
    clock.now = 110.0
    response = await failover.complete(REQUEST)
    assert response.source_index == 1
    assert bad.calls == 2
    assert response.warnings == [
        "failover: source 0 (a) skipped, circuit open for another 20.0 s after 2 consecutive "
        "failures"
    ]
    clock.now = 130.0
    await failover.complete(REQUEST)
    assert bad.calls == 3
    clock.now = 159.0
    await failover.complete(REQUEST)
    assert bad.calls == 3
    bad.always = None
    clock.now = 160.0
    assert (await failover.complete(REQUEST)).source_index == 0
    assert (await failover.complete(REQUEST)).source_index == 0
    assert bad.calls == 5
    assert failover.breakers[0].state == "closed"


@pytest.mark.anyio
async def test_every_source_skipped_raises_a_typed_circuit_error() -> None:
    clock = FakeClock(start=0.0)
    sources = [_Source(0, always=_down(0)), _Source(1, always=_rate(1, 4.0))]
    failover = Failover(sources, names=["a", "b"], threshold=1, cooldown=60.0, clock=clock)
    with pytest.raises(RateLimitedError):
        await failover.complete(REQUEST)
    clock.now = 15.0
    with pytest.raises(RateLimitedError) as caught:
        await failover.complete(REQUEST)
    assert [s.calls for s in sources] == [1, 1]
    error = caught.value
    assert error.error_type == "circuit_open"
    assert error.status_code == 429
    assert error.source_index == 1
    assert error.retry_after == 45.0
    assert error.message == (
        "all 2 sources failed: "
        "source 0 (a): skipped: circuit open for another 45.0 s after 1 consecutive failures "
        "(last: TransientError, HTTP 503, server_error) (TransientError, HTTP 503, circuit_open); "
        "source 1 (b): skipped: circuit open for another 45.0 s after 1 consecutive failures "
        "(last: RateLimitedError, HTTP 429, rate_limit_exceeded) "
        "(RateLimitedError, HTTP 429, circuit_open)"
    )
    assert [(type(e), e.error_type, e.status_code) for e in error.previous] == [
        (TransientError, "circuit_open", 503)
    ]


@pytest.mark.anyio
async def test_rejections_and_cancellation_do_not_count_against_a_source() -> None:
    clock = FakeClock(start=0.0)
    source0 = _Source(0, [RequestRejectedError("bad", status_code=400)] * 3)
    failover = Failover([source0], threshold=1, cooldown=5.0, clock=clock)
    for _ in range(3):
        with pytest.raises(RequestRejectedError):
            await failover.complete(REQUEST)
    assert failover.breakers[0].state == "closed"

    class _Hang(_Source):
        async def complete(self, request: Request) -> Response:
            self.calls += 1
            await anyio.sleep(10)
            raise AssertionError("cancelled before this")

    hang = _Hang(0)
    failover = Failover([hang], threshold=1, cooldown=5.0, clock=clock)
    failover.breakers[0].failure(_down(0))
    clock.now = 5.0
    with anyio.move_on_after(0.01):
        await failover.complete(REQUEST)
    assert failover.breakers[0].state == "half_open"
    assert failover.breakers[0].allow()


@pytest.mark.anyio
async def test_a_per_call_timeout_is_one_deadline_across_sources() -> None:
    clock = FakeClock(start=0.0)
    sources = [
        _Source(0, [_down(0)], clock=clock, spend=3.0),
        _Source(1, [_down(1)], clock=clock, spend=1.5),
        _Source(2, clock=clock),
    ]
    failover = Failover(sources, clock=clock)
    response = await failover.complete(REQUEST.with_(timeout=5.0))
    assert response.source_index == 2
    assert [s.timeouts for s in sources] == [[5.0], [2.0], [0.5]]

    spent = [_Source(0, [_down(0)], clock=clock, spend=5.0), _Source(1)]
    with pytest.raises(TransientError) as caught:
        await Failover(spent, clock=clock).complete(REQUEST.with_(timeout=5.0))
    assert caught.value.source_index == 0
    assert spent[1].calls == 0

    untimed = [_Source(0, [_down(0)], clock=clock, spend=100.0), _Source(1)]
    await Failover(untimed, clock=clock).complete(REQUEST)
    assert untimed[1].timeouts == [None]


@pytest.mark.anyio
async def test_stream_fails_over_before_output_and_notes_it_on_done() -> None:
    sources = [_Source(0, [_rate(0)]), _Source(1)]
    events = [e async for e in Failover(sources, names=["a", "b"]).stream(REQUEST)]
    assert [e.type for e in events] == ["text", "done"]
    assert events[0].text == "from 1"
    done = events[-1].response
    assert done is not None
    assert done.source_index == 1
    assert done.warnings == [
        "failover: source 0 (a) failed (RateLimitedError, HTTP 429, rate_limit_exceeded); "
        "tried the next source"
    ]


class _Breaks(_Source):
    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        self.calls += 1
        yield StreamEvent("text", text="partial")
        raise StreamInterruptedError("cut", source_index=self.index, error_type="connection_error")


@pytest.mark.anyio
async def test_stream_does_not_fail_over_after_output() -> None:
    first_error = _down(0)
    sources = [_Source(0, [first_error]), _Breaks(1), _Source(2)]
    failover = Failover(sources, threshold=1)
    seen: list[str] = []
    with pytest.raises(StreamInterruptedError) as caught:
        await collect(failover.stream(REQUEST), seen)
    assert seen == ["partial"]
    assert caught.value.previous == [first_error]
    assert sources[2].calls == 0
    assert failover.breakers[1].state == "open"


@pytest.mark.anyio
async def test_client_fails_over_when_the_server_wait_exceeds_the_cap() -> None:
    clock = FakeClock()
    with respx.mock(assert_all_called=True) as router:
        slow = router.post("https://slow.test/v1/chat/completions").respond(
            429,
            json={"error": {"message": "later", "type": "requests", "code": "rate_limit_exceeded"}},
            headers={"retry-after": "90"},
        )
        fast = router.post("https://fast.test/v1/chat/completions").respond(
            200, json=completion("from fast", "gpt-4o-mini")
        )
        client = client_with(
            [
                source(base_url="https://slow.test/v1"),
                source(model="gpt-4o-mini", base_url="https://fast.test/v1"),
            ],
            clock=clock,
            http_client=mock_http(router),
        )
        async with client:
            response = await client.complete(MESSAGES)
    assert response.text == "from fast"
    assert response.source_index == 1
    assert response.warnings == [
        "failover: source 0 (openai gpt-4o) failed (RateLimitedError, HTTP 429, "
        "rate_limit_exceeded); tried the next source"
    ]
    assert slow.call_count == 1
    assert fast.call_count == 1
    assert clock.sleeps == []


@pytest.mark.anyio
async def test_client_raises_the_last_sources_error_when_all_fail() -> None:
    clock = FakeClock()
    with respx.mock(assert_all_called=True) as router:
        router.post("https://a.test/v1/chat/completions").mock(
            side_effect=httpx.ConnectError("refused")
        )
        router.post("https://b.test/v1/chat/completions").respond(
            429, json={"error": {"type": "requests"}}, headers={"retry-after-ms": "1500"}
        )
        client = client_with(
            [source(base_url="https://a.test/v1"), source(base_url="https://b.test/v1")],
            clock=clock,
            http_client=mock_http(router),
        )
        async with client:
            with pytest.raises(RateLimitedError) as caught:
                await client.complete(MESSAGES)
    assert caught.value.source_index == 1
    assert caught.value.retry_after == 1.5
    assert caught.value.attempts == 3
    assert [(type(e), e.error_type, e.attempts) for e in caught.value.previous] == [
        (TransientError, "connection_error", 3)
    ]
    assert clock.sleeps == [0.5, 1.0, 1.5, 1.5]


def test_what_counts_against_a_source() -> None:
    assert counts_against(_rate(0))
    assert counts_against(_down(0))
    assert counts_against(TransientError("reset", error_type="connection_error"))
    assert counts_against(AuthError("bad key", status_code=401))
    assert counts_against(StreamInterruptedError("cut"))
    refused = RateLimitedError("not sent", error_type="concurrency_limit", retry_after=1.0)
    assert not counts_against(refused)
    assert not counts_against(RequestRejectedError("bad", status_code=400))
    assert not counts_against(ThinkingUnsupportedError("no such tier"))
