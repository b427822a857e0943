"""Telemetry through the whole client: respx-mocked HTTP, the simulator, recorded traffic.

Here the spans and metrics come from real parsing: the OpenAI chat transport reads the
bodies, the reasoning layer resolves and reconciles the tier, failover picks the source.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import genai_prices
import httpx
import pytest
import respx
from opentelemetry.trace import SpanKind, StatusCode

from polythink import Client, Source
from polythink.errors import AuthError
from polythink.simulator import Simulator
from tests.conftest import cassette
from tests.test_telemetry import DURATION, FIRST_CHUNK, REASONING, TOKENS, Otel, attrs

KEY = "sk-proj-telemetry0123456789SECRET"
URL = "https://llm.example.com:8443/v1"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
OPENAI_BASE = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-5.5",
    "server.address": "llm.example.com",
    "server.port": 8443,
}
# C13 control: OpenAI's prompt_tokens already include the cached ones.
COMPLETION = {
    "id": "chatcmpl-C13control",
    "object": "chat.completion",
    "model": "gpt-5.5-2026-08-01",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}
    ],
    "usage": {
        "prompt_tokens": 10007,
        "completion_tokens": 50,
        "prompt_tokens_details": {"cached_tokens": 9800},
        "completion_tokens_details": {"reasoning_tokens": 30},
    },
}


def table_price(
    provider: str, model: str, input_tokens: int, output: int, reasoning: int, cache_read: int
) -> float:
    """The total the price table gives for these tokens (the test's own oracle)."""
    usage = genai_prices.Usage(
        input_tokens=input_tokens,
        output_tokens=output,
        output_reasoning_tokens=reasoning,
        cache_read_tokens=cache_read,
    )
    return float(genai_prices.calc_price(usage, model, provider_id=provider).total_price)


NEAREST = (
    "model 'gpt-5.5' does not accept reasoning_effort='max' (accepted: none, low, medium, high, "
    "xhigh); applied 'xhigh' by effort_fallback='nearest'"
)


@pytest.fixture
def otel() -> Otel:
    return Otel()


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(assert_all_called=False)


def client(otel: Otel, router: respx.MockRouter, *sources: Source, **kwargs: Any) -> Client:
    http = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    return Client(
        sources or [Source("openai", "gpt-5.5", api_key=KEY, base_url=URL)],
        http_client=http,
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        **kwargs,
    )


@pytest.mark.anyio
async def test_complete_records_the_exact_span_and_metrics(
    otel: Otel, router: respx.MockRouter
) -> None:
    router.post(f"{URL}/chat/completions").respond(200, json=COMPLETION)

    async with client(otel, router) as llm:
        answer = await llm.complete(
            QUESTION, reasoning_effort="max", max_tokens=512, top_p=1.0, stop=["END"]
        )

    assert answer.text == "Paris."
    span = otel.span()
    assert (span.name, span.kind, span.status.status_code) == (
        "chat gpt-5.5",
        SpanKind.CLIENT,
        StatusCode.UNSET,
    )
    assert attrs(span) == {
        **OPENAI_BASE,
        "gen_ai.request.max_tokens": 512,
        "gen_ai.request.top_p": 1.0,
        "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.response.model": "gpt-5.5-2026-08-01",
        "gen_ai.response.id": "chatcmpl-C13control",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 10007,
        "gen_ai.usage.output_tokens": 50,
        "gen_ai.usage.cache_read.input_tokens": 9800,
        "gen_ai.usage.reasoning.output_tokens": 30,
        "polythink.source.index": 0,
        "polythink.cache.hit": False,
        "polythink.reasoning.requested_effort": "max",
        "polythink.reasoning.applied_effort": "xhigh",
        "gen_ai.request.reasoning.level": "xhigh",
        "polythink.cost.total": table_price("openai", "gpt-5.5", 10007, 50, 30, 9800),
        "polythink.cost.source": f"genai-prices {genai_prices.__version__}",
        "polythink.reasoning.observation": "observed",
        "polythink.warning.count": 1,
        "polythink.attempts": 1,
    }
    assert [(e.name, attrs(e)) for e in span.events] == [
        ("polythink.warning", {"message": NEAREST})
    ]
    (duration,) = otel.points(DURATION)
    assert duration.count == 1
    assert attrs(duration) == OPENAI_BASE
    tokens = {attrs(p)["gen_ai.token.type"]: p.sum for p in otel.points(TOKENS)}
    assert tokens == {"input": 10007, "output": 50}
    (reasoning,) = otel.points(REASONING)
    assert reasoning.sum == 30
    assert attrs(reasoning) == {
        **OPENAI_BASE,
        "polythink.reasoning.applied_effort": "xhigh",
    }
    assert otel.points(FIRST_CHUNK) == []


@pytest.fixture(scope="module")
def simulator() -> Iterator[Simulator]:
    with Simulator() as sim:
        yield sim


@pytest.mark.anyio
async def test_simulated_stream_records_the_exact_span(otel: Otel, simulator: Simulator) -> None:
    source = Source(
        "openai", "gpt-5.5", api_key="sk-sim-0123456789", base_url=simulator.base_url("openai")
    )
    llm = Client([source], tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    async with llm:
        # The call's bounds on each clock the telemetry reads: perf_counter for durations,
        # time_ns for span times (the two are not compared with each other).
        wall_before, before = time.time_ns(), time.perf_counter()
        events = [e async for e in llm.stream(QUESTION, reasoning_effort="high")]
        after, wall_after = time.perf_counter(), time.time_ns()

    done = events[-1].response
    assert done is not None
    span = otel.span()
    attributes = attrs(span)
    first_chunk = attributes.pop("gen_ai.response.time_to_first_chunk")
    assert isinstance(first_chunk, float)
    assert span.end_time is not None
    assert span.start_time is not None
    assert wall_before <= span.start_time < span.end_time <= wall_after
    assert 0 < first_chunk < after - before
    assert re.fullmatch(r"chatcmpl-sim-[0-9a-f]{10}", str(attributes.pop("gen_ai.response.id")))
    # The simulator counts one prompt token per 4 characters of the sorted compact JSON
    # message (58 characters -> 14) and answers 12 words after 320 reasoning tokens ("high").
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5.5",
        "server.address": "127.0.0.1",
        "server.port": simulator.port,
        "gen_ai.request.stream": True,
        "gen_ai.response.model": "gpt-5.5",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 14,
        "gen_ai.usage.output_tokens": 332,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.reasoning.output_tokens": 320,
        "polythink.source.index": 0,
        "polythink.cache.hit": False,
        "polythink.reasoning.requested_effort": "high",
        "polythink.reasoning.applied_effort": "high",
        "gen_ai.request.reasoning.level": "high",
        "polythink.cost.total": table_price("openai", "gpt-5.5", 14, 332, 320, 0),
        "polythink.cost.source": f"genai-prices {genai_prices.__version__}",
        "polythink.reasoning.observation": "observed",
        "polythink.warning.count": 0,
        "polythink.attempts": 1,
    }
    assert [e.type for e in events].count("done") == 1
    (first,) = otel.points(FIRST_CHUNK)
    assert first.sum == first_chunk
    (reasoning,) = otel.points(REASONING)
    assert (reasoning.sum, attrs(reasoning)["polythink.reasoning.applied_effort"]) == (
        320,
        "high",
    )


@pytest.mark.anyio
async def test_recorded_openai_stream_reports_its_zeros(
    otel: Otel, router: respx.MockRouter
) -> None:
    recording = cassette("pai_openai_chat_plain_stream_include_usage.yaml").interactions[0]
    router.post("https://api.openai.com/v1/chat/completions").respond(
        200, headers={"content-type": "text/event-stream"}, content=recording.response_raw
    )
    source = Source("openai", "gpt-4o-mini", api_key=KEY)

    async with client(otel, router, source) as llm:
        events = [e async for e in llm.stream(QUESTION)]

    assert events[-1].type == "done"
    attributes = attrs(otel.span())
    assert {k: v for k, v in attributes.items() if k.startswith(("gen_ai.response", "gen_ai.usage"))
            and k != "gen_ai.response.time_to_first_chunk"} == {
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-Dx0XpqH8w09uBXwq1zFGYdETjtnEl",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 53,
        "gen_ai.usage.output_tokens": 15,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.reasoning.output_tokens": 0,
    }  # fmt: skip
    assert (attributes["server.address"], attributes["server.port"]) == ("api.openai.com", 443)
    tokens = sorted((attrs(p)["gen_ai.token.type"], p.sum) for p in otel.points(TOKENS))
    assert tokens == [("input", 53), ("output", 15)]
    (reasoning,) = otel.points(REASONING)
    assert (reasoning.count, reasoning.sum) == (1, 0)


@pytest.mark.anyio
async def test_c13_anthropic_wire_usage_counts_cached_input(
    otel: Otel, router: respx.MockRouter
) -> None:
    router.post("https://api.anthropic.com/v1/messages").respond(
        200,
        json={
            "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "Paris."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 7,
                "cache_read_input_tokens": 9800,
                "cache_creation_input_tokens": 200,
                "output_tokens": 50,
            },
        },
    )
    source = Source("anthropic", "claude-sonnet-4-5", api_key="sk-ant-api03-0123456789abcdef")

    async with client(otel, router, source) as llm:
        await llm.complete(QUESTION)

    attributes = attrs(otel.span())
    assert {k: v for k, v in attributes.items() if k.startswith("gen_ai.usage.")} == {
        "gen_ai.usage.input_tokens": 10007,
        "gen_ai.usage.cache_read.input_tokens": 9800,
        "gen_ai.usage.cache_creation.input_tokens": 200,
        "gen_ai.usage.cache_write.input_tokens": 200,
        "gen_ai.usage.output_tokens": 50,
    }
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    tokens = sorted((attrs(p)["gen_ai.token.type"], p.sum) for p in otel.points(TOKENS))
    assert tokens == [("input", 10007), ("output", 50)]


@pytest.mark.anyio
async def test_c15_response_without_usage_records_none(
    otel: Otel, router: respx.MockRouter
) -> None:
    body = {key: value for key, value in COMPLETION.items() if key != "usage"}
    router.post(f"{URL}/chat/completions").respond(200, json=body)

    async with client(otel, router) as llm:
        answer = await llm.complete(QUESTION)

    assert answer.usage is None
    assert [k for k in attrs(otel.span()) if k.startswith("gen_ai.usage.")] == []
    assert otel.points(TOKENS) == []
    assert otel.points(REASONING) == []


@pytest.mark.anyio
async def test_failover_puts_the_answering_source_on_the_response_side(
    otel: Otel, router: respx.MockRouter
) -> None:
    first = Source("openai", "gpt-5.5", api_key=KEY, base_url=URL, max_retries=0)
    second = Source(
        "deepseek", "deepseek-chat", api_key="sk-deepseek-0123456789", base_url="https://ds.example"
    )
    router.post(f"{URL}/chat/completions").respond(
        401, json={"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
    )
    answer = {**COMPLETION, "model": "deepseek-chat", "id": "ds-1"}
    router.post("https://ds.example/chat/completions").respond(200, json=answer)

    async with client(otel, router, first, second) as llm:
        result = await llm.complete(QUESTION)

    assert result.source_index == 1
    span = otel.span()
    # The span and the metric points describe the request that was served: the tokens are
    # DeepSeek's, so per-provider dashboards must see DeepSeek.
    assert span.name == "chat deepseek-chat"
    assert span.status.status_code is StatusCode.UNSET
    attributes = attrs(span)
    assert {
        k: attributes[k]
        for k in (
            "gen_ai.provider.name",
            "gen_ai.request.model",
            "gen_ai.response.model",
            "server.address",
            "server.port",
            "polythink.source.index",
        )
    } == {
        "gen_ai.provider.name": "deepseek",
        "gen_ai.request.model": "deepseek-chat",
        "gen_ai.response.model": "deepseek-chat",
        "server.address": "ds.example",
        "server.port": 443,
        "polythink.source.index": 1,
    }
    assert "error.type" not in attributes
    (duration,) = otel.points(DURATION)
    assert attrs(duration) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "deepseek",
        "gen_ai.request.model": "deepseek-chat",
        "server.address": "ds.example",
        "server.port": 443,
    }


@pytest.mark.anyio
async def test_no_api_key_reaches_exported_telemetry(otel: Otel, router: respx.MockRouter) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    route = router.post(f"{URL}/chat/completions")
    route.side_effect = [
        httpx.Response(200, json=COMPLETION),
        httpx.Response(401, json=echo),
    ]
    source = Source("openai", "gpt-5.5", api_key=KEY, base_url=URL, max_retries=0)

    async with client(otel, router, source, capture_content=True) as llm:
        await llm.complete(QUESTION)
        with pytest.raises(AuthError):
            await llm.complete(QUESTION)

    assert route.calls[1].request.headers["authorization"] == f"Bearer {KEY}"
    spans = otel.spans()
    assert [s.status.status_code for s in spans] == [StatusCode.UNSET, StatusCode.ERROR]
    assert attrs(spans[1])["error.type"] == "polythink.errors.AuthError"
    assert attrs(spans[1])["http.response.status_code"] == 401
    exported = "".join(s.to_json() for s in otel.all_spans())
    metrics_data = otel.reader.get_metrics_data()
    assert metrics_data is not None
    exported += metrics_data.to_json()
    assert "capital of France" in exported  # content capture is on, so the prompt is there
    assert KEY not in exported
    assert "telemetry0123456789" not in exported
    assert json.loads(spans[1].to_json())["events"][0]["name"] == "exception"


@pytest.mark.anyio
async def test_client_without_providers_uses_the_global_no_op(router: respx.MockRouter) -> None:
    router.post(f"{URL}/chat/completions").respond(200, json=COMPLETION)
    http = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    source = Source("openai", "gpt-5.5", api_key=KEY, base_url=URL)

    async with Client([source], http_client=http) as llm:
        answer = await llm.complete(QUESTION)

    assert answer.usage is not None
    assert answer.usage.input_tokens == 10007
