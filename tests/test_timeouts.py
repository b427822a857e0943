"""Timeouts against the loopback simulator: time to first byte, idle between chunks, the total
deadline for streams and non-streams, and the deadline across retries."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from polythink import Client, Source, Timeout
from polythink.errors import PolythinkError, RequestTimeoutError, StreamInterruptedError
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import Fault, FaultPlan
from polythink.transports.error_map import error_from_transport
from tests.resilience_helpers import collect

MESSAGES = [{"role": "user", "content": "tell me"}]
SLACK = 1.5
"""Seconds a timeout may fire late on a loaded machine. Every stall here is 5 s or longer and
the trickling stream lasts 10 s, so an end within the slack still proves which limit fired."""


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings()) as simulator:
        yield simulator


@pytest.fixture
def plan(sim: Simulator) -> FaultPlan:
    sim.settings.faults = FaultPlan()
    return sim.settings.faults


def _source(sim: Simulator, **kwargs: object) -> Source:
    fields: dict[str, object] = {"api_key": "sk-sim", "base_url": sim.base_url("openai")}
    fields.update(kwargs)
    return Source("openai", "gpt-4o", **fields)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_no_first_byte_fails_at_the_first_byte_timeout(
    sim: Simulator, plan: FaultPlan
) -> None:
    plan.add(Fault.stall(5.0))
    src = _source(sim, timeout=Timeout(first_byte=0.4), max_retries=0)
    async with Client([src]) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as caught:
            await client.complete(MESSAGES)
        elapsed = time.monotonic() - started
    assert caught.value.error_type == "first_byte_timeout"
    assert 0.4 <= elapsed < 0.4 + SLACK


@pytest.mark.anyio
async def test_unset_first_byte_bounds_a_streams_head_by_idle_only(
    sim: Simulator, plan: FaultPlan
) -> None:
    plan.add(Fault.stall(5.0), Fault.stall(0.8))
    src = _source(sim, timeout=Timeout(idle=0.4), max_retries=0)
    async with Client([src]) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as caught:
            await collect(client.stream(MESSAGES), [])
        elapsed = time.monotonic() - started
        # A non-streamed answer comes only when the model is done: no idle limit applies.
        slow = await client.complete(MESSAGES)
    assert caught.value.error_type == "first_byte_timeout"
    assert 0.4 <= elapsed < 0.4 + SLACK
    assert slow.text.startswith("Simulated gpt-4o")


@pytest.mark.anyio
async def test_silence_after_output_fails_at_the_idle_timeout(
    sim: Simulator, plan: FaultPlan
) -> None:
    plan.add(Fault.stall(5.0, after_chunks=3))
    src = _source(sim, timeout=Timeout(idle=0.4))
    async with Client([src]) as client:
        texts: list[str] = []
        started = time.monotonic()
        with pytest.raises(StreamInterruptedError) as caught:
            await collect(client.stream(MESSAGES), texts)
        elapsed = time.monotonic() - started
    assert caught.value.error_type == "idle_timeout"
    assert isinstance(caught.value.__cause__, RequestTimeoutError)
    assert texts == ["Simulated", " gpt-4o"]
    assert caught.value.partial is not None
    assert caught.value.partial.text == "Simulated gpt-4o"
    assert 0.4 <= elapsed < 0.4 + SLACK


@pytest.mark.anyio
async def test_silence_before_output_is_a_timeout(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.stall(5.0, after_chunks=1))
    src = _source(sim, timeout=Timeout(idle=0.4), max_retries=0)
    async with Client([src]) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as caught:
            await collect(client.stream(MESSAGES), [])
        elapsed = time.monotonic() - started
    assert caught.value.error_type == "idle_timeout"
    assert 0.4 <= elapsed < 0.4 + SLACK


@pytest.mark.anyio
async def test_a_trickling_stream_fails_at_the_total_deadline(sim: Simulator) -> None:
    src = _source(
        sim,
        timeout=Timeout(idle=0.6, total=1.0),
        headers={"x-sim-chunk-delay": "0.05", "x-sim-answer-words": "200"},
    )
    async with Client([src]) as client:
        texts: list[str] = []
        started = time.monotonic()
        with pytest.raises(StreamInterruptedError) as caught:
            await collect(client.stream(MESSAGES), texts)
        elapsed = time.monotonic() - started
    assert caught.value.error_type == "deadline"
    assert 1.0 <= elapsed < 1.0 + SLACK
    assert 5 < len(texts) < 200
    assert caught.value.partial is not None
    assert caught.value.partial.text == "".join(texts)


@pytest.mark.anyio
async def test_per_call_timeout_is_the_total_deadline(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.stall(5.0))
    async with Client([_source(sim)]) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as caught:
            await client.complete(MESSAGES, timeout=0.5)
        elapsed = time.monotonic() - started
    assert caught.value.error_type == "deadline"
    assert 0.5 <= elapsed < 0.5 + SLACK


@pytest.mark.anyio
@pytest.mark.real_backoff
async def test_the_deadline_covers_retries(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(*[Fault.stall(5.0)] * 6)
    # Attempt 1 fails at 1.0 s, the backoff (0.375-0.5 s) starts attempt 2 before 2.0 s
    # with 0.5 s to spare, and the deadline cuts it at 2.0 s.
    src = _source(sim, timeout=Timeout(first_byte=1.0, total=2.0), max_retries=5)
    async with Client([src]) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as caught:
            await client.complete(MESSAGES)
        elapsed = time.monotonic() - started
    assert caught.value.attempts == 2
    assert caught.value.error_type == "deadline"
    assert 2.0 <= elapsed < 2.0 + SLACK


@pytest.mark.parametrize(
    "kwargs",
    [
        {"total": 0},
        {"idle": -1.0},
        {"connect": float("nan")},
        {"first_byte": float("inf")},
        {"total": True},
        {"idle": "5"},
    ],
)
def test_timeout_rejects_what_is_not_a_positive_finite_number(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="must be a positive number of seconds or None"):
        Timeout(**kwargs)  # type: ignore[arg-type]


def test_source_timeout_accepts_seconds_or_a_timeout() -> None:
    assert Source("openai", "gpt-4o", api_key="k", timeout=30).timeouts == Timeout(total=30.0)
    assert Source("openai", "gpt-4o", api_key="k").timeouts == Timeout(5.0, None, 120.0, 600.0)
    custom = Timeout(connect=1.0, first_byte=2.0, idle=None, total=None)
    assert Source("openai", "gpt-4o", api_key="k", timeout=custom).timeouts is custom


@pytest.mark.parametrize("value", [0, -2.0, float("nan"), float("inf"), True])
def test_per_call_timeout_is_validated(value: float) -> None:
    client = Client([Source("openai", "gpt-4o", api_key="k")])
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        client.request(MESSAGES, timeout=value)


# ------------------------------------------------------------------ what a timeout's message says

SET = Timeout(connect=1.5, first_byte=2.0, idle=30.0, total=600.0)
HEAD_BY_IDLE = Timeout(connect=1.5, first_byte=None, idle=0.25, total=600.0)


@pytest.mark.parametrize(
    ("exc", "stage", "streamed", "timeouts", "error_type", "message"),
    [
        (
            httpx.ConnectTimeout("t"),
            "response",
            False,
            SET,
            "connect_timeout",
            "openai: no connection within connect=1.5 s",
        ),
        (
            httpx.WriteTimeout("t"),
            "response",
            True,
            SET,
            "write_timeout",
            "openai: the request was not sent within connect=1.5 s",
        ),
        (
            httpx.PoolTimeout("t"),
            "response",
            False,
            SET,
            "pool_timeout",
            "openai: no free pooled connection within connect=1.5 s",
        ),
        (
            httpx.ReadTimeout("t"),
            "response",
            False,
            SET,
            "first_byte_timeout",
            "openai: no response within first_byte=2.0 s",
        ),
        (
            httpx.ReadTimeout("t"),
            "response",
            True,
            SET,
            "first_byte_timeout",
            "openai: no response within first_byte=2.0 s",
        ),
        (
            httpx.ReadTimeout("t"),
            "response",
            True,
            HEAD_BY_IDLE,
            "first_byte_timeout",
            "openai: no response within idle=0.25 s (first_byte is unset: a stream's head "
            "waits at most idle)",
        ),
        (
            httpx.ReadTimeout("t"),
            "body",
            True,
            SET,
            "idle_timeout",
            "openai: stream idle for longer than idle=30.0 s",
        ),
        (
            httpx.ReadTimeout("t"),
            "body",
            False,
            SET,
            "idle_timeout",
            "openai: the answer's body paused longer than first_byte=2.0 s (the read timeout "
            "of a non-streamed answer)",
        ),
        (
            TimeoutError(),
            "body",
            True,
            SET,
            "deadline",
            "openai: deadline exceeded: no complete answer within the 12.5 s left of the "
            "call's timeout (Timeout.total or timeout=)",
        ),
        (
            httpx.ConnectTimeout("t"),
            "response",
            False,
            None,
            "connect_timeout",
            "openai: no connection within the connect timeout",
        ),
    ],
)
def test_a_timeout_names_which_it_was_and_how_long(
    exc: BaseException,
    stage: str,
    streamed: bool,
    timeouts: Timeout | None,
    error_type: str,
    message: str,
) -> None:
    budget = 12.5 if timeouts is not None else None
    error = error_from_transport(
        exc,
        provider="openai",
        source_index=0,
        stage=stage,
        timeouts=timeouts,
        streamed=streamed,
        budget=budget,
    )
    assert type(error) is RequestTimeoutError
    assert (error.error_type, error.message) == (error_type, message)


async def _call(client: Client, stream: bool) -> None:
    if stream:
        await collect(client.stream(MESSAGES), [])
    else:
        await client.complete(MESSAGES)


def _full_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A loopback port whose accept queue is full: a connection to it is never established
    (the kernel drops its SYN), so only the connect timeout can end it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(server.getsockname())
        fillers.append(filler)
    return server, fillers


@pytest.mark.anyio
@pytest.mark.parametrize("http", ["httpx", "aiohttp"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_connect_timeout_names_connect_on_both_layers(http: str, stream: bool) -> None:
    server, fillers = _full_listener()
    port = server.getsockname()[1]
    src = Source(
        "openai",
        "gpt-4o",
        api_key="sk-sim",
        base_url=f"http://127.0.0.1:{port}/v1",
        timeout=Timeout(connect=0.3, first_byte=30.0, total=60.0),
        max_retries=0,
    )
    try:
        async with Client([src], http=http) as client:  # type: ignore[arg-type]
            with pytest.raises(RequestTimeoutError) as caught:
                await _call(client, stream)
    finally:
        for sock in (server, *fillers):
            sock.close()
    assert (caught.value.error_type, caught.value.message) == (
        "connect_timeout",
        "openai: no connection within connect=0.3 s",
    )


STALLS = [
    # stream, the source's timeout, the stall, the error's type and message
    (
        False,
        Timeout(first_byte=0.3),
        Fault.stall(5.0),
        "first_byte_timeout",
        "openai: no response within first_byte=0.3 s",
    ),
    (
        True,
        Timeout(first_byte=0.3),
        Fault.stall(5.0),
        "first_byte_timeout",
        "openai: no response within first_byte=0.3 s",
    ),
    (
        True,
        Timeout(idle=0.3),
        Fault.stall(5.0),
        "first_byte_timeout",
        "openai: no response within idle=0.3 s (first_byte is unset: a stream's head waits "
        "at most idle)",
    ),
    (
        True,
        Timeout(idle=0.3),
        Fault.stall(5.0, after_chunks=1),
        "idle_timeout",
        "openai: stream idle for longer than idle=0.3 s",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize("http", ["httpx", "aiohttp"])
@pytest.mark.parametrize(("stream", "timeout", "stall", "error_type", "message"), STALLS)
async def test_a_read_timeout_names_its_timeout_on_both_layers(
    sim: Simulator,
    plan: FaultPlan,
    http: str,
    stream: bool,
    timeout: Timeout,
    stall: Fault,
    error_type: str,
    message: str,
) -> None:
    plan.add(stall)
    src = _source(sim, timeout=timeout, max_retries=0)
    async with Client([src], http=http) as client:  # type: ignore[arg-type]
        with pytest.raises(RequestTimeoutError) as caught:
            await _call(client, stream)
    assert (caught.value.error_type, caught.value.message) == (error_type, message)


@pytest.mark.anyio
@pytest.mark.parametrize("http", ["httpx", "aiohttp"])
async def test_idle_after_output_names_idle_in_the_interruption(
    sim: Simulator, plan: FaultPlan, http: str
) -> None:
    plan.add(Fault.stall(5.0, after_chunks=3))
    src = _source(sim, timeout=Timeout(idle=0.3), max_retries=0)
    async with Client([src], http=http) as client:  # type: ignore[arg-type]
        with pytest.raises(StreamInterruptedError) as caught:
            await collect(client.stream(MESSAGES), [])
    cause = caught.value.__cause__
    assert isinstance(cause, PolythinkError)
    assert cause.message == "openai: stream idle for longer than idle=0.3 s"
    assert caught.value.message == (
        "stream from openai broke after output began: openai: stream idle for longer than "
        "idle=0.3 s"
    )
