"""Every telemetry name polythink emits: span and metric attributes, instruments, units.

One module, so a rename upstream is a change here only, and so the Grafana dashboard
(``dashboards/polythink.json``) and its tests read the same names the code writes.

GenAI names follow the OpenTelemetry semantic conventions, all of them in Development status.
The released ones are v1.41.0 (``open-telemetry/semantic-conventions``, ``docs/gen-ai``; the
Python package ``opentelemetry-semantic-conventions`` 0.66b2 carries the same); the work
moved in 2026-05 to ``open-telemetry/semantic-conventions-genai``, which renamed some of
them. Checked 2026-12-01 against both (summary in ``../shared/wire/OPERATIONS.md`` §D):

- ``gen_ai.provider.name`` replaces the deprecated ``gen_ai.system`` (never emitted).
- ``gen_ai.usage.cache_read.input_tokens`` and ``gen_ai.usage.reasoning.output_tokens``
  (semantic-conventions #3383): subsets of the input and output counts.
- ``gen_ai.usage.cache_creation.input_tokens`` (released) is renamed
  ``gen_ai.usage.cache_write.input_tokens`` (semantic-conventions-genai #440): spans carry
  both until the released name is retired.
- ``gen_ai.request.reasoning.level`` (semantic-conventions-genai ``client-inference.md``,
  "Recommended when applicable"): the level sent, so polythink sets it to the applied tier.
- ``gen_ai.client.operation.time_to_first_chunk`` (released) is renamed
  ``gen_ai.client.inference.time_to_first_chunk`` (semantic-conventions-genai #521). The
  released name is the default; ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``
  switches to the new one (the opt-in the conventions define for moving names).
- ``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage`` stay on their released
  names: their replacements for inference (#521, #374) are not settled between snapshots of
  the new repository.

polythink's own names live under ``polythink.*``. Its instruments carry the same attribute
keys on every point, success or error (:data:`CALL_METRIC_KEYS`), every one of them with a
small, closed set of values.

Prometheus (``opentelemetry-exporter-prometheus``) writes these instruments with dots as
underscores, a unit suffix for ``s`` (``_seconds``) and ``USD`` (``_USD``) and none for
``{token}`` or ``{call}``, and ``_total`` after counters: ``polythink_client_cost_USD_total``
(checked by scraping the installed exporter 0.66b2; the dashboard test scrapes it again).
"""

from __future__ import annotations

__all__ = [
    "CALL_METRIC_KEYS",
    "ERROR_TYPE",
    "GEN_AI_CLIENT_INFERENCE_TIME_TO_FIRST_CHUNK",
    "GEN_AI_CLIENT_OPERATION_DURATION",
    "GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK",
    "GEN_AI_CLIENT_TOKEN_USAGE",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_LATEST_EXPERIMENTAL",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_OUTPUT_TYPE",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MAX_TOKENS",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_REASONING_LEVEL",
    "GEN_AI_REQUEST_STOP_SEQUENCES",
    "GEN_AI_REQUEST_STREAM",
    "GEN_AI_REQUEST_TEMPERATURE",
    "GEN_AI_REQUEST_TOP_P",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_ID",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK",
    "GEN_AI_TOKEN_TYPE",
    "GEN_AI_TOOL_DEFINITIONS",
    "GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS",
    "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS",
    "GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GEN_AI_USAGE_REASONING_OUTPUT_TOKENS",
    "HTTP_REQUEST_METHOD",
    "HTTP_REQUEST_RESEND_COUNT",
    "HTTP_RESPONSE_STATUS_CODE",
    "HTTP_ROUTE",
    "HTTP_SERVER_REQUEST_DURATION",
    "OPENAI_REQUEST_SERVICE_TIER",
    "OPENAI_RESPONSE_SERVICE_TIER",
    "OUTCOME_ERROR",
    "OUTCOME_SUCCESS",
    "POLYTHINK_APPLIED_EFFORT",
    "POLYTHINK_APPLIED_REASON",
    "POLYTHINK_APPLIED_SERVICE_TIER",
    "POLYTHINK_ATTEMPT",
    "POLYTHINK_ATTEMPTS",
    "POLYTHINK_ATTEMPT_SPAN",
    "POLYTHINK_BUDGET_NAME",
    "POLYTHINK_BUDGET_REMAINING",
    "POLYTHINK_BUDGET_SCOPE",
    "POLYTHINK_BUDGET_SPEND",
    "POLYTHINK_BUDGET_STEP_DOWNS",
    "POLYTHINK_CACHE_HIT",
    "POLYTHINK_CLIENT_CALLS",
    "POLYTHINK_CLIENT_COST",
    "POLYTHINK_CLIENT_COST_SAVED",
    "POLYTHINK_CLOSED_EARLY",
    "POLYTHINK_COST_SOURCE",
    "POLYTHINK_COST_TOTAL",
    "POLYTHINK_FAILOVER_REASON",
    "POLYTHINK_FAILOVER_SPAN",
    "POLYTHINK_GATEWAY_DURATION",
    "POLYTHINK_GATEWAY_ROUTE",
    "POLYTHINK_GATEWAY_TENANT",
    "POLYTHINK_OBSERVATION",
    "POLYTHINK_OUTCOME",
    "POLYTHINK_REASONING_BLOCKS",
    "POLYTHINK_REASONING_REASON",
    "POLYTHINK_REASONING_TOKENS",
    "POLYTHINK_REASONING_TRANSFORMATION",
    "POLYTHINK_REQUESTED_EFFORT",
    "POLYTHINK_REQUESTED_SERVICE_TIER",
    "POLYTHINK_SERVED_SERVICE_TIER",
    "POLYTHINK_SOURCE_INDEX",
    "POLYTHINK_WARNING_COUNT",
    "POLYTHINK_WARNING_EVENT",
    "SEMCONV_OPT_IN_ENV",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "UNIT_BLOCK",
    "UNIT_CALL",
    "UNIT_SECONDS",
    "UNIT_TOKEN",
    "UNIT_USD",
    "UNSET_TIER",
]

# Attributes (GenAI semantic conventions).
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_REQUEST_STOP_SEQUENCES = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"
GEN_AI_REQUEST_REASONING_LEVEL = "gen_ai.request.reasoning.level"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS = "gen_ai.usage.cache_write.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_OUTPUT_TYPE = "gen_ai.output.type"
"""``json`` on a call with ``response_format`` ("the content type requested by the client",
values ``text``, ``json``, ``image``, ``speech``; opentelemetry-semantic-conventions 0.66b2
``GenAiOutputTypeValues``); not set on plain text calls."""
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
HTTP_REQUEST_METHOD = "http.request.method"
HTTP_ROUTE = "http.route"
"""The endpoint's path template on the gateway (``/v1/messages``), OpenTelemetry's HTTP
server convention (v1.41, stable)."""
HTTP_SERVER_REQUEST_DURATION = "http.server.request.duration"
"""Histogram (s) of ``polythink serve``'s answers, streams to their last byte (OpenTelemetry's
HTTP server convention, stable), with :data:`HTTP_REQUEST_METHOD`, :data:`HTTP_ROUTE`,
:data:`HTTP_RESPONSE_STATUS_CODE`, :data:`POLYTHINK_GATEWAY_ROUTE` and
:data:`POLYTHINK_GATEWAY_TENANT`."""

# Attributes (polythink's own).
POLYTHINK_REQUESTED_EFFORT = "polythink.reasoning.requested_effort"
POLYTHINK_APPLIED_EFFORT = "polythink.reasoning.applied_effort"
POLYTHINK_OBSERVATION = "polythink.reasoning.observation"
POLYTHINK_CACHE_HIT = "polythink.cache.hit"
POLYTHINK_SOURCE_INDEX = "polythink.source.index"
POLYTHINK_ATTEMPTS = "polythink.attempts"
POLYTHINK_WARNING_COUNT = "polythink.warning.count"
POLYTHINK_WARNING_EVENT = "polythink.warning"
POLYTHINK_CLOSED_EARLY = "polythink.stream.closed_early"
POLYTHINK_OUTCOME = "polythink.call.outcome"
"""``success`` or ``error`` (a stream the consumer closed early is a success)."""
POLYTHINK_COST_TOTAL = "polythink.cost.total"
"""Span attribute: :attr:`Cost.total` in US dollars (the original call's on a cache hit)."""
POLYTHINK_COST_SOURCE = "polythink.cost.source"
"""Span attribute: :attr:`Cost.source` (``provider`` or ``genai-prices X.Y.Z``)."""

POLYTHINK_REQUESTED_SERVICE_TIER = "polythink.service_tier.requested"
"""Span attribute: the service tier the call asked for (``flex``, ``standard``, ``priority``,
``auto``); absent when unset."""
POLYTHINK_APPLIED_SERVICE_TIER = "polythink.service_tier.applied"
"""The service tier sent (after nearest-mapping, a budget's move to flex, a resend after "no
capacity"): on spans, and on the step-down counter (``unset`` when the budget did not move the
call)."""
POLYTHINK_SERVED_SERVICE_TIER = "polythink.service_tier.served"
"""The service tier that served the call: as the provider reported it, else as sent, else
``unset``. On spans and on every point of the call and cost counters, next to the reasoning
tier, so cost can be charted per service tier. Values: ``flex``, ``standard``, ``priority``,
``auto``, ``batch``, a provider's own (``ultrafast``), ``unset``."""
OPENAI_REQUEST_SERVICE_TIER = "openai.request.service_tier"
OPENAI_RESPONSE_SERVICE_TIER = "openai.response.service_tier"
"""The OpenAI-specific conventions' names (semantic-conventions v1.41.0
``docs/registry/attributes/openai.md``, read 2026-12-04): the value sent and the value the
answer reported, as OpenAI spells them, on spans of the ``openai`` and ``openai-responses``
providers."""

POLYTHINK_APPLIED_REASON = "polythink.reasoning.applied_reason"
"""Span attribute: why the applied tier is cheaper than the requested one beyond the model's
own mapping; ``budget`` when a spend budget stepped it down (absent otherwise)."""
POLYTHINK_BUDGET_NAME = "polythink.budget.name"
"""The name of a spend budget: on the budget metrics, on the step-down counter, and on the
span of a call a budget stepped down or refused."""
POLYTHINK_BUDGET_SCOPE = "polythink.budget.scope"
"""What a budget counted a call under (``all``, an account, a model, a tier, or a tag; at
most 100 values per budget per process, the rest ``_other``)."""

POLYTHINK_FAILOVER_SPAN = "polythink.failover"
"""Name of the child span of one failover step: one source tried (or passed over) for the
call, from the attempt to the source's answer or failure."""
POLYTHINK_ATTEMPT_SPAN = "polythink.attempt"
"""Name of the child span of one upstream attempt on a source (the first and each retry), as
the OpenTelemetry HTTP instrumentations make one span per resent request."""
POLYTHINK_FAILOVER_REASON = "polythink.failover.reason"
"""On a failover step that did not answer: why the call moved on (the error's ``error_type``,
``circuit_open`` for a source skipped by its circuit breaker, ``context_window`` for one whose
window is too small)."""
POLYTHINK_ATTEMPT = "polythink.attempt"
"""On an attempt span: its number on the source, 1 for the first."""
HTTP_REQUEST_RESEND_COUNT = "http.request.resend_count"
"""On an attempt span after the first: how many times the request was sent before
(HTTP semantic conventions: "the ordinal number of request resending attempt")."""
POLYTHINK_REASONING_TRANSFORMATION = "polythink.reasoning.transformation"
"""What a provider did to a replayed reasoning block before the model read it: Anthropic's
``input_transformations`` type (``thinking_dropped``, ``thinking_mismatch_allowed``;
``_OTHER`` for a type polythink does not know)."""
POLYTHINK_REASONING_REASON = "polythink.reasoning.reason"
"""Why: the entry's ``reason`` (``model_binding_mismatch``, ``prefix_binding_mismatch``,
``organization_binding_mismatch``, ``end_user_binding_mismatch``; ``_OTHER`` otherwise)."""

OUTCOME_SUCCESS = "success"
OUTCOME_ERROR = "error"
UNSET_TIER = "unset"
"""The tier attribute's value when no tier was requested, or none is known to be applied."""

# Instruments.
GEN_AI_CLIENT_OPERATION_DURATION = "gen_ai.client.operation.duration"
GEN_AI_CLIENT_TOKEN_USAGE = "gen_ai.client.token.usage"
GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
GEN_AI_CLIENT_INFERENCE_TIME_TO_FIRST_CHUNK = "gen_ai.client.inference.time_to_first_chunk"
POLYTHINK_REASONING_TOKENS = "polythink.reasoning.tokens"
"""Histogram ({token}) of reasoning tokens per call, by applied tier."""
POLYTHINK_CLIENT_CALLS = "polythink.client.calls"
"""Counter ({call}) of calls, by requested and applied tier, source, cache hit, outcome."""
POLYTHINK_CLIENT_COST = "polythink.client.cost"
"""Counter (USD) of money spent: :attr:`Cost.total` of every call that reached a provider."""
POLYTHINK_CLIENT_COST_SAVED = "polythink.client.cost.saved"
"""Counter (USD) of money saved: the original cost of every answer served from the cache."""

POLYTHINK_REASONING_BLOCKS = "polythink.reasoning.blocks"
"""Counter ({block}) of replayed reasoning blocks a provider dropped or let through
unchecked (:attr:`Response.input_transformations`), by provider, model, transformation
and reason."""

POLYTHINK_BUDGET_SPEND = "polythink.budget.spend"
"""Counter (USD) of what the calls in a budget's scope cost (each call's charge once it
ended), by budget and scope."""
POLYTHINK_BUDGET_REMAINING = "polythink.budget.remaining"
"""Gauge (USD) of what is left of a budget in its window, as this process last saw it
(reservations of calls in flight counted), by budget and scope."""
POLYTHINK_BUDGET_STEP_DOWNS = "polythink.budget.step_downs"
"""Counter ({call}) of calls a budget stepped down or moved to flex, by requested and applied
reasoning tier, budget, and the service tier it moved the call to
(:data:`POLYTHINK_APPLIED_SERVICE_TIER`, ``unset`` when it did not)."""

POLYTHINK_GATEWAY_DURATION = "polythink.gateway.duration"
"""Histogram (s) of what ``polythink serve`` added to a call: its wall time less the time in
the sources' transports, by :data:`HTTP_ROUTE`, :data:`POLYTHINK_GATEWAY_ROUTE` and
:data:`POLYTHINK_GATEWAY_TENANT`."""
POLYTHINK_GATEWAY_ROUTE = "polythink.route"
"""The gateway route (model id) a call took; ``-`` before one is known."""
POLYTHINK_GATEWAY_TENANT = "polythink.tenant"
"""The gateway tenant whose key a request presented; ``-`` without keys."""

UNIT_SECONDS = "s"
UNIT_TOKEN = "{token}"
UNIT_CALL = "{call}"
UNIT_BLOCK = "{block}"
UNIT_USD = "USD"

SEMCONV_OPT_IN_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
GEN_AI_LATEST_EXPERIMENTAL = "gen_ai_latest_experimental"

CALL_METRIC_KEYS: tuple[str, ...] = (
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_MODEL,
    POLYTHINK_REQUESTED_EFFORT,
    POLYTHINK_APPLIED_EFFORT,
    POLYTHINK_SERVED_SERVICE_TIER,
    POLYTHINK_SOURCE_INDEX,
    POLYTHINK_CACHE_HIT,
    POLYTHINK_OUTCOME,
)
"""The attribute keys of every point of :data:`POLYTHINK_CLIENT_CALLS`,
:data:`POLYTHINK_CLIENT_COST` and :data:`POLYTHINK_CLIENT_COST_SAVED` (plus
``server.address`` / ``server.port`` when the source has an address), success or error."""
