"""Cases C08, C09, C10 and C18 from ../shared/cases/CASES.md, each with the right behaviour."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator

import httpx
import pytest
import respx

from polythink import Client, Source, Timeout
from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    StreamInterruptedError,
    TransientError,
)
from polythink.middleware.retry import RetryPolicy
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import Fault, FaultPlan
from polythink.types import StreamEvent
from tests.resilience_helpers import (
    MESSAGES,
    URL,
    FakeClock,
    client_with,
    collect,
    completion,
    mock_http,
    source,
)

WHEN = 1_445_412_480.0


# ------------------------------------------------------------------ C08 Retry-After honoured


def _rate_limited(**headers: str) -> httpx.Response:
    body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}}
    return httpx.Response(429, json=body, headers=headers)


C08_HEADERS = [
    {"retry-after": "90"},
    {"retry-after-ms": "90000"},
    {"retry-after": email.utils.formatdate(WHEN + 90, usegmt=True)},
]


async def _c08(
    headers: dict[str, str], policy: RetryPolicy | None, clock: FakeClock
) -> tuple[respx.Route, object]:
    with respx.mock(assert_all_called=True) as router:
        route = router.post(URL).mock(
            side_effect=[_rate_limited(**headers), httpx.Response(200, json=completion())]
        )
        client = client_with(
            [source(max_retries=2)], clock=clock, policy=policy, http_client=mock_http(router)
        )
        async with client:
            try:
                return route, await client.complete(MESSAGES)
            except PolythinkError as exc:
                return route, exc


@pytest.mark.anyio
@pytest.mark.parametrize("headers", C08_HEADERS)
async def test_c08_waits_exactly_the_servers_delay_up_to_the_cap(
    headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time, "time", lambda: WHEN)
    clock = FakeClock()
    route, outcome = await _c08(headers, RetryPolicy(max_retries=2, max_retry_after=120.0), clock)
    assert getattr(outcome, "text", None) == "ok"
    assert clock.sleeps == [90.0]
    assert route.call_count == 2


@pytest.mark.anyio
@pytest.mark.parametrize("headers", C08_HEADERS)
async def test_c08_above_the_cap_raises_the_429_at_once(
    headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time, "time", lambda: WHEN)
    clock = FakeClock()
    route, outcome = await _c08(headers, None, clock)
    assert isinstance(outcome, RateLimitedError)
    assert outcome.retry_after == 90.0
    assert outcome.attempts == 1
    assert route.call_count == 1
    assert clock.sleeps == []


@pytest.mark.anyio
async def test_c08_short_delay_and_missing_header() -> None:
    clock = FakeClock()
    await _c08({"retry-after": "5"}, None, clock)
    assert clock.sleeps == [5.0]
    clock = FakeClock()
    await _c08({"retry-after": "soon"}, None, clock)
    assert clock.sleeps == [0.5]


# ------------------------------------------------------------------ C09 no retry of a 400


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "cls", "calls"),
    [
        (400, RequestRejectedError, 1),
        (401, AuthError, 1),
        (403, AuthError, 1),
        (404, RequestRejectedError, 1),
        (422, RequestRejectedError, 1),
        (408, TransientError, 4),
        (409, TransientError, 4),
        (429, RateLimitedError, 4),
        (500, TransientError, 4),
        (503, TransientError, 4),
    ],
)
async def test_c09_only_retryable_statuses_are_retried(
    status: int, cls: type[PolythinkError], calls: int
) -> None:
    body = {"error": {"type": "invalid_request_error", "message": "Invalid request"}}
    clock = FakeClock()
    with respx.mock(assert_all_called=True) as router:
        route = router.post(URL).respond(status, json=body)
        client = client_with([source(max_retries=3)], clock=clock, http_client=mock_http(router))
        async with client:
            with pytest.raises(cls) as caught:
                await client.complete(MESSAGES)
    assert type(caught.value) is cls
    assert route.call_count == calls
    assert caught.value.attempts == calls


@pytest.mark.anyio
async def test_c09_connection_errors_are_retried() -> None:
    clock = FakeClock()
    with respx.mock(assert_all_called=True) as router:
        route = router.post(URL).mock(side_effect=httpx.ConnectError("connection refused"))
        client = client_with([source(max_retries=3)], clock=clock, http_client=mock_http(router))
        async with client:
            with pytest.raises(TransientError):
                await client.complete(MESSAGES)
    assert route.call_count == 4


# ------------------------------------------------------------------ C10 stalled streams


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings()) as simulator:
        yield simulator


@pytest.fixture
def plan(sim: Simulator) -> FaultPlan:
    sim.settings.faults = FaultPlan()
    return sim.settings.faults


def _sim_source(sim: Simulator, provider: str, model: str, **kwargs: object) -> Source:
    fields: dict[str, object] = {"api_key": "sk-sim", "base_url": sim.base_url(provider)}
    return Source(provider, model, **fields, **kwargs)  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize("fault", [Fault.stall(10.0), Fault.stall(10.0, after_chunks=1)])
async def test_c10_a_stalled_stream_fails_at_the_per_call_timeout(
    sim: Simulator, plan: FaultPlan, fault: Fault
) -> None:
    plan.add(fault)
    async with Client([_sim_source(sim, "openai", "gpt-4o")]) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as caught:
            await collect(client.stream(MESSAGES, timeout=2), [])
        elapsed = time.monotonic() - started
    assert caught.value.error_type == "deadline"
    # The stall is 10 s: ending within 2 s of slack (a loaded machine) proves the timeout.
    assert 2.0 <= elapsed < 4.0


@pytest.mark.anyio
async def test_c10_idle_timeout_counts_from_the_last_chunk(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.stall(10.0, after_chunks=4))
    src = _sim_source(
        sim, "openai", "gpt-4o", timeout=Timeout(idle=2.0), headers={"x-sim-chunk-delay": "0.2"}
    )
    arrivals: list[float] = []
    texts: list[str] = []

    async def consume() -> None:
        async for event in client.stream(MESSAGES):
            arrivals.append(time.monotonic())
            if event.text:
                texts.append(event.text)

    async with Client([src]) as client:
        with pytest.raises(StreamInterruptedError) as caught:
            await consume()
        failed = time.monotonic()
    assert texts == ["Simulated", " gpt-4o", " answer"]
    assert caught.value.error_type == "idle_timeout"
    assert isinstance(caught.value.__cause__, RequestTimeoutError)
    # The stall is 10 s: ending within 2 s of slack (a loaded machine) proves the timeout.
    assert 2.0 <= failed - arrivals[-1] < 4.0


# ------------------------------------------------------------------ C18 in-band overload


@pytest.mark.anyio
@pytest.mark.parametrize("error_type", ["overloaded_error", "rate_limit_error", "api_error"])
async def test_c18_in_band_error_before_the_first_token_is_retried(
    sim: Simulator, plan: FaultPlan, error_type: str
) -> None:
    src = _sim_source(sim, "anthropic", "claude-haiku-4-5")
    clock = FakeClock()
    async with client_with([src], clock=clock) as client:
        clean = await collect(client.stream(MESSAGES), [])
        before = sim.stats.requests
        plan.add(Fault.in_band(error_type, after_chunks=1))
        texts: list[str] = []
        retried = await collect(client.stream(MESSAGES), texts)
    assert sim.stats.requests - before == 2
    assert clock.sleeps == [0.5]
    assert [_shape(e) for e in retried] == [_shape(e) for e in clean]
    assert "".join(texts) == retried[-1].response.text  # type: ignore[union-attr]


def _shape(event: StreamEvent) -> tuple[str, str | None, object]:
    return event.type, event.text, event.usage


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error_type", "cls"),
    [
        ("overloaded_error", TransientError),
        ("rate_limit_error", RateLimitedError),
        ("api_error", TransientError),
    ],
)
async def test_c18_in_band_error_after_the_first_token_is_not_retried(
    sim: Simulator, plan: FaultPlan, error_type: str, cls: type[PolythinkError]
) -> None:
    src = _sim_source(sim, "anthropic", "claude-haiku-4-5")
    clock = FakeClock()
    texts: list[str] = []
    async with client_with([src], clock=clock) as client:
        before = sim.stats.requests
        plan.add(Fault.in_band(error_type, after_chunks=6))
        with pytest.raises(StreamInterruptedError) as caught:
            await collect(client.stream(MESSAGES), texts)
    assert sim.stats.requests - before == 1
    assert clock.sleeps == []
    assert texts
    error = caught.value
    assert type(error.__cause__) is cls
    assert error.error_type == error_type
    assert error.status_code == 200
    assert error.attempts == 1
    assert error.partial is not None
    assert error.partial.text == "".join(texts)
