"""A thousand concurrent calls in each of four processes, sharing limits, a cache and a spend
budget on one real redis-server: every call is answered, and the server is never taken for
down (issue: past about 100 calls in flight, redis-py's default pool raised
``MaxConnectionsError``, read as an outage: budgeted calls refused as ``spend_unknown``)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator

import anyio
import pytest
import redis

from polythink.backends.redis import DEFAULT_MAX_CONNECTIONS, RedisCache, Unavailable
from tests.redis_support import RedisServer, go_together, spawn

WORKERS = 4
CALLS = 1000


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


def info(server: RedisServer, section: str, field: str) -> int:
    with redis.Redis(port=server.port) as client:
        return int(client.info(section)[field])


@pytest.mark.anyio
async def test_out_of_connections_is_a_wait_then_a_busy_process_never_an_outage(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    # BLPOP holds the one connection, silent for its whole timeout: a long socket timeout.
    cache = RedisCache(redis_server.url, max_connections=1, pool_timeout=0.6, socket_timeout=5)
    link = cache.link

    async def blocked() -> None:
        # Until Redis holds the BLPOP: only then is the one connection surely taken (a busy
        # machine may start the task later than any fixed pause).
        with anyio.fail_after(30):
            while info(redis_server, "clients", "blocked_clients") < 1:  # noqa: ASYNC110
                await anyio.sleep(0.005)

    try:
        # One connection: the second operation waits its turn, and both are answered.
        async with anyio.create_task_group() as group:
            group.start_soon(link.run, lambda c: c.blpop(["polythink:test:none"], timeout=0.1))
            await anyio.sleep(0.02)  # either order answers both
            assert await link.run(lambda c: c.ping()) is True
        # Held past the pool's wait: that operation goes on without Redis, which is not down.
        with caplog.at_level(logging.WARNING, logger="polythink.redis"):
            async with anyio.create_task_group() as group:
                group.start_soon(link.run, lambda c: c.blpop(["polythink:test:none"], timeout=2))
                await blocked()
                with pytest.raises(Unavailable):
                    await link.run(lambda c: c.ping())
        assert not link.down
        assert link.outages == 0
        assert await link.run(lambda c: c.ping()) is True
        (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert "answers, but all 1 connections stayed busy for 0.6 s" in warning
        assert "does not answer" not in warning
    finally:
        await cache.aclose()


@pytest.mark.anyio
async def test_an_answer_a_busy_process_reads_late_is_not_a_timeout(
    redis_server: RedisServer,
) -> None:
    cache = RedisCache(redis_server.url, socket_timeout=0.2)
    link = cache.link
    try:
        assert await link.run(lambda c: c.ping()) is True

        async def hog() -> None:
            await anyio.sleep(0.01)
            time.sleep(0.6)  # noqa: ASYNC251 - the loop holds still: three socket timeouts go by

        async with anyio.create_task_group() as group:
            group.start_soon(hog)
            assert await link.run(lambda c: c.ping()) is True
        assert not link.down
        assert link.outages == 0
        # A server that does go silent still times out, after its socket timeout (put off
        # while the loop itself runs late, as a loaded machine may make it).
        redis_server.command("CLIENT", "PAUSE", "2000", "ALL")
        began = time.monotonic()
        with pytest.raises(Unavailable):
            await link.run(lambda c: c.ping())
        assert 0.2 <= time.monotonic() - began < 1.9
        assert link.down
        await anyio.sleep(max(0.0, began + 2.1 - time.monotonic()))  # the next test's server
    finally:
        await cache.aclose()


@pytest.mark.anyio
async def test_a_thousand_calls_in_each_of_four_processes_share_one_redis(
    redis_server: RedisServer,
) -> None:
    # A loaded test machine may keep a worker from Redis's answers past the default socket
    # timeout (0.5 s of the server's silence); this test is about the pool, so it gives 2 s.
    plan = {"redis": redis_server.url, "tasks": CALLS, "socket_timeout": 2.0}
    before = info(redis_server, "stats", "total_connections_received")
    workers = [spawn(plan, "tests.crowd_worker") for _ in range(WORKERS)]
    await go_together(workers)
    summaries = []
    for worker in workers:
        out, err = await anyio.to_thread.run_sync(lambda w=worker: w.communicate(timeout=240))
        assert worker.returncode == 0, err[-3000:]
        summaries.append(json.loads(out.strip().splitlines()[-1]))
    for summary in summaries:
        # No call refused: not by a budget whose spend is unknown, nor by a limit gone local.
        assert summary["outcomes"] == {"ok": CALLS}, summary
        # The server answered throughout: no warning takes it for down.
        assert not [w for w in summary["warnings"] if "does not answer" in w], summary
    # Each process kept to its pools: the limits' and the cache's.
    received = info(redis_server, "stats", "total_connections_received") - before - 1
    assert received <= WORKERS * 2 * DEFAULT_MAX_CONNECTIONS, received
