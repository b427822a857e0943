"""Learning from rejections end to end: a simulator whose models disagree with the registry.

The simulator plays each model below with the tiers given here instead of polythink's registry
(``Settings.capabilities``) and answers other tiers with that provider's own rejection. Every
exchange is counted on the HTTP client (``event_hooks``), so "one 400, then success" is the
real number of requests on the wire.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx

from polythink import Client, Source
from polythink.capability_store import CapabilityStore
from polythink.cli import main as cli
from polythink.errors import RequestRejectedError, ThinkingUnsupportedError
from polythink.reasoning import Capability
from polythink.simulator import Settings, Simulator
from polythink.types import Effort

USER = [{"role": "user", "content": "Name three primes"}]

PLAYED: dict[str, Capability | None] = {
    "gpt-5.5": Capability("gpt-5.5", ("low", "medium", "high"), default_effort="medium"),
    "claude-sonnet-4-6": Capability(
        "claude-sonnet-4-6", ("none", "low", "medium", "high"), thinking="adaptive"
    ),
    "gemini-3-pro-preview": Capability(
        "gemini-3-pro-preview", ("high",), default_effort="high", thinking="level"
    ),
    "gemini-2.5-flash": Capability(
        "gemini-2.5-flash",
        ("minimal", "low", "medium", "high", "xhigh", "max"),
        default_effort="auto",
        thinking="budget",
        budget_min=1,
        budget_max=24576,
    ),
    "grok-4.3": None,
    "qwen3.7-plus": Capability("qwen3.7-plus", ("low", "medium", "high"), provider="qwen"),
}
"""Registry vs played: gpt-5.5 none..xhigh vs low..high; claude-sonnet-4-6 up to max vs up to
high; gemini-3-pro-preview low+high vs high; gemini-2.5-flash can switch off vs cannot;
grok-4.3 none..high vs no reasoning parameter at all; qwen3.7-plus can switch off vs cannot."""


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(capabilities=dict(PLAYED))) as simulator:
        yield simulator


class Wire:
    """Every exchange on the wire: (provider path segment, model, status, request body)."""

    def __init__(self) -> None:
        self.exchanges: list[tuple[str, str, int, dict[str, Any]]] = []

    async def hook(self, response: httpx.Response) -> None:
        body = json.loads(response.request.content or b"{}")
        provider = response.request.url.path.split("/")[1]
        model = body.get("model") or response.request.url.path.split("/models/")[-1].split(":")[0]
        self.exchanges.append((provider, model, response.status_code, body))

    def rejected(self, model: str | None = None) -> int:
        return sum(1 for _, m, s, _ in self.exchanges if s >= 400 and model in (None, m))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=30.0, event_hooks={"response": [self.hook]})


def _source(sim: Simulator, provider: str, model: str, **kw: Any) -> Source:
    return Source(provider, model, api_key="sim", base_url=sim.base_url(provider), **kw)


@pytest.mark.anyio
async def test_learn_nearest_after_one_rejection_then_never_again(
    sim: Simulator, tmp_path: Path
) -> None:
    wire = Wire()
    store = tmp_path / "capabilities.json"
    async with wire.client() as http:
        source = _source(sim, "openai", "gpt-5.5")
        async with Client([source], http_client=http, capabilities_store=store) as client:
            first = await client.complete(USER, reasoning_effort="xhigh")
            second = await client.complete(USER, reasoning_effort="xhigh")
        async with Client([source], http_client=http, capabilities_store=store) as client:
            third = await client.complete(USER, reasoning_effort="xhigh")
    assert [(s, b.get("reasoning_effort")) for _, _, s, b in wire.exchanges] == [
        (400, "xhigh"),
        (200, "high"),
        (200, "high"),
        (200, "high"),
    ]
    for response in (first, second, third):
        assert (response.requested_effort, response.applied_effort) == (Effort.XHIGH, Effort.HIGH)
        assert response.usage is not None
        assert response.usage.reasoning_tokens == 320
    assert first.warnings[0] == (
        "openai rejected the reasoning fields for model 'gpt-5.5' (Unsupported value: "
        "'reasoning_effort' does not support 'xhigh' with this model. Supported values are: "
        "'low', 'medium', and 'high'.); learned accepted: low, medium, high and sent the call "
        "again"
    )
    assert second.warnings == [
        "model 'gpt-5.5' does not accept reasoning_effort='xhigh' (accepted: low, medium, "
        "high); applied 'high' by effort_fallback='nearest'"
    ]
    saved = json.loads(store.read_text())
    [entry] = saved["entries"]
    assert (entry["origin"], entry["provider"], entry["model"]) == ("observed", "openai", "gpt-5.5")
    assert entry["endpoint"] == sim.base_url("openai")
    assert entry["capability"]["supported_efforts"] == ["low", "medium", "high"]
    assert entry["evidence"].endswith(
        f"on openai at {sim.base_url('openai')}: "
        'HTTP 400 to {"reasoning_effort": "xhigh"}: Unsupported value: '
        "'reasoning_effort' does not support 'xhigh' with this model. Supported values are: "
        "'low', 'medium', and 'high'."
    )
    assert store.stat().st_mode & 0o777 == 0o600


@pytest.mark.anyio
async def test_learn_cache_key_keeps_the_requested_tier(sim: Simulator, tmp_path: Path) -> None:
    wire = Wire()
    async with wire.client() as http:
        source = _source(sim, "openai", "gpt-5.5")
        async with Client(
            [source], http_client=http, cache=tmp_path / "cache", capabilities_store=False
        ) as client:
            sent = await client.complete(USER, reasoning_effort="xhigh")
            hit = await client.complete(USER, reasoning_effort="xhigh")
            other = await client.complete(USER, reasoning_effort="high")
    assert [s for _, _, s, _ in wire.exchanges] == [400, 200, 200]
    assert (sent.cache_hit, hit.cache_hit, other.cache_hit) == (False, True, False)
    assert (hit.requested_effort, hit.applied_effort) == (Effort.XHIGH, Effort.HIGH)


@pytest.mark.anyio
async def test_learn_telemetry_records_the_tier_that_finally_went_out(sim: Simulator) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    source = _source(sim, "openai", "gpt-5.5")
    async with Client([source], tracer_provider=tracer, capabilities_store=False) as client:
        await client.complete(USER, reasoning_effort="xhigh")
    [span] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert span.attributes is not None
    assert span.attributes["polythink.reasoning.requested_effort"] == "xhigh"
    assert span.attributes["polythink.reasoning.applied_effort"] == "high"


@pytest.mark.anyio
async def test_learn_error_policy_names_the_accepted_tiers(sim: Simulator) -> None:
    wire = Wire()
    async with wire.client() as http:
        source = _source(sim, "openai", "gpt-5.5", effort_fallback="error")
        async with Client([source], http_client=http, capabilities_store=False) as client:
            with pytest.raises(ThinkingUnsupportedError) as first:
                await client.complete(USER, reasoning_effort="xhigh")
            with pytest.raises(ThinkingUnsupportedError) as again:
                await client.complete(USER, reasoning_effort="xhigh")
            fine = await client.complete(USER, reasoning_effort="medium")
    assert first.value.message.startswith(
        "model 'gpt-5.5' does not accept reasoning_effort='xhigh'; accepted tiers: low, medium, "
        "high (effort_fallback='error'; 'nearest' maps to the nearest accepted tier); learned "
        "from observed "
    )
    assert isinstance(first.value.__cause__, RequestRejectedError)
    assert first.value.source_index == 0
    assert again.value.message.startswith(
        "model 'gpt-5.5' does not accept reasoning_effort='xhigh'; accepted tiers: low, medium, "
        "high"
    )
    assert fine.applied_effort is Effort.MEDIUM
    assert [s for _, _, s, _ in wire.exchanges] == [400, 200]


@pytest.mark.anyio
async def test_learn_twenty_concurrent_first_calls_pay_one_rejection(sim: Simulator) -> None:
    wire = Wire()
    applied: list[Effort | None] = []
    async with wire.client() as http:
        source = _source(sim, "openai", "gpt-5.5")
        async with Client([source], http_client=http, capabilities_store=False) as client:

            async def call(i: int) -> None:
                prompt = [{"role": "user", "content": f"prime number {i}"}]
                applied.append(
                    (await client.complete(prompt, reasoning_effort="xhigh")).applied_effort
                )

            async with anyio.create_task_group() as group:
                for i in range(20):
                    group.start_soon(call, i)
    assert applied == [Effort.HIGH] * 20
    assert wire.rejected() == 1
    assert len(wire.exchanges) == 21


@pytest.mark.anyio
async def test_learn_unrecognised_400_is_not_retried() -> None:
    url = "https://api.openai.com/v1/chat/completions"
    body = {
        "error": {
            "message": "Unsupported value: 'temperature' does not support 0 with this model. "
            "Only the default (1) value is supported.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "unsupported_value",
        }
    }
    store = CapabilityStore(None)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(return_value=httpx.Response(400, json=body))
        source = Source("openai", "gpt-5.5", api_key="sk-test-000000000000")
        async with Client([source], capabilities_store=store) as client:
            with pytest.raises(RequestRejectedError) as caught:
                await client.complete(USER, reasoning_effort="high")
    assert route.call_count == 1
    assert type(caught.value) is RequestRejectedError
    assert caught.value.status_code == 400
    assert store.entries() == []


@pytest.mark.anyio
async def test_learn_on_a_stream_before_the_first_event(sim: Simulator) -> None:
    wire = Wire()
    async with wire.client() as http:
        source = _source(sim, "anthropic", "claude-sonnet-4-6")
        async with Client([source], http_client=http, capabilities_store=False) as client:
            events = [e async for e in client.stream(USER, reasoning_effort="max")]
    done = events[-1].response
    assert done is not None
    assert (done.requested_effort, done.applied_effort) == (Effort.MAX, Effort.HIGH)
    assert [(s, b.get("output_config")) for _, _, s, b in wire.exchanges] == [
        (400, {"effort": "max"}),
        (200, {"effort": "high"}),
    ]
    assert sum(1 for e in events if e.type == "reasoning") > 0


@pytest.mark.anyio
async def test_learn_model_without_a_reasoning_parameter_is_sent_none(sim: Simulator) -> None:
    wire = Wire()
    async with wire.client() as http:
        source = _source(sim, "xai", "grok-4.3")
        async with Client([source], http_client=http, capabilities_store=False) as client:
            first = await client.complete(USER, reasoning_effort="high")
            second = await client.complete(USER, reasoning_effort="low")
    assert [(s, "reasoning_effort" in b) for _, _, s, b in wire.exchanges] == [
        (400, True),
        (200, False),
        (200, False),
    ]
    assert (first.requested_effort, first.applied_effort) == (Effort.HIGH, None)
    note = (
        "model 'grok-4.3' takes no reasoning parameter on xai (observed evidence); sent none "
        "for reasoning_effort='low', so the model reasons (or not) by its own default"
    )
    assert second.warnings == [note]
    assert first.warnings[0] == (
        "xai rejected the reasoning fields for model 'grok-4.3' (Model grok-4.3 does not "
        "support parameter reasoningEffort.); learned no reasoning parameter and sent the call "
        "again"
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "switch"),
    [
        ("gemini", "gemini-2.5-flash", [400, 200, 200, 200]),
        # DashScope refuses enable_thinking=false on a model that always thinks.
        ("qwen", "qwen3.7-plus", [(400, False), (200, True), (200, True), (200, True)]),
    ],
)
async def test_learn_that_a_model_cannot_switch_off(
    sim: Simulator, provider: str, model: str, switch: list[Any]
) -> None:
    wire = Wire()
    async with wire.client() as http:
        source = _source(sim, provider, model)
        async with Client([source], http_client=http, capabilities_store=False) as client:
            first = await client.complete(USER, reasoning_effort="none")
            second = await client.complete(USER, reasoning_effort="none")
            fine = await client.complete(USER, reasoning_effort="low")
        strict = _source(sim, provider, model, effort_fallback="error")
        async with Client([strict], http_client=http, capabilities_store=False) as client:
            with pytest.raises(ThinkingUnsupportedError) as refused:
                await client.complete(USER, reasoning_effort="none")
    # The rejection is paid once: the model's cheapest tier goes out instead, then at once.
    assert (first.applied_effort, second.applied_effort) == (Effort.MINIMAL, Effort.MINIMAL)
    assert first.warnings[0].startswith(f"{provider} rejected the reasoning fields for model")
    assert fine.applied_effort is Effort.LOW
    assert refused.value.message.startswith(
        f"model {model!r} cannot switch reasoning off, so reasoning_effort='none' "
        "cannot be satisfied (effort_fallback='error'; 'nearest' applies the cheapest tier); "
        "its cheapest tier is 'minimal'"
    )
    sent = [
        (status, body.get("enable_thinking")) if provider == "qwen" else status
        for _, _, status, body in wire.exchanges
    ]
    # The strict client learns on its own store: one more 400, then it refuses.
    assert sent == [*switch, switch[0]]


CALLS: list[tuple[str, str, str]] = [
    ("openai", "gpt-5.5", "xhigh"),
    ("openai", "gpt-5.5", "minimal"),
    ("openai", "gpt-5.5", "low"),
    ("openai-responses", "gpt-5.5", "xhigh"),
    ("openai-responses", "gpt-5.5", "minimal"),
    ("anthropic", "claude-sonnet-4-6", "max"),
    ("anthropic", "claude-sonnet-4-6", "low"),
    ("anthropic", "claude-sonnet-4-6", "max"),
    ("gemini", "gemini-3-pro-preview", "low"),
    ("gemini", "gemini-3-pro-preview", "medium"),
    ("gemini", "gemini-3-pro-preview", "high"),
    ("xai", "grok-4.3", "high"),
    ("xai", "grok-4.3", "none"),
    ("xai", "grok-4.3", "medium"),
]


@pytest.mark.anyio
async def test_learn_mixed_tiers_against_a_disagreeing_simulator(
    sim: Simulator,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    wire = Wire()
    store = tmp_path / "capabilities.json"
    results: list[tuple[str, str, str | None]] = []
    async with wire.client() as http:
        for provider, model, tier in CALLS:
            source = _source(sim, provider, model)
            async with Client([source], http_client=http, capabilities_store=store) as client:
                response = await client.complete(USER, reasoning_effort=tier)
            applied = response.applied_effort
            results.append((model, tier, applied.value if applied else None))
    assert results == [
        ("gpt-5.5", "xhigh", "high"),
        ("gpt-5.5", "minimal", "low"),
        ("gpt-5.5", "low", "low"),
        ("gpt-5.5", "xhigh", "high"),
        ("gpt-5.5", "minimal", "low"),
        ("claude-sonnet-4-6", "max", "high"),
        ("claude-sonnet-4-6", "low", "low"),
        ("claude-sonnet-4-6", "max", "high"),
        ("gemini-3-pro-preview", "low", "high"),
        ("gemini-3-pro-preview", "medium", "high"),
        ("gemini-3-pro-preview", "high", "high"),
        ("grok-4.3", "high", None),
        ("grok-4.3", "none", None),
        ("grok-4.3", "medium", None),
    ]
    rejected = {
        (p, m): sum(1 for q, n, s, _ in wire.exchanges if (q, n) == (p, m) and s >= 400)
        for p, m, _ in CALLS
    }
    assert rejected == {
        ("openai", "gpt-5.5"): 1,
        ("openai-responses", "gpt-5.5"): 1,
        ("anthropic", "claude-sonnet-4-6"): 1,
        ("gemini", "gemini-3-pro-preview"): 1,
        ("xai", "grok-4.3"): 1,
    }
    assert cli(["models", "--learned", "--store", str(store), "--json"]) == 0
    learned = json.loads(capsys.readouterr().out)
    assert [(r["kind"], r["provider"], r["model"], r["tiers"], r["registry"]) for r in learned] == [
        (
            "observed",
            "anthropic",
            "claude-sonnet-4-6",
            ["none", "low", "medium", "high"],
            ["none", "low", "medium", "high", "max"],
        ),
        ("observed", "gemini", "gemini-3-pro-preview", ["high"], ["low", "high"]),
        (
            "observed",
            "openai",
            "gpt-5.5",
            ["low", "medium", "high"],
            ["none", "low", "medium", "high", "xhigh"],
        ),
        (
            "observed",
            "openai-responses",
            "gpt-5.5",
            ["low", "medium", "high"],
            ["none", "low", "medium", "high", "xhigh"],
        ),
        ("observed", "xai", "grok-4.3", None, ["none", "low", "medium", "high"]),
    ]
    why = {(r["provider"], r["model"]): r["evidence"].split(": ", 1)[1] for r in learned}
    assert why[("gemini", "gemini-3-pro-preview")] == (
        'HTTP 400 to {"generationConfig": {"thinkingConfig": {"includeThoughts": true, '
        '"thinkingLevel": "low"}}}: Thinking level low is not supported for this model.'
    )
    assert why[("xai", "grok-4.3")] == (
        'HTTP 400 to {"reasoning_effort": "high"}: Model grok-4.3 does not support parameter '
        "reasoningEffort."
    )
    assert cli(["models", "--learned", "--store", str(store)]) == 0
    table = capsys.readouterr().out
    assert "no reasoning parameter" in table
    assert "Thinking level low is not supported for this model." in table


def test_learn_simulate_command_plays_disagreeing_models() -> None:
    import subprocess
    import sys

    command = [
        sys.executable,
        "-c",
        "import sys; from polythink.cli import main; sys.exit(main())",
        "simulate",
        "--port",
        "0",
        "--play",
        "gpt-5.5=low,medium,high",
        "--play",
        "grok-4.3=",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        root = line.split(" listening on ", 1)[1].split(";", 1)[0]
        with httpx.Client(timeout=10.0) as http:
            openai = http.post(
                f"{root}/openai/v1/chat/completions",
                json={"model": "gpt-5.5", "messages": USER, "reasoning_effort": "xhigh"},
            )
            xai = http.post(
                f"{root}/xai/v1/chat/completions",
                json={"model": "grok-4.3", "messages": USER, "reasoning_effort": "low"},
            )
    finally:
        process.terminate()
        process.wait(10)
    assert (openai.status_code, openai.json()["error"]["message"]) == (
        400,
        "Unsupported value: 'reasoning_effort' does not support 'xhigh' with this model. "
        "Supported values are: 'low', 'medium', and 'high'.",
    )
    assert (xai.status_code, xai.json()) == (
        400,
        {
            "code": "Client specified an invalid argument",
            "error": "Model grok-4.3 does not support parameter reasoningEffort.",
        },
    )


@pytest.mark.parametrize(
    ("model", "provider"),
    [("deepseek-v4-pro", "deepseek"), ("glm-5.3", "glm"), ("kimi-k3", "kimi")],
)
def test_learn_simulate_refuses_to_play_a_provider_that_rejects_no_tier(
    model: str, provider: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["simulate", "--port", "0", "--play", f"{model}=high"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"polythink simulate: error: --play {model}: {provider}'s API refuses no reasoning "
        "tier (it maps or ignores them), so there is no rejection to play; --play works for "
        "openai, openai-responses, anthropic, gemini, xai, groq, mistral, minimax and qwen "
        "(switching off only)\n"
    )
