"""The telemetry layer: one OpenTelemetry GenAI span and a few metrics per logical call.

Outermost layer of the onion, so one span covers the whole call as the application saw it:
cache hits, failover across sources and retries included. The span is ended, and the
metrics recorded, exactly once: when ``complete`` returns or raises, when a stream's
``done`` event arrives, when a stream raises, or when the consumer closes or cancels a
stream early.

Names follow the OpenTelemetry GenAI semantic conventions in their v1.37-v1.41 shape
(``gen_ai.provider.name``, ``gen_ai.usage.cache_read.input_tokens`` …; never the
deprecated ``gen_ai.system`` or ``gen_ai.usage.prompt_tokens``). Every name is a string
constant in this module, so a rename upstream is a change here only; the semconv package
is not a dependency (its gen_ai constants are marked as moved). Sources:
https://github.com/open-telemetry/semantic-conventions/tree/v1.41.0/docs/gen-ai
(``gen-ai-spans.md``, ``gen-ai-metrics.md``; summarised with dates in
``../shared/wire/TELEMETRY_RETRY_LIBRARIES.md`` Part A) and, for ``error.type``,
https://opentelemetry.io/docs/specs/semconv/registry/attributes/error/ ("If the operation
has completed successfully, instrumentations SHOULD NOT set error.type").

Span ``chat {model}``, kind CLIENT. Request-side attributes (``gen_ai.provider.name``,
``gen_ai.request.model``) describe the client's first source, set at creation so samplers
see them; response-side ones (``gen_ai.response.model``, ``server.address``,
``polythink.source.index``) describe the source that answered. Ours, under ``polythink.*``:
requested and applied reasoning tier, the reasoning observation, cache hit, source index,
attempts (when an inner layer reports them through :func:`record_attempt`) and the number
of warnings (each warning is also a ``polythink.warning`` span event); when a spend budget
stepped the tier down, ``polythink.reasoning.applied_reason`` = ``budget`` and the budget's
``polythink.budget.name`` (the name also on the span of a call a budget refused).

Metrics: ``gen_ai.client.operation.duration`` (s), ``gen_ai.client.token.usage``
(``{token}``, one point per reported side, ``gen_ai.token.type`` ``input``/``output``),
``gen_ai.client.operation.time_to_first_chunk`` (s, streams), and
``polythink.reasoning.tokens`` (``{token}``, with the applied tier as
``polythink.reasoning.applied_effort``; the conventions define no reasoning token type), and
``polythink.budget.step_downs`` (``{call}``, by requested and applied tier and budget name,
once per call a budget stepped down; the budget layer records spend and remaining), and
``polythink.reasoning.blocks`` (``{block}``, one per ``input_transformations`` entry of an
answer: a replayed reasoning block the provider dropped or let through unchecked, by
provider, model, ``polythink.reasoning.transformation`` and ``polythink.reasoning.reason``).
Every point of one instrument carries the same attribute keys; ``error.type`` is added to
the duration points of failed calls only, as the conventions require. The call, cost and
step-down counters (``polythink.client.calls``, ``polythink.client.cost``,
``polythink.client.cost.saved``, ``polythink.budget.step_downs``) are observable counters:
summed in the process per meter and reported when the meter collects, so a call updates a
sum instead of making an SDK measurement per counter; they carry no exemplars.

Rules kept here:

- Usage the provider did not report is not recorded (no attribute, no histogram point);
  a reported 0 is recorded as 0. ``Usage`` is recorded as the transports normalised it
  (input includes cached tokens on every provider).
- A cache hit consumed no tokens: its usage is neither on the span nor in the token
  histograms (the duration is recorded; ``polythink.cache.hit`` says it was a hit).
- ``error.type`` is the exception's class (``polythink.errors.RateLimitedError``,
  ``TimeoutError``, ``asyncio.exceptions.CancelledError``), never its message; ``_OTHER`` for
  a stream that ended without its ``done`` event. A stream the consumer closed early is not
  an error (no ``error.type``; ``polythink.stream.closed_early`` on the span). The span
  status is ERROR for failures; a cancelled or early-closed stream leaves it unset (the
  application stopped the call; nothing failed).
- No prompt or completion text unless ``capture_content=True``; then
  ``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.tool.definitions``
  as JSON strings on the span. API keys are never recorded; exception messages pass
  through :func:`polythink.errors.redact` with the sources' keys.
- Cheap when nothing records: attributes are built only when ``span.is_recording()``; the
  request's are set with the answer's, at the end of the span (the start attributes are
  there at creation, for samplers).
- Telemetry never raises into the call: a failure here is logged and the call goes on.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import traceback
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from polythink.config import Source
from polythink.errors import BudgetExceededError, InvalidInputError, StreamInterruptedError, redact
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.middleware.semconv import (
    ERROR_TYPE,
    GEN_AI_CLIENT_INFERENCE_TIME_TO_FIRST_CHUNK,
    GEN_AI_CLIENT_OPERATION_DURATION,
    GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
    GEN_AI_CLIENT_TOKEN_USAGE,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_LATEST_EXPERIMENTAL,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_OUTPUT_TYPE,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MAX_TOKENS,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_REQUEST_REASONING_LEVEL,
    GEN_AI_REQUEST_STOP_SEQUENCES,
    GEN_AI_REQUEST_STREAM,
    GEN_AI_REQUEST_TEMPERATURE,
    GEN_AI_REQUEST_TOP_P,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    GEN_AI_TOKEN_TYPE,
    GEN_AI_TOOL_DEFINITIONS,
    GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    HTTP_RESPONSE_STATUS_CODE,
    OPENAI_REQUEST_SERVICE_TIER,
    OPENAI_RESPONSE_SERVICE_TIER,
    OUTCOME_ERROR,
    OUTCOME_SUCCESS,
    POLYTHINK_APPLIED_EFFORT,
    POLYTHINK_APPLIED_REASON,
    POLYTHINK_APPLIED_SERVICE_TIER,
    POLYTHINK_ATTEMPTS,
    POLYTHINK_BUDGET_NAME,
    POLYTHINK_BUDGET_STEP_DOWNS,
    POLYTHINK_CACHE_HIT,
    POLYTHINK_CLIENT_CALLS,
    POLYTHINK_CLIENT_COST,
    POLYTHINK_CLIENT_COST_SAVED,
    POLYTHINK_CLOSED_EARLY,
    POLYTHINK_COST_SOURCE,
    POLYTHINK_COST_TOTAL,
    POLYTHINK_FAILOVER_REASON,
    POLYTHINK_OBSERVATION,
    POLYTHINK_OUTCOME,
    POLYTHINK_REASONING_BLOCKS,
    POLYTHINK_REASONING_REASON,
    POLYTHINK_REASONING_TOKENS,
    POLYTHINK_REASONING_TRANSFORMATION,
    POLYTHINK_REQUESTED_EFFORT,
    POLYTHINK_REQUESTED_SERVICE_TIER,
    POLYTHINK_SERVED_SERVICE_TIER,
    POLYTHINK_SOURCE_INDEX,
    POLYTHINK_WARNING_COUNT,
    POLYTHINK_WARNING_EVENT,
    SEMCONV_OPT_IN_ENV,
    SERVER_ADDRESS,
    SERVER_PORT,
    UNIT_BLOCK,
    UNIT_CALL,
    UNIT_SECONDS,
    UNIT_TOKEN,
    UNIT_USD,
    UNSET_TIER,
)
from polythink.providers import OPENAI_TIERS
from polythink.types import Effort, Message, Request, Response, StreamEvent, Tool, Usage

__all__ = [
    "TelemetryMiddleware",
    "child_span",
    "end_child",
    "error_type",
    "observed_on",
    "provider_name",
    "record_attempt",
]

_OPERATION = "chat"
_UNSET_TIER = UNSET_TIER
_OTHER_ERROR = "_OTHER"

# Bucket advice from the conventions' metric definitions (gen-ai-metrics.md, v1.41.0).
_DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92
)  # fmt: skip
_TOKEN_BUCKETS = tuple(4**i for i in range(14))  # 1, 4, 16, ... 67108864

# Well-known gen_ai.provider.name values (semconv v1.41.0 registry; moonshot_ai from the
# semantic-conventions-genai repository). Providers without one report their polythink id.
_PROVIDER_NAMES = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "kimi": "moonshot_ai",
    "bedrock": "aws.bedrock",
    "bedrock-converse": "aws.bedrock",
    "vertex": "gcp.vertex_ai",
    "vertex-anthropic": "gcp.vertex_ai",
    "azure": "azure.ai.openai",
    "azure-responses": "azure.ai.openai",
}

# The output-message schema spells the tool finish reason in the singular.
_OUTPUT_FINISH = {"tool_calls": "tool_call"}

_CALL_KEY = otel_context.create_key("polythink-telemetry-call")
_log = logging.getLogger("polythink.telemetry")


def provider_name(provider: str) -> str:
    """Return the ``gen_ai.provider.name`` for a polythink provider id.

    Well-known values where the conventions define one (``gemini`` -> ``gcp.gemini``,
    ``xai`` -> ``x_ai``, ``mistral`` -> ``mistral_ai``, ``kimi`` -> ``moonshot_ai``,
    ``openai-responses`` -> ``openai``, the clouds ``aws.bedrock``, ``gcp.vertex_ai`` and
    ``azure.ai.openai``); otherwise the id itself (``openrouter``, ``qwen``…).
    """
    return _PROVIDER_NAMES.get(provider, provider)


def error_type(exc: BaseException) -> str:
    """Return the ``error.type`` for an exception: its class, never its message.

    Fully qualified for classes outside builtins (``polythink.errors.TransientError``,
    ``asyncio.exceptions.CancelledError``), bare for builtins (``TimeoutError``,
    ``GeneratorExit``), as ``opentelemetry-util-genai`` and ``exception.type`` do. The
    result only holds letters, digits, ``_`` and ``.``.
    """
    cls = type(exc)
    name = cls.__qualname__ if "<" not in cls.__qualname__ else cls.__name__
    return name if cls.__module__ == "builtins" else f"{cls.__module__}.{name}"


def child_span(name: str, attributes: Mapping[str, Any]) -> Span | None:
    """Start a child span of the call being traced in this context, or ``None`` (no traced
    call, or its span is not recording: then nothing is built). End it with
    :func:`end_child`. A failure here is logged; the call goes on."""
    call = otel_context.get_value(_CALL_KEY)
    if not isinstance(call, _Call) or not call.recording or call.tracer is None:
        return None
    try:
        return call.tracer.start_span(
            name, context=call.context, kind=SpanKind.INTERNAL, attributes=attributes
        )
    except Exception:
        _log.warning("telemetry could not start a child span; the call goes on", exc_info=True)
        return None


def end_child(
    span: Span | None, error: BaseException | None = None, reason: str | None = None
) -> None:
    """End a span of :func:`child_span`: with ``error``, its ``error.type``, the HTTP status
    it carries, ERROR status with its redacted first words, and ``reason``
    (:data:`POLYTHINK_FAILOVER_REASON`, when given). ``None``: nothing to do."""
    if span is None:
        return
    try:
        if error is not None:
            attributes: dict[str, Any] = {ERROR_TYPE: error_type(error)}
            status = getattr(error, "status_code", None)
            if isinstance(status, int):
                attributes[HTTP_RESPONSE_STATUS_CODE] = status
            if reason is not None:
                attributes[POLYTHINK_FAILOVER_REASON] = reason
            span.set_attributes(attributes)
            kind = getattr(error, "error_type", None) or type(error).__name__
            span.set_status(Status(StatusCode.ERROR, str(kind)))
        elif reason is not None:
            span.set_attribute(POLYTHINK_FAILOVER_REASON, reason)
        span.end()
    except Exception:
        _log.warning("telemetry could not end a child span", exc_info=True)


def record_attempt() -> None:
    """Count one upstream attempt for the call being traced in this context.

    Inner layers (the retry layer) call this once per request they send; the count goes
    on the span as ``polythink.attempts``, summed over every source the call tried. A
    no-op outside a traced call or when the span is not recording; never raises.
    """
    call = otel_context.get_value(_CALL_KEY)
    if isinstance(call, _Call):
        call.attempts += 1


class _SourceInfo:
    """What telemetry says about one source, computed once at client start."""

    __slots__ = (
        "address",
        "base",
        "index",
        "input",
        "key",
        "model",
        "output",
        "port",
        "provider",
        "tiers",
    )

    def __init__(self, source: Source, index: int, first: _SourceInfo | None) -> None:
        self.index = index
        self.model = source.model
        self.provider = provider_name(source.provider)
        self.address, self.port = _server(source.endpoint)
        # Metric points carry the provider, model and server of the source that answered
        # (after a failover, the one that served the tokens), with the same keys on every
        # point; a source without a known address falls back to the first source's.
        head = first if first is not None else self
        self.base: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: _OPERATION,
            GEN_AI_PROVIDER_NAME: self.provider,
            GEN_AI_REQUEST_MODEL: self.model,
        }
        if head.address is not None:
            self.base[SERVER_ADDRESS] = self.address or head.address
        if head.port is not None:
            self.base[SERVER_PORT] = self.port or head.port
        self.input = {**self.base, GEN_AI_TOKEN_TYPE: "input"}
        self.output = {**self.base, GEN_AI_TOKEN_TYPE: "output"}
        self.key = tuple(self.base.items())
        self.tiers: dict[str, dict[str, Any]] = {}
        """The reasoning histogram's attributes, by applied tier."""


def _server(endpoint: str) -> tuple[str | None, int | None]:
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError:
        return None, None
    if not parts.hostname:
        return None, None
    return parts.hostname, port or {"https": 443, "http": 80}.get(parts.scheme)


class _Call:
    """The state of one traced call, from its start to the single end."""

    __slots__ = (
        "attempts",
        "context",
        "ended",
        "first_chunk",
        "recording",
        "request",
        "requested",
        "span",
        "start",
        "tracer",
    )

    def __init__(
        self, span: Span, recording: bool, start: float, requested: Effort | None = None
    ) -> None:
        self.span = span
        self.tracer: trace.Tracer | None = None
        self.request: Request | None = None
        self.requested = requested
        self.recording = recording
        self.start = start
        self.context: otel_context.Context | None = None
        self.first_chunk: float | None = None
        self.attempts = 0
        self.ended = False


class TelemetryMiddleware:
    """Trace and measure every call with OpenTelemetry (GenAI semantic conventions).

    Args:
        sources: the client's sources, in order. The first one names the span
            (``chat {model}``) and gives the request-side provider and model; the one
            that answered gives the response side.
        tracer_provider: where spans go; ``None`` uses the global provider (a no-op until
            the application installs the SDK). Never set globally by polythink.
        meter_provider: where metrics go; ``None`` uses the global provider.
        capture_content: record prompts, completions and tool definitions on the span
            (opt-in; off by default).
        clock: monotonic seconds for durations (``time.perf_counter``; injectable).

    Raises:
        ValueError: for an empty source list.
    """

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if not sources:
            raise InvalidInputError("telemetry needs at least one source")
        first = _SourceInfo(sources[0], 0, None)
        self._sources = (
            first,
            *(_SourceInfo(s, i, first) for i, s in enumerate(sources[1:], 1)),
        )
        self._secrets = tuple(secret for s in sources for secret in s.secrets())
        self._default_effort = sources[0].effort
        self._capture = capture_content
        self._clock = clock
        self._span_name = f"{_OPERATION} {first.model}"
        self._start_attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: _OPERATION,
            GEN_AI_PROVIDER_NAME: first.provider,
            GEN_AI_REQUEST_MODEL: first.model,
        }
        if first.address is not None:
            self._start_attributes[SERVER_ADDRESS] = first.address
            if first.port is not None:
                self._start_attributes[SERVER_PORT] = first.port
        version = _version()
        self._tracer = trace.get_tracer("polythink", version, tracer_provider=tracer_provider)
        meter = metrics.get_meter("polythink", version, meter_provider=meter_provider)
        self._duration = _histogram(
            meter,
            GEN_AI_CLIENT_OPERATION_DURATION,
            UNIT_SECONDS,
            "Duration of a GenAI call as the application saw it.",
            _DURATION_BUCKETS,
        )
        latest = GEN_AI_LATEST_EXPERIMENTAL in os.environ.get(SEMCONV_OPT_IN_ENV, "").split(",")
        self._first_chunk = _histogram(
            meter,
            (
                GEN_AI_CLIENT_INFERENCE_TIME_TO_FIRST_CHUNK
                if latest
                else GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK
            ),
            UNIT_SECONDS,
            "Time from the start of a streamed call to its first event.",
            _DURATION_BUCKETS,
        )
        self._tokens = _histogram(
            meter,
            GEN_AI_CLIENT_TOKEN_USAGE,
            UNIT_TOKEN,
            "Tokens used per call, by gen_ai.token.type.",
            _TOKEN_BUCKETS,
        )
        self._reasoning = _histogram(
            meter,
            POLYTHINK_REASONING_TOKENS,
            UNIT_TOKEN,
            "Reasoning tokens per call, by applied reasoning tier.",
            _TOKEN_BUCKETS,
        )
        self._totals = _totals_of(meter)

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Run the call inside its span; record the outcome, then return or re-raise."""
        call = self._begin(request)
        token = otel_context.attach(call.context) if call.context is not None else None
        try:
            response = await call_next(request)
        except BaseException as exc:
            self._end(call, _partial(exc), exc, None)
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
        self._end(call, response, None, None)
        return response

    async def stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        """Pass events through; end the span at ``done``, on error, or on early close.

        The span is the current span only while the inner layers run (each step of the
        inner generator), never while the consumer holds an event.
        """
        call = self._begin(request)
        usage: Usage | None = None
        done = False
        try:
            async with aclosing(call_next(request)) as events:
                while True:
                    token = otel_context.attach(call.context) if call.context is not None else None
                    try:
                        event = await anext(events)
                    except StopAsyncIteration:
                        break
                    finally:
                        if token is not None:
                            otel_context.detach(token)
                    if call.first_chunk is None:
                        call.first_chunk = self._clock()
                    if event.type == "done":
                        done = True
                        self._end(call, event.response, None, usage)
                    elif event.type == "usage":
                        usage = event.usage
                    yield event
        except BaseException as exc:
            self._end(call, _partial(exc), exc, usage)
            raise
        if not done:
            self._end(call, None, None, usage, incomplete=True)

    def _begin(self, request: Request) -> _Call:
        start = self._clock()
        requested = request.reasoning_effort or self._default_effort
        try:
            span = self._tracer.start_span(
                self._span_name, kind=SpanKind.CLIENT, attributes=self._start_attributes
            )
            call = _Call(span, span.is_recording(), start, requested)
        except Exception:
            _log.warning("telemetry could not start a span; the call goes on", exc_info=True)
            return _Call(trace.INVALID_SPAN, False, start, requested)
        if call.recording:
            try:
                # Described with the answer, in one set of attributes (see _describe).
                call.tracer = self._tracer
                call.request = request
                call.context = otel_context.set_value(
                    _CALL_KEY, call, trace.set_span_in_context(span)
                )
            except Exception:
                _log.warning("telemetry could not describe a request", exc_info=True)
        return call

    def _request_attributes(self, request: Request) -> dict[str, Any]:
        attributes: dict[str, Any] = {}
        if request.max_tokens is not None:
            attributes[GEN_AI_REQUEST_MAX_TOKENS] = request.max_tokens
        if request.temperature is not None:
            attributes[GEN_AI_REQUEST_TEMPERATURE] = float(request.temperature)
        if request.top_p is not None:
            attributes[GEN_AI_REQUEST_TOP_P] = float(request.top_p)
        if request.stop:
            attributes[GEN_AI_REQUEST_STOP_SEQUENCES] = list(request.stop)
        if request.stream:
            attributes[GEN_AI_REQUEST_STREAM] = True
        if request.response_format is not None:
            attributes[GEN_AI_OUTPUT_TYPE] = "json"
        requested = request.reasoning_effort or self._default_effort
        if requested is not None:
            attributes[POLYTHINK_REQUESTED_EFFORT] = requested.value
        if self._capture:
            attributes[GEN_AI_INPUT_MESSAGES] = _dumps([_message_json(m) for m in request.messages])
            if request.tools:
                attributes[GEN_AI_TOOL_DEFINITIONS] = _dumps([_tool_json(t) for t in request.tools])
        return attributes

    def count_result(self, response: Response) -> None:
        """Count an answer that did not come through the onion (a batch request's result):
        one call, and its cost, in ``polythink.client.calls`` and ``polythink.client.cost``
        under its source and tiers (its served tier is ``batch``). No span and no duration:
        the request ran at the provider, on its own time."""
        try:
            call = _Call(trace.INVALID_SPAN, False, 0.0, response.requested_effort)
            self._count(call, self._source(response.source_index), response, None)
        except Exception:
            _log.warning("telemetry could not count a batch result", exc_info=True)

    def _source(self, index: int | None) -> _SourceInfo:
        if index is not None and 0 <= index < len(self._sources):
            return self._sources[index]
        return self._sources[0]

    def _end(
        self,
        call: _Call,
        response: Response | None,
        exc: BaseException | None,
        usage: Usage | None,
        *,
        incomplete: bool = False,
    ) -> None:
        if call.ended:
            return
        call.ended = True
        # The context holds the call and the call its context: freed now, not by the collector.
        call.context = None
        try:
            elapsed = self._clock() - call.start
            if response is not None:
                index: int | None = response.source_index
                if response.usage is not None:
                    usage = response.usage
                if response.cache_hit:
                    usage = None
            else:
                index = getattr(exc, "source_index", None)
            source = self._source(index if isinstance(index, int) else None)
            if isinstance(exc, GeneratorExit):
                # The consumer stopped reading: the call did not fail, so no error series.
                kind: str | None = None
            elif exc is not None:
                kind = error_type(exc)
            else:
                kind = _OTHER_ERROR if incomplete else None
            if call.recording:
                self._describe(call, source, response, exc, kind, usage)
            self._measure(call, source, response, kind, usage, elapsed)
        except Exception:
            _log.warning("telemetry could not record a call; the call is unaffected", exc_info=True)
        finally:
            try:
                call.span.end()
            except Exception:
                _log.warning("telemetry could not end a span", exc_info=True)

    def _describe(
        self,
        call: _Call,
        source: _SourceInfo,
        response: Response | None,
        exc: BaseException | None,
        kind: str | None,
        usage: Usage | None,
    ) -> None:
        span = call.span
        # The request's attributes are set with the answer's, one set of attributes a span
        # rather than two (each costs the SDK a validation pass): exporters see every
        # attribute either way; only the start attributes are there for samplers.
        request, call.request = call.request, None
        attributes: dict[str, Any] = {}
        if request is not None:
            try:
                attributes = self._request_attributes(request)
            except Exception:
                _log.warning("telemetry could not describe a request", exc_info=True)
        if source is not self._sources[0]:
            # Another source answered: the span describes the request that was served.
            attributes[GEN_AI_PROVIDER_NAME] = source.provider
            attributes[GEN_AI_REQUEST_MODEL] = source.model
            span.update_name(f"{_OPERATION} {source.model}")
            if source.address is not None:
                attributes[SERVER_ADDRESS] = source.address
                if source.port is not None:
                    attributes[SERVER_PORT] = source.port
        if response is not None:
            attributes[GEN_AI_RESPONSE_MODEL] = response.model
            if response.id:
                attributes[GEN_AI_RESPONSE_ID] = response.id
            attributes[GEN_AI_RESPONSE_FINISH_REASONS] = [response.finish_reason]
            attributes[POLYTHINK_SOURCE_INDEX] = response.source_index
            attributes[POLYTHINK_CACHE_HIT] = response.cache_hit
            if response.requested_effort is not None:
                attributes[POLYTHINK_REQUESTED_EFFORT] = response.requested_effort.value
            if response.applied_effort is not None:
                attributes[POLYTHINK_APPLIED_EFFORT] = response.applied_effort.value
                attributes[GEN_AI_REQUEST_REASONING_LEVEL] = response.applied_effort.value
            if response.cost is not None:
                attributes[POLYTHINK_COST_TOTAL] = response.cost.total
                attributes[POLYTHINK_COST_SOURCE] = response.cost.source
            if response.step_down is not None:
                attributes[POLYTHINK_APPLIED_REASON] = response.step_down.reason
                attributes[POLYTHINK_BUDGET_NAME] = response.step_down.budget
            _tier_attributes(response, attributes)
            attributes[POLYTHINK_OBSERVATION] = response.thinking.value
            attributes[POLYTHINK_WARNING_COUNT] = len(response.warnings)
            for warning in response.warnings:
                span.add_event(POLYTHINK_WARNING_EVENT, {"message": warning})
            if self._capture:
                attributes[GEN_AI_OUTPUT_MESSAGES] = _dumps([_output_json(response)])
        elif call.first_chunk is not None:
            # The stream began but its finish reason never arrived.
            attributes[GEN_AI_RESPONSE_FINISH_REASONS] = ["error"]
        if usage is not None:
            _usage_attributes(usage, attributes)
        if call.attempts:
            attributes[POLYTHINK_ATTEMPTS] = call.attempts
        if call.first_chunk is not None:
            attributes[GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = call.first_chunk - call.start
        if kind is not None:
            attributes[ERROR_TYPE] = kind
        if isinstance(exc, BudgetExceededError):
            attributes[POLYTHINK_BUDGET_NAME] = exc.budget
        if exc is not None:
            status_code = getattr(exc, "status_code", None)
            if isinstance(status_code, int):
                attributes[HTTP_RESPONSE_STATUS_CODE] = status_code
            index = getattr(exc, "source_index", None)
            if response is None and isinstance(index, int):
                attributes[POLYTHINK_SOURCE_INDEX] = index
            if isinstance(exc, Exception):
                message = redact(str(exc), self._secrets)
                stack = redact("".join(traceback.format_exception(exc)), self._secrets)
                span.record_exception(
                    exc,
                    attributes={"exception.message": message, "exception.stacktrace": stack},
                    escaped=True,
                )
                span.set_status(Status(StatusCode.ERROR, message))
        elif kind is not None:
            span.set_status(Status(StatusCode.ERROR, "the stream ended without its final event"))
        if isinstance(exc, GeneratorExit):
            attributes[POLYTHINK_CLOSED_EARLY] = True
        span.set_attributes(attributes)

    def _measure(
        self,
        call: _Call,
        source: _SourceInfo,
        response: Response | None,
        kind: str | None,
        usage: Usage | None,
        elapsed: float,
    ) -> None:
        base = source.base
        self._duration.record(elapsed, {**base, ERROR_TYPE: kind} if kind is not None else base)
        if call.first_chunk is not None:
            self._first_chunk.record(call.first_chunk - call.start, base)
        self._count(call, source, response, kind)
        if usage is None:
            return
        if usage.input_tokens is not None:
            self._tokens.record(usage.input_tokens, source.input)
        if usage.output_tokens is not None:
            self._tokens.record(usage.output_tokens, source.output)
        if usage.reasoning_tokens is not None:
            applied = response.applied_effort if response is not None else None
            tier = applied.value if applied is not None else _UNSET_TIER
            attributes = source.tiers.get(tier)
            if attributes is None:
                attributes = source.tiers[tier] = {**base, POLYTHINK_APPLIED_EFFORT: tier}
            self._reasoning.record(usage.reasoning_tokens, attributes)

    def _count(
        self, call: _Call, source: _SourceInfo, response: Response | None, kind: str | None
    ) -> None:
        # The same keys on every point, success or error (semconv.CALL_METRIC_KEYS).
        if response is not None:
            requested = response.requested_effort
            applied = response.applied_effort
            model = response.model
            hit = response.cache_hit
            served = served_label(response)
        else:
            requested, applied, model, hit = call.requested, None, source.model, False
            served = _UNSET_TIER
        asked = requested.value if requested is not None else _UNSET_TIER
        tier = applied.value if applied is not None else _UNSET_TIER
        key = (source.key, model, asked, tier, served, hit, kind is None)
        totals = self._totals
        point = totals.point(key)
        if point is None:
            point = totals.new_point(
                key,
                {
                    **source.base,
                    GEN_AI_RESPONSE_MODEL: model,
                    POLYTHINK_REQUESTED_EFFORT: asked,
                    POLYTHINK_APPLIED_EFFORT: tier,
                    POLYTHINK_SERVED_SERVICE_TIER: served,
                    POLYTHINK_SOURCE_INDEX: source.index,
                    POLYTHINK_CACHE_HIT: hit,
                    POLYTHINK_OUTCOME: OUTCOME_ERROR if kind is not None else OUTCOME_SUCCESS,
                },
            )
        cost = response.cost if response is not None else None
        totals.add(point, cost.total if cost is not None else None, hit)
        step = response.step_down if response is not None else None
        if step is not None and not hit:
            moved = step.service_tier.value if step.service_tier is not None else _UNSET_TIER
            totals.step_down(asked, tier, step.budget, moved)
        if response is not None and response.input_transformations and not hit:
            for entry in response.input_transformations:
                totals.block(response.provider, model, entry)


def served_label(response: Response) -> str:
    """The service tier a call counts under in metrics: the tier that served it as reported,
    else the tier sent, else ``unset``."""
    if response.service_tier is not None:
        return response.service_tier
    if response.applied_service_tier is not None:
        return response.applied_service_tier.value
    return _UNSET_TIER


_OPENAI_IDS = frozenset({"openai", "openai-responses"})


def _tier_attributes(response: Response, attributes: dict[str, Any]) -> None:
    """Set the service-tier attributes of a finished call's span: requested, applied,
    served (polythink's vocabulary), and on OpenAI the conventions' own two."""
    if response.requested_service_tier is not None:
        attributes[POLYTHINK_REQUESTED_SERVICE_TIER] = response.requested_service_tier.value
    if response.applied_service_tier is not None:
        attributes[POLYTHINK_APPLIED_SERVICE_TIER] = response.applied_service_tier.value
    served = served_label(response)
    if served != _UNSET_TIER:
        attributes[POLYTHINK_SERVED_SERVICE_TIER] = served
    if response.provider in _OPENAI_IDS:
        applied = response.applied_service_tier
        if applied is not None:
            wire = OPENAI_TIERS.values.get(applied.value)
            if wire:
                attributes[OPENAI_REQUEST_SERVICE_TIER] = wire
        if response.service_tier is not None:
            attributes[OPENAI_RESPONSE_SERVICE_TIER] = _OPENAI_WIRE.get(
                response.service_tier, response.service_tier
            )


_OPENAI_WIRE = {"standard": "default"}
"""polythink's served tier back in OpenAI's spelling, where they differ."""


class _Point:
    """One attribute set of the call counters and its sums: calls, and the dollars spent and
    saved by the cache (``None`` until a call of this set had a cost)."""

    __slots__ = ("attributes", "calls", "saved", "spent")

    def __init__(self, attributes: dict[str, Any]) -> None:
        self.attributes = attributes
        self.calls = 0
        self.spent: float | None = None
        self.saved: float | None = None


class _Totals:
    """The call and cost counters of every client on one meter, summed here and reported
    when the meter collects.

    Observable counters, read at collection: a call costs an update of its point rather
    than an SDK measurement per counter (about 10 us each). They are cumulative sums, as
    the synchronous counters were, with the same attributes; they carry no exemplars.
    Updates and reads hold one lock (a client may run in another thread than the exporter
    and than other clients).
    """

    def __init__(self, meter: metrics.Meter) -> None:
        self._lock = threading.Lock()
        self._points: dict[tuple[Any, ...], _Point] = {}
        self._step_downs: dict[tuple[str, str, str, str], int] = {}
        self._blocks: dict[tuple[str, str, str, str], int] = {}
        meter.create_observable_counter(
            POLYTHINK_REASONING_BLOCKS,
            callbacks=[self._observe_blocks],
            unit=UNIT_BLOCK,
            description="Replayed reasoning blocks a provider dropped or let through unchecked.",
        )
        meter.create_observable_counter(
            POLYTHINK_CLIENT_CALLS,
            callbacks=[self._observe_calls],
            unit=UNIT_CALL,
            description="Calls, by requested and applied reasoning tier, source and outcome.",
        )
        meter.create_observable_counter(
            POLYTHINK_CLIENT_COST,
            callbacks=[self._observe_spent],
            unit=UNIT_USD,
            description="US dollars spent: the cost of every call a provider answered.",
        )
        meter.create_observable_counter(
            POLYTHINK_CLIENT_COST_SAVED,
            callbacks=[self._observe_saved],
            unit=UNIT_USD,
            description="US dollars saved: the original cost of every answer from the cache.",
        )
        meter.create_observable_counter(
            POLYTHINK_BUDGET_STEP_DOWNS,
            callbacks=[self._observe_step_downs],
            unit=UNIT_CALL,
            description="Calls a spend budget stepped down, by requested and applied tier.",
        )

    def point(self, key: tuple[Any, ...]) -> _Point | None:
        """The point of ``key`` if it was counted before."""
        return self._points.get(key)

    def new_point(self, key: tuple[Any, ...], attributes: dict[str, Any]) -> _Point:
        """The point of ``key``, with these attributes when it is new."""
        with self._lock:
            return self._points.setdefault(key, _Point(attributes))

    def add(self, point: _Point, cost: float | None, hit: bool) -> None:
        """Count one call of ``point``, and its cost: saved when it was a cache hit."""
        with self._lock:
            point.calls += 1
            if cost is not None:
                if hit:
                    point.saved = (point.saved or 0.0) + cost
                else:
                    point.spent = (point.spent or 0.0) + cost

    def step_down(self, requested: str, applied: str, budget: str, service_tier: str) -> None:
        """Count one call a budget stepped down or moved to flex (``service_tier``: the tier
        it moved the call to, else ``unset``)."""
        key = (requested, applied, budget, service_tier)
        with self._lock:
            self._step_downs[key] = self._step_downs.get(key, 0) + 1

    def block(self, provider: str, model: str, entry: Mapping[str, Any]) -> None:
        """Count one ``input_transformations`` entry (its type and reason, ``_OTHER`` when
        polythink does not know them: the values stay a small, closed set)."""
        kind = entry.get("type")
        reason = entry.get("reason")
        key = (
            provider,
            model,
            kind if kind in _TRANSFORMATIONS else _OTHER,
            reason if reason in _REASONS else _OTHER,
        )
        with self._lock:
            self._blocks[key] = self._blocks.get(key, 0) + 1

    def _observe_blocks(self, options: metrics.CallbackOptions) -> list[metrics.Observation]:
        with self._lock:
            return [
                metrics.Observation(
                    count,
                    {
                        GEN_AI_PROVIDER_NAME: provider,
                        GEN_AI_RESPONSE_MODEL: model,
                        POLYTHINK_REASONING_TRANSFORMATION: kind,
                        POLYTHINK_REASONING_REASON: reason,
                    },
                )
                for (provider, model, kind, reason), count in self._blocks.items()
            ]

    def _observe_calls(self, options: metrics.CallbackOptions) -> list[metrics.Observation]:
        with self._lock:
            return [metrics.Observation(p.calls, p.attributes) for p in self._points.values()]

    def _observe_spent(self, options: metrics.CallbackOptions) -> list[metrics.Observation]:
        with self._lock:
            return [
                metrics.Observation(p.spent, p.attributes)
                for p in self._points.values()
                if p.spent is not None
            ]

    def _observe_saved(self, options: metrics.CallbackOptions) -> list[metrics.Observation]:
        with self._lock:
            return [
                metrics.Observation(p.saved, p.attributes)
                for p in self._points.values()
                if p.saved is not None
            ]

    def _observe_step_downs(self, options: metrics.CallbackOptions) -> list[metrics.Observation]:
        with self._lock:
            return [
                metrics.Observation(
                    count,
                    {
                        POLYTHINK_REQUESTED_EFFORT: requested,
                        POLYTHINK_APPLIED_EFFORT: applied,
                        POLYTHINK_BUDGET_NAME: budget,
                        POLYTHINK_APPLIED_SERVICE_TIER: service_tier,
                    },
                )
                for (requested, applied, budget, service_tier), count in self._step_downs.items()
            ]


_TRANSFORMATIONS = frozenset({"thinking_dropped", "thinking_mismatch_allowed"})
_REASONS = frozenset(
    {
        "model_binding_mismatch",
        "prefix_binding_mismatch",
        "organization_binding_mismatch",
        "end_user_binding_mismatch",
    }
)
_OTHER = _OTHER_ERROR

_T = TypeVar("_T")
_meters: weakref.WeakKeyDictionary[metrics.Meter, dict[type, Any]] = weakref.WeakKeyDictionary()
_meters_lock = threading.Lock()


def observed_on(meter: metrics.Meter, kind: Callable[[metrics.Meter], _T]) -> _T:
    """The one ``kind(meter)`` of ``meter`` (made on first use): an observable instrument's
    name is taken once per meter, so every client recording to it shares its sums, as they
    would share a synchronous instrument of that name.

    ``kind`` is a class whose instances keep sums or last values in the process and report
    them from their instruments' callbacks when the meter collects.
    """
    with _meters_lock:
        kinds = _meters.get(meter)
        if kinds is None:
            kinds = _meters[meter] = {}
        found = kinds.get(kind)  # type: ignore[call-overload]
        if found is None:
            found = kinds[kind] = kind(meter)  # type: ignore[index]
        return cast(_T, found)


def _totals_of(meter: metrics.Meter) -> _Totals:
    return observed_on(meter, _Totals)


def _usage_attributes(usage: Usage, attributes: dict[str, Any]) -> None:
    for name, value in (
        (GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens),
        (GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens),
        (GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cache_read_tokens),
        (GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_write_tokens),
        (GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS, usage.cache_write_tokens),
        (GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, usage.reasoning_tokens),
    ):
        if value is not None:
            attributes[name] = value


def _partial(exc: BaseException) -> Response | None:
    return exc.partial if isinstance(exc, StreamInterruptedError) else None


def _histogram(
    meter: metrics.Meter, name: str, unit: str, description: str, buckets: Sequence[float]
) -> metrics.Histogram:
    try:
        return meter.create_histogram(
            name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets
        )
    except TypeError:
        # opentelemetry-api before 1.31 has no bucket advice.
        return meter.create_histogram(name, unit=unit, description=description)


def _version() -> str:
    # Imported late: the package's __init__ imports this module before it defines __version__.
    from polythink import __version__

    return __version__


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)


def _content_parts(content: str | list[Any] | None) -> list[dict[str, Any]]:
    if not content:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = str(part.get("type") or "unknown")
        if kind == "text":
            parts.append({"type": "text", "content": str(part.get("text", ""))})
        else:
            # Images and files are recorded by type only: their payloads can be megabytes.
            parts.append({"type": kind})
    return parts


def _message_json(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        parts: list[dict[str, Any]] = [
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.text()}
        ]
    else:
        parts = []
        if message.reasoning:
            parts.append({"type": "reasoning", "content": message.reasoning})
        parts.extend(_content_parts(message.content))
        parts.extend(
            {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
            for c in message.tool_calls
        )
    return {"role": message.role, "parts": parts}


def _output_json(response: Response) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if response.reasoning:
        parts.append({"type": "reasoning", "content": response.reasoning})
    if response.text:
        parts.append({"type": "text", "content": response.text})
    parts.extend(
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
        for c in response.tool_calls
    )
    finish = _OUTPUT_FINISH.get(response.finish_reason, response.finish_reason)
    return {"role": "assistant", "parts": parts, "finish_reason": finish}


def _tool_json(tool: Tool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }
