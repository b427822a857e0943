"""Spend budgets shared through a real redis-server: the scripts' calendar, a fleet of worker
processes on one daily budget, and a server killed mid-run."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
import redis

from polythink import Budget, BudgetExceededError, Client, Effort, Source
from polythink.backends.redis import _BUDGET_PRELUDE, RedisLimitStore
from polythink.budgets import Line, account_id, fingerprint, window_bounds
from polythink.cli import main
from polythink.simulator import Settings, Simulator
from tests.budget_support import charge, nano, table_price
from tests.redis_support import RedisServer, go_together, results, spawn

pytestmark = pytest.mark.anyio

PROMPT = [{"role": "user", "content": "Why is the sky blue?"}]


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


async def test_the_scripts_windows_are_pythons_utc_calendar(redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port)
    window = client.register_script(_BUDGET_PRELUDE + "return {window(ARGV[1], tonumber(ARGV[2]))}")
    edges = [
        datetime(y, m, d, tzinfo=UTC).timestamp() + shift
        for y, m, d in [(2026, 1, 1), (2026, 3, 1), (2028, 2, 29), (2028, 3, 1), (2100, 3, 1)]
        for shift in (-1, 0, 1)
    ]
    rng = random.Random(7)
    moments = edges + [rng.uniform(0, 4_102_444_800) for _ in range(200)]  # 1970 to 2100
    for at in moments:
        second = int(at)
        for per in ("minute", "hour", "day", "month"):
            assert tuple(window(args=[per, second])) == window_bounds(per, second), (per, at)


async def test_redis_budgets_reserve_all_or_nothing_and_expire(redis_server: RedisServer) -> None:
    store = RedisLimitStore(redis_server.url).budgets()
    key = "sk-never-in-a-key-0001"
    account = account_id("openai", "https://api.openai.com/v1", key)
    day = Budget(1e-6, account="*").line(account)
    hour = Line("hour:tag=*:acme", 400, "hour")
    try:
        first = await store.reserve([day, hour], 250)
        assert first.taken
        assert first.shared
        assert [t.spent for t in first.tallies] == [0, 0]
        now = time.time()
        assert [(t.start, t.end) for t in first.tallies] == [
            window_bounds("day", now),
            window_bounds("hour", now),
        ]
        second = await store.reserve([day, hour], 250)
        assert not second.taken  # 500 > 400 for the hour: neither takes it
        assert [t.spent for t in await store.peek([day, hour])] == [250, 250]
        assert await store.settle([day, hour], first, 80 - 250) == [80, 80]
        assert (await store.reserve([day, hour], 300)).taken
        assert [redis_server.budget_spent(line.key) for line in (day, hour)] == [380, 380]
    finally:
        await store.link.aclose()
    server = redis.Redis(port=redis_server.port)
    names = [k.decode() for k in server.keys("polythink:{polythink-budget}:*")]
    assert f"polythink:{{polythink-budget}}:{day.key}" in names
    assert fingerprint(key) in day.key
    assert not any(key in name for name in names)
    # Each key lives until a minute after its window ends.
    ttl = server.pttl(f"polythink:{{polythink-budget}}:{hour.key}") / 1000
    assert abs(window_bounds("hour", time.time())[1] + 60 - time.time() - ttl) < 2


async def test_four_processes_on_one_daily_budget_never_exceed_it(
    redis_server: RedisServer,
) -> None:
    """4 processes x 2 tasks call gpt-5.5 at high (max_tokens 400) until the budget refuses.

    Each call reserves its worst case (8 prompt tokens estimated + 400 output) in one script
    before it is sent, so the sum of what the calls cost stays within the budget plus what
    the calls in flight at the cap had under-reserved (the simulator counts a few more prompt
    tokens than the estimate): below one call's worst case, the bound asserted here."""
    usd = 0.30
    worst = nano(table_price("gpt-5.5", "openai", input_tokens=11, output_tokens=400))
    with Simulator() as sim:
        plan = {
            "redis": redis_server.url,
            "base_url": sim.base_url("openai"),
            "usd": usd,
            "name": "fleet",
            "tasks": 2,
            "calls": 200,
            "effort": "high",
            "max_tokens": 400,
            "wait_go": True,
        }
        workers = [spawn(plan, "tests.budget_worker") for _ in range(4)]
        await go_together(workers)
        records = [r for w in workers for r in results(w)]
    answered = [r for r in records if r["ok"]]
    refused = [r for r in records if not r["ok"]]
    assert len(refused) == 8  # every task ended refused
    assert {r["error"] for r in refused} == {"BudgetExceededError"}
    spent = sum(charge(r) for r in answered)
    cap = round(usd * 1e9)
    assert spent <= cap + worst
    assert redis_server.budget_spent("fleet:all") == spent
    # The budget was used: when the last call was refused, what was left could not take one
    # worst case, and at most the 8 calls in flight then gave part of theirs back.
    assert spent > cap - 9 * worst
    assert len(answered) > 15


async def test_a_process_alone_keeps_to_its_share_of_each_budget_and_steps_down_against_it(
    tmp_path: Path,
) -> None:
    """Three other processes were seen on the budgets; Redis dies, and comes back."""
    server = RedisServer(tmp_path, persist=True).start()
    limits = RedisLimitStore(server.url, retry_interval=0.05)
    budgets = limits.budgets()
    workers = "polythink:{polythink-budget}:workers"
    for other in ("other-a", "other-b", "other-c"):
        assert server.command("ZADD", workers, "9999999999999", other) == ":1"
    exact = Line("exact:all", 1000, "day")
    try:
        with Simulator() as sim:
            source = Source("openai", "gpt-5.5", api_key="sim", base_url=sim.base_url("openai"))
            (plan,) = await Client([source], budgets=[Budget(1.0)]).plan(
                PROMPT, reasoning_effort="high", max_tokens=400
            )
            assert plan.worst_case is not None
            w = round(plan.worst_case * 1e9)
            budget = Budget(100 * w / 1e9, name="share", step_down_at=0.5, floor="medium")
            line = budget.line("all")
            assert line.limit == 100 * w
            async with Client([source], limits=limits, budgets=[budget]) as client:
                # Reading counts the live workers without joining them; reserving joins.
                await budgets.peek([exact])
                assert budgets.share.workers == 3
                # Last read before the outage: 400 of 1000 spent, 40 % of the other budget.
                assert (await budgets.reserve([exact], 400)).taken
                assert (await budgets.reserve([line], 40 * w)).taken
                assert budgets.share.workers == 4
                assert server.process is not None
                server.process.kill()
                server.process.wait(10)
                server.process = None
                # Its share: a quarter of the 600 left, counted as a quarter of the 1000 of
                # which its part of the 400 spent (100) is used.
                (tally,) = await budgets.peek([exact])
                assert (tally.spent, tally.share, tally.workers) == (100, 250, 4)
                assert budgets.alone
                first = await budgets.reserve([exact], 150)
                assert first.taken
                assert not first.shared
                assert not (await budgets.reserve([exact], 1)).taken
                # A call that cost less gives back what it did not use; the share takes it.
                assert await budgets.settle([exact], first, -50) == [500]
                assert (await budgets.reserve([exact], 50)).taken
                assert not (await budgets.reserve([exact], 1)).taken
                # 5 % of the other budget spent alone counts as 4 x 5 % for the fleet: 60 %
                # spent, so high steps down to medium (from 50 %; low from 66.7 %).
                assert (await budgets.reserve([line], 5 * w)).taken
                (plan,) = await client.plan(PROMPT, reasoning_effort="high", max_tokens=400)
                (state,) = plan.budgets
                assert (state.limit, state.spent) == (25 * w / 1e9, 15 * w / 1e9)
                assert plan.applied is Effort.MEDIUM
                assert any("keeps to its share, 1/4" in reason for reason in plan.reasons)
                answer = await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
                assert answer.step_down is not None
                assert answer.step_down.spent == pytest.approx(0.6)
                assert answer.applied_effort is Effort.MEDIUM
                # It spends at most the 10 worst cases left of its share (at medium, the
                # budget's floor), then is refused ...
                answered = [answer]
                error = None
                for _ in range(40):
                    try:
                        answered.append(
                            await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
                        )
                    except BudgetExceededError as exc:
                        error = exc
                        break
                assert error is not None
                costs = [round(a.cost.total * 1e9) for a in answered if a.cost is not None]
                assert len(costs) == len(answered)
                # ... less than a (medium) worst case left: between 9 and 10 of them spent.
                assert 9 * w < sum(costs) <= 10 * w
                assert {a.applied_effort for a in answered} == {Effort.MEDIUM}
                assert (error.limit, error.window) == (25 * w / 1e9, "day")
                assert error.spent == pytest.approx((15 * w + sum(costs)) / 1e9)
                assert "Redis does not answer, so this process keeps to its share, 1/4" in str(
                    error
                )
                # Back: what it spent alone is added to Redis with its next reservation.
                server.start()
                await anyio.sleep(0.1)
                assert (await budgets.reserve([exact, line], 0)).taken
                assert not budgets.alone
                assert server.budget_spent("exact:all") == 400 + 150 - 50 + 50
                assert server.budget_spent("share:all") == 40 * w + 5 * w + sum(costs)
    finally:
        await limits.aclose()
        server.stop()


async def test_redis_killed_mid_run_leaves_four_processes_their_shares_of_what_remained(
    tmp_path: Path,
) -> None:
    """4 processes x 2 tasks call gpt-5.5 at high (max_tokens 400) on one $0.60 daily budget
    until it refuses them; Redis is killed once 40 % of it is spent, and stays away.

    Each process then keeps to a quarter of what the budget had left when it last read it,
    so the fleet spends S_k + sum over processes of (L - S_i) / 4, where S_k is the spend on
    Redis at the kill and S_i what process i last read: at most L plus a quarter of what
    each process's reading missed (the calls the others reserved after it). Every process
    reads at each of its calls, so that is at most the other tasks' calls in flight at the
    kill: the bound held here is L + 8 worst cases (every task's call in flight). Counting
    on from its last reading instead, each process could spend all that was left: about
    S_k + 4 (L - S_k), 2.8 L."""
    server = RedisServer(tmp_path).start()
    usd = 0.60
    cap = round(usd * 1e9)
    worst = nano(table_price("gpt-5.5", "openai", input_tokens=12, output_tokens=400))
    try:
        with Simulator(Settings(latency=0.05)) as sim:
            plan = {
                "redis": server.url,
                "retry_interval": 0.2,
                "base_url": sim.base_url("openai"),
                "usd": usd,
                "name": "outage-fleet",
                "tasks": 2,
                "calls": 400,
                "effort": "high",
                "max_tokens": 400,
                "wait_go": True,
                "log": True,
            }
            workers = [spawn(plan, "tests.budget_worker") for _ in range(4)]
            await go_together(workers)
            deadline = time.monotonic() + 20
            while (at_kill := server.budget_spent("outage-fleet:all")) < 0.4 * cap:
                assert time.monotonic() < deadline, at_kill
                await anyio.sleep(0.005)
            assert server.process is not None
            server.process.kill()  # SIGKILL, mid-run
            server.process.wait(10)
            server.process = None
            outputs = [await anyio.to_thread.run_sync(w.communicate, None, 30) for w in workers]
    finally:
        server.stop()
    records = []
    for worker, (out, _) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, outputs
        records += [json.loads(line) for line in out.splitlines() if '"call"' in line]
    answered = [r for r in records if r["ok"]]
    spent = sum(charge(r) for r in answered)
    assert cap * 0.4 <= at_kill < cap
    assert spent <= cap + 8 * worst, (spent, cap, at_kill)
    # The shares were used: each process stopped with less than a call's worst case (and
    # what its last calls gave back) left of its quarter.
    assert spent > cap - 8 * worst, (spent, cap, at_kill)
    refused = [r for r in records if not r["ok"]]
    assert len(refused) == 8  # every task ended refused, against its process's share
    for record in refused:
        assert "Redis does not answer, so this process keeps to its share, 1/4" in record["message"]
    for _, err in outputs:
        # Each process saw the four of them on the budget, and went on with a quarter.
        assert "spend budgets: alone with 1/4 of what each had left" in err, err


async def test_redis_killed_mid_run_counts_in_process_then_carries_it_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path, persist=True).start()
    caplog.set_level(logging.INFO, logger="polythink.redis")
    limits = RedisLimitStore(server.url, retry_interval=0.1)
    try:
        with Simulator() as sim:
            source = Source("openai", "gpt-5.5", api_key="sim", base_url=sim.base_url("openai"))
            # Every call here is the same, so each costs c; its worst case is w.
            async with Client([source]) as plain:
                answer = await plain.complete(PROMPT, reasoning_effort="low", max_tokens=300)
            assert answer.cost is not None
            c = round(answer.cost.total * 1e9)
            (plan,) = await Client([source], budgets=[Budget(1.0, name="w")]).plan(
                PROMPT, reasoning_effort="low", max_tokens=300
            )
            assert plan.worst_case is not None
            w = round(plan.worst_case * 1e9)
            assert w > c
            # Room for 4 calls: the fourth starts at 3c, and 3c + w fits; a fifth does not.
            budget = Budget((3 * c + w + c // 2) / 1e9, name="outage")
            line = budget.line("all")
            async with Client([source], limits=limits, budgets=[budget]) as client:

                async def call() -> None:
                    await client.complete(PROMPT, reasoning_effort="low", max_tokens=300)

                for _ in range(3):
                    await call()
                assert server.budget_spent("outage:all") == 3 * c
                assert server.process is not None
                server.process.kill()  # SIGKILL: no goodbye
                server.process.wait(10)
                server.process = None
                # No call fails for the outage, and this process counts on from the shared
                # spend it last read: the fourth call fits, the fifth does not.
                await call()
                with pytest.raises(BudgetExceededError) as during:
                    await call()
                assert during.value.spent * 1e9 == pytest.approx(4 * c)
                (tally,) = await limits.budgets().fallback.peek([line])
                assert tally.spent == 4 * c
                server.start()
                await anyio.sleep(0.15)
                # The server kept what it had (append-only file); the call spent meanwhile
                # is added to it with the next call, which then finds the budget spent.
                (shared,) = await limits.budgets().peek([line])
                assert shared.spent == 3 * c
                with pytest.raises(BudgetExceededError) as after:
                    await call()
                assert after.value.spent * 1e9 == pytest.approx(4 * c)
                assert server.budget_spent("outage:all") == 4 * c
    finally:
        await limits.aclose()
        server.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "shared rate limits" in warnings[0]
    assert "does not answer" in warnings[0]


async def test_resolve_reads_what_a_budget_spent_on_redis(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    limits = RedisLimitStore(redis_server.url)
    budget = Budget(0.015, "day", step_down_at=0.5, name="cli-live")
    with Simulator() as sim:
        source = Source("openai", "gpt-5.5", api_key="sim", base_url=sim.base_url("openai"))
        async with Client([source], limits=limits, budgets=[budget]) as client:
            answer = await client.complete(PROMPT, reasoning_effort="high", max_tokens=300)
    spent = redis_server.budget_spent("cli-live:all")
    usage = answer.usage
    assert usage is not None
    assert spent == charge(
        {
            "model": answer.model,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
        }
    )
    assert spent > 7.5e6  # more than half of the 1.5 cents
    argv = ["resolve", "--provider", "openai", "--model", "gpt-5.5", "--effort", "high"]
    argv += ["--budget", "0.015/day", "--step-down-at", "0.5", "--budget-name", "cli-live"]
    code = await anyio.to_thread.run_sync(
        main, [*argv, "--max-tokens", "300", "--limits", redis_server.url, "--json"]
    )
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    (state,) = result["budgets"]
    assert (state["budget"], state["spent"]) == ("cli-live", spent / 1e9)
    # More than half spent: at least one step of gpt-5.5's medium, low, none.
    part = min(2, int((spent / 1.5e7 - 0.5) / 0.5 * 3))
    assert result["applied_effort"] == ("medium", "low", "none")[part]


async def test_a_plan_while_redis_never_answered_shows_the_budget_and_an_unknown_spend() -> None:
    """Port 1 refuses connections: the fleet's spend was never read, and there is no share."""
    url = "redis://127.0.0.1:1/0"
    source = Source("openai", "gpt-5.5", api_key="sk-budget-unknown-0123456789")
    async with Client([source], limits=RedisLimitStore(url), budgets=[Budget(1.0)]) as client:
        (plan,) = await client.plan(PROMPT, reasoning_effort="high", max_tokens=400)
    (state,) = plan.budgets
    assert (state.limit, state.spent, state.known, state.fraction) == (1.0, 0.0, False, 0.0)
    assert not plan.fits


def test_resolve_while_redis_never_answered_says_the_spend_is_unknown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "redis://127.0.0.1:1/0"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-budget-unknown-0123456789")
    argv = ["resolve", "--provider", "openai", "--model", "gpt-5.5", "--effort", "high"]
    assert main([*argv, "--limits", url, "--budget", "1/day"]) == 0
    out = capsys.readouterr().out
    assert "budget     'day' (all): $1 a day, spent unknown (Redis does not answer); " in out
