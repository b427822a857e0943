"""Limits and cache shared through a real redis-server by several worker processes."""

from __future__ import annotations

import json
import logging
import random
import time
import zlib
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis

from polythink import Client, Source
from polythink.backends.local import LocalLimits, MonotonicClock
from polythink.backends.redis import RedisCache, RedisLimitStore, account_tag, fingerprint
from polythink.config import options_from_env, options_from_toml, sources_from_env
from polythink.errors import RateLimitedError
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import Fault, FaultPlan
from polythink.types import RateLimit
from tests import doc_blocks
from tests.redis_support import RedisServer, go, go_together, results, spawn

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "Name three primes"}]


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


def source(sim: Simulator, key: str, **fields: Any) -> Source:
    return Source("openai", "gpt-5.5", api_key=key, base_url=sim.base_url("openai"), **fields)


def plan(server: RedisServer, sim: Simulator, key: str, **fields: Any) -> dict[str, Any]:
    spec = {"base_url": sim.base_url("openai"), "api_key": key}
    spec.update(fields.pop("source", {}))
    return {"redis": server.url, "source": spec, **fields}


def bucket(server: RedisServer, sim: Simulator, key: str, name: str) -> tuple[float, float]:
    """The stored ``(level, ts)`` of an account's bucket (ts in ms of Redis TIME)."""
    tag = account_tag("openai", sim.base_url("openai"), key)
    level, ts = redis.Redis(port=server.port).hmget(f"polythink:{tag}:{name}", ["level", "ts"])
    assert level is not None
    assert ts is not None
    return float(level), float(ts)


def calls(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == "call"]


async def test_four_redis_workers_keep_one_rpm_and_concurrency_and_a_killed_worker_frees_its_slot(
    redis_server: RedisServer,
) -> None:
    """120 RPM and 3 slots shared by 4 processes for 10 s; meanwhile, on another account, a
    worker holding the only slot of a 1.5 s lease is SIGKILLed mid-stream."""
    with (
        Simulator(Settings(latency=0.05)) as sim,
        Simulator(Settings(chunk_delay=0.2, answer_words=200)) as slow,
    ):
        shared = plan(
            redis_server,
            sim,
            "sk-shared-rpm-0001",
            source={"rpm": 120, "max_concurrency": 3},
            wait_go=True,
            seconds=10.0,
            tasks=4,
            vary=True,
            stream=[False, True],
        )
        workers = [spawn(shared) for _ in range(4)]
        victim = spawn(
            plan(
                redis_server,
                slow,
                "sk-lease-0002",
                source={"max_concurrency": 1},
                lease=1.5,
                calls=1,
                stream=True,
            )
        )
        # The four start together once all are ready, however long their imports took.
        await go_together(workers)
        until = time.time() + 10.0
        assert victim.stdout is not None
        line = await anyio.to_thread.run_sync(victim.stdout.readline)
        assert '"streaming"' in line
        probe = source(slow, "sk-lease-0002", max_concurrency=1)
        store = RedisLimitStore(redis_server.url, lease=1.5, socket_timeout=2.0)
        async with Client([probe], limits=store) as client:
            # Two whole leases later the victim still holds the slot: it renews its lease.
            await anyio.sleep(3.2)
            with pytest.raises(RateLimitedError) as caught:
                await client.complete(USER, timeout=0.3)
            assert caught.value.error_type == "concurrency_limit"
            victim.kill()
            killed = time.monotonic()
            assert victim.wait(10) == -9
            # On the server's clock: the dead worker's lease ends within one lease (1.5 s) of
            # its death, whatever the load (the probe below only shows the slot comes back).
            raw = redis.Redis(port=redis_server.port)
            seconds, micros = raw.time()
            dead_at_ms = seconds * 1000 + micros / 1000
            tag = account_tag("openai", slow.base_url("openai"), "sk-lease-0002")
            ((_, expires_ms),) = raw.zrange(f"polythink:{tag}:leases", 0, -1, withscores=True)
            assert 0 < expires_ms - dead_at_ms <= 1500, expires_ms - dead_at_ms
            answer = await client.complete(USER, timeout=10.0)
            freed = time.monotonic() - killed
        assert answer.text.startswith("Simulated")
        # Renewed every 0.5 s, the lease had between 1.0 and 1.5 s left when the worker died
        # (less if its renewal ran late on a loaded machine); the probe polls every 10 ms,
        # with 1 s of slack for a loaded machine.
        assert 0.2 <= freed <= 1.5 + 1.0, freed
        records = [calls(await anyio.to_thread.run_sync(results, w)) for w in workers]
    sent = [r for rs in records for r in rs if r["ok"]]
    refused = [r for rs in records for r in rs if not r["ok"]]
    # The bucket starts full (120) and refills 2 per second from the first call to the last.
    arrivals = sorted(sim.stats.arrivals)
    span = arrivals[-1] - arrivals[0]
    assert 9.0 <= span <= 11.0, span
    allowed = 120 + 120 / 60 * span
    assert abs(sim.stats.requests - allowed) <= 0.05 * allowed, (sim.stats.requests, allowed)
    # A call admitted just before the end may run out of the run's deadline in flight.
    cut = [r for r in refused if r["error"] == "RequestTimeoutError"]
    assert all(r["end"] >= until - 0.2 for r in cut), cut
    assert len(sent) <= sim.stats.requests <= len(sent) + len(cut)
    assert sim.stats.max_in_flight == 3
    assert all(rs for rs in records)
    # The other calls that did not go were refused, unsent, when the run's end came nearer
    # than their turn: by the bucket, the queue, the slots, or after waiting (deadline).
    assert {(r["error"], r["error_type"]) for r in refused if r not in cut} <= {
        ("RateLimitedError", "rpm_limit"),
        ("RateLimitedError", "queue"),
        ("RateLimitedError", "concurrency_limit"),
        ("RateLimitedError", "deadline"),
    }
    assert all(r["end"] >= until - 1.0 for r in refused), refused
    assert max(r["end"] for r in sent) <= until + 2.0


async def test_tpm_is_shared_across_redis_workers_with_corrections_streamed_and_not(
    redis_server: RedisServer,
) -> None:
    """3000 TPM: A's call reserves 2008 of them; B's streamed call, sent while A runs, waits
    for them and goes as soon as A's real usage is put back, not when the estimate would
    have refilled."""
    key = "sk-shared-tpm-0003"
    with Simulator(Settings(latency=0.5)) as sim:
        common = {"source": {"tpm": 3000}, "calls": 1, "max_tokens": 2000}
        first = spawn(plan(redis_server, sim, key, **common))
        second = spawn(plan(redis_server, sim, key, stream=True, wait_go=True, **common))
        # The simulator counts in its own thread; B starts once A's request is in it.
        while sim.stats.requests == 0:  # noqa: ASYNC110
            await anyio.sleep(0.005)
        go(second)
        (a,) = calls(await anyio.to_thread.run_sync(results, first))
        (b,) = calls(await anyio.to_thread.run_sync(results, second))
        level, ts = bucket(redis_server, sim, key, "tpm")
    assert a["ok"]
    assert b["ok"]
    # Estimate: 17 characters = 5 tokens + 3 of framing + max_tokens 2000 = 2008, so B needs
    # (2008 - 992) / 50 = 20.3 s of refill without A's correction; it went 0.5-1 s after A.
    assert b["start"] < a["end"]
    # At the simulator (one clock): A answers 0.5 s after it arrives; B arrives only after
    # that answer. Without A's correction B could not go before 20.3 s of refill, so any
    # arrival well under that proves the correction; 8 s leaves room for a loaded machine
    # (B's recheck is every 0.5 s when it is scheduled).
    arrived_a, arrived_b = sorted(sim.stats.arrivals)
    assert 0.5 <= arrived_b - arrived_a <= 8.0, (arrived_a, arrived_b)
    assert a["usage"] == b["usage"] == [11, 132]
    used = sum(a["usage"]) + sum(b["usage"])
    # Corrected to the real usage of both calls; refilled 50 tokens/s since A took.
    refill = 3000 / 60 * (ts / 1000 - a["start"])
    assert 0 <= level - (3000 - used) <= refill + 1e-6, (level, used, refill)


async def test_a_429_in_one_redis_worker_pauses_the_others(redis_server: RedisServer) -> None:
    key = "sk-shared-429-0004"
    faults = FaultPlan([Fault.http(429, retry_after=2)])
    with Simulator(Settings(faults=faults)) as sim:
        common = {"source": {"max_retries": 0}, "calls": 1}
        hit = spawn(plan(redis_server, sim, key, **common))
        other = spawn(plan(redis_server, sim, key, wait_go=True, **common))
        assert hit.stdout is not None
        a = json.loads(await anyio.to_thread.run_sync(hit.stdout.readline))
        go(other)
        (b,) = calls(await anyio.to_thread.run_sync(results, other))
        assert calls(await anyio.to_thread.run_sync(results, hit)) == []
    assert (a["ok"], a["error"], a["error_type"]) == (
        False,
        "RateLimitedError",
        "rate_limit_exceeded",
    )
    assert b["ok"]
    # B started inside the 2 s pause (1.5 s leaves room for the hand-off on a loaded machine).
    assert b["start"] < a["end"] + 1.5
    # At the simulator (one clock): B was held until the pause A's 429 set had passed (it
    # sleeps out the pause's PTTL; the upper bound only says it did not wait for much more,
    # with room for a loaded machine).
    assert sim.stats.requests == 2
    arrived_a, arrived_b = sorted(sim.stats.arrivals)
    assert 2.0 <= arrived_b - arrived_a <= 2.0 + 3.0, (arrived_a, arrived_b)


async def test_a_retried_429_pauses_the_other_redis_workers_from_the_first_attempt(
    redis_server: RedisServer,
) -> None:
    """A retries its 429 (max_retries=1): the pause is on the server while A waits to retry,
    so B, let go during it, is held too; every attempt took a request from the shared RPM."""
    key = "sk-shared-429-retried-0014"
    server = redis.Redis(port=redis_server.port)
    faults = FaultPlan([Fault.http(429, retry_after=2)])
    with Simulator(Settings(faults=faults)) as sim:
        tag = account_tag("openai", sim.base_url("openai"), key)
        common = {"source": {"max_retries": 1, "rpm": 6}, "calls": 1}
        hit = spawn(plan(redis_server, sim, key, **common))
        other = spawn(plan(redis_server, sim, key, wait_go=True, **common))
        # Wait (no fixed sleep) for the pause A's first 429 sets: with the pause applied only
        # when the retries give up, A's retry succeeds and no pause is ever set.
        with anyio.fail_after(20):
            while server.pttl(f"polythink:{tag}:pause") <= 0:  # noqa: ASYNC110
                await anyio.sleep(0.005)
        assert sim.stats.requests == 1
        go(other)
        (a,) = calls(await anyio.to_thread.run_sync(results, hit))
        (b,) = calls(await anyio.to_thread.run_sync(results, other))
        level, ts = bucket(redis_server, sim, key, "rpm")
    assert a["ok"]
    assert b["ok"]
    # At the simulator (one clock): A's retry and B both came after the 2 s pause (B sleeps
    # out its PTTL; the upper bound leaves room for a loaded machine).
    assert sim.stats.requests == 3
    first, *rest = sorted(sim.stats.arrivals)
    assert all(2.0 <= later - first <= 2.0 + 3.0 for later in rest), (first, rest)
    # Three requests taken from the 6 RPM bucket (A's two attempts and B's call), refilled at
    # 0.1 per second since A began.
    refill = 6 / 60 * (ts / 1000 - a["start"])
    assert 0 <= level - (6 - 3) <= refill + 1e-6, (level, refill)


async def test_a_redis_cache_entry_written_by_one_process_is_a_hit_in_another(
    redis_server: RedisServer,
) -> None:
    with Simulator() as sim:
        writer = {"redis": None, "cache": redis_server.url, "calls": 2, "stream": [False, True]}
        writer["prompt"] = "Cache me across processes"
        first = calls(results(spawn(plan(redis_server, sim, "sk-cache-0005", **writer))))
        second = calls(results(spawn(plan(redis_server, sim, "sk-cache-0005", **writer))))
    assert [r["cache_hit"] for r in first] == [False, False]
    assert [r["cache_hit"] for r in second] == [True, True]
    assert [r["text"] for r in second] == [r["text"] for r in first]
    assert second[1]["events"] == first[1]["events"]
    kinds = [kind for kind, _ in first[1]["events"]]
    assert kinds.count("text") == 12
    assert kinds[-2:] == ["usage", "done"]
    assert second[1]["usage"] == first[1]["usage"]
    assert sim.stats.requests == 2
    stored = redis.Redis(port=redis_server.port).keys("polythink:{polythink-cache}:e:*")
    assert len(stored) >= 2


async def test_two_api_keys_on_one_provider_do_not_share_a_redis_budget(
    redis_server: RedisServer,
) -> None:
    with Simulator() as sim:
        alice = source(sim, "sk-alice-0000000006", rpm=2)
        bob = source(sim, "sk-bob-00000000007", rpm=2)
        async with (
            Client([alice], limits=redis_server.url) as one,
            Client([alice], limits=redis_server.url) as same_key,
            Client([bob], limits=redis_server.url) as other_key,
        ):
            await one.complete(USER)
            await same_key.complete(USER)
            with pytest.raises(RateLimitedError) as caught:
                await one.complete(USER, timeout=1.0)
            assert caught.value.error_type == "rpm_limit"
            assert 29.0 <= (caught.value.retry_after or 0) <= 30.0
            assert (await other_key.complete(USER)).text.startswith("Simulated")
            assert (await other_key.complete(USER)).text.startswith("Simulated")
    keys = {k.decode() for k in redis.Redis(port=redis_server.port).keys("polythink:{openai*rpm")}
    tags = {account_tag("openai", sim.base_url("openai"), k) for k in ("sk-alice-0000000006",)}
    tags.add(account_tag("openai", sim.base_url("openai"), "sk-bob-00000000007"))
    assert {f"polythink:{t}:rpm" for t in tags} <= keys
    assert not any("sk-" in k for k in keys)
    assert fingerprint("sk-alice-0000000006") in next(iter(sorted(tags)))


async def test_redis_stopped_mid_run_and_restarted_falls_back_once_and_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path).start()
    key = "sk-restart-0008"
    limits = RedisLimitStore(server.url, retry_interval=0.2)
    cache = RedisCache(server.url, retry_interval=0.2)
    caplog.set_level(logging.INFO, logger="polythink.redis")
    try:
        with Simulator() as sim:
            async with Client(
                [source(sim, key, rpm=600, max_concurrency=2)], limits=limits, cache=cache
            ) as client:
                layer = client._limits[0]
                fallback = layer.backend.local
                assert isinstance(fallback, LocalLimits)

                async def run(n: int, tag: str) -> list[bool]:
                    hits = []
                    for i in range(n):
                        prompt = "the same question" if i == 0 else f"{tag} {i}"
                        answer = await client.complete([{"role": "user", "content": prompt}])
                        assert answer.text.startswith("Simulated")
                        hits.append(answer.cache_hit)
                    return hits

                # Refill bounds come from the time the calls took (10 per second), on the
                # clock of each bucket: Redis TIME (epoch ms) or this process's monotonic.
                began = time.time()
                began_mono = time.monotonic()
                assert await run(4, "before") == [False, False, False, False]
                shared_level, ts = bucket(server, sim, key, "rpm")
                # 4 taken; refilled 10 per second since.
                assert 0 <= shared_level - 596.0 <= 10 * (ts / 1000 - began) + 1e-6
                assert fallback.requests is not None
                assert fallback.requests.level(MonotonicClock().now()) == 600.0

                server.stop()
                # Every call still answers: limits in-process (this process's share, 1/1, of
                # what the shared bucket had left, not a full bucket), the cache a miss.
                assert await run(4, "during") == [False, False, False, False]
                now = time.monotonic()
                level = fallback.requests.level(now)
                assert 0 <= level - 592.0 <= 10 * (now - began_mono) + 1e-6
                assert sim.stats.requests == 8

                server.start()
                await anyio.sleep(0.25)
                before_at = time.monotonic()
                local_before = fallback.requests.level(before_at)
                assert await run(4, "after") == [False, False, False, False]
                # The first question is stored again, and answered from Redis without a call.
                assert await run(1, "after") == [True]
                assert sim.stats.requests == 12
                restarted_level, ts = bucket(server, sim, key, "rpm")
                # A new server, seeded with what this process had left (not a full bucket),
                # then the 4 calls that reached the limiter: 12 taken in all.
                assert 0 <= restarted_level - 588.0 <= 10 * (ts / 1000 - began) + 1e-6
                # Nothing was taken in-process any more: the local bucket only refilled.
                after_at = time.monotonic()
                local_after = fallback.requests.level(after_at)
                assert 0 <= local_after - local_before <= 10 * (after_at - before_at) + 1e-6
    finally:
        server.stop()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert sorted(r.getMessage().split(":")[0] for r in warnings) == [
        "shared cache",
        "shared rate limits",
    ]
    assert all("does not answer" in r.getMessage() for r in warnings)
    back = [r.getMessage() for r in caplog.records if "answers again" in r.getMessage()]
    assert sorted(m.split(":")[0] for m in back) == ["shared cache", "shared rate limits"]
    assert key not in caplog.text


async def test_redis_buckets_go_into_debt_take_corrections_and_pauses_like_local_ones(
    redis_server: RedisServer,
) -> None:
    store = RedisLimitStore(redis_server.url)
    clock = MonotonicClock()
    limits = store.for_source(
        "openai",
        "https://example.test/v1",
        "sk-units-0009",
        rpm=60,
        tpm=600,
        max_concurrency=2,
        fallback=LocalLimits(60, 600, 2, clock),
    )
    raw = redis.Redis(port=redis_server.port)
    tpm_key, pause_key = limits.keys[1], limits.keys[2]
    try:
        # Full bucket: a call larger than the whole bucket passes and leaves it in debt.
        assert await limits.take(1000) == (0.0, "")
        assert float(raw.hget(tpm_key, "level") or 0) == -400.0
        wait, reason = await limits.take(10)
        assert reason == "tpm_limit"
        assert 40.9 <= wait <= 41.0  # (10 + 400) tokens at 10 per second
        # A correction gives back at most up to the capacity; a negative one charges more.
        await limits.settle(5000, None, None)
        assert float(raw.hget(tpm_key, "level") or 0) == 600.0
        await limits.settle(-100, None, None)
        level = float(raw.hget(tpm_key, "level") or 0)
        assert 500.0 <= level <= 500.1
        assert 0 < raw.pttl(tpm_key) <= 60_000 * 100 / 600 + 1000
        # Reported remaining counts shrink; a reported exhaustion pauses until its reset.
        await limits.settle(0, RateLimit(tokens_remaining=300), None)
        assert 300.0 <= float(raw.hget(tpm_key, "level") or 0) <= 300.1
        await limits.settle(0, RateLimit(requests_remaining=0, requests_reset=3.0), None)
        assert 2900 <= raw.pttl(pause_key) <= 3000
        await limits.settle(0, None, 1.0)  # a shorter pause does not shorten it
        assert 2800 <= raw.pttl(pause_key) <= 3000
        wait, reason = await limits.take(1)
        assert reason == "server_pause"
        assert 2.8 <= wait <= 3.0
        # Leases: two slots, a third caller waits and is refused at its timeout.
        first = await limits.acquire(0)
        second = await limits.acquire(0)
        assert first is not None
        assert second is not None
        assert raw.zcard(limits.leases_key) == 2
        assert await limits.acquire(0) is None
        started = time.monotonic()
        assert await limits.acquire(0.2) is None
        # Refused at its 0.2 s timeout (the slots stay held; the slack is for a loaded machine).
        assert 0.2 <= time.monotonic() - started <= 0.2 + 1.5
        await first.release()
        await first.release()
        assert raw.zcard(limits.leases_key) == 1
        third = await limits.acquire(0)
        assert third is not None
        await second.release()
        await third.release()
        assert raw.exists(limits.leases_key) == 0
    finally:
        await store.aclose()


async def test_a_slow_redis_costs_one_socket_timeout_then_calls_go_on_in_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path).start()
    try:
        with Simulator() as sim:
            limits = RedisLimitStore(server.url, socket_timeout=0.5, retry_interval=5.0)
            async with Client([source(sim, "sk-slow-0010", rpm=600)], limits=limits) as client:
                await client.complete(USER)
                assert server.command("CLIENT", "PAUSE", "2000", "ALL") == "+OK"
                started = time.monotonic()
                for _ in range(3):
                    assert (await client.complete(USER)).text.startswith("Simulated")
                elapsed = time.monotonic() - started
    finally:
        server.stop()
    # One socket timeout (0.5 s), then in-process: three timeouts would take 1.5 s or more
    # (the pause is 2 s); the 0.9 s left over is slack for a loaded machine.
    assert 0.5 <= elapsed < 1.4, elapsed
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "TimeoutError" in warnings[0].getMessage()


async def test_a_redis_stream_closed_early_is_not_cached_and_releases_its_lease(
    redis_server: RedisServer,
) -> None:
    with Simulator(Settings(answer_words=30)) as sim:
        key = "sk-early-0011"
        async with Client(
            [source(sim, key, max_concurrency=1)],
            limits=redis_server.url,
            cache=redis_server.url,
        ) as client:
            prompt = [{"role": "user", "content": "Close me early"}]
            async with aclosing(client.stream(prompt)) as events:
                async for event in events:
                    assert event.type in ("reasoning", "text")
                    break
            leases = client._limits[0].backend
            assert redis.Redis(port=redis_server.port).exists(leases.leases_key) == 0  # type: ignore[attr-defined]
            replay = [e.type async for e in client.stream(prompt)]
            assert replay[-1] == "done"
            assert sim.stats.requests == 2


def test_the_readme_redis_example_builds_a_client_sharing_limits_and_cache(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = doc_blocks.block_with("cache=RedisCache(")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-0012")
    namespace: dict[str, Any] = {}
    exec(block.replace("redis://redis:6379/0", redis_server.url), namespace)
    client = namespace["client"]
    assert isinstance(client._shared, RedisLimitStore)
    assert client._shared.link.url == redis_server.url
    assert isinstance(client._store, RedisCache)
    assert client._store.ttl == 3600
    assert client._limits[0].backend.tag == account_tag(
        "openai", "https://api.openai.com/v1", "sk-readme-0012"
    )


def test_from_env_and_from_toml_name_the_redis_limits_and_cache(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    env = {
        "CHAT__OPENAI__0__MODEL": "gpt-5.5",
        "CHAT__OPENAI__0__API_KEY": "sk-env-0013",
        "CHAT__LIMITS": redis_server.url,
        "CHAT__CACHE": redis_server.url,
    }
    assert options_from_env("chat", env) == {"limits": redis_server.url, "cache": redis_server.url}
    assert [s.model for s in sources_from_env("chat", env)] == ["gpt-5.5"]
    path = tmp_path / "polythink.toml"
    path.write_text(
        f'limits = "{redis_server.url}"\ncache = "{redis_server.url}"\n\n'
        '[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\napi_key = "sk-toml-0014"\n',
        encoding="utf-8",
    )
    client = Client.from_toml(path)
    assert isinstance(client._shared, RedisLimitStore)
    assert isinstance(client._store, RedisCache)
    assert client._limits[0].backend.tag == account_tag(
        "openai", "https://api.openai.com/v1", "sk-toml-0014"
    )
    path.write_text('limits = 6379\n[[source]]\nprovider = "openai"\nmodel = "m"\n')
    with pytest.raises(ValueError, match="limits must be a non-empty string"):
        options_from_toml(path)
    with pytest.raises(ValueError, match="limits must be None"):
        Client([Source("openai", "gpt-5.5", api_key="sk-x-0015")], limits="memcached://x")


async def test_the_redis_cache_culls_the_least_recently_stored_past_its_size_limit(
    redis_server: RedisServer,
) -> None:
    raw = redis.Redis(port=redis_server.port)
    raw.flushdb()
    cache = RedisCache(redis_server.url, size_limit=3000, ttl=60)
    try:
        noise = random.Random(9)
        values = {f"{i:064x}": noise.randbytes(900) for i in range(4)}
        sizes = {key: len(zlib.compress(value, 6)) for key, value in values.items()}
        for key, value in values.items():
            await cache.save(key, value, 60.0)
        stored = [key for key in values if await cache.load(key) == values[key]]
        # Kept newest first while the compressed sizes fit in 3000 bytes.
        kept, total = [], 0
        for key in reversed(list(values)):
            if total + sizes[key] > 3000:
                break
            kept.append(key)
            total += sizes[key]
        assert sorted(stored) == sorted(kept)
        assert len(kept) == 3
        assert int(raw.get("polythink:{polythink-cache}:total") or 0) == total
        assert 59_000 <= raw.pttl(cache.prefix + kept[0]) <= 60_000
        await cache.save("f" * 64, b"x" * 10, None)
        assert await cache.load("f" * 64) == b"x" * 10
        raw.set(cache.prefix + "e" * 64, b"not zlib")
        with pytest.raises(ValueError, match="not compressed"):
            await cache.load("e" * 64)
    finally:
        await cache.aclose()


async def test_an_unreachable_redis_warns_once_without_its_password_and_calls_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = "redis://:hunter2-secret@127.0.0.1:1/0"
    with Simulator() as sim:
        limits = RedisLimitStore(url)
        async with Client([source(sim, "sk-down-0016", rpm=600)], limits=limits) as client:
            began = MonotonicClock().now()
            for _ in range(3):
                assert (await client.complete(USER)).text.startswith("Simulated")
            took = MonotonicClock().now() - began
            bucket = client._limits[0].requests
            assert bucket is not None
            # The three calls were counted in-process, from a bucket that started empty (it
            # never saw the others, nor was told how many there are): each waited for one
            # request's refill, 0.1 s at 600 a minute.
            assert bucket.capacity == 600
            assert took >= 0.3 - 0.005
            assert -0.01 <= bucket.level(MonotonicClock().now()) <= 1.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "redis://***@127.0.0.1:1/0" in warnings[0]
    assert "hunter2" not in caplog.text
    assert limits.link.outages == 1
