"""A Redis that has not answered since the processes started: nothing to take a share of.

Each process's share during an outage is a part of what it last read (see
``tests/test_redis_outage.py``). A process that never read anything cannot know how many
share the limits or what they spent: without ``workers=`` it refuses calls under a spend
budget and starts its rate buckets empty; with ``workers=N`` (an argument, or ``?workers=N``
in the URL) it takes 1/N of them. These tests name a real redis-server's address with
nothing listening on it, then start the server there: the processes must join it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import redis

from polythink import Budget, BudgetExceededError, Client, Source
from polythink.backends.base import Tally
from polythink.backends.local import LocalBudgets, LocalLimits
from polythink.backends.redis import RedisLimitStore
from polythink.backends.share import Share, split_workers
from polythink.budgets import Line, window_bounds
from polythink.simulator import Settings, Simulator
from tests.budget_support import Clock, charge, nano, table_price
from tests.limits_cache_support import FakeClock
from tests.redis_support import BUSY_SECONDS, RedisServer, go_together, spawn, stop, until

pytestmark = pytest.mark.anyio

PROMPT = [{"role": "user", "content": "Why is the sky blue?"}]
DAY = 1_780_000_000 - 1_780_000_000 % 86_400
"""The start of a UTC day (2026-05-28)."""


async def test_a_budget_never_read_is_unknown_unless_workers_is_configured() -> None:
    line = Line("b6:all", 600, "day")
    clock = Clock(DAY + 3600.0)
    start, end = window_bounds("day", clock.now)
    # Never reached the server, not told how many share it: unknown, no share, refused.
    never = Share()
    budgets = LocalBudgets(clock, journal=True)
    assert await budgets.peek([line], share=never) == [Tally(0, start, end, 0, 1, known=False)]
    refused = await budgets.reserve([line], 1, share=never)
    assert not refused.taken
    # Told there are 4: a quarter of the whole budget, nothing of it used yet.
    told = Share(4)
    assert (await budgets.reserve([line], 150, share=told)).taken
    assert not (await budgets.reserve([line], 1, share=told)).taken
    assert await budgets.peek([line], share=told) == [Tally(150, start, end, 150, 4)]
    # Reached the server before this window began: nothing could be counted in it then.
    earlier = Share()
    earlier.counted(3, DAY - 10.0)
    assert earlier.unread_is_unspent(start)
    (tally,) = await LocalBudgets(clock).peek([line], share=earlier)
    assert (tally.known, tally.share, tally.spent) == (True, 200, 0)
    # Reached it in this window, but never read this budget: unknown.
    today = Share()
    today.counted(3, DAY + 60.0)
    assert not today.unread_is_unspent(start)
    fresh = LocalBudgets(clock, journal=True)
    (tally,) = await fresh.peek([line], share=today)
    assert not tally.known
    # Read in this window (300 of 600 spent): a third of the 300 left.
    fresh.seed(line.key, Tally(300, start, end))
    (tally,) = await fresh.peek([line], share=today)
    assert (tally.known, tally.share, tally.spent) == (True, 200, 100)


def test_workers_come_from_the_url_of_the_limits_and_nowhere_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert split_workers("redis://r:6379/0?workers=4") == ("redis://r:6379/0", 4)
    assert split_workers("redis://:pw@r:6379/0?socket_timeout=2&workers=3") == (
        "redis://:pw@r:6379/0?socket_timeout=2",
        3,
    )
    assert split_workers("unix:///run/redis.sock?db=2") == ("unix:///run/redis.sock?db=2", None)
    store = RedisLimitStore("redis://127.0.0.1:6399/0?workers=4")
    assert store.workers == 4
    assert store.link.url == "redis://127.0.0.1:6399/0"
    assert store.budgets().share.workers == 4
    assert RedisLimitStore("redis://127.0.0.1:6399/0?workers=4", workers=4).workers == 4
    with pytest.raises(ValueError, match=r"workers=2 and \?workers=4 in the URL differ"):
        RedisLimitStore("redis://127.0.0.1:6399/0?workers=4", workers=2)
    with pytest.raises(ValueError, match=r"limits='redis://:\*\*\*@r:1/0\?workers=0'.*'0'"):
        Client([Source("openai", "gpt-5.5", api_key="sk-x")], limits="redis://:pw@r:1/0?workers=0")
    with pytest.raises(ValueError, match=r"workers= is an option of limits=.*not of cache="):
        Client([Source("openai", "gpt-5.5", api_key="sk-x")], cache="redis://r:1/0?workers=4")
    client = Client([Source("openai", "gpt-5.5", api_key="sk-x")], limits="redis://r:1/0?workers=6")
    assert client._shared is not None
    assert client._shared.workers == 6
    # The same string from a TOML file's limits key, or from {SCOPE}__LIMITS.
    toml = tmp_path / "chat.toml"
    toml.write_text(
        'limits = "redis://r:1/0?workers=3"\n\n'
        '[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\napi_key = "sk-x"\n'
    )
    from_toml = Client.from_toml(toml)
    assert from_toml._shared is not None
    assert from_toml._shared.workers == 3
    monkeypatch.setenv("CHAT__OPENAI__0__MODEL", "gpt-5.5")
    monkeypatch.setenv("CHAT__OPENAI__0__API_KEY", "sk-x")
    monkeypatch.setenv("CHAT__LIMITS", "redis://r:1/0?workers=5")
    from_env = Client.from_env("CHAT")
    assert from_env._shared is not None
    assert from_env._shared.workers == 5


async def test_limits_never_reached_start_empty_then_join_the_server_when_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="polythink.redis")
    server = RedisServer(tmp_path)  # its port, with nothing listening yet
    store = RedisLimitStore(server.url, retry_interval=0.05)
    clock = FakeClock(0.0)
    limits = store.for_source(
        "openai",
        "https://example.test/v1",
        "sk-unreached-0001",
        rpm=60,
        tpm=None,
        max_concurrency=3,
        fallback=LocalLimits(60, None, 3, clock),
    )
    try:
        # 60 a minute refill one a second, and the bucket starts empty.
        assert await limits.take(0) == (1.0, "rpm_limit")
        assert limits.alone
        clock.t += 1.0
        assert await limits.take(0) == (0.0, "")
        assert await limits.take(0) == (1.0, "rpm_limit")
        # All three slots: nothing says how many share them.
        held = [await limits.acquire(0) for _ in range(3)]
        assert all(lease is not None for lease in held)
        assert await limits.acquire(0) is None
        server.start()
        await anyio.sleep(0.1)
        # Back (for the first time): the request taken alone is charged on the server (its
        # bucket was absent, so full), the running calls are leased there.
        assert await limits.take(0) == (0.0, "")
        assert not limits.alone
        level = float(redis.Redis(port=server.port).hget(limits.keys[0], "level") or "nan")
        assert 58.0 <= level < 58.1
        assert server.command("ZCARD", limits.leases_key) == ":3"
        for lease in held:
            assert lease is not None
            await lease.release()
        assert server.command("ZCARD", limits.leases_key) == ":0"
    finally:
        await store.aclose()
        server.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "does not answer" in warnings[0]
    assert "never has since this process started" in warnings[0]
    assert "refuses calls under a spend budget and starts each rate bucket empty" in warnings[0]
    assert "workers=N" in warnings[0]


async def test_a_client_whose_redis_never_answered_refuses_budgeted_calls_then_joins(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path)
    budget = Budget(0.60, "day", name="b6")
    store = RedisLimitStore(server.url, retry_interval=0.05)
    try:
        with Simulator() as sim:
            source = Source(
                "openai",
                "gpt-5.5",
                api_key="sim",
                base_url=sim.base_url("openai"),
                rpm=6000,
            )
            async with Client([source], limits=store, budgets=[budget]) as client:
                (plan,) = await client.plan(PROMPT, reasoning_effort="low", max_tokens=400)
                assert not plan.fits
                assert any("never read what the budget spent" in r for r in plan.reasons)
                with pytest.raises(BudgetExceededError) as refused:
                    await client.complete(PROMPT, reasoning_effort="low", max_tokens=400)
                error = refused.value
                assert error.error_type == "spend_unknown"
                assert (error.budget, error.limit, error.spent, error.retry_after) == (
                    "b6",
                    0.0,
                    0.0,
                    None,
                )
                assert "Redis does not answer" in error.message
                assert "what the fleet spent is unknown" in error.message
                assert "?workers=N in the limits URL" in error.message
                assert sim.stats.requests == 0
                server.start()
                await anyio.sleep(0.1)
                answer = await client.complete(PROMPT, reasoning_effort="low", max_tokens=400)
                usage = answer.usage
                assert usage is not None
                cost = charge({"model": answer.model, **dataclasses.asdict(usage)})
                assert server.budget_spent("b6:all") == cost
                assert sim.stats.requests == 1
    finally:
        await store.aclose()
        server.stop()


def quiet(sim: Simulator, seconds: float = 0.6) -> Callable[[], bool]:
    """A condition: a call reached the simulator, and none since ``seconds`` ago."""

    def holds() -> bool:
        arrivals = sim.stats.arrivals
        return bool(arrivals) and time.monotonic() - arrivals[-1] >= seconds

    return holds


async def test_four_processes_told_workers_4_spend_a_quarter_each_then_join_redis(
    tmp_path: Path,
) -> None:
    """4 processes x 2 tasks, ``?workers=4``, a $0.20 daily budget, Redis not there at first.

    Each keeps to a quarter of the whole budget (it read nothing, and was told it is one of
    4), so the fleet spends at most the budget before Redis appears; once it does, each
    adds what it spent alone to the shared count and goes on against the shared budget."""
    server = RedisServer(tmp_path)
    usd = 0.20
    cap = round(usd * 1e9)
    worst = nano(table_price("gpt-5.5", "openai", input_tokens=12, output_tokens=400))
    try:
        with Simulator(Settings(latency=0.02)) as sim:
            plan = {
                "redis": f"{server.url}?workers=4",
                "retry_interval": 0.1,
                "base_url": sim.base_url("openai"),
                "usd": usd,
                "name": "unreached",
                "tasks": 2,
                "calls": 1000,
                "effort": "low",
                "max_tokens": 400,
                "seconds": 300.0,
                "stop_on_stdin": True,
                "wait_go": True,
            }
            workers = [spawn(plan, "tests.budget_worker") for _ in range(4)]
            await go_together(workers)
            # Each phase lasts until the fleet has spent what it may: no call reaches the
            # simulator for a while (every process refused), however slow the machine.
            await until(quiet(sim), "the fleet spending its quarters alone")
            server.start()
            started = time.time()
            before = sim.stats.requests
            await until(lambda: sim.stats.requests > before, "a call once Redis answers")
            await until(quiet(sim), "the fleet spending the shared budget")
            for worker in workers:
                stop(worker)
            outputs = [
                await anyio.to_thread.run_sync(w.communicate, None, BUSY_SECONDS) for w in workers
            ]
            at_server = server.budget_spent("unreached:all")
            fleet = server.command("ZCARD", "polythink:{polythink-budget}:workers")
    finally:
        server.stop()
    spent = 0
    for worker, (out, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err
        records = [json.loads(line) for line in out.splitlines() if '"call"' in line]
        alone = [r for r in records if r["at"] < started]
        # Before Redis: its quarter of the whole, and refused against it.
        assert sum(charge(r) for r in alone if r["ok"]) <= cap // 4
        assert any(not r["ok"] for r in alone), records
        for record in (r for r in alone if not r["ok"]):
            assert record["error_type"] == "budget_exceeded"
            assert "keeps to its share, 1/4" in record["message"]
        # After: refused against the shared budget, as every process of the fleet.
        last = records[-1]
        assert not last["ok"]
        assert last["at"] > started
        assert "keeps to its share" not in last["message"]
        assert "has $" in last["message"]
        spent += sum(charge(r) for r in records if r["ok"])
    # Everything spent alone was added to the shared count: it holds all the fleet spent.
    assert at_server == spent
    assert fleet == ":4"
    assert cap - 9 * worst < spent <= cap + worst
