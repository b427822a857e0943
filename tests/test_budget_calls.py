"""Budgets through the client against the simulator: reservations, corrections, refusals,
step-downs, failover, the cache, scopes, introspection and telemetry.

Every expected price is computed here with genai-prices itself (``calc_price`` on the usage
the simulator reported, or on the worst case the layer's rule defines: the prompt as the
rate limiter estimates it plus the output ceiling, all as output), never read back from
polythink's pricing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from polythink import Budget, BudgetExceededError, Client, Effort, Source
from polythink.backends.local import LocalBudgets
from polythink.budgets import account_id
from polythink.errors import RequestTimeoutError, StreamInterruptedError, TransientError
from polythink.middleware import semconv
from polythink.reasoning.resolve import TIER_BUDGET_TOKENS
from polythink.simulator import Simulator
from polythink.simulator.behaviour import REASONING_TOKENS
from polythink.simulator.faults import Fault, FaultPlan
from polythink.types import Response
from tests.budget_support import PROMPT, PROMPT_TOKENS, Clock, Recording, fresh_budgets, nano
from tests.budget_support import table_price as priced
from tests.test_telemetry import Otel


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as running:
        yield running


@pytest.fixture(autouse=True)
def no_faults(sim: Simulator) -> Iterator[None]:
    yield
    sim.settings.faults = None
    sim.settings.latency = 0.0


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Recording:
    return fresh_budgets(monkeypatch)


def _source(sim: Simulator, provider: str = "openai", model: str = "gpt-5.5", **kw: Any) -> Source:
    return Source(provider, model, api_key="sim", base_url=sim.base_url(provider), **kw)


def _charged(response: Response, provider: str) -> int:
    usage = response.usage
    assert usage is not None
    return nano(
        priced(
            response.model,
            provider,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )
    )


@pytest.mark.anyio
async def test_a_call_reserves_its_worst_case_and_is_corrected_to_its_cost(
    sim: Simulator, store: Recording
) -> None:
    # gpt-5.5 sends max_tokens as max_completion_tokens, which holds reasoning and answer.
    worst = nano(priced("gpt-5.5", "openai", input_tokens=PROMPT_TOKENS, output_tokens=400))
    async with Client([_source(sim)], budgets=[Budget(1.0)]) as client:
        response = await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
    cost = _charged(response, "openai")
    assert store.reserved == [(["day:all"], worst, True)]
    assert store.settled == [(["day:all"], cost - worst)]
    assert await store.spent("day:all") == cost
    assert response.cost is not None
    assert response.step_down is None


@pytest.mark.anyio
async def test_a_budget_wire_reserves_the_raised_ceiling(sim: Simulator, store: Recording) -> None:
    # claude-haiku-4-5 thinks with budget_tokens: the ceiling sent is max_tokens plus the
    # tier's budget (16,384 for high), within the model's 64,000-token maximum output.
    ceiling = 1000 + TIER_BUDGET_TOKENS[Effort.HIGH]
    worst = nano(
        priced("claude-haiku-4-5", "anthropic", input_tokens=PROMPT_TOKENS, output_tokens=ceiling)
    )
    source = _source(sim, "anthropic", "claude-haiku-4-5")
    async with Client([source], budgets=[Budget(5.0, model="*")]) as client:
        response = await _stream_done(client, PROMPT, reasoning_effort="high", max_tokens=1000)
    key = "day:model=*:claude-haiku-4-5"  # the budget's name, then the scope value
    assert store.reserved == [([key], worst, True)]
    assert await store.spent(key) == _charged(response, "anthropic")


async def _stream_done(client: Client, *args: Any, **kwargs: Any) -> Response:
    final = None
    async for event in client.stream(*args, **kwargs):
        if event.type == "done":
            final = event.response
    assert final is not None
    return final


@pytest.mark.anyio
async def test_a_stream_cut_early_is_charged_what_its_usage_cost(
    sim: Simulator, store: Recording
) -> None:
    # Gemini reports usage with its chunks: the cut stream's usage is what it cost.
    sim.settings.faults = FaultPlan([Fault.reset(after_chunks=6)])
    source = _source(sim, "gemini", "gemini-2.5-flash", max_retries=0)
    async with Client([source], budgets=[Budget(1.0)]) as client:
        with pytest.raises(StreamInterruptedError) as caught:
            await _stream_done(client, PROMPT, reasoning_effort="low", max_tokens=500)
    usage = caught.value.partial.usage
    assert usage is not None
    assert usage.output_tokens == REASONING_TOKENS[Effort.LOW]
    cost = nano(
        priced(
            "gemini-2.5-flash",
            "google",
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )
    )
    ((_, reserved, _),) = store.reserved
    assert store.settled == [(["day:all"], cost - reserved)]
    assert await store.spent("day:all") == cost


@pytest.mark.anyio
async def test_a_stream_cut_without_usage_is_charged_what_was_streamed(
    sim: Simulator, store: Recording
) -> None:
    # OpenAI reports usage only at the end: the prompt as estimated, the output at one token
    # per 4 characters of what arrived.
    sim.settings.faults = FaultPlan([Fault.reset(after_chunks=5)])
    async with Client([_source(sim, max_retries=0)], budgets=[Budget(1.0)]) as client:
        with pytest.raises(StreamInterruptedError) as caught:
            await _stream_done(client, PROMPT, reasoning_effort="none", max_tokens=500)
    streamed = caught.value.partial.text
    assert streamed
    output = math.ceil(len(streamed) / 4)
    cost = nano(priced("gpt-5.5", "openai", input_tokens=PROMPT_TOKENS, output_tokens=output))
    assert await store.spent("day:all") == cost


@pytest.mark.anyio
async def test_a_stream_the_caller_closes_is_charged_what_was_streamed(
    sim: Simulator, store: Recording
) -> None:
    async with Client([_source(sim)], budgets=[Budget(1.0)]) as client:
        seen = ""
        stream = client.stream(PROMPT, reasoning_effort="none", max_tokens=500)
        async for event in stream:
            if event.type == "text":
                seen += event.text
                if len(seen) > 12:
                    break
        await stream.aclose()
    output = math.ceil(len(seen) / 4)
    cost = nano(priced("gpt-5.5", "openai", input_tokens=PROMPT_TOKENS, output_tokens=output))
    assert await store.spent("day:all") == cost


@pytest.mark.anyio
async def test_an_error_answer_costs_nothing_and_a_timeout_keeps_the_worst_case(
    sim: Simulator, store: Recording
) -> None:
    worst = nano(priced("gpt-5.5", "openai", input_tokens=PROMPT_TOKENS, output_tokens=300))
    source = _source(sim, max_retries=0)
    async with Client([source], budgets=[Budget(1.0)]) as client:
        sim.settings.faults = FaultPlan([Fault.http(500)])
        with pytest.raises(TransientError):
            await client.complete(PROMPT, reasoning_effort="low", max_tokens=300)
        assert await store.spent("day:all") == 0
        sim.settings.faults = None
        sim.settings.latency = 0.5
        with pytest.raises(RequestTimeoutError):
            await client.complete(PROMPT, reasoning_effort="low", max_tokens=300, timeout=0.1)
    # The provider may have run the timed-out call to its end: its worst case stays.
    assert await store.spent("day:all") == worst


@pytest.mark.anyio
async def test_a_cancelled_complete_keeps_its_worst_case(sim: Simulator, store: Recording) -> None:
    worst = nano(priced("gpt-5.5", "openai", input_tokens=PROMPT_TOKENS, output_tokens=300))
    sim.settings.latency = 0.5
    async with Client([_source(sim)], budgets=[Budget(1.0)]) as client:
        with anyio.move_on_after(0.1):
            await client.complete(PROMPT, reasoning_effort="low", max_tokens=300)
    assert await store.spent("day:all") == worst


@pytest.mark.anyio
async def test_a_call_that_does_not_fit_is_refused_unsent(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(1_796_083_200.0 + 3600 * 5 + 42)  # 2026-12-01 05:00:42 UTC
    store = fresh_budgets(monkeypatch, LocalBudgets(clock))
    worst = nano(priced("gpt-5.5", "openai", input_tokens=PROMPT_TOKENS, output_tokens=400))
    budget = Budget(worst * 1.5 / 1e9, "hour", name="tight")
    sent = sim.stats.requests
    async with Client([_source(sim)], budgets=[budget]) as client:
        first = await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
        spent = _charged(first, "openai")
        assert spent > budget.usd * 1e9 - worst  # what is left is below one worst case
        with pytest.raises(BudgetExceededError) as caught:
            await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
    error = caught.value
    assert sim.stats.requests == sent + 1
    assert (error.budget, error.scope, error.window, error.limit) == (
        "tight",
        "all",
        "hour",
        budget.usd,
    )
    assert error.spent == spent / 1e9
    assert error.remaining == pytest.approx(budget.usd - spent / 1e9)
    assert error.needed == worst / 1e9
    assert error.resets_at == 1_796_083_200.0 + 3600 * 6
    assert (error.provider, error.source_index, error.error_type) == (
        "openai",
        0,
        "budget_exceeded",
    )
    assert error.status_code is None
    assert "2026-12-01T06:00:00Z" in str(error)
    assert await store.spent("tight:all", "hour") == spent


@pytest.mark.anyio
async def test_the_window_rolls_over_with_the_clock(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(1_796_083_200.0 - 30)  # 30 s before 2026-12-01 00:00 UTC
    store = fresh_budgets(monkeypatch, LocalBudgets(clock))
    worst = nano(priced("gpt-5.5", "openai", input_tokens=PROMPT_TOKENS, output_tokens=400))
    budget = Budget(worst * 1.5 / 1e9, "minute", name="per-minute")
    async with Client([_source(sim)], budgets=[budget]) as client:
        await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
        with pytest.raises(BudgetExceededError) as caught:
            await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
        assert caught.value.resets_at == 1_796_083_200.0
        clock.now += 31
        again = await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
    assert await store.spent("per-minute:all", "minute") == _charged(again, "openai")


@pytest.mark.anyio
async def test_failover_goes_to_a_source_whose_budgets_allow_the_call(
    sim: Simulator, store: Recording
) -> None:
    capped = Budget(1e-6, model="gpt-5.5")
    sources = [_source(sim), _source(sim, "anthropic", "claude-sonnet-4-6")]
    async with Client(sources, budgets=[capped, Budget(1.0, model="*")]) as client:
        response = await client.complete(PROMPT, reasoning_effort="medium", max_tokens=300)
        assert response.source_index == 1
        assert any("BudgetExceededError" in w and "budget_exceeded" in w for w in response.warnings)
        only = Client([_source(sim)], budgets=[capped])
        async with only:
            with pytest.raises(BudgetExceededError) as caught:
                await only.complete(PROMPT, reasoning_effort="medium", max_tokens=300)
    assert caught.value.budget == "day:model=gpt-5.5"
    assert await store.spent("day:model=*:claude-sonnet-4-6") == _charged(response, "anthropic")
    assert await store.spent("day:model=gpt-5.5:gpt-5.5") == 0


@pytest.mark.anyio
async def test_the_tightest_budget_refuses(sim: Simulator, store: Recording) -> None:
    worst = nano(priced("gpt-5.5", "openai", input_tokens=PROMPT_TOKENS, output_tokens=400))
    roomy = Budget(worst * 0.9 / 1e9, name="roomy")
    tight = Budget(worst * 0.5 / 1e9, tag="*")
    async with Client([_source(sim)], budgets=[roomy, tight]) as client:
        with pytest.raises(BudgetExceededError) as caught:
            await client.complete(PROMPT, reasoning_effort="high", max_tokens=400, tag="acme")
    assert (caught.value.budget, caught.value.scope) == ("day:tag=*", "acme")


@pytest.mark.anyio
async def test_a_budget_running_low_steps_the_tier_down_until_it_refuses(
    sim: Simulator, store: Recording
) -> None:
    budget = Budget(0.05, step_down_at=0.5, name="stepping")
    applied: list[Effort | None] = []
    refused = None
    async with Client([_source(sim)], budgets=[budget]) as client:
        for _ in range(100):
            try:
                response = await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
            except BudgetExceededError as exc:
                refused = exc
                break
            applied.append(response.applied_effort)
            assert response.requested_effort is Effort.HIGH
            step = response.step_down
            if response.applied_effort is Effort.HIGH:
                assert step is None
                continue
            assert step is not None
            assert (step.requested, step.applied, step.budget) == (
                Effort.HIGH,
                response.applied_effort,
                "stepping",
            )
            assert step.spent >= 0.5
            assert response.warnings[-1].startswith("budget: 'stepping' is ")
            assert response.usage is not None
            assert response.usage.reasoning_tokens == REASONING_TOKENS[step.applied]
    assert refused is not None
    assert refused.budget == "stepping"
    # gpt-5.5 accepts none low medium high: from high the ladder is medium, low, none, in
    # that order, each tier for a run of calls, never back up.
    order = [Effort.HIGH, Effort.MEDIUM, Effort.LOW, Effort.NONE]
    ranks = [order.index(tier) for tier in applied if tier is not None]
    assert ranks == sorted(ranks)
    assert {Effort.HIGH, Effort.MEDIUM, Effort.LOW} <= set(applied)
    assert await store.spent("stepping:all") <= 0.05 * 1e9


@pytest.mark.anyio
async def test_a_cache_hit_spends_nothing_and_a_stepped_answer_is_not_stored(
    sim: Simulator, store: Recording, tmp_path: Any
) -> None:
    budget = Budget(1.0, name="cached")
    async with Client([_source(sim)], budgets=[budget], cache=tmp_path / "c") as client:
        first = await client.complete(PROMPT, reasoning_effort="low", max_tokens=300)
        hit = await client.complete(PROMPT, reasoning_effort="low", max_tokens=300)
        assert hit.cache_hit
        assert await store.spent("cached:all") == _charged(first, "openai")
        assert len(store.reserved) == 1
    # A budget that steps from the first dollar: its answers are never stored.
    eager = Budget(1.0, step_down_at=0.0, name="eager")
    await store.inner.reserve([eager.line("all")], 100_000_000)
    async with Client([_source(sim)], budgets=[eager], cache=tmp_path / "d") as client:
        stepped = await client.complete(PROMPT, reasoning_effort="high", max_tokens=300)
        again = await client.complete(PROMPT, reasoning_effort="high", max_tokens=300)
    assert stepped.step_down is not None
    assert not again.cache_hit


@pytest.mark.anyio
async def test_an_unpriced_model_is_refused_or_let_through_uncounted(
    sim: Simulator, store: Recording
) -> None:
    source = _source(sim, "qwen", "qwen3.7-plus")  # genai-prices has no qwen prices
    sent = sim.stats.requests
    async with Client([source], budgets=[Budget(1.0)]) as client:
        with pytest.raises(BudgetExceededError) as caught:
            await client.complete(PROMPT, reasoning_effort="low", max_tokens=300)
    assert caught.value.error_type == "unpriced"
    assert "no price for qwen model 'qwen3.7-plus'" in caught.value.message
    assert sim.stats.requests == sent
    async with Client([source], budgets=[Budget(1.0, unpriced="allow")]) as client:
        response = await client.complete(PROMPT, reasoning_effort="low", max_tokens=300)
    assert response.warnings[-1].startswith("budget: the price table has no price")
    assert store.reserved == []
    # An unbounded ceiling is unpriced too: no max_tokens and no known maximum output.
    async with Client([_source(sim, "glm", "glm-5.3-flash")], budgets=[Budget(1.0)]) as client:
        with pytest.raises(BudgetExceededError, match="no known maximum output"):
            await client.complete(PROMPT, reasoning_effort="low")


@pytest.mark.anyio
async def test_scopes_count_what_they_match(sim: Simulator, store: Recording) -> None:
    budgets = [
        Budget(1.0, tag="*"),
        Budget(1.0, tag="acme", name="acme-only"),
        Budget(1.0, tier="high"),
        Budget(1.0, account="openai"),
        Budget(1.0, account="anthropic"),
    ]
    source = _source(sim)
    async with Client([source], budgets=budgets) as client:
        acme = await client.complete(PROMPT, reasoning_effort="high", max_tokens=300, tag="acme")
        beta = await client.complete(PROMPT, reasoning_effort="low", max_tokens=300, tag="beta")
        plain = await client.complete(PROMPT, reasoning_effort="low", max_tokens=300)
        with pytest.raises(ValueError, match="tag must be"):
            await client.complete(PROMPT, tag="a\tb")
    a, b, p = (_charged(r, "openai") for r in (acme, beta, plain))
    assert await store.spent("day:tag=*:acme") == a
    assert await store.spent("day:tag=*:beta") == b
    assert await store.spent("acme-only:acme") == a
    assert await store.spent("day:tier=high:high") == a
    # The account: provider, base URL and the key's fingerprint; only openai's budget applies.
    account = Budget(1.0, account="openai").key(account_id("openai", source.endpoint, "sim"))
    assert await store.spent(account) == a + b + p
    assert [keys for keys, _, _ in store.reserved] == [
        [account, "day:tag=*:acme", "acme-only:acme", "day:tier=high:high"],
        [account, "day:tag=*:beta"],
        [account],
    ]


@pytest.mark.anyio
async def test_clients_naming_a_budget_share_it(sim: Simulator, store: Recording) -> None:
    async with Client([_source(sim)], budgets=[Budget(1.0, name="shared")]) as one:
        first = await one.complete(PROMPT, reasoning_effort="low", max_tokens=300)
    async with Client([_source(sim)], budgets=[Budget(2.0, name="shared")]) as two:
        second = await two.complete(PROMPT, reasoning_effort="high", max_tokens=300)
    assert await store.spent("shared:all") == _charged(first, "openai") + _charged(second, "openai")
    with pytest.raises(ValueError, match="both named 'x' but differ"):
        Client([_source(sim)], budgets=[Budget(1, name="x"), Budget(2, name="x")])
    with pytest.raises(ValueError, match="wrap the one budget"):
        Client([_source(sim)], budgets=Budget(1))  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_plan_shows_the_tier_a_call_would_get_now_and_why(
    sim: Simulator, store: Recording
) -> None:
    budget = Budget(0.20, step_down_at=0.8, name="plan")
    sources = [_source(sim), _source(sim, "anthropic", "claude-sonnet-4-6")]
    async with Client(sources, budgets=[budget, Budget(1.0, model="gpt-5.5")]) as client:
        (calm, other) = await client.plan(reasoning_effort="high", max_tokens=400)
        await store.inner.reserve([budget.line("all")], 176_000_000)  # 88 % spent
        (pressed, _) = await client.plan(PROMPT, reasoning_effort="high", max_tokens=400)
        await store.inner.reserve([budget.line("all")], 23_990_000)
        (broke, _) = await client.plan(PROMPT, reasoning_effort="high", max_tokens=400)
    assert (calm.applied, calm.step_down, calm.fits) == (Effort.HIGH, None, True)
    assert [s.budget for s in calm.budgets] == ["plan", "day:model=gpt-5.5"]
    assert [s.budget for s in other.budgets] == ["plan"]
    assert calm.payload == {"reasoning_effort": "high"}
    # 88 % is past 0.8 + 0.2/3: two steps of medium, low, none.
    assert pressed.applied is Effort.LOW
    assert pressed.step_down is not None
    assert pressed.step_down.spent == pytest.approx(0.88)
    assert pressed.payload == {"reasoning_effort": "low"}
    assert pressed.reasons[0] == (
        "budget: 'plan' is 88.0% spent (steps down from 80%): reasoning_effort='high' was sent "
        "as 'low'"
    )
    assert pressed.budgets[0].spent == pytest.approx(0.176)
    worst = nano(priced("gpt-5.5", "openai", input_tokens=PROMPT_TOKENS, output_tokens=400))
    assert pressed.worst_case == worst / 1e9
    assert pressed.fits
    assert broke.applied is Effort.NONE
    assert not broke.fits
    assert "it would raise BudgetExceededError" in broke.reasons[-1]


@pytest.mark.anyio
async def test_budget_metrics_and_spans(sim: Simulator, store: Recording) -> None:
    otel = Otel()
    budget = Budget(1.0, step_down_at=0.0, name="metered")
    async with Client(
        [_source(sim)],
        budgets=[budget],
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
    ) as client:
        await store.inner.reserve([budget.line("all")], 100_000_000)  # 10 % spent
        stepped = await client.complete(PROMPT, reasoning_effort="high", max_tokens=300)
    cost = _charged(stepped, "openai")
    (spend,) = otel.points(semconv.POLYTHINK_BUDGET_SPEND)
    assert dict(spend.attributes) == {
        semconv.POLYTHINK_BUDGET_NAME: "metered",
        semconv.POLYTHINK_BUDGET_SCOPE: "all",
    }
    assert spend.value == pytest.approx(cost / 1e9)
    (remaining,) = otel.points(semconv.POLYTHINK_BUDGET_REMAINING)
    assert remaining.value == pytest.approx(1.0 - 0.1 - cost / 1e9)
    (step,) = otel.points(semconv.POLYTHINK_BUDGET_STEP_DOWNS)
    assert dict(step.attributes) == {
        semconv.POLYTHINK_REQUESTED_EFFORT: "high",
        semconv.POLYTHINK_APPLIED_EFFORT: "medium",
        semconv.POLYTHINK_BUDGET_NAME: "metered",
        semconv.POLYTHINK_APPLIED_SERVICE_TIER: "unset",
    }
    assert step.value == 1
    span = otel.span()
    assert span.attributes is not None
    assert span.attributes[semconv.POLYTHINK_APPLIED_REASON] == "budget"
    assert span.attributes[semconv.POLYTHINK_BUDGET_NAME] == "metered"
    assert span.attributes[semconv.POLYTHINK_REQUESTED_EFFORT] == "high"
    assert span.attributes[semconv.POLYTHINK_APPLIED_EFFORT] == "medium"


def test_the_sync_client_takes_budgets_tags_and_plans(sim: Simulator) -> None:
    from polythink import SyncClient

    store = LocalBudgets()
    budget = Budget(1.0, tag="*", step_down_at=0.5)
    with SyncClient([_source(sim)], budgets=[budget], budget_store=store) as client:
        response = client.complete(PROMPT, reasoning_effort="low", max_tokens=300, tag="acme")
        (plan,) = client.plan(PROMPT, reasoning_effort="low", max_tokens=300, tag="acme")
    assert [(s.budget, s.scope) for s in plan.budgets] == [("day:tag=*", "acme")]
    assert plan.budgets[0].spent == _charged(response, "openai") / 1e9


@pytest.mark.anyio
async def test_an_unpriced_refusal_says_what_was_spent_and_when_its_window_resets(
    sim: Simulator,
) -> None:
    clock = Clock(1_796_083_200.0 + 5)  # 2026-12-01 00:00:05 UTC
    store = LocalBudgets(clock)
    budget = Budget(1.0, "hour")
    await store.reserve([budget.line("all")], 250_000_000)
    source = _source(sim, "qwen", "qwen3.7-plus")
    async with Client([source], budgets=[budget], budget_store=store) as client:
        with pytest.raises(BudgetExceededError) as caught:
            await client.complete(PROMPT, reasoning_effort="low", max_tokens=300)
    error = caught.value
    assert (error.error_type, error.needed, error.spent) == ("unpriced", None, 0.25)
    assert error.resets_at == 1_796_083_200.0 + 3600
