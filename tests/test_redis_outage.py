"""A Redis blip does not multiply the fleet's load: each process goes on with its share.

The rules themselves (:mod:`polythink.backends.share`) are tested alone with exact numbers;
a fleet of worker processes then loses its real redis-server mid-run and gets it back.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis

from polythink.backends.local import LocalLimits
from polythink.backends.redis import RedisLimitStore
from polythink.backends.share import Share
from polythink.simulator import Settings, Simulator
from tests.limits_cache_support import FakeClock
from tests.redis_support import BUSY_SECONDS, RedisServer, go_together, spawn, stop, until

pytestmark = pytest.mark.anyio


def test_a_share_splits_slots_by_rank_and_starts_its_buckets_at_its_part_of_what_remained() -> None:
    share = Share()
    # Never saw the server, and not told how many share it: the whole limit and slots, but
    # a bucket that starts empty (the others may have used the shared one up): only the
    # refill, 2 a second, is taken.
    assert share.workers == 1
    assert share.units(4) == 4
    alone = share.bucket("rpm", 120, 50.0)
    assert (alone.capacity, alone.level(50.0), alone.level(51.5)) == (120.0, 0.0, 3.0)
    assert not share.reached
    # Told there are 4: a quarter of a full bucket.
    told = Share(4).bucket("rpm", 120, 50.0)
    assert (told.capacity, told.level(50.0)) == (30.0, 30.0)
    # Three live workers, this one ranked 1; the rpm bucket held 60, the pause 2 s more.
    share.seen(workers=3, rank=1, levels={"rpm": 60.0, "tpm": -300.0}, pause=2.0, now=100.0)
    assert share.fraction == pytest.approx(1 / 3)
    # 4 slots over 3 workers: 2, 1, 1 by rank; 2 slots: 1, 1, 0.
    assert share.units(4) == 1
    assert [_ranked(r, 3).units(4) for r in range(3)] == [2, 1, 1]
    assert [_ranked(r, 3).units(2) for r in range(3)] == [1, 1, 0]
    assert sum(_ranked(r, 5).units(12) for r in range(5)) == 12
    # Its third of 60 left at 100 s, refilled at a third of 120/min (2/3 per second) since.
    requests = share.bucket("rpm", 120, 103.0)
    assert requests.capacity == 40.0
    assert requests.level(103.0) == pytest.approx(20.0 + 3 * 2 / 3)
    # A bucket in debt stays in debt (its share of it).
    assert share.bucket("tpm", 3000, 100.0).level(100.0) == pytest.approx(-100.0)
    assert share.paused_until == 102.0
    # A configured number of workers wins over the one seen.
    assert Share(8).workers == 8
    configured = Share(8)
    configured.seen(workers=3, rank=2, levels={}, pause=0.0, now=0.0)
    assert configured.fraction == 1 / 8
    assert configured.paused_until == -math.inf
    # What it spends alone is counted; the fleet's bucket as it would be without that:
    # 60 seen at 100 s, refilled at 2 per second.
    share.begin()
    share.spend("tpm", 500)
    share.spend("tpm", -120)
    assert share.spent == {"tpm": 380.0}
    assert share.fleet_level("rpm", 120, 110.0) == pytest.approx(80.0)
    assert share.fleet_level("rpm", 120, 200.0) == 120.0
    assert Share().fleet_level("rpm", 120, 0.0) is None
    # A budget that does not refill, 1000 units of which 400 were used when last seen: its
    # third of the 600 left is 200 of its 333, so its part of what was used is 133.
    assert share.allowance(1000, 400) == (333, 133)
    assert share.allowance(1000, 0) == (333, 0)  # a window begun since: its whole share
    # Overspent (1200 of 1000): it is left -67, below nothing.
    assert share.allowance(1000, 1200) == (333, 400)
    assert configured.allowance(1000, 400) == (125, 50)
    share.counted(0, 0.0)
    assert share.workers == 1
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        Share(0)
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        RedisLimitStore("redis://127.0.0.1:1/0", workers=True)  # type: ignore[arg-type]


def _ranked(rank: int, workers: int) -> Share:
    share = Share()
    share.seen(workers=workers, rank=rank, levels={}, pause=0.0, now=0.0)
    return share


async def test_a_process_alone_keeps_its_share_counts_running_calls_and_charges_on_return(
    tmp_path: Path,
) -> None:
    """Two other processes were seen; this one holds two calls when the server dies."""
    server = RedisServer(tmp_path).start()
    store = RedisLimitStore(server.url, retry_interval=0.05)
    clock = FakeClock(0.0)
    fallback = LocalLimits(90, None, 3, clock)
    limits = store.for_source(
        "openai",
        "https://example.test/v1",
        "sk-alone-0000",
        rpm=90,
        tpm=None,
        max_concurrency=3,
        fallback=fallback,
    )
    try:
        # Two more processes present on this account (their presence, as the scripts write it).
        for other in ("000000000000", "ffffffffffff"):
            assert server.command("ZADD", limits.keys[4], "9999999999999", other) == ":1"
        first = await limits.acquire(0)
        second = await limits.acquire(0)
        assert first is not None
        assert second is not None
        for _ in range(30):
            assert await limits.take(0) == (0.0, "")
        assert limits.share.workers == 3
        assert limits.share.levels["rpm"] == pytest.approx(60.0, abs=0.1)
        seen = time.monotonic()
        server.stop()
        # Its share: 1 of the 3 slots (it holds 2 already: none is free), a third of the
        # 60 requests left and of the rate.
        assert await limits.acquire(0) is None
        assert limits.alone is True
        assert fallback.requests is not None
        assert fallback.requests.capacity == 30.0
        assert fallback.requests.level(clock.now()) == pytest.approx(20.0, abs=0.1)
        taken = 0
        while (await limits.take(0))[0] == 0.0:
            taken += 1
        assert taken == 20
        await first.release()
        assert await limits.acquire(0) is None
        await second.release()
        third = await limits.acquire(0)
        assert third is not None
        assert await limits.acquire(0) is None
        # Back on a server that restarted empty: the bucket is set to the 60 last seen
        # (refilled since), less the 20 taken alone, and the call running alone is leased
        # there. The other two processes will charge what they took when they come back.
        server.start()
        await anyio.sleep(0.1)
        assert await limits.take(0) == (0.0, "")
        assert limits.alone is False
        level = float(redis.Redis(port=server.port).hget(limits.keys[0], "level") or "nan")
        # 40, refilled at 1.5 per second since it was seen, and the request just taken.
        assert 39.0 <= level <= 39.0 + 1.5 * (time.monotonic() - seen) + 0.1
        assert server.command("ZCARD", limits.leases_key) == ":1"
        await third.release()
    finally:
        await store.aclose()
        server.stop()


async def test_a_redis_killed_and_restarted_mid_run_keeps_four_processes_within_the_limits(
    tmp_path: Path,
) -> None:
    """4 processes x 4 tasks share 120 RPM and 4 slots; Redis dies while they call and comes
    back. Each phase ends once what it waits for has happened (calls arriving in it), so the
    test holds however slowly a busy machine runs it."""
    server = RedisServer(tmp_path).start()
    rpm, slots = 120, 4
    phases: dict[str, int] = {}
    try:
        with Simulator(Settings(latency=0.1)) as sim:
            plan: dict[str, Any] = {
                "redis": server.url,
                "retry_interval": 0.2,
                "lease": 1.5,
                "log": True,
                "source": {
                    "base_url": sim.base_url("openai"),
                    "api_key": "sk-outage-0001",
                    "rpm": rpm,
                    "max_concurrency": slots,
                },
                "wait_go": True,
                "seconds": 300.0,
                "stop_on_stdin": True,
                "tasks": 4,
                "vary": True,
            }
            workers = [spawn(plan) for _ in range(4)]
            await go_together(workers)
            stats = sim.stats

            def phase(name: str) -> None:
                phases[name] = stats.max_in_flight
                stats.max_in_flight = stats.in_flight

            def since(moment: float) -> int:
                return sum(1 for t in stats.arrivals if t > moment)

            await until(lambda: stats.requests >= 8, "calls while Redis is up", at_least=0.5)
            phase("shared")
            server.stop()
            killed = time.monotonic()
            # The calls running when it died end within 0.1 s (the simulator's latency).
            await until(lambda: since(killed) >= 2, "calls while Redis is down", at_least=0.4)
            phase("outage, calls running before it end")
            outage = time.monotonic()
            await until(lambda: since(outage) >= 2, "more calls while it is down", at_least=0.5)
            phase("outage")
            server.start()
            restarted = time.monotonic()
            await until(lambda: since(restarted) >= 4, "calls once Redis is back", at_least=1.0)
            for worker in workers:
                stop(worker)
            outputs = [
                await anyio.to_thread.run_sync(w.communicate, None, BUSY_SECONDS) for w in workers
            ]
            phase("back")
            arrivals = sorted(stats.arrivals)
    finally:
        server.stop()
    calls = []
    excess = 0
    for worker, (out, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err
        calls += [json.loads(line) for line in out.splitlines() if '"call"' in line]
        # Each process logs its share when it goes on alone: 1 of the 4 slots here (once,
        # or again should a loaded machine keep it from the restarted server a while).
        alone = re.findall(r"alone with 1/(\d+) of them \((\d+) of 4 slots, (\d+) running\)", err)
        assert alone, err
        _, share, running = map(int, alone[0])
        assert all((int(w), int(n)) == (4, 1) for w, n, _ in alone), err
        excess += max(0, running - share)
        assert "back on the server" in err
    # Every answer the workers got was a call the simulator saw (calls cut by the end of
    # the run were seen and not answered).
    assert 0 < sum(c["ok"] for c in calls) <= len(arrivals)
    # In flight: never above the 4 slots, but for the calls that were running above their
    # process's share when Redis died, until they end (one 0.1 s call later).
    assert phases["shared"] <= slots
    assert phases["outage, calls running before it end"] <= slots + excess, (phases, excess)
    assert phases["outage"] <= slots
    assert phases["back"] <= slots
    # Per minute: at most the bucket's 120 at the first call plus its refill (2 per second)
    # until the last, over the whole run; each process's view of what remained is at most
    # one call old, so the fleet may take up to 4 calls more.
    span = arrivals[-1] - arrivals[0]
    allowed = rpm + rpm / 60 * span
    assert len(arrivals) <= allowed + 4, (len(arrivals), allowed, phases)
    # The fleet went on calling while Redis was away, and after it came back.
    assert any(killed + 0.4 < t < restarted for t in arrivals)
    assert any(t > restarted for t in arrivals)
