"""What ``polythink.resolve``, ``polythink resolve`` and ``Client.plan`` say a call sends is
what the client sends, for cloud model ids a cloud serves over another wire.

A ``bedrock`` source of an OpenAI or Amazon model goes through Converse, a ``vertex`` source of
Claude through ``rawPredict``, an ``openai`` or ``azure`` source's tool call on a model that
takes tools on the Responses API only goes there; each test sends the call to the simulator
and compares the fragment the reasoning tier added to the body (the body less the same call's
body without a tier) with the payload each of the three reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from polythink import Source, resolve
from polythink.cli import main
from polythink.errors import ThinkingUnsupportedError
from polythink.reasoning.serving import serving
from polythink.simulator import Settings, Simulator
from polythink.simulator.clouds import AZURE_API_KEY, BEDROCK_API_KEY, GOOGLE_TOKEN_PREFIX
from tests.cloud_support import WEATHER, Wire, clear_cloud_environment, recorded

HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(
        Settings(answer_words=4, deployments={"prod-chat": "gpt-5.5", "astra": "gpt-6-astra"})
    ) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def no_cloud_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cloud_environment(monkeypatch)


@dataclass(frozen=True)
class Case:
    provider: str
    model: str
    effort: str
    fragment: dict[str, Any]
    """What the tier adds to the body on the wire that serves the model."""
    url: str
    """The end of the URL the call goes to."""
    options: dict[str, Any] = field(default_factory=dict)
    base_model: str | None = None
    tools: bool = False

    @property
    def id(self) -> str:
        return f"{self.provider}:{self.model}:{self.effort}{':tools' if self.tools else ''}"

    def source(self, sim: Simulator) -> Source:
        return Source(
            self.provider,
            self.model,
            base_url=sim.base_url(self.provider),
            base_model=self.base_model,
            **self.options,
        )

    def argv(self) -> list[str]:
        argv = ["resolve", "--provider", self.provider, "--model", self.model]
        argv += ["--effort", self.effort, "--json"]
        if self.base_model is not None:
            argv += ["--base-model", self.base_model]
        return [*argv, "--tools"] if self.tools else argv


BEDROCK = {"api_key": BEDROCK_API_KEY, "region": "us-east-1"}
VERTEX = {"credentials": lambda: GOOGLE_TOKEN_PREFIX + "fixed", "project": "proj-1"}
AZURE = {"api_key": AZURE_API_KEY}

CASES = [
    # Claude on Vertex: rawPredict with the Messages body (manual budget for Sonnet 4.5), not
    # Gemini's generationConfig.
    Case(
        "vertex",
        "claude-sonnet-4-5@20250929",
        "high",
        {"thinking": {"type": "enabled", "budget_tokens": 16384}, "max_tokens": 20480},
        "/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
        VERTEX,
    ),
    # gpt-oss on Bedrock: Converse with the flat reasoning_effort; minimal is no tier of it.
    Case(
        "bedrock",
        "openai.gpt-oss-120b-1:0",
        "minimal",
        {"additionalModelRequestFields": {"reasoning_effort": "low"}},
        "/model/openai.gpt-oss-120b-1:0/converse",
        BEDROCK,
    ),
    # Nova Pro (Nova 1) does not reason: "none" sends nothing, not a reasoningConfig.
    Case(
        "bedrock",
        "amazon.nova-pro-v1:0",
        "none",
        {},
        "/model/amazon.nova-pro-v1:0/converse",
        BEDROCK,
    ),
    # Nova 2 Lite: reasoningConfig with maxReasoningEffort.
    Case(
        "bedrock",
        "us.amazon.nova-2-lite-v1:0",
        "high",
        {
            "additionalModelRequestFields": {
                "reasoningConfig": {"type": "enabled", "maxReasoningEffort": "high"}
            }
        },
        "/model/us.amazon.nova-2-lite-v1:0/converse",
        BEDROCK,
    ),
    # Claude on Bedrock stays on InvokeModel with the Messages fields.
    Case(
        "bedrock",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "medium",
        {"thinking": {"type": "enabled", "budget_tokens": 8192}, "max_tokens": 12288},
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke",
        BEDROCK,
    ),
    # Gemini on Vertex: generateContent, a budget on 2.5.
    Case(
        "vertex",
        "gemini-2.5-pro",
        "high",
        {
            "generationConfig": {
                "thinkingConfig": {"thinkingBudget": 16384, "includeThoughts": True}
            }
        },
        "/publishers/google/models/gemini-2.5-pro:generateContent",
        VERTEX,
    ),
    # An Azure deployment serving gpt-5.5 (base_model): max is no tier of it.
    Case(
        "azure",
        "prod-chat",
        "max",
        {"reasoning_effort": "xhigh"},
        "/openai/v1/chat/completions",
        AZURE,
        base_model="gpt-5.5",
    ),
    # GPT-6 Astra takes function tools on the Responses API only: an Azure deployment of it
    # and an openai source send a tool call there, with reasoning.effort.
    Case(
        "azure",
        "astra",
        "high",
        {"reasoning": {"effort": "high"}},
        "/openai/v1/responses",
        AZURE,
        base_model="gpt-6-astra",
        tools=True,
    ),
    Case(
        "openai",
        "gpt-6-astra",
        "high",
        {"reasoning": {"effort": "high"}},
        "/openai/v1/responses",
        {"api_key": "sk-sim"},
        tools=True,
    ),
]


def _added(body: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any]:
    """The top-level fields of ``body`` that ``plain`` (the same call without a tier) lacks
    or has otherwise; a field only ``plain`` has would be one the tier took away."""
    assert set(plain) <= set(body), sorted(set(plain) - set(body))
    return {key: value for key, value in body.items() if plain.get(key) != value}


async def _sent(sim: Simulator, case: Case) -> tuple[dict[str, Any], list[Any]]:
    """The fragment the case's tier added to the body the client sent, and the plan's."""
    wire = Wire()
    http, client = recorded(case.source(sim), wire)
    tools = [WEATHER] if case.tools else None
    async with http, client:
        (plan,) = await client.plan(reasoning_effort=case.effort, tools=tools)
        await client.complete(HI, tools=tools)
        plain = wire.body
        await client.complete(HI, reasoning_effort=case.effort, tools=tools)
    assert str(wire.requests[-1].url).endswith(case.url), wire.requests[-1].url
    return _added(wire.body, plain), [plan.payload, list(plan.reasons)]


@pytest.mark.anyio
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_resolve_plan_and_the_command_say_what_the_client_sends(
    sim: Simulator, case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    sent, (planned, _) = await _sent(sim, case)
    assert sent == case.fragment
    resolved = resolve(
        case.effort,
        provider=case.provider,
        model=case.model,
        base_model=case.base_model,
        tools=case.tools,
    )
    assert resolved.payload == sent
    assert planned == sent
    assert main(case.argv()) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["payload"] == sent
    assert printed["warnings"] == list(resolved.warnings)


@pytest.mark.anyio
async def test_a_tool_call_sent_to_responses_says_so_in_each_report(sim: Simulator) -> None:
    case = CASES[-1]
    note = (
        "sent to the Responses API: model 'gpt-6-astra' takes function tools on the Responses "
        "API only; the openai source reaches it with the same key and host"
    )
    _, (_, reasons) = await _sent(sim, case)
    assert reasons == [note]
    resolved = resolve("high", provider="openai", model="gpt-6-astra", tools=True)
    assert resolved.warnings == (note,)
    # Without tools the call stays on Chat Completions, and so does what resolve says.
    assert resolve("high", provider="openai", model="gpt-6-astra").payload == {
        "reasoning_effort": "high"
    }


def test_the_command_names_the_profile_that_serves_a_cloud_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["resolve", "--provider", "bedrock", "--model", "openai.gpt-oss-120b-1:0"]
    assert main([*argv, "--effort", "high"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "requested  high",
        "applied    high",
        'payload    {"additionalModelRequestFields": {"reasoning_effort": "high"}}',
        "served by  bedrock-converse",
    ]


@pytest.mark.anyio
async def test_nova_is_found_by_its_family_and_refused_alike(
    sim: Simulator, capsys: pytest.CaptureFixture[str]
) -> None:
    message = (
        "model 'amazon.nova-pro-v1:0' does not reason, so reasoning_effort='high' cannot be "
        "satisfied; accepted: none (or leave reasoning_effort unset)"
    )
    argv = ["resolve", "--provider", "bedrock", "--model", "amazon.nova-pro-v1:0"]
    assert main([*argv, "--effort", "high", "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"error": {"type": "ThinkingUnsupportedError", "message": message}}
    with pytest.raises(ThinkingUnsupportedError) as raised:
        resolve("high", provider="bedrock", model="amazon.nova-pro-v1:0")
    assert raised.value.message == message
    wire = Wire()
    http, client = recorded(CASES[2].source(sim), wire)
    async with http, client:
        with pytest.raises(ThinkingUnsupportedError) as refused:
            await client.complete(HI, reasoning_effort="high")
    assert refused.value.message == message
    assert wire.requests == []
    assert main(["models", "--levels", "amazon.nova-pro-v1:0", "--provider", "bedrock"]) == 0
    assert capsys.readouterr().out == "amazon.nova-pro-v1:0: no reasoning control (inferred)\n"
    assert main(["models", "--levels", "us.amazon.nova-2-lite-v1:0", "--provider", "bedrock"]) == 0
    assert capsys.readouterr().out == (
        "us.amazon.nova-2-lite-v1:0: none low medium high (default none; inferred)\n"
    )


@pytest.mark.parametrize(
    ("provider", "model", "base_model", "served"),
    [
        ("bedrock", "openai.gpt-oss-120b-1:0", None, "bedrock-converse"),
        ("bedrock", "us.amazon.nova-2-lite-v1:0", None, "bedrock-converse"),
        ("bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", None, "bedrock"),
        ("vertex", "claude-sonnet-4-5@20250929", None, "vertex-anthropic"),
        ("vertex", "gemini-2.5-pro", None, "vertex"),
        (
            "bedrock",
            "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc",
            "anthropic.claude-opus-4-8",
            "bedrock",
        ),
        ("azure", "prod-chat", "gpt-5.5", "azure"),
    ],
)
def test_the_source_and_resolve_share_one_serving_decision(
    provider: str, model: str, base_model: str | None, served: str
) -> None:
    source = Source(provider, model, base_model=base_model, api_key="k")
    decided = serving(provider, model, base_model)
    assert (source.profile.id, decided.profile.id) == (served, served)
    assert decided.model == source.registry_model
    # A served profile serves its models itself: the reasoning layer, given it, decides alike.
    assert serving(decided.profile, model, base_model) == decided
