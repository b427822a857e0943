"""Vertex AI end to end against the simulator, which checks each OAuth token and express-mode
key: exact Gemini and Claude bodies, URLs and headers at every tier, tokens refreshed before
they expire and off the event loop, thinking tool loops that send their signatures back, and
wrong or missing credentials."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from polythink import Client, Source
from polythink.errors import AuthError, RateLimitedError
from polythink.simulator import Settings, Simulator
from polythink.simulator.clouds import GOOGLE_TOKEN_PREFIX, VERTEX_API_KEY
from polythink.simulator.faults import Fault, FaultPlan
from tests.cloud_support import Wire, recorded, tool_loop

google_credentials = pytest.importorskip("google.auth.credentials")

HI = [{"role": "user", "content": "Hi"}]
CLAUDE_TURN = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
GEMINI_TURN = [{"role": "user", "parts": [{"text": "Hi"}]}]
TOKEN = GOOGLE_TOKEN_PREFIX + "fixed"


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(answer_words=4)) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def no_google_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in (
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_PROJECT",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "GOOGLE_CLOUD_LOCATION",
        "CLOUD_ML_REGION",
        "GOOGLE_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))


def _source(sim: Simulator, model: str, **options: Any) -> Source:
    options.setdefault("credentials", lambda: TOKEN)
    options.setdefault("project", "proj-1")
    return Source("vertex", model, base_url=sim.base_url("vertex"), **options)


def _level(level: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"thinkingLevel": level} if level else {}
    return {"generationConfig": {"thinkingConfig": {**config, "includeThoughts": True}}}


def _budget(tokens: int) -> dict[str, Any]:
    return {
        "generationConfig": {"thinkingConfig": {"thinkingBudget": tokens, "includeThoughts": True}}
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "tier", "applied", "fields"),
    [
        # Gemini 3 Pro: thinkingLevel low or high; it cannot switch off.
        ("gemini-3-pro-preview", "none", "low", _level("low")),
        ("gemini-3-pro-preview", "low", "low", _level("low")),
        ("gemini-3-pro-preview", "medium", "low", _level("low")),
        ("gemini-3-pro-preview", "high", "high", _level("high")),
        ("gemini-3-pro-preview", "max", "high", _level("high")),
        ("gemini-3-pro-preview", "auto", "auto", _level(None)),
        # Gemini 2.5 Pro: thinkingBudget per tier.
        ("gemini-2.5-pro", "minimal", "minimal", _budget(1024)),
        ("gemini-2.5-pro", "low", "low", _budget(2048)),
        ("gemini-2.5-pro", "medium", "medium", _budget(8192)),
        ("gemini-2.5-pro", "high", "high", _budget(16384)),
        ("gemini-2.5-pro", "xhigh", "xhigh", _budget(24576)),
        ("gemini-2.5-pro", "max", "max", _budget(32768)),
    ],
)
async def test_gemini_on_vertex_at_every_tier(
    sim: Simulator, model: str, tier: str, applied: str, fields: dict[str, Any]
) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, model, region="us-central1"), wire)
    async with http, client:
        response = await client.complete(HI, reasoning_effort=tier)
    assert response.applied_effort is not None
    assert response.applied_effort.value == applied
    assert wire.body == {"contents": GEMINI_TURN, **fields}
    request = wire.requests[-1]
    assert str(request.url) == (
        f"{sim.base_url('vertex')}/projects/proj-1/locations/us-central1/publishers/google/"
        f"models/{model}:generateContent"
    )
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "x-goog-api-key" not in request.headers
    assert response.provider == "vertex"
    assert response.text.startswith(f"Simulated {model} answer")


ADAPTIVE = {"thinking": {"type": "adaptive", "display": "summarized"}}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tier", "applied", "fields"),
    [
        ("none", "none", {}),
        ("minimal", "low", {**ADAPTIVE, "output_config": {"effort": "low"}}),
        ("low", "low", {**ADAPTIVE, "output_config": {"effort": "low"}}),
        ("medium", "medium", {**ADAPTIVE, "output_config": {"effort": "medium"}}),
        ("high", "high", {**ADAPTIVE, "output_config": {"effort": "high"}}),
        ("xhigh", "xhigh", {**ADAPTIVE, "output_config": {"effort": "xhigh"}}),
        ("max", "max", {**ADAPTIVE, "output_config": {"effort": "max"}}),
        ("auto", "auto", ADAPTIVE),
    ],
)
async def test_claude_on_vertex_at_every_tier(
    sim: Simulator, tier: str, applied: str, fields: dict[str, Any]
) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, "claude-opus-4-8", region="us-east5"), wire)
    async with http, client:
        response = await client.complete(HI, reasoning_effort=tier)
    assert response.applied_effort is not None
    assert response.applied_effort.value == applied
    assert response.provider == "vertex-anthropic"
    assert wire.body == {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 4096,
        "messages": CLAUDE_TURN,
        "stream": False,
        **fields,
    }
    request = wire.requests[-1]
    assert str(request.url) == (
        f"{sim.base_url('vertex')}/projects/proj-1/locations/us-east5/publishers/anthropic/"
        "models/claude-opus-4-8:rawPredict"
    )
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "anthropic-version" not in request.headers


@pytest.mark.anyio
async def test_claude_streams_over_stream_raw_predict_past_vertex_events(sim: Simulator) -> None:
    wire = Wire()
    source = _source(
        sim, "claude-opus-4-8", headers={"anthropic-beta": "interleaved-thinking-2025-05-14"}
    )
    http, client = recorded(source, wire)
    async with http, client:
        complete = await client.complete(HI, reasoning_effort="high")
        events = [e async for e in client.stream(HI, reasoning_effort="high")]
    request = wire.requests[-1]
    assert str(request.url).endswith(
        "/publishers/anthropic/models/claude-opus-4-8:streamRawPredict"
    )
    assert wire.body["stream"] is True
    # Betas stay a header on Vertex (CLOUDS.md §2.3).
    assert request.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    done = events[-1].response
    assert done is not None
    assert (done.text, done.reasoning, done.usage) == (
        complete.text,
        complete.reasoning,
        complete.usage,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_gemini_tool_loop_sends_its_thought_signatures_back(
    sim: Simulator, stream: bool
) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, "gemini-3-pro-preview"), wire)
    async with http, client:
        first, second = await tool_loop(client, stream=stream)
    assert first.message.reasoning_format == "vertex"
    call_part = next(p for p in first.message.reasoning_items if "functionCall" in p)
    assert call_part["thoughtSignature"]
    model_turn = wire.body["contents"][1]
    assert model_turn["role"] == "model"
    assert call_part in model_turn["parts"]
    assert second.finish_reason == "stop"


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_claude_tool_loop_sends_its_signature_back(sim: Simulator, stream: bool) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, "claude-sonnet-4-5@20250929"), wire)
    async with http, client:
        first, second = await tool_loop(client, stream=stream)
    assert str(wire.requests[0].url).endswith("models/claude-sonnet-4-5@20250929:rawPredict") or (
        stream and str(wire.requests[0].url).endswith(":streamRawPredict")
    )
    assert first.message.reasoning_format == "vertex-anthropic"
    thinking = first.message.reasoning_items[0]
    assert thinking["signature"].startswith("sim2.")
    assert wire.body["messages"][1]["content"][0] == thinking
    assert second.finish_reason == "stop"


class RefreshingCredentials(google_credentials.Credentials):  # type: ignore[misc]
    """google-auth credentials whose refresh mints the next token, valid for an hour, and
    records the thread it ran on."""

    def __init__(self, expires_in: float) -> None:
        super().__init__()
        self.token = GOOGLE_TOKEN_PREFIX + "0"
        self.expiry = _utc_naive() + datetime.timedelta(seconds=expires_in)
        self.refreshes: list[int] = []
        self._quota_project_id = "billing-project"

    def refresh(self, request: Any) -> None:
        self.refreshes.append(threading.get_ident())
        self.token = f"{GOOGLE_TOKEN_PREFIX}{len(self.refreshes)}"
        self.expiry = _utc_naive() + datetime.timedelta(hours=1)


def _utc_naive() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


@pytest.mark.anyio
async def test_a_token_about_to_expire_is_refreshed_first_and_off_the_event_loop(
    sim: Simulator,
) -> None:
    # Within google-auth's refresh threshold (3 min 45 s) of its expiry: stale.
    credentials = RefreshingCredentials(expires_in=120)
    wire = Wire()
    http, client = recorded(_source(sim, "gemini-3-pro-preview", credentials=credentials), wire)
    async with http, client:
        await client.complete(HI)
        await client.complete(HI)
    assert len(credentials.refreshes) == 1
    assert credentials.refreshes[0] != threading.get_ident()
    assert [r.headers["authorization"] for r in wire.requests] == [
        f"Bearer {GOOGLE_TOKEN_PREFIX}1",
        f"Bearer {GOOGLE_TOKEN_PREFIX}1",
    ]
    assert wire.requests[0].headers["x-goog-user-project"] == "billing-project"


@pytest.mark.anyio
async def test_a_fresh_token_is_used_as_it_is(sim: Simulator) -> None:
    credentials = RefreshingCredentials(expires_in=3600)
    async with Client(
        [_source(sim, "gemini-3-pro-preview", credentials=credentials)], cache=False
    ) as client:
        await client.complete(HI)
    assert credentials.refreshes == []


@pytest.mark.anyio
async def test_express_mode_sends_the_key_without_a_project(sim: Simulator) -> None:
    wire = Wire()
    source = Source(
        "vertex", "gemini-3-pro-preview", base_url=sim.base_url("vertex"), api_key=VERTEX_API_KEY
    )
    http, client = recorded(source, wire)
    async with http, client:
        response = await client.complete(HI)
    request = wire.requests[-1]
    assert str(request.url) == (
        f"{sim.base_url('vertex')}/publishers/google/models/gemini-3-pro-preview:generateContent"
    )
    assert request.headers["x-goog-api-key"] == VERTEX_API_KEY
    assert "authorization" not in request.headers
    assert response.finish_reason == "stop"


@pytest.mark.anyio
async def test_a_wrong_token_is_an_auth_error_without_the_token(sim: Simulator) -> None:
    token = "ya29.not-a-token-the-simulator-issued-0001"
    async with Client(
        [_source(sim, "claude-opus-4-8", credentials=lambda: token)], cache=False
    ) as client:
        with pytest.raises(AuthError) as caught:
            await client.complete(HI)
    assert (caught.value.status_code, caught.value.error_type) == (401, "UNAUTHENTICATED")
    assert token not in repr(vars(caught.value)) + str(caught.value)


@pytest.mark.anyio
async def test_no_application_default_credentials_says_what_to_set(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    metadata = pytest.importorskip("google.auth.compute_engine._metadata")
    monkeypatch.setattr(metadata, "_NO_GCE_CHECK", True)
    source = Source("vertex", "gemini-3-pro-preview", base_url=sim.base_url("vertex"), project="p")
    async with Client([source], cache=False) as client:
        with pytest.raises(AuthError) as caught:
            await client.complete(HI)
    message = caught.value.message
    assert message.startswith(
        "vertex: no Google Application Default Credentials were found (DefaultCredentialsError:"
    )
    assert message.endswith(
        "run 'gcloud auth application-default login', set GOOGLE_APPLICATION_CREDENTIALS to a "
        "service-account key file, or give Source(credentials=...)"
    )


@pytest.mark.anyio
async def test_resource_exhausted_is_a_rate_limit_with_its_retry_delay(sim: Simulator) -> None:
    sim.settings.faults = FaultPlan([Fault.http(429, retry_after=7)])
    try:
        source = _source(sim, "gemini-3-pro-preview", max_retries=0)
        async with Client([source], cache=False) as client:
            with pytest.raises(RateLimitedError) as caught:
                await client.complete(HI)
    finally:
        sim.settings.faults = None
    assert (caught.value.error_type, caught.value.retry_after) == ("RESOURCE_EXHAUSTED", 7.0)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tier", "header", "served"),
    [
        ("flex", "flex", "flex"),
        ("priority", "priority", "priority"),
        ("standard", None, "standard"),
    ],
)
async def test_gemini_on_vertex_sends_the_tier_as_its_header(
    sim: Simulator, tier: str, header: str | None, served: str
) -> None:
    """Vertex AI takes the tier in ``X-Vertex-AI-LLM-Shared-Request-Type`` (standard is its
    absence) and reports the one served in ``usageMetadata.trafficType`` (CONTINUITY.md §4:
    docs.cloud.google.com/vertex-ai/generative-ai/docs/priority-paygo, read 2026-12-04)."""
    wire = Wire()
    http, client = recorded(_source(sim, "gemini-4-argon", region="global"), wire)
    async with http, client:
        response = await client.complete(HI, service_tier=tier)
    request = wire.requests[-1]
    assert request.headers.get("x-vertex-ai-llm-shared-request-type") == header
    assert "serviceTier" not in wire.body
    assert response.applied_service_tier == tier
    assert response.service_tier == (served if header is not None else None)
