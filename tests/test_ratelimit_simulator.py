"""The rate-limit and cache layers through the whole onion, over real HTTP to the simulator."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest

from polythink import Client, Source
from polythink.simulator import Simulator

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "Name three primes"}]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def source(sim: Simulator, **fields: object) -> Source:
    return Source(
        "openai",
        "gpt-5.5",
        api_key="sk-sim-0123456789abcdef",
        base_url=sim.base_url("openai"),
        **fields,  # type: ignore[arg-type]
    )


async def test_the_simulator_never_sees_more_calls_at_once_than_the_cap(sim: Simulator) -> None:
    slow = source(sim, max_concurrency=3, headers={"x-sim-latency": "0.04"})
    sim.stats.reset()
    async with Client([slow]) as client:
        texts: list[str] = []

        async def call(i: int) -> None:
            answer = await client.complete(
                [{"role": "user", "content": f"question {i}"}], timeout=10.0
            )
            texts.append(answer.text)

        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(call, i)
        assert client._limits[0].in_flight == 0
    assert len(texts) == 12
    assert sim.stats.requests == 12
    assert sim.stats.max_in_flight == 3


async def test_overflow_goes_to_the_next_source_when_the_first_is_busy(sim: Simulator) -> None:
    first = source(sim, max_concurrency=2, headers={"x-sim-latency": "0.1"})
    second = dataclasses.replace(first, max_concurrency=None)
    async with Client([first, second]) as client:
        used: list[int] = []

        async def call(i: int) -> None:
            answer = await client.complete([{"role": "user", "content": f"q {i}"}])
            used.append(answer.source_index)

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(call, i)
    assert sorted(used) == [0, 0, 1, 1, 1]


async def test_cached_answers_and_streams_do_not_reach_the_simulator(
    sim: Simulator, tmp_path: Path
) -> None:
    sim.stats.reset()
    async with Client([source(sim)], cache=tmp_path / "cache") as client:
        first = await client.complete(USER, reasoning_effort="low")
        second = await client.complete(USER, reasoning_effort="low")
        async with aclosing(client.stream(USER, reasoning_effort="low")) as events:
            streamed = [event async for event in events]
        async with aclosing(client.stream(USER, reasoning_effort="low")) as events:
            replayed = [event async for event in events]
        other_tier = await client.complete(USER, reasoning_effort="medium")
    assert sim.stats.requests == 3
    assert (first.cache_hit, second.cache_hit, other_tier.cache_hit) == (False, True, False)
    assert dataclasses.replace(second, cache_hit=False, rate_limit=first.rate_limit) == first
    assert len(streamed) > 3
    assert replayed[:-1] == streamed[:-1]
    original, replay = streamed[-1].response, replayed[-1].response
    assert original is not None
    assert replay is not None
    assert replay.cache_hit is True
    assert dataclasses.replace(replay, cache_hit=False, rate_limit=original.rate_limit) == original
