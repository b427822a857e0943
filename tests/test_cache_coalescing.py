"""Identical calls in flight in different processes make one upstream call, through Redis.

Two clients in this process stand for two processes where the point is the Redis protocol
(each client has its own cache layer, so nothing is shared but the server); worker processes
where a process must really be separate (two at once, and one killed mid-call).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest
import redis

from polythink import Client, Source
from polythink.backends.local import LocalLimits
from polythink.backends.redis import RedisCache
from polythink.cache_key import cache_key
from polythink.errors import RequestRejectedError, RequestTimeoutError
from polythink.middleware.base import compose
from polythink.middleware.cache import CacheMiddleware
from polythink.middleware.ratelimit import RateLimitMiddleware
from polythink.providers import get_provider
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import Fault, FaultPlan
from polythink.types import Message, Request, Response, StreamEvent, Usage
from tests.limits_cache_support import DictStore, FakeClock, FakeHandler, response
from tests.redis_support import RedisServer, SimLatency, go, results, spawn

pytestmark = pytest.mark.anyio

FILLS = "polythink:{polythink-cache}:f:*"


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


def source(sim: Simulator, **fields: Any) -> Source:
    return Source(
        "openai", "gpt-5.5", api_key="sk-coalesce", base_url=sim.base_url("openai"), **fields
    )


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def streamed(client: Client, text: str) -> tuple[list[tuple[str, str | None]], Response]:
    events = []
    done = None
    async with aclosing(client.stream(user(text))) as stream:
        async for event in stream:
            events.append((event.type, event.text))
            done = event.response or done
    assert done is not None
    return events, done


async def fill_started(server: RedisServer, key: str | None = None, timeout: float = 10.0) -> None:
    """Wait until some caller holds a fill lease (on ``key``, when given)."""
    raw = redis.Redis(port=server.port)
    pattern = FILLS if key is None else FILLS[:-1] + key
    deadline = time.monotonic() + timeout
    while not raw.keys(pattern):
        assert time.monotonic() < deadline, "no caller took a fill lease"
        await anyio.sleep(0.01)


async def test_identical_calls_of_two_clients_sharing_redis_make_one_upstream_call(
    redis_server: RedisServer,
) -> None:
    answers: dict[str, Any] = {}
    with Simulator(Settings(latency=0.3)) as sim:
        async with (
            Client([source(sim)], cache=redis_server.url) as one,
            Client([source(sim)], cache=redis_server.url) as two,
        ):

            async def complete(name: str, client: Client) -> None:
                answers[name] = await client.complete(user("one payment"))

            async def stream(name: str, client: Client) -> None:
                answers[name] = await streamed(client, "one payment")

            async with anyio.create_task_group() as tg:
                tg.start_soon(complete, "complete 1", one)
                tg.start_soon(complete, "complete 2", two)
                tg.start_soon(stream, "stream 1", one)
                tg.start_soon(stream, "stream 2", two)
    # One upstream call for the complete pair and one for the stream pair.
    assert sim.stats.requests == 2
    first, second = answers["complete 1"], answers["complete 2"]
    assert sorted([first.cache_hit, second.cache_hit]) == [False, True]
    assert first.text == second.text
    assert first.text.startswith("Simulated")
    assert first.usage == second.usage
    (events_1, done_1), (events_2, done_2) = answers["stream 1"], answers["stream 2"]
    # The joiner replays the whole stream: 12 words, usage, done.
    assert events_1 == events_2
    assert [kind for kind, _ in events_1].count("text") == 12
    assert sorted([done_1.cache_hit, done_2.cache_hit]) == [False, True]
    assert redis.Redis(port=redis_server.port).keys(FILLS) == []


async def test_a_holder_that_fails_hands_the_call_to_the_one_waiting(
    redis_server: RedisServer,
) -> None:
    # The first request gets a 400 (not retried); the next one a normal answer.
    plan = FaultPlan([Fault.http(400)])
    with Simulator(Settings(latency=0.3, faults=plan)) as sim:
        async with (
            Client([source(sim)], cache=redis_server.url) as one,
            Client([source(sim)], cache=redis_server.url) as two,
            anyio.create_task_group() as tg,
        ):
            failed: list[BaseException] = []

            async def holder() -> None:
                try:
                    await one.complete(user("failing holder"))
                except RequestRejectedError as exc:
                    failed.append(exc)

            tg.start_soon(holder)
            await fill_started(redis_server)
            answer = await two.complete(user("failing holder"))
    assert len(failed) == 1
    # The error is not shared across processes: the waiting call went upstream itself.
    assert answer.cache_hit is False
    assert answer.text.startswith("Simulated")
    assert sim.stats.requests == 2


async def test_a_waiting_call_ends_its_wait_at_its_bound_or_its_timeout(
    redis_server: RedisServer,
) -> None:
    with Simulator() as sim:
        slow = source(sim, middleware=[SimLatency(1.5)])
        async with (
            Client([slow], cache=redis_server.url) as holder,
            Client([source(sim)], cache=RedisCache(redis_server.url, wait=0.2)) as brief,
            Client([source(sim)], cache=redis_server.url) as patient,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(holder.complete, user("slow holder"))
            await fill_started(redis_server)
            started = time.monotonic()
            with pytest.raises(RequestTimeoutError) as caught:
                await patient.complete(user("slow holder"), timeout=0.25)
            assert 0.25 <= time.monotonic() - started < 1.0
            assert caught.value.error_type == "deadline"
            assert "not sent" in str(caught.value)
            started = time.monotonic()
            answer = await brief.complete(user("slow holder"))
            waited = time.monotonic() - started
            assert answer.cache_hit is False
            # 0.2 s of waiting, then its own call (no latency), while the holder's takes 1.5 s.
            assert 0.2 <= waited < 1.0, waited
    # The holder's call and the one that stopped waiting; the timed-out one was not sent.
    assert sim.stats.requests == 2


async def test_a_call_that_waited_for_its_slot_is_answered_from_an_entry_stored_meanwhile() -> None:
    """One store, two clients (as two processes): the first has one slot, busy; its second
    call waits for it while the other client stores that call's answer."""
    store = DictStore()
    first_done = anyio.Event()
    first_started = anyio.Event()

    async def answer(request: Request) -> Response:
        text = request.messages[0].text()
        if text == "busy":
            first_started.set()
            await first_done.wait()
        return response(f"answer to {text}", usage=Usage(input_tokens=3, output_tokens=2))

    inner = FakeHandler(answer)
    limited = Source("openai", "gpt-4o", api_key="sk-unused-0000000000", max_concurrency=1)
    clock = FakeClock()
    limiter = RateLimitMiddleware(limited, 0, get_provider("openai"), clock=clock)
    one = compose([CacheMiddleware(store, [limited]), limiter], inner)
    two = compose([CacheMiddleware(store, [limited])], inner)
    ask = Request(messages=(Message(role="user", content="asked twice"),))
    got: list[Response] = []
    events: list[StreamEvent] = []

    async def waiting_stream() -> None:
        async with aclosing(one.stream(ask.with_(stream=True))) as stream:
            async for event in stream:
                events.append(event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one.complete, Request(messages=(Message(role="user", content="busy"),)))
        await first_started.wait()

        async def waiting() -> None:
            got.append(await one.complete(ask))

        tg.start_soon(waiting)
        tg.start_soon(waiting_stream)
        await anyio.wait_all_tasks_blocked()
        assert len(inner.requests) == 1
        # Meanwhile another client answers both and stores them.
        stored = await two.complete(ask)
        stored_events = [e async for e in two.stream(ask.with_(stream=True))]
        first_done.set()
    (hit,) = got
    assert hit.cache_hit is True
    assert hit.text == stored.text == "answer to asked twice"
    assert [(e.type, e.text) for e in events] == [(e.type, e.text) for e in stored_events]
    assert events[-1].response is not None
    assert events[-1].response.cache_hit is True
    # busy, and the other client's two calls: the waiting calls were not sent.
    assert [r.messages[0].text() for r in inner.requests] == ["busy", "asked twice", "asked twice"]
    assert limiter.in_flight == 0
    local = limiter.backend.local
    assert isinstance(local, LocalLimits)
    assert await local.acquire(0) is not None


async def test_two_processes_asking_the_same_calls_pay_once_and_a_killed_holder_is_replaced(
    redis_server: RedisServer,
) -> None:
    with Simulator(Settings(latency=0.3)) as sim:
        spec = {"base_url": sim.base_url("openai"), "api_key": "sk-coalesce"}
        same = {
            "redis": None,
            "cache": redis_server.url,
            "source": spec,
            "wait_go": True,
            "tasks": 2,
            "calls": 2,
            "stream": [False, True],
            "prompt": "fleet question",
            "vary": True,
        }
        workers = [spawn(same) for _ in range(2)]
        # A holder in its own process, on a slow call, with a 0.6 s fill lease.
        slow = {**spec, "latency": 30}
        victim = spawn(
            {"cache": redis_server.url, "cache_lease": 0.6, "source": slow, "calls": 1}
            | {"prompt": "killed holder", "wait_go": True}
        )
        for worker in [*workers, victim]:
            assert worker.stdout is not None
            assert '"ready"' in await anyio.to_thread.run_sync(worker.stdout.readline)
        async with Client([source(sim)], cache=redis_server.url) as client:
            key = cache_key(client.request(user("killed holder")), [source(sim)])
            for worker in [*workers, victim]:
                go(worker)
            await fill_started(redis_server, key)
            async with anyio.create_task_group() as tg:
                answers: list[Response] = []

                async def join() -> None:
                    answers.append(await client.complete(user("killed holder")))

                tg.start_soon(join)
                await anyio.sleep(0.2)
                victim.kill()
                killed = time.monotonic()
                assert victim.wait(10) == -9
            replaced = time.monotonic() - killed
        outputs = [await anyio.to_thread.run_sync(results, w) for w in workers]
        records = [r for out in outputs for r in out if r["event"] == "call"]
    # 2 processes x 2 tasks x 2 calls over 4 distinct calls: 4 upstream calls, 4 hits.
    assert len(records) == 8
    assert all(r["ok"] for r in records)
    assert sum(not r["cache_hit"] for r in records) == 4
    # Each distinct call's answer, the same in both processes.
    assert sorted(Counter(r["text"] for r in records).values()) == [2, 2, 2, 2]
    # The dead holder's lease ended within 0.6 s of its death (renewed every 0.2 s), then the
    # waiting call went upstream (0.3 s); the slack is for a loaded machine.
    (answer,) = answers
    assert answer.cache_hit is False
    assert 0.3 + 0.3 <= replaced < 0.6 + 0.3 + 1.5, replaced
    assert sim.stats.requests == 4 + 2
