"""Azure OpenAI end to end against the simulator, which checks each api-key and Entra ID
token: exact bodies, URLs and headers of the v1 and deployments APIs at every tier, Responses
on Azure with its encrypted reasoning sent back, deployments mapped to the model they serve
(configured, or learned from an answer), content-filter refusals, throttling, and wrong
credentials."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from polythink import Budget, Client, ContentFilterError, Message, Source
from polythink.auth.azure import COGNITIVE_SERVICES_SCOPE, EntraAuth
from polythink.errors import AuthError, RateLimitedError
from polythink.simulator import Settings, Simulator
from polythink.simulator.azure import FILTERED_COMPLETION, FILTERED_PROMPT
from polythink.simulator.clouds import AZURE_API_KEY, AZURE_TOKEN_PREFIX
from polythink.simulator.faults import Fault, FaultPlan
from tests.cloud_support import WEATHER, Wire, recorded

HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    settings = Settings(answer_words=4, deployments={"prod-chat": "gpt-5.5"})
    with Simulator(settings) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def no_azure_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


def _source(sim: Simulator, model: str = "prod-chat", **options: Any) -> Source:
    if "credentials" not in options:
        options.setdefault("api_key", AZURE_API_KEY)
    provider = options.pop("provider", "azure")
    return Source(provider, model, base_url=sim.base_url("azure"), **options)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tier", "applied", "effort"),
    [
        # gpt-5.5: none, low, medium, high, xhigh (CURRENT.md §2.1).
        ("none", "none", "none"),
        ("minimal", "low", "low"),
        ("low", "low", "low"),
        ("medium", "medium", "medium"),
        ("high", "high", "high"),
        ("xhigh", "xhigh", "xhigh"),
        ("max", "xhigh", "xhigh"),
        ("auto", "auto", None),
    ],
)
async def test_gpt_on_azure_at_every_tier(
    sim: Simulator, tier: str, applied: str, effort: str | None
) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, base_model="gpt-5.5"), wire)
    async with http, client:
        response = await client.complete(HI, reasoning_effort=tier)
    assert response.applied_effort is not None
    assert response.applied_effort.value == applied
    expected: dict[str, Any] = {"model": "prod-chat", "messages": HI, "stream": False}
    if effort is not None:
        expected["reasoning_effort"] = effort
    assert wire.body == expected
    request = wire.requests[-1]
    assert str(request.url) == f"{sim.base_url('azure')}/chat/completions"
    assert request.headers["api-key"] == AZURE_API_KEY
    assert "authorization" not in request.headers
    assert response.model == "gpt-5.5"
    assert response.cost is not None


@pytest.mark.anyio
async def test_the_deployments_api_takes_a_dated_api_version(sim: Simulator) -> None:
    wire = Wire()
    source = _source(sim, base_model="gpt-5.5", api_version="2025-04-01-preview")
    http, client = recorded(source, wire)
    async with http, client:
        response = await client.complete(HI, reasoning_effort="high")
    root = sim.base_url("azure").removesuffix("/v1")
    assert str(wire.requests[-1].url) == (
        f"{root}/deployments/prod-chat/chat/completions?api-version=2025-04-01-preview"
    )
    assert wire.body["reasoning_effort"] == "high"
    assert response.finish_reason == "stop"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tier", "applied", "effort"),
    [("none", "none", "none"), ("low", "low", "low"), ("max", "xhigh", "xhigh")],
)
async def test_responses_on_azure(sim: Simulator, tier: str, applied: str, effort: str) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, provider="azure-responses", base_model="gpt-5.5"), wire)
    async with http, client:
        response = await client.complete(HI, reasoning_effort=tier)
    assert str(wire.requests[-1].url) == f"{sim.base_url('azure')}/responses"
    body = wire.body
    assert body["model"] == "prod-chat"
    assert body["reasoning"] == {"effort": effort}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert response.applied_effort is not None
    assert response.applied_effort.value == applied


@pytest.mark.anyio
async def test_a_responses_tool_loop_sends_its_encrypted_reasoning_back(sim: Simulator) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, provider="azure-responses", base_model="gpt-5.5"), wire)
    async with http, client:
        messages: list[Any] = [Message(role="user", content="What is the weather in Paris?")]
        first = await client.complete(messages, reasoning_effort="high", tools=[WEATHER])
        messages.append(first.message)
        for call in first.tool_calls:
            messages.append(Message(role="tool", tool_call_id=call.id, content='{"sky":"clear"}'))
        second = await client.complete(messages, reasoning_effort="high", tools=[WEATHER])
    assert first.message.reasoning_format == "azure-responses"
    item = next(i for i in first.message.reasoning_items if i["type"] == "reasoning")
    assert item["encrypted_content"]
    assert item in wire.body["input"]
    assert second.finish_reason == "stop"


@pytest.mark.anyio
async def test_a_deployment_learns_its_model_from_the_first_answer(sim: Simulator) -> None:
    wire = Wire()
    http, client = recorded(_source(sim), wire)
    async with http, client:
        first = await client.complete(HI, reasoning_effort="max")
        second = await client.complete(HI, reasoning_effort="max")
    # Unknown on the first call: "max" sent as asked, without a check.
    assert json.loads(wire.requests[0].content)["reasoning_effort"] == "max"
    assert (
        "azure deployment 'prod-chat' serves model 'gpt-5.5' (from its answer): its reasoning "
        "rules apply from the next call; set base_model= on the source to apply them from the "
        "first"
    ) in first.warnings
    # Then gpt-5.5's rules: "max" is not a tier of it.
    assert wire.body["reasoning_effort"] == "xhigh"
    assert second.applied_effort is not None
    assert second.applied_effort.value == "xhigh"


@pytest.mark.anyio
async def test_an_entra_token_provider_authorises_each_request(sim: Simulator) -> None:
    tokens = iter([AZURE_TOKEN_PREFIX + "a", AZURE_TOKEN_PREFIX + "b"])
    wire = Wire()
    source = _source(sim, base_model="gpt-5.5", credentials=lambda: next(tokens))
    http, client = recorded(source, wire)
    async with http, client:
        await client.complete(HI)
        await client.complete(HI)
    assert [r.headers["authorization"] for r in wire.requests] == [
        f"Bearer {AZURE_TOKEN_PREFIX}a",
        f"Bearer {AZURE_TOKEN_PREFIX}b",
    ]
    assert all("api-key" not in r.headers for r in wire.requests)


class Access:
    def __init__(self, token: str, expires_on: int) -> None:
        self.token = token
        self.expires_on = expires_on


class TokenCredential:
    """An azure-identity ``TokenCredential`` stand-in: records each scope asked."""

    def __init__(self, lifetime: int) -> None:
        self.scopes: list[str] = []
        self.lifetime = lifetime

    def get_token(self, *scopes: str) -> Access:
        self.scopes.extend(scopes)
        return Access(f"{AZURE_TOKEN_PREFIX}{len(self.scopes)}", 1_000 + self.lifetime)


@pytest.mark.anyio
async def test_an_entra_token_is_kept_until_five_minutes_before_it_expires() -> None:
    now = [1_000.0]
    credential = TokenCredential(lifetime=3600)
    auth = EntraAuth(credentials=credential, clock=lambda: now[0])
    assert await auth.token() == f"{AZURE_TOKEN_PREFIX}1"
    now[0] = 1_000 + 3600 - 301
    assert await auth.token() == f"{AZURE_TOKEN_PREFIX}1"
    now[0] = 1_000 + 3600 - 300
    assert await auth.token() == f"{AZURE_TOKEN_PREFIX}2"
    assert credential.scopes == [COGNITIVE_SERVICES_SCOPE, COGNITIVE_SERVICES_SCOPE]


class FailingCredential:
    def get_token(self, *scopes: str) -> Access:
        raise RuntimeError("DefaultAzureCredential failed to retrieve a token")


@pytest.mark.anyio
async def test_an_entra_credential_that_fails_says_what_to_fix(sim: Simulator) -> None:
    source = _source(sim, base_model="gpt-5.5", credentials=FailingCredential())
    async with Client([source], cache=False) as client:
        with pytest.raises(AuthError) as caught:
            await client.complete(HI)
    assert caught.value.message == (
        "azure: no Microsoft Entra ID token for https://cognitiveservices.azure.com/.default "
        "(RuntimeError: DefaultAzureCredential failed to retrieve a token); run 'az login', set "
        "AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET, use a managed identity with "
        "the 'Cognitive Services OpenAI User' role, give Source(credentials=...), or an api-key "
        "in AZURE_OPENAI_API_KEY"
    )


@pytest.mark.anyio
async def test_a_wrong_key_is_an_auth_error_without_the_key(sim: Simulator) -> None:
    key = "0123456789abcdef0123456789abcdef"
    async with Client([_source(sim, api_key=key, base_model="gpt-5.5")], cache=False) as client:
        with pytest.raises(AuthError) as caught:
            await client.complete(HI)
    assert caught.value.status_code == 401
    assert caught.value.message.startswith(
        "azure answered HTTP 401: Access denied due to invalid subscription key or wrong API "
        "endpoint."
    )
    assert key not in repr(vars(caught.value)) + str(caught.value)


@pytest.mark.anyio
async def test_a_prompt_the_content_filter_refuses_is_a_typed_error(sim: Simulator) -> None:
    async with Client([_source(sim, base_model="gpt-5.5")], cache=False) as client:
        with pytest.raises(ContentFilterError) as caught:
            await client.complete([{"role": "user", "content": f"{FILTERED_PROMPT} now"}])
    error = caught.value
    assert (error.status_code, error.error_type) == (400, "content_filter")
    assert error.filtered == ["violence"]
    assert error.content_filter_result is not None
    assert error.content_filter_result["violence"] == {"filtered": True, "severity": "high"}
    assert error.content_filter_result["jailbreak"] == {"filtered": False, "detected": False}


@pytest.mark.anyio
async def test_a_completion_the_content_filter_stopped_names_the_categories(
    sim: Simulator,
) -> None:
    async with Client([_source(sim, base_model="gpt-5.5")], cache=False) as client:
        response = await client.complete([{"role": "user", "content": FILTERED_COMPLETION}])
    assert response.finish_reason == "content_filter"
    assert response.refusal == "content filter: violence (high)"


@pytest.mark.anyio
async def test_throttling_with_retry_after_ms_is_a_rate_limit_with_its_wait(
    sim: Simulator,
) -> None:
    sim.settings.faults = FaultPlan([Fault.http(429, retry_after_ms=1500)])
    try:
        source = _source(sim, base_model="gpt-5.5", max_retries=0)
        async with Client([source], cache=False) as client:
            with pytest.raises(RateLimitedError) as caught:
                await client.complete(HI)
    finally:
        sim.settings.faults = None
    assert caught.value.retry_after == 1.5


@pytest.mark.anyio
async def test_a_budget_prices_a_deployment_by_the_model_it_serves(sim: Simulator) -> None:
    budget = Budget(1.0, "day", name="azure")
    source = _source(sim, base_model="gpt-5.5")
    async with Client([source], cache=False, budgets=[budget]) as client:
        response = await client.complete(HI, reasoning_effort="low", max_tokens=200)
        (plan,) = await client.plan(HI, reasoning_effort="low", max_tokens=200)
    assert response.cost is not None
    assert plan.fits is True
    assert plan.worst_case is not None
    (state,) = plan.budgets
    assert state.spent == pytest.approx(response.cost.total, rel=1e-6, abs=1e-9)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["azure", "azure-responses"])
async def test_azure_sends_flex_and_learns_a_deployment_that_refuses_it(
    sim: Simulator, provider: str
) -> None:
    """Azure takes ``service_tier`` as OpenAI spells it and answers 400 for flex on a model
    without it (CONTINUITY.md §4, learn.microsoft.com flex-processing, read 2026-12-04): the
    refusal is learned for the endpoint and the call goes on at standard."""
    from polythink.reasoning.tiers import forget_refusals

    wire = Wire()
    http, client = recorded(_source(sim, provider=provider, base_model="gpt-5.5"), wire)
    try:
        async with http, client:
            served = await client.complete(HI, service_tier="flex")
            assert wire.body["service_tier"] == "flex"
            assert (served.applied_service_tier, served.service_tier) == ("flex", "flex")
            sim.settings.service_tiers = {"gpt-5.5": ("standard", "priority")}
            refused = await client.complete(HI, service_tier="flex")
            after = await client.complete(HI, service_tier="flex")
    finally:
        sim.settings.service_tiers = {}
        forget_refusals()
    sent = [json.loads(r.content).get("service_tier") for r in wire.requests]
    # served at flex; then refused once, resent at standard; then standard at once.
    assert sent == ["flex", "flex", "default", "default"]
    assert (refused.applied_service_tier, refused.service_tier) == ("standard", "standard")
    assert after.applied_service_tier == "standard"
