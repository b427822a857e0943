"""Service tiers: one vocabulary resolved per provider and model, sent as each provider spells
it, read back from the answer, priced at the tier served, resent at standard on "no capacity".

Facts: ../shared/wire/CONTINUITY.md §4 (read 2026-12-04): OpenAI ``service_tier`` auto |
default | flex | priority, flex's 429 ``resource_unavailable``; Gemini top-level ``serviceTier``
and the ``x-gemini-service-tier`` response header; Vertex AI's
``X-Vertex-AI-LLM-Shared-Request-Type`` header and ``usageMetadata.trafficType``; Anthropic
``service_tier`` auto | standard_only and ``usage.service_tier``; Groq on_demand | flex |
performance and its 498; Azure's 400 on flex for a model without it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import genai_prices
import httpx
import pytest
import respx

from polythink import (
    CapacityUnavailableError,
    Client,
    ServiceTier,
    ServiceTierUnsupportedError,
    Source,
)
from polythink.config import sources_from_env, sources_from_toml
from polythink.middleware import semconv
from polythink.middleware.failover import counts_against
from polythink.pricing import price, tier_price_note
from polythink.providers import (
    AZURE_TIERS,
    PROVIDERS,
    VERTEX_TIERS,
    ProviderProfile,
    register_provider,
)
from polythink.reasoning.tiers import forget_refusals, resolve_tier, tiers_refused
from polythink.simulator import Simulator
from polythink.types import TierResolution, Usage
from tests.budget_support import nano
from tests.test_telemetry import Otel

HI = [{"role": "user", "content": "Why is the sky blue?"}]
T = ServiceTier


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as running:
        yield running


@pytest.fixture(autouse=True)
def plain(sim: Simulator) -> Iterator[None]:
    yield
    sim.settings.no_capacity = ()
    sim.settings.service_tiers = {}
    sim.stats.reset()
    forget_refusals()


@pytest.fixture
def vertex() -> Iterator[str]:
    """A Vertex-AI-like profile: the Gemini wire, tiers spelt as Vertex spells them."""
    register_provider(
        ProviderProfile(
            "vertex-tiers-test",
            "gemini",
            "https://vertex.invalid/v1",
            auth="x-goog-api-key",
            reasoning_wire="gemini",
            max_tokens_field="maxOutputTokens",
            reasoning_format="gemini",
            service_tiers=VERTEX_TIERS,
        )
    )
    yield "vertex-tiers-test"
    del PROVIDERS["vertex-tiers-test"]


@pytest.fixture
def azure() -> Iterator[str]:
    """An Azure-OpenAI-like profile: the Chat wire, tiers spelt and refused as Azure does."""
    register_provider(
        ProviderProfile(
            "azure-tiers-test",
            "openai_chat",
            "https://azure.invalid/openai/v1",
            max_tokens_field="max_completion_tokens",
            service_tiers=AZURE_TIERS,
        )
    )
    yield "azure-tiers-test"
    del PROVIDERS["azure-tiers-test"]


def _source(sim: Simulator, provider: str = "openai", model: str = "gpt-5.5", **kw: Any) -> Source:
    return Source(provider, model, api_key="sim", base_url=sim.base_url(provider), **kw)


# ---------------------------------------------------------------- resolution (pure)


@pytest.mark.parametrize(
    ("provider", "tier", "applied", "body"),
    [
        ("openai", "flex", T.FLEX, {"service_tier": "flex"}),
        ("openai", "standard", T.STANDARD, {"service_tier": "default"}),
        ("openai", "priority", T.PRIORITY, {"service_tier": "priority"}),
        ("openai", "auto", T.AUTO, {"service_tier": "auto"}),
        ("openai-responses", "flex", T.FLEX, {"service_tier": "flex"}),
        ("gemini", "flex", T.FLEX, {"serviceTier": "flex"}),
        ("gemini", "priority", T.PRIORITY, {"serviceTier": "priority"}),
        ("gemini", "auto", T.AUTO, {}),
        ("groq", "flex", T.FLEX, {"service_tier": "flex"}),
        ("groq", "standard", T.STANDARD, {"service_tier": "on_demand"}),
        ("groq", "priority", T.PRIORITY, {"service_tier": "performance"}),
        ("anthropic", "standard", T.STANDARD, {"service_tier": "standard_only"}),
        ("anthropic", "auto", T.AUTO, {"service_tier": "auto"}),
    ],
)
def test_each_provider_gets_the_tier_as_it_spells_it(
    provider: str, tier: str, applied: ServiceTier, body: dict[str, str]
) -> None:
    found = resolve_tier(tier, provider=provider, model="some-model")
    assert (found.requested, found.applied, dict(found.body), dict(found.headers)) == (
        T(tier),
        applied,
        body,
        {},
    )
    assert found.warnings == ()


def test_vertex_sends_the_tier_as_a_header_and_standard_as_nothing(vertex: str) -> None:
    flex = resolve_tier("flex", provider=vertex, model="gemini-4-argon")
    assert (dict(flex.body), dict(flex.headers)) == (
        {},
        {"X-Vertex-AI-LLM-Shared-Request-Type": "flex"},
    )
    standard = resolve_tier("standard", provider=vertex, model="gemini-4-argon")
    assert (standard.applied, dict(standard.body), dict(standard.headers)) == (T.STANDARD, {}, {})


def test_a_tier_the_provider_lacks_maps_to_the_nearest_with_a_warning() -> None:
    found = resolve_tier("priority", provider="anthropic", model="claude-haiku-5-5")
    assert (found.applied, dict(found.body)) == (T.STANDARD, {"service_tier": "standard_only"})
    assert found.warnings == (
        "anthropic model 'claude-haiku-5-5' does not take service_tier='priority' (it takes: "
        "standard); applied 'standard' by service_tier_fallback='nearest'",
    )
    flex = resolve_tier("flex", provider="anthropic", model="claude-haiku-5-5")
    assert flex.applied is T.STANDARD


def test_the_model_narrows_the_provider_and_ties_go_to_the_cheaper_tier() -> None:
    from polythink.reasoning.capability import Capability

    only_ends = Capability("m", ("none",), service_tiers=("flex", "priority"))
    found = resolve_tier("standard", provider="openai", model="m", capability=only_ends)
    assert (found.applied, dict(found.body)) == (T.FLEX, {"service_tier": "flex"})
    no_flex = Capability("m", ("none",), service_tiers=("standard", "priority"))
    assert resolve_tier("flex", provider="openai", model="m", capability=no_flex).applied is (
        T.STANDARD
    )


def test_error_and_drop_policies() -> None:
    with pytest.raises(ServiceTierUnsupportedError, match=r"it takes: standard\)") as caught:
        resolve_tier("flex", provider="anthropic", model="claude-haiku-5-5", policy="error")
    assert caught.value.error_type == "service_tier_unsupported"
    dropped = resolve_tier("flex", provider="anthropic", model="claude-haiku-5-5", policy="drop")
    assert (dropped.applied, dict(dropped.body)) == (None, {})
    assert "sent without one by service_tier_fallback='drop'" in dropped.warnings[0]


def test_a_provider_without_tiers_sends_nothing() -> None:
    flex = resolve_tier("flex", provider="deepseek", model="deepseek-v4-flash")
    assert (flex.applied, dict(flex.body), dict(flex.headers)) == (None, {}, {})
    assert flex.warnings == (
        "provider 'deepseek' has no service tiers: service_tier='flex' was not sent (the "
        "provider serves the call at its only tier)",
    )
    for quiet in ("standard", "auto"):
        assert resolve_tier(quiet, provider="deepseek", model="x") == TierResolution(T(quiet), None)
    with pytest.raises(ServiceTierUnsupportedError, match="has no service tiers"):
        resolve_tier("priority", provider="deepseek", model="x", policy="error")


def test_the_capacity_fallback_is_a_different_tier_the_provider_takes() -> None:
    assert resolve_tier("flex", provider="openai", model="m").fallback is T.STANDARD
    assert resolve_tier("standard", provider="openai", model="m").fallback is None
    assert resolve_tier("flex", provider="openai", model="m", fallback=None).fallback is None
    assert resolve_tier("flex", provider="openai", model="m", fallback="priority").fallback is (
        T.PRIORITY
    )


def test_vocabulary_and_sources_refuse_what_is_not_a_tier() -> None:
    assert T.parse(" Default ") is T.STANDARD
    assert [t.rank for t in T] == [0, 1, 2, None]
    with pytest.raises(ValueError, match="accepted: flex, standard, priority, auto"):
        T.parse("fast")
    with pytest.raises(ValueError, match=r"Source.service_tier: unknown service tier 'cheap'"):
        Source("openai", "gpt-5.5", api_key="k", service_tier="cheap")
    with pytest.raises(ValueError, match="capacity_fallback must be flex, standard, priority"):
        Source("openai", "gpt-5.5", api_key="k", capacity_fallback="auto")
    with pytest.raises(ValueError, match="service_tier_fallback must be one of"):
        Source("openai", "gpt-5.5", api_key="k", service_tier_fallback="closest")
    assert Source("openai", "gpt-5.5", api_key="k", capacity_fallback="none").spare_tier is None
    # A source's own tier it cannot be served at, under "error", fails when the client is built.
    source = Source(
        "deepseek", "deepseek-v4-flash", api_key="k", service_tier="flex",
        service_tier_fallback="error",
    )  # fmt: skip
    with pytest.raises(ServiceTierUnsupportedError) as caught:
        Client([source])
    assert caught.value.source_index == 0


def test_tiers_come_from_toml_and_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "sources.toml"
    path.write_text(
        '[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\nservice_tier = "flex"\n'
        'capacity_fallback = "none"\nservice_tier_fallback = "error"\n'
    )
    (source,) = sources_from_toml(path)
    assert (source.tier, source.spare_tier, source.service_tier_fallback) == (
        T.FLEX,
        None,
        "error",
    )
    env = {
        "CHAT__GEMINI__0__MODEL": "gemini-4-argon",
        "CHAT__GEMINI__0__SERVICE_TIER": "priority",
        "CHAT__GEMINI__0__CAPACITY_FALLBACK": "flex",
        "GEMINI_API_KEY": "k",
    }
    (from_env,) = sources_from_env("chat", env)
    assert (from_env.tier, from_env.spare_tier) == (T.PRIORITY, T.FLEX)


# ---------------------------------------------------------------- on the wire (respx)


def _chat_answer(tier: str | None) -> httpx.Response:
    body: dict[str, Any] = {
        "id": "c1",
        "model": "gpt-5.5",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
    if tier is not None:
        body["service_tier"] = tier
    body["choices"][0]["finish_reason"] = "stop"
    return httpx.Response(200, json=body)


@pytest.mark.anyio
async def test_a_call_sends_its_tier_and_reads_back_the_one_served() -> None:
    source = Source("openai", "gpt-5.5", api_key="sk-tier-0123456789ab", service_tier="priority")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post("https://api.openai.com/v1/chat/completions").mock(
            side_effect=[_chat_answer("flex"), _chat_answer("default")]
        )
        async with Client([source]) as client:
            flex = await client.complete(HI, service_tier="flex")
            own = await client.complete(HI)
    sent = [json.loads(call.request.content) for call in route.calls]
    assert [body["service_tier"] for body in sent] == ["flex", "priority"]
    assert (flex.requested_service_tier, flex.applied_service_tier, flex.service_tier) == (
        T.FLEX,
        T.FLEX,
        "flex",
    )
    # Priority asked, standard served (OpenAI's "default"): priced at standard.
    assert (own.requested_service_tier, own.applied_service_tier, own.service_tier) == (
        T.PRIORITY,
        T.PRIORITY,
        "standard",
    )
    assert own.cost is not None
    assert own.cost.total == float(
        genai_prices.calc_price(
            genai_prices.Usage(input_tokens=10, output_tokens=2), "gpt-5.5", provider_id="openai"
        ).total_price
    )


@pytest.mark.anyio
async def test_an_unset_tier_sends_nothing() -> None:
    source = Source("openai", "gpt-5.5", api_key="sk-tier-0123456789ab")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=_chat_answer(None)
        )
        async with Client([source]) as client:
            response = await client.complete(HI)
    assert "service_tier" not in json.loads(route.calls[0].request.content)
    assert (response.service_tier, response.applied_service_tier) == (None, None)


@pytest.mark.anyio
async def test_vertex_sends_the_header_and_reads_the_traffic_type(vertex: str) -> None:
    source = Source(vertex, "gemini-4-argon", api_key="AIzaSyTIERS-0123456789abcdefghij")
    answer = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {
            "promptTokenCount": 7,
            "candidatesTokenCount": 1,
            "totalTokenCount": 8,
            "trafficType": "ON_DEMAND_FLEX",
        },
        "modelVersion": "gemini-4-argon",
    }
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post("https://vertex.invalid/v1/models/gemini-4-argon:generateContent").mock(
            return_value=httpx.Response(200, json=answer)
        )
        async with Client([source]) as client:
            response = await client.complete(HI, service_tier="flex")
    request = route.calls[0].request
    assert request.headers["x-vertex-ai-llm-shared-request-type"] == "flex"
    assert "serviceTier" not in json.loads(request.content)
    assert response.service_tier == "flex"


# ---------------------------------------------------------------- against the simulator


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("provider", "model", "tier", "served"),
    [
        ("openai", "gpt-5.5", "flex", "flex"),
        ("openai-responses", "gpt-5.5", "priority", "priority"),
        ("gemini", "gemini-4-argon", "flex", "flex"),
        ("anthropic", "claude-haiku-5-5", "auto", "standard"),
        ("groq", "openai/gpt-oss-120b", "flex", "flex"),
    ],
)
async def test_every_wire_reports_the_tier_served(
    sim: Simulator, provider: str, model: str, tier: str, served: str, stream: bool
) -> None:
    async with Client([_source(sim, provider, model)]) as client:
        if stream:
            response = None
            async for event in client.stream(HI, service_tier=tier):
                if event.type == "done":
                    response = event.response
            assert response is not None
        else:
            response = await client.complete(HI, service_tier=tier)
    assert (response.requested_service_tier, response.service_tier) == (T(tier), served)


@pytest.mark.anyio
async def test_no_capacity_is_resent_at_standard_once_and_priced_there(sim: Simulator) -> None:
    sim.settings.no_capacity = ("flex",)
    source = _source(sim, rpm=600, service_tier="flex", max_retries=0)
    async with Client([source]) as client:
        response = await client.complete(HI)
        limiter = client._limits[0]
        assert await limiter.backend.take(0) == (0.0, "")  # not paused by the 429
    assert sim.stats.by_status == {429: 1, 200: 1}
    assert (
        response.requested_service_tier,
        response.applied_service_tier,
        response.service_tier,
    ) == (T.FLEX, T.STANDARD, "standard")
    assert (
        "openai had no capacity at service_tier='flex' (HTTP 429, not charged): sent the call "
        "again at 'standard' (the source's capacity_fallback)"
    ) in response.warnings
    usage = response.usage
    assert usage is not None
    assert response.cost is not None
    assert response.cost.total == float(
        genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
            ),
            "gpt-5.5",
            provider_id="openai",
        ).total_price
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "status", "code"),
    [
        ("openai", "gpt-5.5", 429, "resource_unavailable"),
        ("groq", "openai/gpt-oss-120b", 498, "capacity_exceeded"),
    ],
)
async def test_no_capacity_without_a_fallback_is_its_own_error(
    sim: Simulator, provider: str, model: str, status: int, code: str
) -> None:
    sim.settings.no_capacity = ("flex",)
    source = _source(sim, provider, model, capacity_fallback=None, max_retries=0)
    async with Client([source]) as client:
        with pytest.raises(CapacityUnavailableError) as caught:
            await client.complete(HI, service_tier="flex")
    error = caught.value
    assert (error.status_code, error.error_type, error.service_tier) == (status, code, "flex")
    assert not counts_against(error)
    assert sim.stats.by_status == {status: 1}


@pytest.mark.anyio
async def test_a_refused_tier_is_learned_for_the_endpoint(sim: Simulator, azure: str) -> None:
    sim.settings.service_tiers = {"gpt-5.5": ("standard", "priority")}
    source = _source(sim, azure, service_tier="flex")
    async with Client([source]) as client:
        first = await client.complete(HI)
        second = await client.complete(HI)
    # One refusal, then every call goes straight at standard.
    assert sim.stats.by_status == {400: 1, 200: 2}
    assert tiers_refused(source.endpoint, azure, "gpt-5.5") == {T.FLEX}
    assert (first.applied_service_tier, first.service_tier) == (T.STANDARD, "standard")
    assert any(
        w.startswith(
            "azure-tiers-test refused service_tier='flex' for model 'gpt-5.5' at this endpoint"
        )
        for w in first.warnings
    )
    assert second.applied_service_tier is T.STANDARD
    assert second.warnings[-1] == (
        "azure-tiers-test model 'gpt-5.5' does not take service_tier='flex' (it takes: "
        "standard, priority); applied 'standard' by service_tier_fallback='nearest'"
    )


@pytest.mark.anyio
async def test_a_refused_tier_under_error_raises(sim: Simulator, azure: str) -> None:
    sim.settings.service_tiers = {"gpt-5.5": ("standard",)}
    source = _source(sim, azure, service_tier_fallback="error")
    async with Client([source]) as client:
        with pytest.raises(ServiceTierUnsupportedError, match="learned from"):
            await client.complete(HI, service_tier="flex")


@pytest.mark.anyio
async def test_the_tier_is_on_the_span_and_the_call_counters(sim: Simulator) -> None:
    otel = Otel()
    source = _source(sim, service_tier="flex")
    async with Client(
        [source], tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    ) as client:
        response = await client.complete(HI)
    attributes = otel.span().attributes
    assert attributes is not None
    assert {k: v for k, v in attributes.items() if "service_tier" in k} == {
        semconv.POLYTHINK_REQUESTED_SERVICE_TIER: "flex",
        semconv.POLYTHINK_APPLIED_SERVICE_TIER: "flex",
        semconv.POLYTHINK_SERVED_SERVICE_TIER: "flex",
        semconv.OPENAI_REQUEST_SERVICE_TIER: "flex",
        semconv.OPENAI_RESPONSE_SERVICE_TIER: "flex",
    }
    (cost,) = otel.points(semconv.POLYTHINK_CLIENT_COST)
    assert cost.attributes is not None
    assert cost.attributes[semconv.POLYTHINK_SERVED_SERVICE_TIER] == "flex"
    assert response.cost is not None
    assert cost.value == response.cost.total


# ---------------------------------------------------------------- prices at the tier served


def test_prices_follow_the_tier_served() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)

    def table(model: str, provider: str, **context: str) -> float:
        return float(
            genai_prices.calc_price(
                genai_prices.Usage(input_tokens=1_000_000, output_tokens=1_000_000),
                model,
                provider_id=provider,
                price_context=context or None,
            ).total_price
        )

    standard = price(usage, "openai", "gpt-5.5")
    flex = price(usage, "openai", "gpt-5.5", service_tier="flex")
    priority = price(usage, "openai", "gpt-5.5", service_tier="priority")
    assert standard is not None
    assert flex is not None
    assert priority is not None
    assert (standard.total, flex.total, priority.total) == (
        table("gpt-5.5", "openai"),
        table("gpt-5.5", "openai", service_tier="flex"),
        table("gpt-5.5", "openai", service_tier="priority"),
    )
    assert flex.total == standard.total / 2
    # Gemini 4 Argon carries its own flex and priority prices.
    argon = price(usage, "gemini", "gemini-4-argon", service_tier="priority")
    assert argon is not None
    assert argon.total == table("gemini-4-argon", "google", service_tier="priority")
    assert tier_price_note("gemini", "gemini-4-argon", "priority") is None


def test_where_the_table_has_no_tier_price_it_says_so() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    # Gemini 3.8 Flash has a batch price and no flex price: flex is billed as batches are.
    flex = price(usage, "gemini", "gemini-3.8-flash", service_tier="flex")
    batch = price(usage, "gemini", "gemini-3.8-flash", batch=True)
    assert flex is not None
    assert batch is not None
    assert flex.total == batch.total
    assert tier_price_note("gemini", "gemini-3.8-flash", "flex") == (
        "the price table has no flex price for gemini model 'gemini-3.8-flash': priced at its "
        "batch price, as gemini bills flex"
    )
    # No priority price: the premium differs by model, so the cost is not known.
    assert price(usage, "gemini", "gemini-3.8-flash", service_tier="priority") is None
    assert tier_price_note("gemini", "gemini-3.8-flash", "priority") == (
        "the price table has no priority price for gemini model 'gemini-3.8-flash': the call's "
        "cost is not known (Response.cost is None)"
    )
    # Groq bills flex at on-demand prices.
    groq = price(usage, "groq", "openai/gpt-oss-120b", service_tier="flex")
    assert groq == price(usage, "groq", "openai/gpt-oss-120b")
    assert tier_price_note("groq", "openai/gpt-oss-120b", "flex") is None


def test_a_response_without_a_tier_price_carries_the_note(sim: Simulator) -> None:
    # Checked through the cost layer: a priority answer of a model the table has no priority
    # price for has no cost, and says why.
    from polythink.middleware.cost import CostMiddleware
    from polythink.types import Message, Response

    layer = CostMiddleware([Source("gemini", "gemini-3.8-flash", api_key="k")])
    answer = Response(
        text="ok",
        reasoning=None,
        tool_calls=[],
        finish_reason="stop",
        usage=Usage(input_tokens=10, output_tokens=2),
        model="gemini-3.8-flash",
        provider="gemini",
        source_index=0,
        message=Message(role="assistant", content="ok"),
        service_tier="priority",
    )
    priced = layer.priced(answer)
    assert priced.cost is None
    assert priced.warnings == [
        "the price table has no priority price for gemini model 'gemini-3.8-flash': the call's "
        "cost is not known (Response.cost is None)"
    ]
    flex = layer.priced(dataclasses.replace(answer, service_tier="flex"))
    assert flex.cost is not None
    assert nano_of(flex.cost.total) == nano(
        genai_prices.calc_price(
            genai_prices.Usage(input_tokens=10, output_tokens=2),
            "gemini-3.8-flash",
            provider_id="google",
            price_context={"processing": "batch"},
        ).total_price
    )


def nano_of(usd: float) -> int:
    from polythink.budgets import nanos

    return nanos(usd)


@pytest.mark.anyio
async def test_no_capacity_never_pauses_the_source() -> None:
    # Even with a retry-after, a 429 that says "no capacity at flex" is not the source's rate
    # limit: a RateLimitedError with this wait would pause the source for 30 s.
    source = Source(
        "openai", "gpt-5.5", api_key="sk-tier-0123456789ab", rpm=600, max_retries=0,
        capacity_fallback=None,
    )  # fmt: skip
    no_capacity = httpx.Response(
        429,
        headers={"retry-after": "30"},
        json={
            "error": {
                "message": "Resource Unavailable",
                "type": "x",
                "code": "resource_unavailable",
            }
        },
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post("https://api.openai.com/v1/chat/completions").mock(return_value=no_capacity)
        async with Client([source]) as client:
            with pytest.raises(CapacityUnavailableError) as caught:
                await client.complete(HI, service_tier="flex")
            assert await client._limits[0].backend.take(0) == (0.0, "")
    assert caught.value.retry_after == 30.0
