"""The telemetry layer on its own: spans and metrics around stub handlers, exact values.

The stub handlers stand in for everything below the telemetry layer (cache, failover, the
per-source stacks). Time comes from an injected clock that the stubs advance, so durations
are exact. Spans and metrics go to the OpenTelemetry SDK's in-memory exporter and reader.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from polythink import Effort, Message, Source, ThinkingObservation, Tool, ToolCall, Usage
from polythink.conversion import coerce_messages
from polythink.errors import StreamInterruptedError, TransientError
from polythink.middleware import compose
from polythink.middleware import telemetry as tm
from polythink.middleware.telemetry import TelemetryMiddleware, error_type, record_attempt
from polythink.types import Request, Response, StreamEvent

DURATION = "gen_ai.client.operation.duration"
TOKENS = "gen_ai.client.token.usage"
FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
REASONING = "polythink.reasoning.tokens"

ANTHROPIC = Source("anthropic", "claude-sonnet-4-5", api_key="sk-ant-test-0123456789abcdef")
ANTHROPIC_BASE = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "anthropic",
    "gen_ai.request.model": "claude-sonnet-4-5",
    "server.address": "api.anthropic.com",
    "server.port": 443,
}


@dataclass
class Otel:
    """In-memory OpenTelemetry SDK: finished spans and metric points."""

    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)
    tracer_provider: TracerProvider = field(default_factory=TracerProvider)
    meter_provider: MeterProvider = field(init=False)

    def __post_init__(self) -> None:
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> tuple[ReadableSpan, ...]:
        """The spans of the calls (``chat {model}``), without their child spans."""
        return tuple(s for s in self.all_spans() if s.name.startswith("chat "))

    def all_spans(self) -> tuple[ReadableSpan, ...]:
        """Every finished span: the calls' and their failover-step and attempt spans."""
        return self.exporter.get_finished_spans()

    def span(self) -> ReadableSpan:
        (only,) = self.spans()
        return only

    def metric_names(self) -> set[str]:
        data = self.reader.get_metrics_data()
        if data is None:
            return set()
        return {
            m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
        }

    def points(self, name: str) -> list[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        found: list[HistogramDataPoint] = []
        if data is None:
            return found
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)  # type: ignore[arg-type]
        return found

    def layer(self, sources: list[Source], **kwargs: Any) -> TelemetryMiddleware:
        return TelemetryMiddleware(
            sources,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            **kwargs,
        )


def attrs(item: ReadableSpan | HistogramDataPoint | Event) -> dict[str, Any]:
    """The attributes of a span, event or metric point, as a plain dict."""
    return dict(item.attributes or {})


@pytest.fixture
def otel() -> Otel:
    return Otel()


class Clock:
    """Monotonic seconds that only move when a test says so."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def response(
    *,
    usage: Usage | None = None,
    text: str = "Paris.",
    model: str = "claude-sonnet-4-5-20250929",
    provider: str = "anthropic",
    finish: str = "stop",
    **changes: Any,
) -> Response:
    return Response(
        text=text,
        reasoning=changes.pop("reasoning", None),
        tool_calls=changes.pop("tool_calls", []),
        finish_reason=finish,
        usage=usage,
        model=model,
        provider=provider,
        source_index=changes.pop("source_index", 0),
        message=Message(role="assistant", content=text),
        id=changes.pop("id", "msg_01XFDUDYJgAACzvnptvVoYEL"),
        **changes,
    )


class Stub:
    """The rest of the onion: answers with a fixed response or events, or raises."""

    def __init__(
        self,
        clock: Clock,
        *,
        answer: Response | None = None,
        events: list[StreamEvent | BaseException | float] | None = None,
        error: BaseException | None = None,
        latency: float = 0.25,
        during: Callable[[], None] | None = None,
    ) -> None:
        self.clock = clock
        self.answer = answer
        self.events = events or []
        self.error = error
        self.latency = latency
        self.during = during
        self.closed = False
        self.requests: list[Request] = []

    async def complete(self, request: Request) -> Response:
        self.requests.append(request)
        if self.during is not None:
            self.during()
        self.clock.now += self.latency
        if self.error is not None:
            raise self.error
        assert self.answer is not None
        return self.answer

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        self.requests.append(request)
        try:
            for item in self.events:
                if self.during is not None:
                    self.during()
                if isinstance(item, float):
                    self.clock.now += item
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            self.closed = True


def request(*, stream: bool = False, **changes: Any) -> Request:
    return Request(
        messages=coerce_messages([{"role": "user", "content": "What is the capital of France?"}]),
        stream=stream,
        **changes,
    )


async def drain(events: AsyncGenerator[StreamEvent, None], texts: list[str | None]) -> None:
    async for event in events:
        texts.append(event.text)


# -- C13: Anthropic input includes cache reads and writes -------------------------------------


@pytest.mark.anyio
async def test_c13_anthropic_usage_is_recorded_with_cached_input(otel: Otel) -> None:
    # The Anthropic wire reports {"input_tokens": 7, "cache_read_input_tokens": 9800,
    # "cache_creation_input_tokens": 200, "output_tokens": 50}; the Anthropic transport
    # normalises it to the Usage below (input = 7 + 9800 + 200), which a stub returns here.
    usage = Usage(
        input_tokens=7 + 9800 + 200,
        output_tokens=50,
        cache_read_tokens=9800,
        cache_write_tokens=200,
    )
    clock = Clock()
    stub = Stub(clock, answer=response(usage=usage), latency=0.25)
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], stub)

    result = await chain.complete(request(max_tokens=1024, temperature=1, top_p=0.5))

    assert result is stub.answer
    span = otel.span()
    assert span.name == "chat claude-sonnet-4-5"
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    assert attrs(span) == {
        **ANTHROPIC_BASE,
        "gen_ai.request.max_tokens": 1024,
        "gen_ai.request.temperature": 1.0,
        "gen_ai.request.top_p": 0.5,
        "gen_ai.response.model": "claude-sonnet-4-5-20250929",
        "gen_ai.response.id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 10007,
        "gen_ai.usage.output_tokens": 50,
        "gen_ai.usage.cache_read.input_tokens": 9800,
        "gen_ai.usage.cache_creation.input_tokens": 200,
        "gen_ai.usage.cache_write.input_tokens": 200,
        "polythink.source.index": 0,
        "polythink.cache.hit": False,
        "polythink.reasoning.observation": "unknown",
        "polythink.warning.count": 0,
    }
    assert not [k for k in attrs(span) if "prompt_tokens" in k or "completion" in k]

    (duration,) = otel.points(DURATION)
    assert (duration.count, duration.sum) == (1, 0.25)
    assert attrs(duration) == ANTHROPIC_BASE
    assert duration.explicit_bounds == (
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92
    )  # fmt: skip
    tokens = {attrs(p)["gen_ai.token.type"]: p for p in otel.points(TOKENS)}
    assert {kind: (p.count, p.sum) for kind, p in tokens.items()} == {
        "input": (1, 10007),
        "output": (1, 50),
    }
    assert attrs(tokens["input"]) == {
        **ANTHROPIC_BASE,
        "gen_ai.token.type": "input",
    }
    assert tokens["input"].explicit_bounds[:3] == (1, 4, 16)
    assert tokens["input"].explicit_bounds[-1] == 67108864
    assert otel.points(REASONING) == []
    assert otel.points(FIRST_CHUNK) == []


# -- C15: usage not reported is not recorded; reported zeros are -------------------------------


@pytest.mark.anyio
async def test_c15_missing_usage_records_no_attribute_and_no_point(otel: Otel) -> None:
    clock = Clock()
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Stub(clock, answer=response()))

    await chain.complete(request())

    attributes = attrs(otel.span())
    assert [k for k in attributes if k.startswith("gen_ai.usage.")] == []
    assert otel.points(TOKENS) == []
    assert otel.points(REASONING) == []
    assert len(otel.points(DURATION)) == 1


@pytest.mark.anyio
async def test_c15_reported_zeros_are_recorded_as_zero(otel: Otel) -> None:
    clock = Clock()
    usage = Usage(input_tokens=0, output_tokens=0, reasoning_tokens=0)
    chain = compose(
        [otel.layer([ANTHROPIC], clock=clock)], Stub(clock, answer=response(usage=usage))
    )

    await chain.complete(request())

    attributes = attrs(otel.span())
    assert {k: v for k, v in attributes.items() if k.startswith("gen_ai.usage.")} == {
        "gen_ai.usage.input_tokens": 0,
        "gen_ai.usage.output_tokens": 0,
        "gen_ai.usage.reasoning.output_tokens": 0,
    }
    tokens = sorted((attrs(p)["gen_ai.token.type"], p.count, p.sum) for p in otel.points(TOKENS))
    assert tokens == [("input", 1, 0), ("output", 1, 0)]
    (reasoning,) = otel.points(REASONING)
    assert (reasoning.count, reasoning.sum) == (1, 0)
    assert attrs(reasoning) == {
        **ANTHROPIC_BASE,
        "polythink.reasoning.applied_effort": "unset",
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("usage", "attribute", "kind"),
    [
        (Usage(input_tokens=25), "gen_ai.usage.input_tokens", "input"),
        (Usage(output_tokens=25), "gen_ai.usage.output_tokens", "output"),
    ],
)
async def test_c15_only_the_reported_side_gets_a_point(
    otel: Otel, usage: Usage, attribute: str, kind: str
) -> None:
    clock = Clock()
    chain = compose(
        [otel.layer([ANTHROPIC], clock=clock)], Stub(clock, answer=response(usage=usage))
    )

    await chain.complete(request())

    attributes = attrs(otel.span())
    assert {k: v for k, v in attributes.items() if k.startswith("gen_ai.usage.")} == {attribute: 25}
    points = otel.points(TOKENS)
    assert [(attrs(p)["gen_ai.token.type"], p.count, p.sum) for p in points] == [(kind, 1, 25)]


@pytest.mark.anyio
async def test_c15_stream_cut_before_its_usage_chunk_records_no_usage(otel: Otel) -> None:
    clock = Clock()
    partial = response(text="Par", finish="error", id="chatcmpl-cut")
    cut = StreamInterruptedError("stream broke after output began", partial=partial)
    events: list[StreamEvent | BaseException | float] = [0.1, StreamEvent("text", text="Par"), cut]
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Stub(clock, events=events))

    seen: list[str | None] = []
    with pytest.raises(StreamInterruptedError):
        await drain(chain.stream(request(stream=True)), seen)

    assert seen == ["Par"]
    span = otel.span()
    attributes = attrs(span)
    assert [k for k in attributes if k.startswith("gen_ai.usage.")] == []
    assert attributes["error.type"] == "polythink.errors.StreamInterruptedError"
    assert attributes["gen_ai.response.finish_reasons"] == ("error",)
    assert attributes["gen_ai.response.id"] == "chatcmpl-cut"
    assert span.status.status_code is StatusCode.ERROR
    assert otel.points(TOKENS) == []
    (duration,) = otel.points(DURATION)
    assert attrs(duration) == {
        **ANTHROPIC_BASE,
        "error.type": "polythink.errors.StreamInterruptedError",
    }


# -- C14: one low-cardinality error series, identical keys ------------------------------------


@pytest.mark.anyio
async def test_c14_error_type_is_a_class_and_series_share_keys(otel: Otel) -> None:
    clock = Clock()
    layer = otel.layer([ANTHROPIC], clock=clock)
    ok = compose(
        [layer], Stub(clock, answer=response(usage=Usage(input_tokens=5, output_tokens=1)))
    )
    await ok.complete(request())
    messages = ["Connection reset by peer 10.0.0.7:443 req=8f2c"]
    messages += [f"Connection reset by peer 10.0.{i}.7:443 req={i:04x}" for i in range(100)]
    for message in messages:
        failing = compose([layer], Stub(clock, error=ConnectionResetError(message)))
        with pytest.raises(ConnectionResetError):
            await failing.complete(request())

    durations = otel.points(DURATION)
    assert len(durations) == 2
    success = next(p for p in durations if "error.type" not in attrs(p))
    failure = next(p for p in durations if "error.type" in attrs(p))
    assert success.count == 1
    assert failure.count == 101
    assert attrs(failure) == {
        **ANTHROPIC_BASE,
        "error.type": "ConnectionResetError",
    }
    # error.type is the only key a failed call adds (the conventions forbid it on success).
    assert set(attrs(failure)) == set(attrs(success)) | {"error.type"}
    assert {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"} <= set(
        attrs(success)
    )
    assert re.fullmatch(r"[A-Za-z0-9_.]+", str(attrs(failure)["error.type"]))
    failed_spans = [s for s in otel.spans() if s.status.status_code is StatusCode.ERROR]
    assert len(failed_spans) == 101
    assert {attrs(s)["error.type"] for s in failed_spans} == {"ConnectionResetError"}
    assert {tuple(sorted(attrs(s))) for s in failed_spans} == {
        tuple(sorted({**ANTHROPIC_BASE, "error.type": 1}))
    }
    for point in otel.points(DURATION) + otel.points(TOKENS):
        for value in attrs(point).values():
            assert "10.0." not in str(value)
            assert "req=" not in str(value)


def test_error_type_names_the_class_never_the_message() -> None:
    class LocalFailure(Exception):
        pass

    assert error_type(TransientError("overloaded, try later")) == "polythink.errors.TransientError"
    assert error_type(TimeoutError("deadline 30 s")) == "TimeoutError"
    assert error_type(GeneratorExit()) == "GeneratorExit"
    assert error_type(LocalFailure("x")) == "tests.test_telemetry.LocalFailure"


def test_provider_names_use_the_well_known_values() -> None:
    assert {
        p: tm.provider_name(p)
        for p in ("openai", "openai-responses", "anthropic", "gemini", "xai", "mistral", "kimi")
    } == {
        "openai": "openai",
        "openai-responses": "openai",
        "anthropic": "anthropic",
        "gemini": "gcp.gemini",
        "xai": "x_ai",
        "mistral": "mistral_ai",
        "kimi": "moonshot_ai",
    }
    assert tm.provider_name("openrouter") == "openrouter"


def test_the_clouds_report_their_well_known_provider_names() -> None:
    # gen_ai.provider.name well-known values (semconv v1.41.0 registry).
    assert {
        p: tm.provider_name(p)
        for p in ("bedrock", "bedrock-converse", "vertex", "vertex-anthropic", "azure")
    } == {
        "bedrock": "aws.bedrock",
        "bedrock-converse": "aws.bedrock",
        "vertex": "gcp.vertex_ai",
        "vertex-anthropic": "gcp.vertex_ai",
        "azure": "azure.ai.openai",
    }


# -- streams ----------------------------------------------------------------------------------


def stream_events(final: Response) -> list[StreamEvent | BaseException | float]:
    return [
        0.5,
        StreamEvent("reasoning", text="The capital"),
        0.75,
        StreamEvent("text", text="Paris."),
        StreamEvent("usage", usage=final.usage),
        0.75,
        StreamEvent("done", response=final),
    ]


@pytest.mark.anyio
async def test_stream_records_first_chunk_and_duration_exactly(otel: Otel) -> None:
    clock = Clock()
    final = response(
        usage=Usage(input_tokens=40, output_tokens=300, reasoning_tokens=256),
        reasoning="The capital",
        requested_effort=Effort.MAX,
        applied_effort=Effort.HIGH,
        thinking=ThinkingObservation.OBSERVED,
        warnings=["claude-sonnet-4-5 has no tier 'max'; sent 'high'"],
    )
    chain = compose(
        [otel.layer([ANTHROPIC], clock=clock)], Stub(clock, events=stream_events(final))
    )

    kinds = [e.type async for e in chain.stream(request(stream=True, reasoning_effort=Effort.MAX))]

    assert kinds == ["reasoning", "text", "usage", "done"]
    span = otel.span()
    assert attrs(span) == {
        **ANTHROPIC_BASE,
        "gen_ai.request.stream": True,
        "gen_ai.response.model": "claude-sonnet-4-5-20250929",
        "gen_ai.response.id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.response.time_to_first_chunk": 0.5,
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 300,
        "gen_ai.usage.reasoning.output_tokens": 256,
        "polythink.source.index": 0,
        "polythink.cache.hit": False,
        "polythink.reasoning.requested_effort": "max",
        "polythink.reasoning.applied_effort": "high",
        "gen_ai.request.reasoning.level": "high",
        "polythink.reasoning.observation": "observed",
        "polythink.warning.count": 1,
    }
    assert [(e.name, attrs(e)) for e in span.events] == [
        ("polythink.warning", {"message": "claude-sonnet-4-5 has no tier 'max'; sent 'high'"})
    ]
    (duration,) = otel.points(DURATION)
    assert duration.sum == 2.0
    (first,) = otel.points(FIRST_CHUNK)
    assert (first.count, first.sum) == (1, 0.5)
    assert attrs(first) == ANTHROPIC_BASE
    (reasoning,) = otel.points(REASONING)
    assert reasoning.sum == 256
    assert attrs(reasoning) == {
        **ANTHROPIC_BASE,
        "polythink.reasoning.applied_effort": "high",
    }


@pytest.mark.anyio
async def test_stream_closed_early_ends_its_span_exactly_once(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    final = response(usage=Usage(input_tokens=40, output_tokens=300))
    stub = Stub(clock, events=stream_events(final))
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], stub)

    events = chain.stream(request(stream=True))
    first = await anext(events)
    await events.aclose()
    await events.aclose()

    assert first.type == "reasoning"
    assert stub.closed
    assert not [r for r in caplog.records if "ended span" in r.getMessage()]
    span = otel.span()
    assert span.end_time is not None
    assert span.status.status_code is StatusCode.UNSET
    attributes = attrs(span)
    # The consumer stopped reading; nothing failed, so no error series.
    assert "error.type" not in attributes
    assert attributes["polythink.stream.closed_early"] is True
    assert attributes["gen_ai.response.finish_reasons"] == ("error",)
    assert attributes["gen_ai.response.time_to_first_chunk"] == 0.5
    (duration,) = otel.points(DURATION)
    assert (duration.count, duration.sum) == (1, 0.5)
    assert "error.type" not in attrs(duration)


@pytest.mark.anyio
async def test_stream_closed_after_done_is_a_success(otel: Otel) -> None:
    clock = Clock()
    final = response(usage=Usage(input_tokens=40, output_tokens=300))
    chain = compose(
        [otel.layer([ANTHROPIC], clock=clock)], Stub(clock, events=stream_events(final))
    )

    events = chain.stream(request(stream=True))
    async for event in events:
        if event.type == "done":
            break
    await events.aclose()

    span = otel.span()
    assert "error.type" not in attrs(span)
    assert span.status.status_code is StatusCode.UNSET
    (duration,) = otel.points(DURATION)
    assert attrs(duration) == ANTHROPIC_BASE


@pytest.mark.anyio
async def test_cancelled_stream_ends_its_span_without_error_status(otel: Otel) -> None:
    clock = Clock()

    async def endless(request: Request) -> AsyncGenerator[StreamEvent, None]:
        clock.now += 0.5
        yield StreamEvent("text", text="Par")
        await anyio.sleep_forever()
        yield StreamEvent("text", text="is")

    class Endless(Stub):
        def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
            return endless(request)

    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Endless(clock))
    received = []
    with anyio.move_on_after(0.05):
        async for event in chain.stream(request(stream=True)):
            received.append(event.text)

    assert received == ["Par"]
    span = otel.span()
    assert span.status.status_code is StatusCode.UNSET
    assert attrs(span)["error.type"] == "asyncio.exceptions.CancelledError"
    (duration,) = otel.points(DURATION)
    assert attrs(duration)["error.type"] == "asyncio.exceptions.CancelledError"


@pytest.mark.anyio
async def test_stream_ending_without_done_is_recorded_as_an_error(otel: Otel) -> None:
    clock = Clock()
    events: list[StreamEvent | BaseException | float] = [0.2, StreamEvent("text", text="Par")]
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Stub(clock, events=events))

    assert [e.text async for e in chain.stream(request(stream=True))] == ["Par"]

    span = otel.span()
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "_OTHER"
    assert attrs(span)["gen_ai.response.finish_reasons"] == ("error",)


@pytest.mark.anyio
async def test_stream_error_keeps_usage_reported_before_the_break(otel: Otel) -> None:
    clock = Clock()
    seen_usage = Usage(input_tokens=12, output_tokens=3)
    failure = TransientError("upstream overloaded", status_code=529, source_index=0)
    events: list[StreamEvent | BaseException | float] = [
        0.1,
        StreamEvent("usage", usage=seen_usage),
        failure,
    ]
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Stub(clock, events=events))

    with pytest.raises(TransientError):
        await drain(chain.stream(request(stream=True)), [])

    span = otel.span()
    attributes = attrs(span)
    assert attributes["gen_ai.usage.input_tokens"] == 12
    assert attributes["gen_ai.usage.output_tokens"] == 3
    assert attributes["http.response.status_code"] == 529
    assert attributes["polythink.source.index"] == 0
    assert span.status.status_code is StatusCode.ERROR
    (exception,) = [e for e in span.events if e.name == "exception"]
    assert attrs(exception)["exception.type"] == "polythink.errors.TransientError"
    tokens = sorted((attrs(p)["gen_ai.token.type"], p.sum) for p in otel.points(TOKENS))
    assert tokens == [("input", 12), ("output", 3)]


@pytest.mark.anyio
async def test_exception_text_is_redacted_of_the_sources_keys(otel: Otel) -> None:
    clock = Clock()
    key = "sk-ant-test-0123456789abcdef"
    failure = RuntimeError(f"proxy refused header x-api-key: {key}")
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Stub(clock, error=failure))

    with pytest.raises(RuntimeError):
        await chain.complete(request())

    span = otel.span()
    assert span.status.description == "proxy refused header x-api-key: [REDACTED]"
    (exception,) = span.events
    assert attrs(exception)["exception.message"] == ("proxy refused header x-api-key: [REDACTED]")
    assert key not in span.to_json()
    assert attrs(span)["error.type"] == "RuntimeError"


# -- our attributes ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_cache_hit_records_no_usage(otel: Otel) -> None:
    clock = Clock()
    hit = response(usage=Usage(input_tokens=40, output_tokens=8), cache_hit=True)
    chain = compose(
        [otel.layer([ANTHROPIC], clock=clock)], Stub(clock, answer=hit, latency=0.03125)
    )

    await chain.complete(request())

    attributes = attrs(otel.span())
    assert attributes["polythink.cache.hit"] is True
    assert [k for k in attributes if k.startswith("gen_ai.usage.")] == []
    assert otel.points(TOKENS) == []
    (duration,) = otel.points(DURATION)
    assert duration.sum == 0.03125


@pytest.mark.anyio
async def test_inner_layers_report_attempts(otel: Otel) -> None:
    clock = Clock()

    def three_attempts() -> None:
        for _ in range(3):
            record_attempt()

    chain = compose(
        [otel.layer([ANTHROPIC], clock=clock)],
        Stub(clock, answer=response(), during=three_attempts),
    )
    await chain.complete(request())
    record_attempt()  # outside any call: nothing to count, nothing raised

    assert attrs(otel.span())["polythink.attempts"] == 3


@pytest.mark.anyio
async def test_stream_attempts_are_counted_in_the_inner_steps(otel: Otel) -> None:
    clock = Clock()
    final = response()
    events: list[StreamEvent | BaseException | float] = [
        StreamEvent("text", text="a"),
        StreamEvent("done", response=final),
    ]
    chain = compose(
        [otel.layer([ANTHROPIC], clock=clock)], Stub(clock, events=events, during=record_attempt)
    )

    async for _ in chain.stream(request(stream=True)):
        record_attempt()  # the consumer's own code is not an attempt

    assert attrs(otel.span())["polythink.attempts"] == 2


@pytest.mark.anyio
async def test_span_is_current_only_while_inner_layers_run(otel: Otel) -> None:
    clock = Clock()
    inside: list[trace.Span] = []
    between: list[trace.Span] = []

    def note() -> None:
        inside.append(trace.get_current_span())

    events: list[StreamEvent | BaseException | float] = [
        StreamEvent("text", text="a"),
        StreamEvent("text", text="b"),
        StreamEvent("done", response=response()),
    ]
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Stub(clock, events=events, during=note))
    async for _ in chain.stream(request(stream=True)):
        between.append(trace.get_current_span())

    span = otel.span()
    assert span.context is not None
    assert {s.get_span_context().span_id for s in inside} == {span.context.span_id}
    assert {s.get_span_context().span_id for s in between} == {0}


@pytest.mark.anyio
async def test_request_effort_defaults_to_the_first_sources(otel: Otel) -> None:
    clock = Clock()
    source = Source("anthropic", "claude-sonnet-4-5", api_key="k" * 12, reasoning_effort="low")
    chain = compose(
        [otel.layer([source], clock=clock)],
        Stub(clock, error=TransientError("overloaded", source_index=0)),
    )

    with pytest.raises(TransientError):
        await chain.complete(request())

    attributes = attrs(otel.span())
    assert attributes["polythink.reasoning.requested_effort"] == "low"
    assert attributes["polythink.source.index"] == 0
    assert "http.response.status_code" not in attributes


# -- content ----------------------------------------------------------------------------------


def conversation() -> Request:
    messages: list[Message | dict[str, Any]] = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Weather in Paris?"},
        Message(
            role="assistant",
            reasoning="Need the tool.",
            tool_calls=(ToolCall(id="call_1", name="weather", arguments='{"city":"Paris"}'),),
        ),
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
    ]
    tool = Tool(name="weather", description="Current weather", parameters={"type": "object"})
    return Request(messages=coerce_messages(messages), tools=(tool,))


@pytest.mark.anyio
async def test_no_content_is_recorded_by_default(otel: Otel) -> None:
    clock = Clock()
    answer = response(text="It is sunny in Paris.", reasoning="Check the tool result.")
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Stub(clock, answer=answer))

    await chain.complete(conversation())

    exported = otel.span().to_json()
    for text in (
        "Answer briefly",
        "Weather in Paris",
        "18 C",
        "sunny",
        "Check the tool",
        "picture",
    ):
        assert text not in exported
    assert not {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
    } & set(attrs(otel.span()))


@pytest.mark.anyio
async def test_captured_content_follows_the_message_schema(otel: Otel) -> None:
    clock = Clock()
    answer = response(
        text="It is sunny in Paris.",
        reasoning="Check the tool result.",
        tool_calls=[ToolCall(id="call_2", name="weather", arguments='{"city":"Lyon"}')],
        finish="tool_calls",
    )
    layer = otel.layer([ANTHROPIC], clock=clock, capture_content=True)
    await compose([layer], Stub(clock, answer=answer)).complete(conversation())

    attributes = attrs(otel.span())
    assert attributes["gen_ai.input.messages"] == (
        '[{"role":"system","parts":[{"type":"text","content":"Answer briefly."}]},'
        '{"role":"user","parts":[{"type":"text","content":"Weather in Paris?"}]},'
        '{"role":"assistant","parts":[{"type":"reasoning","content":"Need the tool."},'
        '{"type":"tool_call","id":"call_1","name":"weather","arguments":"{\\"city\\":\\"Paris\\"}"}]},'
        '{"role":"tool","parts":[{"type":"tool_call_response","id":"call_1",'
        '"response":"18 C, sunny"}]},'
        '{"role":"user","parts":[{"type":"text","content":"And this picture?"},'
        '{"type":"image_url"}]}]'
    )
    assert attributes["gen_ai.output.messages"] == (
        '[{"role":"assistant","parts":[{"type":"reasoning","content":"Check the tool result."},'
        '{"type":"text","content":"It is sunny in Paris."},'
        '{"type":"tool_call","id":"call_2","name":"weather","arguments":"{\\"city\\":\\"Lyon\\"}"}],'
        '"finish_reason":"tool_call"}]'
    )
    assert attributes["gen_ai.tool.definitions"] == (
        '[{"type":"function","name":"weather","description":"Current weather",'
        '"parameters":{"type":"object"}}]'
    )


# -- cheap when off, never raises -------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["noop", "sampled_out"])
async def test_nothing_is_built_when_the_span_does_not_record(
    provider: str, otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    for method in ("_request_attributes", "_describe"):
        monkeypatch.setattr(
            TelemetryMiddleware, method, lambda *args, name=method: built.append(name)
        )
    tracer_provider = (
        trace.NoOpTracerProvider() if provider == "noop" else TracerProvider(sampler=ALWAYS_OFF)
    )
    clock = Clock()
    layer = TelemetryMiddleware(
        [ANTHROPIC],
        tracer_provider=tracer_provider,
        meter_provider=otel.meter_provider,
        clock=clock,
        capture_content=True,
    )
    answer = response(usage=Usage(input_tokens=3, output_tokens=2))
    chain = compose([layer], Stub(clock, answer=answer, during=record_attempt))

    assert await chain.complete(request()) is answer
    assert built == []
    assert len(otel.points(DURATION)) == 1


class _Raising:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"exporter down ({name})")


class _BrokenHistogram(metrics.NoOpHistogram):
    def record(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("metrics backend down")


class _BrokenMeter(metrics.NoOpMeter):
    def create_histogram(self, name: str, *args: Any, **kwargs: Any) -> metrics.Histogram:
        return _BrokenHistogram(name)


class _BrokenMeterProvider(metrics.NoOpMeterProvider):
    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> metrics.Meter:
        return _BrokenMeter(name)


class _BrokenSpan(trace.NonRecordingSpan):
    ended = 0

    def is_recording(self) -> bool:
        return True

    def set_attributes(self, attributes: Any) -> None:
        raise RuntimeError("span storage full")

    def end(self, end_time: int | None = None) -> None:
        _BrokenSpan.ended += 1


class _BrokenTracer(trace.NoOpTracer):
    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return _BrokenSpan(trace.INVALID_SPAN_CONTEXT)


class _BrokenTracerProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _BrokenTracer()


@pytest.mark.anyio
async def test_broken_telemetry_never_reaches_the_call(caplog: pytest.LogCaptureFixture) -> None:
    _BrokenSpan.ended = 0
    clock = Clock()
    layer = TelemetryMiddleware(
        [ANTHROPIC],
        tracer_provider=_BrokenTracerProvider(),
        meter_provider=_BrokenMeterProvider(),
        clock=clock,
    )
    final = response(usage=Usage(input_tokens=1, output_tokens=1))
    caplog.set_level(logging.WARNING, logger="polythink.telemetry")

    answer = await compose([layer], Stub(clock, answer=final)).complete(request())
    kinds = [
        e.type
        async for e in compose([layer], Stub(clock, events=stream_events(final))).stream(
            request(stream=True)
        )
    ]

    assert answer is final
    assert kinds == ["reasoning", "text", "usage", "done"]
    assert _BrokenSpan.ended == 2
    assert any("telemetry could not" in r.getMessage() for r in caplog.records)


# -- names ------------------------------------------------------------------------------------


def test_names_match_the_semantic_conventions_package() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
    from opentelemetry.semconv.attributes import error_attributes, server_attributes

    same = {
        tm.GEN_AI_OPERATION_NAME: genai.GEN_AI_OPERATION_NAME,
        tm.GEN_AI_PROVIDER_NAME: genai.GEN_AI_PROVIDER_NAME,
        tm.GEN_AI_REQUEST_MODEL: genai.GEN_AI_REQUEST_MODEL,
        tm.GEN_AI_REQUEST_MAX_TOKENS: genai.GEN_AI_REQUEST_MAX_TOKENS,
        tm.GEN_AI_REQUEST_TEMPERATURE: genai.GEN_AI_REQUEST_TEMPERATURE,
        tm.GEN_AI_REQUEST_TOP_P: genai.GEN_AI_REQUEST_TOP_P,
        tm.GEN_AI_REQUEST_STOP_SEQUENCES: genai.GEN_AI_REQUEST_STOP_SEQUENCES,
        tm.GEN_AI_REQUEST_STREAM: genai.GEN_AI_REQUEST_STREAM,
        tm.GEN_AI_RESPONSE_ID: genai.GEN_AI_RESPONSE_ID,
        tm.GEN_AI_RESPONSE_MODEL: genai.GEN_AI_RESPONSE_MODEL,
        tm.GEN_AI_RESPONSE_FINISH_REASONS: genai.GEN_AI_RESPONSE_FINISH_REASONS,
        tm.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: genai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        tm.GEN_AI_USAGE_INPUT_TOKENS: genai.GEN_AI_USAGE_INPUT_TOKENS,
        tm.GEN_AI_USAGE_OUTPUT_TOKENS: genai.GEN_AI_USAGE_OUTPUT_TOKENS,
        tm.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: genai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        tm.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: genai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        tm.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: genai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        tm.GEN_AI_TOKEN_TYPE: genai.GEN_AI_TOKEN_TYPE,
        tm.GEN_AI_INPUT_MESSAGES: genai.GEN_AI_INPUT_MESSAGES,
        tm.GEN_AI_OUTPUT_MESSAGES: genai.GEN_AI_OUTPUT_MESSAGES,
        tm.GEN_AI_TOOL_DEFINITIONS: genai.GEN_AI_TOOL_DEFINITIONS,
        tm.SERVER_ADDRESS: server_attributes.SERVER_ADDRESS,
        tm.SERVER_PORT: server_attributes.SERVER_PORT,
        tm.ERROR_TYPE: error_attributes.ERROR_TYPE,
        tm.GEN_AI_CLIENT_OPERATION_DURATION: gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION,
        tm.GEN_AI_CLIENT_TOKEN_USAGE: gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE,
        tm.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK: (
            gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK
        ),
    }
    assert [ours for ours, theirs in same.items() if ours != theirs] == []
    deprecated = {genai.GEN_AI_SYSTEM, genai.GEN_AI_USAGE_PROMPT_TOKENS}
    deprecated |= {genai.GEN_AI_USAGE_COMPLETION_TOKENS, genai.GEN_AI_PROMPT}
    ours = {getattr(tm, name) for name in tm.__all__ if name.isupper()}
    assert ours & deprecated == set()
