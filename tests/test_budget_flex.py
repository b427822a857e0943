"""A daily budget's three levers in order: reasoning steps down, then calls move to flex, then
the budget refuses — each on the response and in the metrics.

An agent loop asks gpt-5.5 for ``high`` against the simulator under ``Budget(0.05,
step_down_at=0.4, flex_at=0.7)``. Prices are genai-prices' own (``calc_price`` with the flex
price context), never read back from polythink.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest

from polythink import (
    Budget,
    BudgetExceededError,
    CapacityUnavailableError,
    Client,
    Effort,
    ServiceTier,
    Source,
)
from polythink.config import options_from_toml
from polythink.middleware import semconv
from polythink.simulator import Simulator
from polythink.types import Response
from tests.budget_support import PROMPT, Recording, fresh_budgets, nano
from tests.test_telemetry import Otel


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as running:
        yield running


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Recording:
    return fresh_budgets(monkeypatch)


def _source(sim: Simulator, provider: str = "openai", model: str = "gpt-5.5", **kw: Any) -> Source:
    return Source(provider, model, api_key="sim", base_url=sim.base_url(provider), **kw)


def _table(response: Response, **context: str) -> int:
    usage = response.usage
    assert usage is not None
    found = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
        ),
        response.model,
        provider_id="openai",
        price_context=context or None,
    )
    return nano(found.total_price)


@pytest.mark.anyio
async def test_an_agent_steps_down_then_moves_to_flex_then_is_refused(
    sim: Simulator, store: Recording
) -> None:
    otel = Otel()
    budget = Budget(0.05, step_down_at=0.4, flex_at=0.7, name="agent")
    phases: list[str] = []
    responses: list[Response] = []
    async with Client(
        [_source(sim)],
        budgets=[budget],
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    ) as client:
        for _ in range(200):
            try:
                response = await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
            except BudgetExceededError as exc:
                refused = exc
                phases.append("refused")
                break
            responses.append(response)
            step = response.step_down
            if step is None:
                phases.append("high")
            elif step.service_tier is None:
                phases.append("stepped")
            else:
                phases.append("flex")
        else:
            raise AssertionError("the budget never refused")
    # The three levers, in order, each at least once, never going back.
    runs = [phase for i, phase in enumerate(phases) if i == 0 or phases[i - 1] != phase]
    assert runs == ["high", "stepped", "flex", "refused"]
    stepped = [r for r in responses if r.step_down is not None and r.step_down.service_tier is None]
    assert [r.applied_effort for r in stepped] == sorted(
        (r.applied_effort for r in stepped), key=lambda e: -(e.rank if e else 0)
    )
    assert {r.applied_effort for r in stepped} == {Effort.MEDIUM, Effort.LOW, Effort.NONE}
    for response in stepped:
        assert response.requested_effort is Effort.HIGH
        assert response.applied_service_tier is None
        assert response.cost is not None
        assert nano(response.cost.total) == _table(response)
    flexed = [r for r in responses if r.step_down is not None and r.step_down.service_tier]
    for response in flexed:
        step = response.step_down
        assert step is not None
        assert (step.budget, step.flex_at, step.step_down_at) == ("agent", 0.7, 0.4)
        assert step.spent >= 0.7
        assert (response.applied_effort, response.applied_service_tier) == (
            Effort.NONE,
            ServiceTier.FLEX,
        )
        assert response.service_tier == "flex"
        assert response.requested_effort is Effort.HIGH
        # Priced, and charged to the budget, at flex: half the standard price on gpt-5.5.
        assert response.cost is not None
        assert nano(response.cost.total) == _table(response, service_tier="flex")
        assert _table(response, service_tier="flex") * 2 == pytest.approx(_table(response), abs=2)
        assert response.warnings[-1].startswith(
            f"budget: 'agent' is {step.spent:.1%} spent (steps down from 40%, moves calls to "
            "flex from 70%): reasoning_effort='high' was sent as 'none'; the call was moved to "
            "service_tier='flex'"
        )
    # The refusal names the cheapest call it could not afford: stepped down, at flex.
    assert refused.budget == "agent"
    assert "reasoning_effort=high stepped down to none, service_tier=flex" in refused.message
    assert refused.needed is not None
    assert refused.needed > refused.remaining
    # The metrics show every step: the step counter by reasoning tier and service tier.
    steps = {
        (
            p.attributes[semconv.POLYTHINK_APPLIED_EFFORT],
            p.attributes[semconv.POLYTHINK_APPLIED_SERVICE_TIER],
        ): p.value
        for p in otel.points(semconv.POLYTHINK_BUDGET_STEP_DOWNS)
        if p.attributes is not None
    }
    assert steps[("none", "flex")] == len(flexed)
    assert sum(v for (_, tier), v in steps.items() if tier == "unset") == len(stepped)
    costs = {
        p.attributes[semconv.POLYTHINK_SERVED_SERVICE_TIER]: p.value
        for p in otel.points(semconv.POLYTHINK_CLIENT_COST)
        if p.attributes is not None
    }
    assert costs["flex"] == pytest.approx(sum(r.cost.total for r in flexed if r.cost))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "moved"),
    [("openai", "gpt-5.5", ServiceTier.FLEX), ("anthropic", "claude-haiku-5-5", None)],
)
async def test_a_budget_moves_to_flex_only_where_the_source_has_it(
    sim: Simulator, store: Recording, provider: str, model: str, moved: ServiceTier | None
) -> None:
    # Half spent, past flex_at: gpt-5.5 moves to flex; Anthropic has no flex tier, so its
    # call keeps its tier (and is refused in time, as any call).
    budget = Budget(1.0, flex_at=0.1, name=f"flex-{provider}")
    await store.inner.reserve([budget.line("all")], nano(Decimal("0.5")))
    async with Client([_source(sim, provider, model)], budgets=[budget]) as client:
        (plan,) = await client.plan(PROMPT, max_tokens=100)
        response = await client.complete(PROMPT, max_tokens=100)
    assert plan.service_tier is moved
    assert response.applied_service_tier is moved
    assert (response.step_down is not None) == (moved is not None)


@pytest.mark.anyio
async def test_plan_shows_the_move_to_flex(sim: Simulator, store: Recording) -> None:
    budget = Budget(1.0, flex_at=0.5, name="plan")
    async with Client([_source(sim)], budgets=[budget]) as client:
        before = (await client.plan(PROMPT, reasoning_effort="high", max_tokens=400))[0]
        assert (before.service_tier, before.step_down) == (None, None)
        await store.inner.reserve([budget.line("all")], nano(Decimal("0.6")))
        after = (await client.plan(PROMPT, reasoning_effort="high", max_tokens=400))[0]
    assert after.service_tier is ServiceTier.FLEX
    assert after.step_down is not None
    assert after.step_down.service_tier is ServiceTier.FLEX
    assert after.budgets[0].flex_at == 0.5


def test_flex_at_is_checked_and_read_from_toml(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"flex_at \(0.5\) must be above step_down_at \(0.8\)"):
        Budget(1.0, step_down_at=0.8, flex_at=0.5)
    with pytest.raises(ValueError, match="flex_at must be a fraction from 0 to below 1"):
        Budget(1.0, flex_at=1.0)
    path = tmp_path / "client.toml"
    path.write_text(
        '[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\n\n'
        "[[budget]]\nusd = 5.0\nstep_down_at = 0.8\nflex_at = 0.9\n"
    )
    (budget,) = options_from_toml(path)["budgets"]
    assert (budget.step_down_at, budget.flex_at) == (0.8, 0.9)


@pytest.mark.anyio
async def test_a_call_a_budget_moved_to_flex_is_not_resent_at_standard(
    sim: Simulator, store: Recording
) -> None:
    # Standard would cost twice what the budget could afford: "no capacity" is raised (and
    # retried with backoff by the retry layer), never resent at standard.
    budget = Budget(1.0, flex_at=0.1, name="no-standard")
    await store.inner.reserve([budget.line("all")], nano(Decimal("0.5")))
    sim.settings.no_capacity = ("flex",)
    try:
        async with Client([_source(sim, max_retries=0)], budgets=[budget]) as client:
            with pytest.raises(CapacityUnavailableError) as caught:
                await client.complete(PROMPT, max_tokens=100)
    finally:
        sim.settings.no_capacity = ()
    assert caught.value.service_tier == "flex"
    # The reservation was given back: the provider charged nothing.
    assert await store.spent(budget.line("all").key) == nano(Decimal("0.5"))


@pytest.mark.anyio
async def test_plan_names_the_service_tier_without_budgets(sim: Simulator) -> None:
    async with Client([_source(sim, "anthropic", "claude-haiku-5-5")]) as client:
        (plan,) = await client.plan(PROMPT, service_tier="priority")
    assert plan.service_tier is ServiceTier.STANDARD
    assert plan.reasons[-1].startswith(
        "anthropic model 'claude-haiku-5-5' does not take service_tier='priority'"
    )
