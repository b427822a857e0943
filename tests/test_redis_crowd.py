"""A thousand concurrent calls in each of four processes, sharing limits, a cache and a spend
budget on one real redis-server: every call is answered, and the server is never taken for
down (issue: past about 100 calls in flight, redis-py's default pool raised
``MaxConnectionsError``, read as an outage: budgeted calls refused as ``spend_unknown``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from polythink.backends.redis import DEFAULT_MAX_CONNECTIONS
from tests.redis_support import RedisServer, go_together, spawn

WORKERS = 4
CALLS = 1000


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


def info(server: RedisServer, section: str, field: str) -> int:
    import redis

    with redis.Redis(port=server.port) as client:
        return int(client.info(section)[field])


@pytest.mark.anyio
async def test_a_thousand_calls_in_each_of_four_processes_share_one_redis(
    redis_server: RedisServer,
) -> None:
    # A loaded test machine may keep a worker from Redis's answers past the default socket
    # timeout (0.5 s of the server's silence); this test is about the pool, so it gives 2 s.
    plan = {"redis": redis_server.url, "tasks": CALLS, "socket_timeout": 2.0}
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
    received = info(redis_server, "stats", "total_connections_received")
    assert received <= WORKERS * 2 * DEFAULT_MAX_CONNECTIONS + 4, received
