"""The retry layer through a real client over mocked HTTP: upstream call counts, exact sleep
sequences (injected clock and jitter), the deadline, and streams before and after output."""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncGenerator, AsyncIterator

import httpx
import pytest
import respx

from polythink import Timeout
from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    StreamInterruptedError,
    TransientError,
)
from polythink.middleware.base import compose
from polythink.middleware.retry import RetryMiddleware, RetryPolicy
from polythink.types import Message, Request, Response, StreamEvent, Usage
from tests.resilience_helpers import (
    MESSAGES,
    URL,
    FakeClock,
    chunk,
    client_with,
    collect,
    completion,
    mock_http,
    source,
    sse,
)

WHEN = 1_445_412_480.0


def _error(status: int, **headers: str) -> httpx.Response:
    body = {"error": {"message": f"status {status}", "type": "x", "param": None, "code": None}}
    return httpx.Response(status, json=body, headers=headers)


async def _complete_with(
    responses: list[httpx.Response] | type[Exception] | Exception,
    *,
    clock: FakeClock,
    random: float = 0.0,
    policy: RetryPolicy | None = None,
    **source_kwargs: object,
) -> tuple[respx.Route, Response | PolythinkError]:
    with respx.mock(assert_all_called=True) as router:
        route = router.post(URL).mock(side_effect=responses)
        client = client_with(
            [source(**source_kwargs)],
            clock=clock,
            random=lambda: random,
            policy=policy,
            http_client=mock_http(router),
        )
        async with client:
            try:
                return route, await client.complete(MESSAGES)
            except PolythinkError as exc:
                return route, exc


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, RequestRejectedError),
        (401, AuthError),
        (403, AuthError),
        (404, RequestRejectedError),
        (422, RequestRejectedError),
    ],
)
async def test_non_retryable_status_makes_exactly_one_call(
    status: int, cls: type[PolythinkError]
) -> None:
    clock = FakeClock()
    route, outcome = await _complete_with([_error(status)] * 3, clock=clock)
    assert type(outcome) is cls
    assert outcome.status_code == status
    assert outcome.attempts == 1
    assert route.call_count == 1
    assert clock.sleeps == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (408, TransientError),
        (409, TransientError),
        (429, RateLimitedError),
        (500, TransientError),
        (503, TransientError),
        (529, TransientError),
    ],
)
async def test_retryable_status_is_tried_three_times(
    status: int, cls: type[PolythinkError]
) -> None:
    clock = FakeClock()
    route, outcome = await _complete_with([_error(status)] * 3, clock=clock)
    assert type(outcome) is cls
    assert outcome.status_code == status
    assert outcome.attempts == 3
    assert route.call_count == 3
    assert clock.sleeps == [0.5, 1.0]
    bodies = {call.request.content for call in route.calls}
    assert len(bodies) == 1


@pytest.mark.anyio
async def test_connection_error_is_retried() -> None:
    clock = FakeClock()
    route, outcome = await _complete_with(httpx.ConnectError("refused"), clock=clock)
    assert type(outcome) is TransientError
    assert outcome.error_type == "connection_error"
    assert route.call_count == 3
    assert clock.sleeps == [0.5, 1.0]


@pytest.mark.anyio
async def test_success_after_two_failures() -> None:
    clock = FakeClock()
    route, outcome = await _complete_with(
        [_error(503), _error(529), httpx.Response(200, json=completion("fine"))], clock=clock
    )
    assert isinstance(outcome, Response)
    assert outcome.text == "fine"
    assert route.call_count == 3
    assert clock.sleeps == [0.5, 1.0]


@pytest.mark.anyio
async def test_backoff_jitter_is_injected() -> None:
    clock = FakeClock()
    route, _ = await _complete_with([_error(500)] * 4, clock=clock, random=0.5, max_retries=3)
    assert route.call_count == 4
    assert clock.sleeps == [0.4375, 0.875, 1.75]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "5"}, 5.0),
        ({"retry-after-ms": "2500"}, 2.5),
        ({"retry-after": "0.75"}, 0.75),
        ({"retry-after": email.utils.formatdate(WHEN + 42, usegmt=True)}, 42.0),
        # 0 means "retry now": a wait of 0 s, not the default backoff.
        ({"retry-after": "0"}, 0.0),
        ({"retry-after-ms": "0"}, 0.0),
        ({"retry-after": email.utils.formatdate(WHEN - 5, usegmt=True)}, 0.0),
    ],
)
async def test_server_wait_is_slept_exactly(
    headers: dict[str, str], wait: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time, "time", lambda: WHEN)
    clock = FakeClock()
    route, outcome = await _complete_with(
        [_error(429, **headers), httpx.Response(200, json=completion())], clock=clock
    )
    assert isinstance(outcome, Response)
    assert route.call_count == 2
    assert clock.sleeps == [wait]


@pytest.mark.anyio
async def test_each_wait_comes_from_the_previous_response() -> None:
    clock = FakeClock()
    route, outcome = await _complete_with(
        [
            _error(429, **{"retry-after": "1"}),
            _error(429, **{"retry-after": "3"}),
            _error(503),
            httpx.Response(200, json=completion()),
        ],
        clock=clock,
        max_retries=3,
    )
    assert isinstance(outcome, Response)
    assert route.call_count == 4
    assert clock.sleeps == [1.0, 3.0, 2.0]


@pytest.mark.anyio
async def test_server_wait_above_the_cap_raises_at_once() -> None:
    clock = FakeClock()
    route, outcome = await _complete_with(
        [_error(429, **{"retry-after": "61"}), httpx.Response(200, json=completion())],
        clock=clock,
    )
    assert type(outcome) is RateLimitedError
    assert outcome.retry_after == 61.0
    assert outcome.attempts == 1
    assert route.call_count == 1
    assert clock.sleeps == []


@pytest.mark.anyio
async def test_cap_is_configurable() -> None:
    clock = FakeClock()
    _, outcome = await _complete_with(
        [_error(429, **{"retry-after": "61"}), httpx.Response(200, json=completion())],
        clock=clock,
        policy=RetryPolicy(max_retry_after=120.0),
    )
    assert isinstance(outcome, Response)
    assert clock.sleeps == [61.0]


@pytest.mark.anyio
async def test_x_should_retry_overrides_the_status_rule() -> None:
    clock = FakeClock()
    route, outcome = await _complete_with(
        [_error(503, **{"x-should-retry": "false"})] * 3, clock=clock
    )
    assert type(outcome) is TransientError
    assert route.call_count == 1
    clock = FakeClock()
    route, outcome = await _complete_with(
        [_error(400, **{"x-should-retry": "true"})] * 3, clock=clock
    )
    assert type(outcome) is RequestRejectedError
    assert route.call_count == 3
    assert clock.sleeps == [0.5, 1.0]


@pytest.mark.anyio
async def test_max_retries_per_source() -> None:
    clock = FakeClock()
    route, outcome = await _complete_with([_error(500)] * 6, clock=clock, max_retries=0)
    assert route.call_count == 1
    assert outcome.attempts == 1  # type: ignore[union-attr]
    clock = FakeClock()
    route, outcome = await _complete_with([_error(500)] * 6, clock=clock, max_retries=5)
    assert route.call_count == 6
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 8.0]


@pytest.mark.anyio
async def test_total_deadline_stops_retrying_before_a_wait_past_it() -> None:
    clock = FakeClock()
    route, outcome = await _complete_with(
        [_error(503)] * 3, clock=clock, timeout=Timeout(total=1.2)
    )
    assert type(outcome) is TransientError
    assert route.call_count == 2
    assert clock.sleeps == [0.5]
    assert outcome.attempts == 2


class _Recorder:
    """An inner handler failing ``failures`` times, recording each attempt's timeout."""

    def __init__(self, failures: list[PolythinkError], clock: FakeClock) -> None:
        self.failures = failures
        self.clock = clock
        self.timeouts: list[float | None] = []

    async def complete(self, request: Request) -> Response:
        self.timeouts.append(request.timeout)
        self.clock.now += 0.1
        if self.failures:
            raise self.failures.pop(0)
        return _response("done")

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        self.timeouts.append(request.timeout)
        yield StreamEvent("usage", usage=Usage(input_tokens=len(self.timeouts)))
        if self.failures:
            raise self.failures.pop(0)
        yield StreamEvent("text", text=f"attempt {len(self.timeouts)}")
        yield StreamEvent("done", response=_response(f"attempt {len(self.timeouts)}"))


def _response(text: str) -> Response:
    return Response(
        text=text,
        reasoning=None,
        tool_calls=[],
        finish_reason="stop",
        usage=None,
        model="m",
        provider="openai",
        source_index=0,
        message=Message(role="assistant", content=text),
    )


@pytest.mark.anyio
async def test_each_attempt_gets_what_is_left_of_the_deadline() -> None:
    clock = FakeClock(start=0.0)
    inner = _Recorder([TransientError("a"), TransientError("b")], clock)
    retry = RetryMiddleware(
        source(timeout=Timeout(total=10.0)), 0, clock=clock, sleep=clock.sleep, random=lambda: 0
    )
    chain = compose([retry], inner)
    response = await chain.complete(Request(messages=(Message(role="user", content="hi"),)))
    assert response.text == "done"
    # The first attempt keeps the request as is: the transport applies Timeout.total.
    assert inner.timeouts == [None, pytest.approx(9.4), pytest.approx(8.3)]
    inner = _Recorder([], clock)
    await compose([retry], inner).complete(
        Request(messages=(Message(role="user", content="hi"),), timeout=3.0)
    )
    assert inner.timeouts == [3.0]


@pytest.mark.anyio
async def test_stream_holds_usage_back_until_output_and_retries_before_it() -> None:
    clock = FakeClock(start=0.0)
    inner = _Recorder([TransientError("overloaded", error_type="overloaded_error")], clock)
    retry = RetryMiddleware(source(), 0, clock=clock, sleep=clock.sleep, random=lambda: 0)
    events = [
        (e.type, e.text, e.usage.input_tokens if e.usage else None)
        async for e in compose([retry], inner).stream(
            Request(messages=(Message(role="user", content="hi"),), stream=True)
        )
    ]
    assert events == [("usage", None, 2), ("text", "attempt 2", None), ("done", None, None)]
    assert clock.sleeps == [0.5]


async def _cut_after(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
    raise httpx.ReadError("connection reset by peer")


@pytest.mark.anyio
async def test_stream_failing_before_output_is_retried_without_duplicates() -> None:
    clock = FakeClock()
    with respx.mock(assert_all_called=True) as router:
        route = router.post(URL).mock(
            side_effect=[
                _error(503),
                httpx.Response(
                    200,
                    headers={"content-type": "text/event-stream"},
                    content=sse({"error": {"type": "server_error", "message": "overloaded"}}),
                ),
                httpx.Response(
                    200,
                    headers={"content-type": "text/event-stream"},
                    content=_cut_after([sse({"choices": [{"index": 0, "delta": {"role": "x"}}]})]),
                ),
                httpx.Response(
                    200,
                    headers={"content-type": "text/event-stream"},
                    content=sse(chunk("Hel"), chunk("lo"), chunk(None, "stop"), "[DONE]"),
                ),
            ]
        )
        client = client_with([source(max_retries=3)], clock=clock, http_client=mock_http(router))
        async with client:
            texts = [e.text async for e in client.stream(MESSAGES) if e.type == "text"]
    assert texts == ["Hel", "lo"]
    assert route.call_count == 4
    assert clock.sleeps == [0.5, 1.0, 2.0]


@pytest.mark.anyio
async def test_stream_broken_after_output_is_not_retried() -> None:
    clock = FakeClock()
    with respx.mock(assert_all_called=True) as router:
        route = router.post(URL).mock(
            side_effect=[
                httpx.Response(
                    200,
                    headers={"content-type": "text/event-stream"},
                    content=_cut_after([sse(chunk("Hel"), chunk("lo"))]),
                ),
                httpx.Response(200, json=completion()),
            ]
        )
        client = client_with([source()], clock=clock, http_client=mock_http(router))
        texts: list[str] = []
        async with client:
            with pytest.raises(StreamInterruptedError) as caught:
                await collect(client.stream(MESSAGES), texts)
    assert texts == ["Hel", "lo"]
    assert caught.value.partial is not None
    assert caught.value.partial.text == "Hello"
    assert caught.value.partial.finish_reason == "error"
    assert caught.value.error_type == "connection_error"
    assert caught.value.attempts == 1
    assert route.call_count == 1
    assert clock.sleeps == []
