"""Timeouts against the loopback simulator: time to first byte, idle between chunks, the total
deadline for streams and non-streams, and the deadline across retries."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from polythink import Client, Source, Timeout
from polythink.errors import RequestTimeoutError, StreamInterruptedError
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import Fault, FaultPlan
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
