"""Amazon Bedrock end to end against the simulator, which verifies every SigV4 signature with
its own implementation of the algorithm: exact InvokeModel and Converse bodies and headers at
every tier, the event-stream framing, betas in the body, thinking tool loops that send their
signatures back, API keys, throttling and credentials that are wrong or missing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from polythink import Client, Source
from polythink.errors import AuthError, RateLimitedError
from polythink.simulator import Settings, Simulator
from polythink.simulator.clouds import (
    AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN,
    AWS_TEMPORARY_KEY_ID,
    BEDROCK_API_KEY,
    event,
    event_frame,
)
from polythink.simulator.faults import Fault, FaultPlan
from polythink.transports.eventstream import EXCEPTION, EventStreamDecoder, MalformedFrame
from tests.cloud_support import WEATHER, Wire, recorded, tool_loop

credentials_module = pytest.importorskip("botocore.credentials")

CLAUDE = "us.anthropic.claude-opus-4-8"
MANUAL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
GPT_OSS = "openai.gpt-oss-120b-1:0"
HI = [{"role": "user", "content": "Hi"}]
USER_TURN = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(answer_words=4)) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _keys(secret: str = AWS_SECRET_ACCESS_KEY) -> Any:
    return credentials_module.Credentials(AWS_ACCESS_KEY_ID, secret)


def _source(sim: Simulator, model: str, **options: Any) -> Source:
    options.setdefault("credentials", _keys())
    return Source("bedrock", model, base_url=sim.base_url("bedrock"), region="us-east-1", **options)


def _adaptive(effort: str | None) -> dict[str, Any]:
    fields: dict[str, Any] = {"thinking": {"type": "adaptive", "display": "summarized"}}
    if effort is not None:
        fields["output_config"] = {"effort": effort}
    return {"max_tokens": 4096, **fields}


def _manual(max_tokens: int, budget: int) -> dict[str, Any]:
    return {"max_tokens": max_tokens, "thinking": {"type": "enabled", "budget_tokens": budget}}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "tier", "applied", "fields"),
    [
        # Opus 4.8: adaptive thinking with output_config.effort; thinking is off by default,
        # so "none" sends no thinking field; "minimal" is not a tier of it (nearest: low).
        (CLAUDE, "none", "none", {"max_tokens": 4096}),
        (CLAUDE, "minimal", "low", _adaptive("low")),
        (CLAUDE, "low", "low", _adaptive("low")),
        (CLAUDE, "medium", "medium", _adaptive("medium")),
        (CLAUDE, "high", "high", _adaptive("high")),
        (CLAUDE, "xhigh", "xhigh", _adaptive("xhigh")),
        (CLAUDE, "max", "max", _adaptive("max")),
        (CLAUDE, "auto", "auto", _adaptive(None)),
        # Sonnet 4.5 (dated, v1:0): manual budgets, max_tokens raised by the budget.
        (MANUAL, "none", "none", {"max_tokens": 4096}),
        (MANUAL, "minimal", "minimal", _manual(5120, 1024)),
        (MANUAL, "low", "low", _manual(6144, 2048)),
        (MANUAL, "medium", "medium", _manual(12288, 8192)),
        (MANUAL, "high", "high", _manual(20480, 16384)),
        (MANUAL, "xhigh", "xhigh", _manual(28672, 24576)),
        (MANUAL, "max", "max", _manual(36864, 32768)),
        (MANUAL, "auto", "medium", _manual(12288, 8192)),
    ],
)
async def test_claude_on_invoke_model_at_every_tier(
    sim: Simulator, model: str, tier: str, applied: str, fields: dict[str, Any]
) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, model), wire)
    async with http, client:
        response = await client.complete(HI, reasoning_effort=tier)
    assert response.applied_effort is not None
    assert response.applied_effort.value == applied
    assert wire.body == {"anthropic_version": "bedrock-2023-05-31", **fields, "messages": USER_TURN}
    request = wire.requests[-1]
    assert str(request.url) == f"{sim.base_url('bedrock')}/model/{model}/invoke"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "application/json"
    assert request.headers["authorization"].startswith(
        f"AWS4-HMAC-SHA256 Credential={AWS_ACCESS_KEY_ID}/{request.headers['x-amz-date'][:8]}/"
        "us-east-1/bedrock/aws4_request, SignedHeaders=accept;content-type;host;x-amz-date, "
        "Signature="
    )
    assert "anthropic-version" not in request.headers
    assert "x-api-key" not in request.headers
    # The simulator verified the signature: the answer is the model's.
    assert response.text.startswith(f"Simulated {model} answer")


@pytest.mark.anyio
@pytest.mark.parametrize("http", ["httpx", "aiohttp"])
@pytest.mark.parametrize(
    "model", [MANUAL, "arn:aws:bedrock:us-east-1:123456789012:inference-profile/" + CLAUDE]
)
async def test_the_path_signed_is_the_path_sent_on_each_http_layer(
    sim: Simulator, http: str, model: str
) -> None:
    # An ARN's "/" is percent-encoded in the path, which SigV4 encodes once more, and ":" is
    # kept (aiohttp would decode its escape): signed over what httpx built, the signature
    # holds whichever layer sends it.
    async with Client([_source(sim, model)], http=http, cache=False) as client:
        response = await client.complete(HI, reasoning_effort="low")
        streamed = [e async for e in client.stream(HI, reasoning_effort="low")]
    assert response.finish_reason == "stop"
    assert streamed[-1].response is not None
    assert streamed[-1].response.text == response.text


@pytest.mark.anyio
async def test_a_stream_reads_the_event_stream_frames_as_the_answer(sim: Simulator) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, CLAUDE), wire)
    async with http, client:
        complete = await client.complete(HI, reasoning_effort="high")
        events = [e async for e in client.stream(HI, reasoning_effort="high")]
    request = wire.requests[-1]
    assert str(request.url).endswith(f"/model/{CLAUDE}/invoke-with-response-stream")
    assert request.headers["accept"] == "application/vnd.amazon.eventstream"
    assert request.headers["x-amzn-bedrock-accept"] == "application/json"
    assert "stream" not in wire.body
    done = events[-1].response
    assert done is not None
    assert (done.text, done.reasoning, done.usage) == (
        complete.text,
        complete.reasoning,
        complete.usage,
    )
    assert "".join(e.text or "" for e in events if e.type == "reasoning") == complete.reasoning
    assert done.message.reasoning_items[0]["signature"].startswith("sim2.")


@pytest.mark.anyio
async def test_betas_go_in_the_body_on_bedrock(sim: Simulator) -> None:
    wire = Wire()
    source = _source(
        sim,
        CLAUDE,
        headers={"anthropic-beta": "interleaved-thinking-2025-05-14, context-1m-2025-08-07"},
        extra_body={"anthropic_beta": ["fine-grained-tool-streaming-2025-05-14"]},
    )
    http, client = recorded(source, wire)
    async with http, client:
        await client.complete(HI)
    assert wire.body["anthropic_beta"] == [
        "fine-grained-tool-streaming-2025-05-14",
        "interleaved-thinking-2025-05-14",
        "context-1m-2025-08-07",
    ]
    assert "anthropic-beta" not in wire.requests[-1].headers


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_thinking_tool_loop_sends_its_signature_back_on_invoke_model(
    sim: Simulator, stream: bool
) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, MANUAL), wire)
    async with http, client:
        first, second = await tool_loop(client, stream=stream)
    assert first.finish_reason == "tool_calls"
    assert second.finish_reason == "stop"
    thinking = first.message.reasoning_items[0]
    assert thinking["type"] == "thinking"
    # The second request replays the assistant turn's blocks as they came, signature first;
    # the simulator checked the signature against the thinking text.
    assistant = wire.body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == thinking
    assert assistant["content"][-1]["type"] == "tool_use"
    assert wire.body["messages"][2]["content"][0]["type"] == "tool_result"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tier", "applied", "fields"),
    [
        ("none", "low", {"reasoning_effort": "low"}),
        ("low", "low", {"reasoning_effort": "low"}),
        ("medium", "medium", {"reasoning_effort": "medium"}),
        ("high", "high", {"reasoning_effort": "high"}),
        ("max", "high", {"reasoning_effort": "high"}),
    ],
)
async def test_other_vendors_on_converse_carry_reasoning_in_additional_fields(
    sim: Simulator, tier: str, applied: str, fields: dict[str, Any]
) -> None:
    wire = Wire()
    http, client = recorded(_source(sim, GPT_OSS), wire)
    async with http, client:
        response = await client.complete(HI, reasoning_effort=tier, max_tokens=300)
    assert response.provider == "bedrock-converse"
    assert response.applied_effort is not None
    assert response.applied_effort.value == applied
    assert str(wire.requests[-1].url) == (
        f"{sim.base_url('bedrock')}/model/openai.gpt-oss-120b-1:0/converse"
    )
    assert wire.body == {
        "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
        "inferenceConfig": {"maxTokens": 300},
        "additionalModelRequestFields": fields,
    }
    assert response.reasoning is not None
    assert response.reasoning.startswith("Step 1: weigh Hi.")


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_claude_on_converse_replays_its_reasoning_content_blocks(
    sim: Simulator, stream: bool
) -> None:
    wire = Wire()
    source = Source(
        "bedrock-converse",
        MANUAL,
        base_url=sim.base_url("bedrock-converse"),
        region="us-east-1",
        credentials=_keys(),
    )
    http, client = recorded(source, wire)
    async with http, client:
        first, second = await tool_loop(client, stream=stream)
    sent = json.loads(wire.requests[0].content)
    assert sent["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 16384}
    }
    assert sent["inferenceConfig"] == {"maxTokens": 20480}
    assert sent["toolConfig"]["tools"] == [
        {
            "toolSpec": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "inputSchema": {"json": WEATHER.parameters},
            }
        }
    ]
    block = first.message.reasoning_items[0]
    assert set(block) == {"reasoningContent"}
    assert block["reasoningContent"]["reasoningText"]["signature"].startswith("sim2.")
    assert first.reasoning == block["reasoningContent"]["reasoningText"]["text"]
    replayed = wire.body["messages"][1]
    assert replayed == {"role": "assistant", "content": list(first.message.reasoning_items)}
    assert wire.body["messages"][2]["content"][0]["toolResult"]["toolUseId"] == (
        first.tool_calls[0].id
    )
    assert second.finish_reason == "stop"


@pytest.mark.anyio
async def test_a_bedrock_api_key_is_a_bearer_token(sim: Simulator) -> None:
    wire = Wire()
    source = Source(
        "bedrock", CLAUDE, base_url=sim.base_url("bedrock"), region="us-east-1",
        api_key=BEDROCK_API_KEY,
    )  # fmt: skip
    http, client = recorded(source, wire)
    async with http, client:
        response = await client.complete(HI)
    assert wire.requests[-1].headers["authorization"] == f"Bearer {BEDROCK_API_KEY}"
    assert "x-amz-date" not in wire.requests[-1].headers
    assert response.finish_reason == "stop"


@pytest.mark.anyio
async def test_the_api_key_in_the_standard_variable(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", BEDROCK_API_KEY)
    source = Source("bedrock", CLAUDE, base_url=sim.base_url("bedrock"), region="us-east-1")
    async with Client([source], cache=False) as client:
        assert (await client.complete(HI)).finish_reason == "stop"


@pytest.mark.anyio
async def test_temporary_credentials_from_the_environment_sign_with_their_token(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_TEMPORARY_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", AWS_SESSION_TOKEN)
    wire = Wire()
    source = Source("bedrock", CLAUDE, base_url=sim.base_url("bedrock"), region="us-east-1")
    http, client = recorded(source, wire)
    async with http, client:
        response = await client.complete(HI)
    assert wire.requests[-1].headers["x-amz-security-token"] == AWS_SESSION_TOKEN
    assert "x-amz-security-token" in wire.requests[-1].headers["authorization"]
    assert response.finish_reason == "stop"


@pytest.mark.anyio
async def test_a_wrong_secret_is_an_auth_error_without_the_secret(sim: Simulator) -> None:
    secret = "not-the-right-secret-key-0001"
    async with Client([_source(sim, CLAUDE, credentials=_keys(secret))], cache=False) as client:
        with pytest.raises(AuthError) as caught:
            await client.complete(HI)
    error = caught.value
    assert (error.status_code, error.error_type) == (403, "InvalidSignatureException")
    assert error.message == (
        "bedrock answered HTTP 403: The request signature we calculated does not match the "
        "signature you provided. Check your AWS Secret Access Key and signing method."
    )
    assert secret not in repr(vars(error)) + str(error)
    assert "Signature=" not in repr(vars(error))


@pytest.mark.anyio
async def test_no_credentials_anywhere_says_what_to_set(sim: Simulator) -> None:
    source = Source("bedrock", CLAUDE, base_url=sim.base_url("bedrock"), region="us-east-1")
    async with Client([source], cache=False) as client:
        with pytest.raises(AuthError) as caught:
            await client.complete(HI)
    assert caught.value.message == (
        "bedrock: no AWS credentials were found; set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), choose a profile with AWS_PROFILE (run "
        "'aws sso login' for an SSO profile), run where an instance or task role applies, give "
        "Source(credentials=...), or use a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK"
    )
    assert caught.value.error_type == "credentials"
    assert sim.stats.by_provider["bedrock"] >= 0


@pytest.mark.anyio
async def test_a_wrong_api_key_is_an_auth_error_without_the_key(sim: Simulator) -> None:
    key = "bedrock-api-key-d3Jvbmcta2V5LXdyb25nLWtleQ=="
    source = Source(
        "bedrock", CLAUDE, base_url=sim.base_url("bedrock"), region="us-east-1", api_key=key
    )
    async with Client([source], cache=False) as client:
        with pytest.raises(AuthError) as caught:
            await client.complete(HI)
    assert caught.value.error_type == "UnrecognizedClientException"
    assert key not in repr(vars(caught.value)) + str(caught.value)


@pytest.mark.anyio
async def test_throttling_is_a_rate_limit_answer_and_a_rate_limit_frame(sim: Simulator) -> None:
    sim.settings.faults = FaultPlan([Fault.http(429), Fault.in_band("rate_limit_error")])
    try:
        source = _source(sim, CLAUDE, max_retries=0)
        async with Client([source], cache=False) as client:
            with pytest.raises(RateLimitedError) as answered:
                await client.complete(HI)
            with pytest.raises(RateLimitedError) as framed:
                async for _ in client.stream(HI):
                    pass
    finally:
        sim.settings.faults = None
    assert (answered.value.status_code, answered.value.error_type) == (429, "ThrottlingException")
    assert answered.value.message == (
        "bedrock answered HTTP 429: Too many requests, please wait before trying again."
    )
    assert (framed.value.status_code, framed.value.error_type) == (429, "throttlingException")


def test_the_event_stream_decoder_reads_frames_split_anywhere() -> None:
    frames = event_frame(
        {":event-type": "chunk", ":message-type": "event"}, b'{"bytes":"e30="}'
    ) + event_frame(
        {":exception-type": "throttlingException", ":message-type": "exception"},
        b'{"message":"slow down"}',
    )
    decoder = EventStreamDecoder()
    out = []
    for i in range(len(frames)):
        out += decoder.feed(frames[i : i + 1])
    assert out == [
        ("chunk", '{"bytes":"e30="}'),
        (f"{EXCEPTION}throttlingException", '{"message":"slow down"}'),
    ]
    assert decoder.close() == []
    assert decoder.pending is False


def test_a_frame_whose_checksum_fails_is_malformed() -> None:
    broken = event_frame({":event-type": "chunk"}, b"{}", corrupt=True)
    with pytest.raises(MalformedFrame) as caught:
        EventStreamDecoder().feed(broken)
    assert caught.value.error_type == "malformed_event"


@pytest.mark.anyio
async def test_global_and_regional_profiles_are_priced_apart(sim: Simulator) -> None:
    costs = {}
    for model in ("global.anthropic.claude-opus-4-8", "us.anthropic.claude-opus-4-8"):
        async with Client([_source(sim, model)], cache=False) as client:
            response = await client.complete(HI, reasoning_effort="none")
        assert response.cost is not None
        costs[model] = response.cost
        usage = response.usage
        assert usage is not None
    # genai-prices 0.2.5: global $5 / $25 per MTok, regional $5.50 / $27.50.
    glob, regional = costs["global.anthropic.claude-opus-4-8"], costs[CLAUDE]
    assert regional.input == pytest.approx(glob.input * 1.1)
    assert regional.output == pytest.approx(glob.output * 1.1)


def _converse_answer(text: str, stop: str) -> bytes:
    return json.dumps(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": stop,
            "usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4},
        }
    ).encode()


def _converse_stream(text: str, stop: str) -> bytes:
    return b"".join(
        [
            event("messageStart", {"role": "assistant"}),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}}),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("messageStop", {"stopReason": stop}),
            event("metadata", {"usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}}),
        ]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_an_unknown_converse_stop_reason_is_an_error_never_cached(
    sim: Simulator, tmp_path: Any, stream: bool
) -> None:
    shape = _converse_stream if stream else _converse_answer
    plan = sim.settings.faults = FaultPlan()
    plan.add(Fault.raw(shape("a", "weird_failure")), Fault.raw(shape("b", "end_turn")))
    try:
        async with Client([_source(sim, GPT_OSS)], cache=tmp_path / "cache") as client:
            answers = []
            for _ in range(3):
                if stream:
                    answers.append([e async for e in client.stream(HI)][-1].response)
                else:
                    answers.append(await client.complete(HI))
    finally:
        sim.settings.faults = None
    first = answers[0]
    assert first is not None
    assert (first.provider, first.text, first.finish_reason, first.native_finish_reason) == (
        "bedrock-converse",
        "a",
        "error",
        "weird_failure",
    )
    assert first.warnings == [
        "bedrock-converse sent finish reason 'weird_failure', which polythink does not know; "
        "read as error, so the answer is not cached (kept in native_finish_reason)"
    ]
    assert [(r.text, r.finish_reason, r.cache_hit) for r in answers[1:] if r is not None] == [
        ("b", "stop", False),
        ("b", "stop", True),
    ]
    assert plan.injected["raw"] == 2
