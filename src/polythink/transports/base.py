"""What every transport shares: the SSE decoder, HTTP plumbing, and the error boundary.

A transport is the innermost handler of a source's onion: it builds the provider's body,
sends it with the client's one ``httpx.AsyncClient``, parses JSON or SSE, and maps every
failure to polythink's error taxonomy exactly once, here, with ``raise … from``.
"""

from __future__ import annotations

import codecs
import dataclasses
import email.utils
import json
import logging
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import aclosing, asynccontextmanager
from datetime import UTC, datetime
from typing import Any, cast

import anyio
import httpx

from polythink.config import Source
from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
    redact,
)
from polythink.providers import ProviderProfile
from polythink.reasoning.capabilities import get_capability
from polythink.types import (
    Effort,
    Message,
    RateLimit,
    Request,
    Response,
    StreamEvent,
    ThinkingObservation,
    ToolCall,
    Usage,
)

_log = logging.getLogger("polythink.transport")

__all__ = [
    "DONE",
    "TRANSPORT_ERRORS",
    "HTTPTransport",
    "SSEDecoder",
    "apply_overrides",
    "assistant_response",
    "deep_merge",
    "dumps",
    "error_from_body",
    "error_from_status",
    "error_from_transport",
    "parse_duration",
    "parse_rate_limit",
    "parse_retry_after",
    "sampling_conflicts",
    "token_count",
    "with_notes",
    "with_rate_limit",
]

_JSON_HEADERS = {"content-type": "application/json", "accept": "application/json"}
_SSE_ACCEPT = "text/event-stream"


def dumps(body: Any) -> bytes:
    """Serialise a request body compactly as UTF-8 JSON."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def deep_merge(base: dict[str, Any], fragment: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``fragment`` into ``base`` in place, recursing into nested objects.

    Values in ``fragment`` win; nested dicts merge key by key; lists are replaced whole.
    Returns ``base``.
    """
    for key, value in fragment.items():
        current = base.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            deep_merge(current, value)
        elif isinstance(value, Mapping):
            base[key] = deep_merge({}, value)
        else:
            base[key] = value
    return base


class SSEDecoder:
    """Incremental server-sent-events decoder following the WHATWG parsing rules.

    Feed raw bytes as they arrive; get ``(event_type, data)`` pairs for each dispatched
    event. Lines end at CRLF, LF or CR (a CR at a chunk's end is held until the next chunk
    shows whether an LF follows). UTF-8 split across chunks is decoded correctly; a leading
    BOM is dropped. Lines starting with ``:`` are comments; ``data:`` lines of one event are
    joined with ``\\n``; ``id`` and ``retry`` only update decoder state; an event whose data
    buffer is empty is not dispatched; the event type defaults to ``message``. Pending data
    at the end of the stream is discarded, as the spec requires.
    """

    __slots__ = (
        "_buffer",
        "_data",
        "_decoder",
        "_event",
        "_skip_lf",
        "_started",
        "last_event_id",
        "retry",
    )

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._skip_lf = False
        self._started = False
        self.last_event_id = ""
        self.retry: int | None = None

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        """Decode ``chunk`` and return the events it completes (possibly none)."""
        text = self._decoder.decode(chunk)
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text[:1] == "\n":
                text = text[1:]
        buffer = self._buffer + text
        if "\r" in buffer:
            if buffer[-1] == "\r":
                self._skip_lf = True
            buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
        lines = buffer.split("\n")
        self._buffer = lines.pop()
        if not lines:
            return []
        return self._lines(lines)

    def _lines(self, lines: Iterable[str]) -> list[tuple[str, str]]:
        events: list[tuple[str, str]] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append((self._event or "message", "\n".join(data)))
                    data.clear()
                self._event = ""
                continue
            if line[0] == ":":
                continue
            name, sep, value = line.partition(":")
            if sep and value[:1] == " ":
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                self._event = value
            elif name == "id":
                if "\0" not in value:
                    self.last_event_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                self.retry = int(value)
        return events


_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def parse_retry_after(
    headers: Mapping[str, str], now: Callable[[], float] | None = None
) -> float | None:
    """Return the server's requested wait in seconds, or ``None``.

    Reads ``retry-after-ms`` (milliseconds, fractions allowed), then ``retry-after`` as
    seconds (fractions allowed) or as an HTTP date, minus ``now()`` (wall-clock seconds,
    ``time.time`` by default) and never below 0; a date without a zone is UTC. A value too
    large for a float gives ``math.inf`` so a cap check refuses it; anything else
    unparseable (negative numbers, ``inf``, ``nan``, garbage) gives ``None``. Conventions
    of the OpenAI and Anthropic SDKs (WIRE.md §8.3) and RFC 9110 §10.2.3.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None and _SECONDS.fullmatch(raw_ms.strip()):
        return float(raw_ms) / 1000.0
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    if _SECONDS.fullmatch(raw):
        return float(raw)
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return max(0.0, parsed.timestamp() - (now or time.time)())


_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(raw: str) -> float | None:
    """Return a Go duration string (``6m0s``, ``1s``, ``12ms``, ``1h2m3.5s``) in seconds.

    OpenAI sends its ``x-ratelimit-reset-*`` values in this form (WIRE.md §8.1; go-openai
    parses them with ``time.ParseDuration``). A bare number is taken as seconds. Anything
    else, or a negative value, gives ``None``.
    """
    text = raw.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 and math.isfinite(seconds) else None
    total = 0.0
    position = 0
    for match in _GO_DURATION.finditer(text):
        if match.start() != position:
            return None
        total += float(match[1]) * _GO_UNITS[match[2]]
        position = match.end()
    if position != len(text) or position == 0:
        return None
    return total


def _header_int(headers: Mapping[str, str], name: str) -> int | None:
    raw = headers.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def _reset_instant(raw: str | None, now: Callable[[], float]) -> float | None:
    if raw is None:
        return None
    try:
        instant = datetime.fromisoformat(raw.strip())
    except ValueError:
        return parse_duration(raw)
    if instant.tzinfo is None:
        return None
    return max(0.0, instant.timestamp() - now())


def parse_rate_limit(
    headers: Mapping[str, str], now: Callable[[], float] = time.time
) -> RateLimit | None:
    """Read the provider's rate-limit headers; ``None`` when it sent none.

    OpenAI (and the OpenAI-compatible providers that copy it):
    ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, resets as Go durations.
    Anthropic: ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``, resets as
    RFC 3339 instants, turned into seconds from ``now()`` (wall clock, never below 0).
    Negative or malformed values become ``None``. Sources: WIRE.md §8.1-8.2; recorded
    headers in ``llm_openai_responses_plain_stream.yaml`` and ``llmanthropic_plain_stream.yaml``.
    """
    if headers.get("x-ratelimit-limit-requests") is not None or (
        headers.get("x-ratelimit-remaining-tokens") is not None
    ):
        reset_requests = headers.get("x-ratelimit-reset-requests")
        reset_tokens = headers.get("x-ratelimit-reset-tokens")
        return RateLimit(
            requests_limit=_header_int(headers, "x-ratelimit-limit-requests"),
            requests_remaining=_header_int(headers, "x-ratelimit-remaining-requests"),
            requests_reset=parse_duration(reset_requests) if reset_requests else None,
            tokens_limit=_header_int(headers, "x-ratelimit-limit-tokens"),
            tokens_remaining=_header_int(headers, "x-ratelimit-remaining-tokens"),
            tokens_reset=parse_duration(reset_tokens) if reset_tokens else None,
        )
    if headers.get("anthropic-ratelimit-requests-limit") is not None or (
        headers.get("anthropic-ratelimit-tokens-remaining") is not None
    ):
        return RateLimit(
            requests_limit=_header_int(headers, "anthropic-ratelimit-requests-limit"),
            requests_remaining=_header_int(headers, "anthropic-ratelimit-requests-remaining"),
            requests_reset=_reset_instant(headers.get("anthropic-ratelimit-requests-reset"), now),
            tokens_limit=_header_int(headers, "anthropic-ratelimit-tokens-limit"),
            tokens_remaining=_header_int(headers, "anthropic-ratelimit-tokens-remaining"),
            tokens_reset=_reset_instant(headers.get("anthropic-ratelimit-tokens-reset"), now),
        )
    return None


def _request_id(headers: Mapping[str, str]) -> str | None:
    for name in ("x-request-id", "request-id", "x-goog-request-id", "cf-ray"):
        value = headers.get(name)
        if value:
            return value
    return None


def _should_retry(headers: Mapping[str, str]) -> bool | None:
    value = headers.get("x-should-retry")
    if value == "true":
        return True
    if value == "false":
        return False
    return None


def _error_fields(body: Any) -> tuple[str | None, str | None, str | None, frozenset[str]]:
    """Return (error_type, message, param, kinds) from the common provider error shapes.

    OpenAI ``{"error": {"type", "code", "message", "param"}}``; Anthropic ``{"type": "error",
    "error": {"type", "message"}}``; Gemini ``{"error": {"code", "status", "message"}}``.
    ``error_type`` prefers a string ``code`` over ``type`` over ``status``; ``kinds`` holds
    all of them (and a numeric ``code``) lowercased, for classification.
    """
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, Mapping):
        return None, None, None, frozenset()
    err = body.get("error", body)
    if not isinstance(err, Mapping):
        return None, str(err), None, frozenset()
    code = err.get("code")
    kind = code if isinstance(code, str) and code else err.get("type") or err.get("status")
    message = err.get("message")
    param = err.get("param")
    kinds = frozenset(
        str(value).lower()
        for value in (code, err.get("type"), err.get("status"))
        if isinstance(value, str | int) and not isinstance(value, bool) and value != ""
    )
    return (
        str(kind) if kind else None,
        str(message) if message is not None else None,
        str(param) if param else None,
        kinds,
    )


def _retry_info(body: Any) -> float | None:
    """Seconds from a Google ``google.rpc.RetryInfo`` error detail (``"retryDelay": "37s"``).

    Gemini puts its wait there rather than in a header (error model: AIP-193,
    https://google.aip.dev/193; ``RetryInfo.retry_delay`` is a ``Duration``, JSON ``"<n>s"``).
    """
    err = body.get("error") if isinstance(body, Mapping) else None
    details = err.get("details") if isinstance(err, Mapping) else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if (
            isinstance(detail, Mapping)
            and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo")
            and isinstance(detail.get("retryDelay"), str)
        ):
            delay = detail["retryDelay"].strip()
            if delay.endswith("s") and _SECONDS.fullmatch(delay[:-1]):
                return float(delay[:-1])
    return None


_REASONING_PARAMS = frozenset({"reasoning_effort", "reasoning.effort", "reasoning", "thinking"})

_QUOTA_TYPES = frozenset(
    {
        "insufficient_quota",
        "credit_balance_exhausted",
        "organization_spend_limit_exceeded",
        "project_spend_limit_exceeded",
        "organization_usage_limit_exceeded",
    }
)
"""OpenAI 429s that waiting cannot lift (quota or spend limit; learn.microsoft.com Dev Proxy
"OpenAI insufficient_quota" page, 2026, citing OpenAI's error-codes guide)."""


def error_from_status(
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    provider: str,
    source_index: int,
    secrets: Iterable[str | None] = (),
    now: Callable[[], float] | None = None,
) -> PolythinkError:
    """Map an HTTP error response to polythink's taxonomy.

    429 -> :class:`RateLimitedError`; 401, 402, 403 -> :class:`AuthError`; 408, 409, 5xx,
    529 -> :class:`TransientError`; other 4xx -> :class:`RequestRejectedError`, or
    :class:`ThinkingUnsupportedError` when the provider named a reasoning parameter as the
    unsupported one (OpenAI ``param: reasoning_effort``, ``code: unsupported_value``).

    ``retry_after`` comes from ``retry-after-ms`` / ``retry-after`` (see
    :func:`parse_retry_after`; ``now`` is its wall clock), else from a Gemini
    ``RetryInfo`` detail. ``should_retry`` is the ``x-should-retry`` header, else ``False``
    for an exhausted quota. A body that is not JSON is kept (redacted) as the message. The
    error's ``rate_limit`` holds the parsed rate-limit headers (:func:`parse_rate_limit`).
    """
    text = redact(content.decode("utf-8", errors="replace"), secrets)
    try:
        parsed = json.loads(content) if content else None
    except ValueError:
        parsed = None
    error_type, message, param, kinds = _error_fields(parsed)
    summary = message or text[:200] or httpx.codes.get_reason_phrase(status)
    if 300 <= status < 400:
        # Redirects are not followed: a provider key must never reach another host (httpx
        # strips only Authorization on a cross-origin redirect, not x-api-key or
        # x-goog-api-key), and LLM endpoints do not redirect in normal operation.
        error_type = "redirect"
        summary = (
            f"redirected to {headers.get('location', 'an unnamed location')}; polythink does "
            "not follow redirects, so set the source's base_url to the final endpoint"
        )
    should_retry = _should_retry(headers)
    retry_after = parse_retry_after(headers, now)
    if retry_after is None:
        retry_after = _retry_info(parsed)
    cls: type[PolythinkError]
    if status == 429:
        cls = RateLimitedError
        if should_retry is None and kinds & _QUOTA_TYPES:
            should_retry = False
    elif status in (401, 402, 403):
        cls = AuthError
    elif status in (408, 409) or status >= 500:
        cls = TransientError
    elif param in _REASONING_PARAMS:
        cls = ThinkingUnsupportedError
    else:
        cls = RequestRejectedError
    error = cls(
        f"{provider} answered HTTP {status}: {redact(summary, secrets)}",
        provider=provider,
        source_index=source_index,
        status_code=status,
        error_type=error_type,
        request_id=_request_id(headers),
        retry_after=retry_after,
        should_retry=should_retry,
        body=text,
    )
    error.rate_limit = parse_rate_limit(headers)
    return error


_RATE_TYPES = frozenset(
    {"rate_limit_error", "rate_limit_exceeded", "resource_exhausted", "too_many_requests", "429"}
)
_AUTH_TYPES = frozenset(
    {
        "authentication_error",
        "permission_error",
        "billing_error",
        "invalid_api_key",
        "unauthenticated",
        "permission_denied",
        "401",
        "402",
        "403",
    }
)
_REJECT_TYPES = frozenset(
    {
        "invalid_request_error",
        "invalid_argument",
        "not_found_error",
        "request_too_large",
        "400",
        "404",
        "413",
        "422",
    }
)


def error_from_body(
    error: Any,
    *,
    provider: str,
    source_index: int,
    status_code: int | None = None,
    request_id: str | None = None,
    secrets: Iterable[str | None] = (),
) -> PolythinkError:
    """Map an in-band error (an SSE ``error`` event or an ``{"error": …}`` chunk).

    The class follows the provider's error type or code (any of ``code``, ``type``,
    ``status``): rate-limit and quota types -> :class:`RateLimitedError` (quota ones with
    ``should_retry=False``); authentication, permission, billing -> :class:`AuthError`;
    invalid request -> :class:`RequestRejectedError`; anything else (``overloaded_error``,
    ``api_error``, ``server_error``, ``timeout_error`` …) -> :class:`TransientError`, so an
    in-band overload is retried like a 529 (Anthropic error types: the Messages OpenAPI
    ``ErrorResponse`` union, ``../shared/wire/specs``). ``status_code`` stays the stream's
    own (usually 200). A Gemini ``RetryInfo`` detail gives ``retry_after``.
    """
    error_type, message, _, kinds = _error_fields(error)
    cls: type[PolythinkError]
    should_retry = None
    if kinds & _QUOTA_TYPES:
        cls = RateLimitedError
        should_retry = False
    elif kinds & _RATE_TYPES:
        cls = RateLimitedError
    elif kinds & _AUTH_TYPES:
        cls = AuthError
    elif kinds & _REJECT_TYPES:
        cls = RequestRejectedError
    else:
        cls = TransientError
    if error_type is None and isinstance(error, Mapping):
        inner = error.get("error", error)
        if isinstance(inner, Mapping) and isinstance(inner.get("code"), int):
            error_type = str(inner["code"])
    body = redact(json.dumps(error, ensure_ascii=False, default=str), secrets)
    label = message or error_type or "unknown"
    return cls(
        f"{provider} sent an in-stream error: {redact(label, secrets)}",
        provider=provider,
        source_index=source_index,
        status_code=status_code,
        error_type=error_type,
        request_id=request_id,
        retry_after=_retry_info(error),
        should_retry=should_retry,
        body=body,
    )


TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.HTTPError,
    OSError,
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)
"""What a send or a body read may raise below polythink: httpx's tree, and the socket, SSL
and anyio stream errors an alternative HTTP transport under httpx may let through
(``ssl.SSLError`` and ``TimeoutError`` are ``OSError`` s)."""

_TIMEOUT_KINDS: tuple[tuple[type[httpx.TimeoutException], str, str], ...] = (
    (httpx.ConnectTimeout, "connect_timeout", "connect timeout"),
    (httpx.WriteTimeout, "write_timeout", "timed out sending the request"),
    (httpx.PoolTimeout, "pool_timeout", "timed out waiting for a free connection"),
)
_UNSENDABLE: tuple[tuple[type[httpx.HTTPError], str], ...] = (
    (httpx.UnsupportedProtocol, "unsupported_protocol"),
    (httpx.LocalProtocolError, "local_protocol_error"),
    (httpx.TooManyRedirects, "too_many_redirects"),
)


def error_from_transport(
    exc: BaseException,
    *,
    provider: str,
    source_index: int,
    stage: str = "response",
    secrets: Iterable[str | None] = (),
) -> PolythinkError:
    """Map a failure below HTTP (see :data:`TRANSPORT_ERRORS`) to the taxonomy.

    ``stage`` is ``"response"`` while waiting for the status line and headers, ``"body"``
    while reading a streamed body: an httpx read timeout is then ``"idle_timeout"`` rather
    than ``"first_byte_timeout"``. A builtin ``TimeoutError`` is the deadline.

    Returns a :class:`RequestTimeoutError` for timeouts, else a :class:`TransientError`:
    ``"connection_error"`` (connect, reset, early EOF, SSL, protocol errors from the
    server), ``"decoding_error"`` (a body that cannot be decoded), or, with
    ``should_retry=False``, a request the HTTP layer refuses to send to this source (an
    unsupported URL scheme, an illegal header value, a redirect loop).
    """
    detail = redact(f"{type(exc).__name__}: {exc}", secrets)[:300]
    fields: dict[str, Any] = {"provider": provider, "source_index": source_index}
    if isinstance(exc, httpx.ReadTimeout):
        kind = "idle_timeout" if stage == "body" else "first_byte_timeout"
        what = "stream idle too long" if stage == "body" else "no response in time"
        return RequestTimeoutError(f"{provider}: {what}", error_type=kind, **fields)
    for cls, kind, what in _TIMEOUT_KINDS:
        if isinstance(exc, cls):
            return RequestTimeoutError(f"{provider}: {what}", error_type=kind, **fields)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return RequestTimeoutError(
            f"{provider}: deadline exceeded", error_type="deadline", **fields
        )
    for cls_, kind in _UNSENDABLE:
        if isinstance(exc, cls_):
            return TransientError(
                f"{provider}: the request cannot be sent ({detail})",
                error_type=kind,
                should_retry=False,
                **fields,
            )
    if isinstance(exc, httpx.DecodingError):
        return TransientError(
            f"{provider}: undecodable response body ({detail})",
            error_type="decoding_error",
            **fields,
        )
    return TransientError(
        f"{provider}: connection error ({detail})", error_type="connection_error", **fields
    )


_DEADLINE = "polythink.deadline"
"""Key in ``httpx.Response.extensions`` under which :meth:`HTTPTransport.open_stream` leaves
the stream's deadline (``time.monotonic()`` seconds) for :meth:`HTTPTransport.sse_events`."""


class HTTPTransport:
    """Base class of the provider transports: one source, the shared client, the URL.

    Subclasses implement ``complete`` and ``stream`` with the helpers here. Everything
    that does not change per call (URL, headers, timeouts) is computed once in
    ``__init__``.

    Timeouts (:class:`~polythink.config.Timeout` of the source): ``connect`` bounds the
    connection (and a write, and waiting for a pooled connection); ``first_byte`` the wait
    for the response head after sending (unset: ``idle`` for a stream, nothing but the
    deadline for a non-streamed answer); ``idle`` the silence between two chunks of a
    streamed body; the deadline (``request.timeout`` when set — the retry layer sets it to
    what is left of the total — else ``total``) the whole exchange, streams included.

    Args:
        source: the source this transport serves.
        index: the source's position in the client (reported on responses and errors).
        profile: the provider profile.
        client: the client's shared ``httpx.AsyncClient``.
        api_key: the resolved key, or ``None``.
    """

    def __init__(
        self,
        *,
        source: Source,
        index: int,
        profile: ProviderProfile,
        client: httpx.AsyncClient,
        api_key: str | None,
    ) -> None:
        self.source = source
        self.index = index
        self.profile = profile
        self.client = client
        self._secrets = (api_key, *source.secrets())
        self._logged_drops: set[str] = set()
        capability = get_capability(source.model) if profile.strict_sampling else None
        self._sampling = capability.sampling if capability is not None else "any"
        self._reasons_by_default = capability is not None and capability.default_reasons
        headers = dict(_JSON_HEADERS)
        if api_key:
            if profile.auth == "bearer":
                headers["authorization"] = f"Bearer {api_key}"
            else:
                headers[profile.auth] = api_key
        headers.update(self.extra_headers())
        if source.headers:
            headers.update({k.lower(): v for k, v in source.headers.items()})
        self.headers = headers
        self.stream_headers = {**headers, "accept": _SSE_ACCEPT}
        t = source.timeouts
        self._timeout = httpx.Timeout(
            connect=t.connect, read=t.first_byte, write=t.connect, pool=t.connect
        )
        head = t.first_byte if t.first_byte is not None else t.idle
        self._stream_timeout = httpx.Timeout(
            connect=t.connect, read=head, write=t.connect, pool=t.connect
        )
        self._idle = t.idle
        self._total = t.total

    def extra_headers(self) -> dict[str, str]:
        """Provider headers sent on every call (for example ``anthropic-version``)."""
        return {}

    async def complete(self, request: Request) -> Response:
        """Send a non-streaming call; subclasses implement."""
        raise NotImplementedError

    def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Send a streaming call; subclasses implement."""
        raise NotImplementedError

    def _budget(self, request: Request) -> float | None:
        return request.timeout if request.timeout is not None else self._total

    def _transport_error(self, exc: BaseException, stage: str = "response") -> PolythinkError:
        return error_from_transport(
            exc,
            provider=self.profile.id,
            source_index=self.index,
            stage=stage,
            secrets=self._secrets,
        )

    def _deadline_error(self) -> RequestTimeoutError:
        return RequestTimeoutError(
            f"{self.profile.id}: deadline exceeded",
            provider=self.profile.id,
            source_index=self.index,
            error_type="deadline",
        )

    async def post_json(self, url: str, body: Mapping[str, Any], request: Request) -> Any:
        """POST ``body`` and return the parsed JSON of a 2xx answer.

        Raises:
            PolythinkError: the mapped error for a non-2xx answer, a transport failure or
                timeout, the deadline (:class:`RequestTimeoutError`, ``"deadline"``), or a
                body that is not JSON (:class:`TransientError`, ``"malformed_body"``).
        """
        data, _ = await self.post_json_with_rate_limit(url, body, request)
        return data

    async def post_json_with_rate_limit(
        self, url: str, body: Mapping[str, Any], request: Request
    ) -> tuple[Any, RateLimit | None]:
        """POST ``body``; return the parsed JSON of a 2xx answer and its rate-limit headers.

        Raises:
            PolythinkError: as :meth:`post_json`.
        """
        response: httpx.Response | None = None
        try:
            with anyio.move_on_after(self._budget(request)):
                # Per request, so a caller's own http_client with follow_redirects=True
                # cannot carry the key to another host either.
                response = await self.client.post(
                    url,
                    content=dumps(body),
                    headers=self.headers,
                    timeout=self._timeout,
                    follow_redirects=False,
                )
        except TRANSPORT_ERRORS as exc:
            raise self._transport_error(exc) from exc
        if response is None:
            raise self._deadline_error()
        content = response.content
        if response.status_code >= 300:
            raise error_from_status(
                response.status_code,
                response.headers,
                content,
                provider=self.profile.id,
                source_index=self.index,
                secrets=self._secrets,
            )
        try:
            return json.loads(content), parse_rate_limit(response.headers)
        except ValueError as exc:
            raise TransientError(
                f"{self.profile.id} answered HTTP {response.status_code} with a body that is "
                "not JSON",
                provider=self.profile.id,
                source_index=self.index,
                status_code=response.status_code,
                error_type="malformed_body",
                request_id=_request_id(response.headers),
                body=redact(content[:2000].decode("utf-8", "replace"), self._secrets),
            ) from exc

    @asynccontextmanager
    async def open_stream(
        self, url: str, body: Mapping[str, Any], request: Request
    ) -> AsyncIterator[httpx.Response]:
        """Open a streamed POST; yields the response once its status is known to be 2xx.

        The deadline covers the whole exchange: the wait for the head here, and the body
        read through :meth:`sse_events`. After the head, httpx's read timeout becomes the
        idle timeout. The connection is released when the block exits, however it exits.

        Raises:
            PolythinkError: the mapped error for a non-2xx answer, a transport failure or
                timeout, or the deadline.
        """
        budget = self._budget(request)
        req = self.client.build_request(
            "POST",
            url,
            content=dumps(body),
            headers=self.stream_headers,
            timeout=self._stream_timeout,
        )
        response: httpx.Response | None = None
        try:
            with anyio.move_on_after(budget):
                response = await self.client.send(req, stream=True, follow_redirects=False)
        except TRANSPORT_ERRORS as exc:
            raise self._transport_error(exc) from exc
        if response is None:
            raise self._deadline_error()
        try:
            if response.status_code >= 300:
                try:
                    content = await response.aread()
                except TRANSPORT_ERRORS:
                    content = b""
                raise error_from_status(
                    response.status_code,
                    response.headers,
                    content,
                    provider=self.profile.id,
                    source_index=self.index,
                    secrets=self._secrets,
                )
            # httpcore reads the read timeout from the request's extensions when the body
            # iteration starts, so from here on it bounds the silence between chunks.
            timeouts = response.request.extensions.get("timeout")
            if isinstance(timeouts, dict):
                timeouts["read"] = self._idle
            if budget is not None:
                response.extensions[_DEADLINE] = time.monotonic() + budget
            yield response
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    async def sse_events(self, response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
        """Yield ``(event_type, data)`` pairs from a streamed response.

        Silence longer than the idle timeout fails through httpx's read timeout; the
        deadline is checked against the clock per chunk, and a cancel scope bounds a read
        only once less than the idle timeout is left before it, so the common chunk costs
        one clock read rather than a scope.

        Raises:
            PolythinkError: a transport failure mid-stream, the idle timeout
                (``"idle_timeout"``) or the deadline (``"deadline"``), mapped at this
                boundary.
        """
        decoder = SSEDecoder()
        deadline: float | None = response.extensions.get(_DEADLINE)
        idle = math.inf if self._idle is None else self._idle
        monotonic = time.monotonic
        async with aclosing(cast(AsyncGenerator[bytes, None], response.aiter_bytes())) as chunks:
            while True:
                try:
                    if deadline is None:
                        chunk = await chunks.__anext__()
                    else:
                        left = deadline - monotonic()
                        if left > idle:
                            chunk = await chunks.__anext__()
                        else:
                            chunk = b""
                            with anyio.move_on_after(left) as scope:
                                chunk = await chunks.__anext__()
                            if scope.cancelled_caught:
                                raise self._deadline_error()
                except StopAsyncIteration:
                    return
                except TRANSPORT_ERRORS as exc:
                    raise self._transport_error(exc, "body") from exc
                for event in decoder.feed(chunk):
                    yield event

    def in_band_error(self, error: Any, response: httpx.Response | None = None) -> PolythinkError:
        """Map an error found inside a 2xx stream or body (with the answer's rate limits)."""
        mapped = error_from_body(
            error,
            provider=self.profile.id,
            source_index=self.index,
            status_code=response.status_code if response is not None else None,
            request_id=_request_id(response.headers) if response is not None else None,
            secrets=self._secrets,
        )
        if response is not None:
            mapped.rate_limit = parse_rate_limit(response.headers)
        return mapped

    def refuse_or_drop(
        self,
        body: dict[str, Any],
        conflicts: list[tuple[str, str]],
        context: str,
        error_type: str = "parameter_conflict",
    ) -> list[str]:
        """Refuse a body with parameters this source's model rejects, or drop them.

        ``conflicts`` are ``(parameter, reason)`` pairs; ``context`` says when they conflict
        (``"while thinking is on"``). Without ``drop_params`` the call fails before any HTTP
        request with :class:`ThinkingUnsupportedError` (another source may take it, so
        failover moves on); with it each parameter is removed from ``body`` and logged once
        per source and parameter. Returns the notes for the response's warnings.
        """
        if not conflicts:
            return []
        model = self.source.model
        if not self.source.drop_params:
            names = ", ".join(name for name, _ in conflicts)
            reasons = "; ".join(reason for _, reason in conflicts)
            raise ThinkingUnsupportedError(
                f"{self.profile.id} model {model!r} rejects {names} {context}: {reasons}. "
                "Remove it, or set drop_params=True on the source to drop it with a warning",
                provider=self.profile.id,
                source_index=self.index,
                error_type=error_type,
            )
        notes = []
        for name, reason in conflicts:
            body.pop(name, None)
            note = f"dropped {reason} for {self.profile.id} model {model!r} (drop_params=True)"
            notes.append(note)
            if name not in self._logged_drops:
                self._logged_drops.add(name)
                _log.warning("source %d: %s", self.index, note)
        return notes

    def sampling_notes(self, body: dict[str, Any], request: Request) -> list[str]:
        """Apply the model's sampling rule (``Capability.sampling``) on strict providers.

        Returns the notes for dropped parameters.

        Raises:
            ThinkingUnsupportedError: a rejected parameter while ``drop_params`` is off.
        """
        rule = self._sampling
        if rule == "any":
            return []
        if rule == "without_reasoning":
            resolution = request.resolution
            applied = resolution.applied_effort if resolution is not None else None
            off = not self._reasons_by_default if applied is None else applied is Effort.NONE
            if off:
                return []
            context = "while it reasons (reasoning_effort='none' lifts this where accepted)"
        else:
            context = "(only the defaults are accepted)"
        return self.refuse_or_drop(body, sampling_conflicts(body), context)

    async def json_events(self, response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
        """Yield ``(event_type, parsed JSON)`` for each event of a streamed response.

        Events with blank data are skipped, as are JSON values that are not objects; a
        ``[DONE]`` event yields ``(event_type, DONE)`` and the caller stops there.

        Raises:
            TransientError: an event whose data is not JSON (``error_type`` ``"malformed_event"``).
            PolythinkError: a transport failure mid-stream (see :meth:`sse_events`).
        """
        async for event_type, data in self.sse_events(response):
            if data == "[DONE]":
                yield event_type, DONE
                return
            if not data or data.isspace():
                continue
            try:
                parsed = json.loads(data)
            except ValueError as exc:
                raise TransientError(
                    f"{self.profile.id} sent a stream event that is not JSON",
                    provider=self.profile.id,
                    source_index=self.index,
                    status_code=response.status_code,
                    error_type="malformed_event",
                    body=redact(data[:2000], self._secrets),
                ) from exc
            if isinstance(parsed, Mapping):
                yield event_type, parsed

    def incomplete(self, response: httpx.Response) -> TransientError:
        """The error for a stream the server closed before it finished."""
        return TransientError(
            f"{self.profile.id} closed the stream before it finished",
            provider=self.profile.id,
            source_index=self.index,
            status_code=response.status_code,
            error_type="stream_incomplete",
        )

    def interrupted(self, error: PolythinkError, partial: Response) -> StreamInterruptedError:
        """The error for a stream that broke after output reached the caller.

        Carries ``partial`` (the response assembled so far) and the cause's status, type
        and request id; raise it ``from error``.
        """
        return StreamInterruptedError(
            f"stream from {self.profile.id} broke after output began: {error.message}",
            partial=partial,
            provider=self.profile.id,
            source_index=self.index,
            status_code=error.status_code,
            error_type=error.error_type,
            request_id=error.request_id,
        )


def sampling_conflicts(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(parameter, reason)`` for each sampling parameter set to a non-default value:
    ``temperature`` or ``top_p`` other than 1, any ``top_k``."""
    conflicts = []
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and value != 1:
            conflicts.append((name, f"{name}={value!r}"))
    if body.get("top_k") is not None:
        conflicts.append(("top_k", f"top_k={body['top_k']!r}"))
    return conflicts


def token_count(value: Any) -> int | None:
    """A provider's token count as an ``int``, or ``None`` when absent or not a count >= 0."""
    return value if type(value) is int and value >= 0 else None


def apply_overrides(
    body: dict[str, Any], request: Request, extra_body: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Deep-merge, in this order, the reasoning fragment of ``request.resolution``, the
    source's ``extra_body`` and the call's ``extra_body`` into ``body`` (later wins)."""
    if request.resolution is not None and request.resolution.payload:
        deep_merge(body, request.resolution.payload)
    if extra_body:
        deep_merge(body, extra_body)
    if request.extra_body:
        deep_merge(body, request.extra_body)
    return body


def with_notes(response: Response, notes: list[str]) -> Response:
    """Return ``response`` with ``notes`` added to its warnings (the same object when none)."""
    if not notes:
        return response
    return dataclasses.replace(response, warnings=[*response.warnings, *notes])


def with_rate_limit(response: Response, rate_limit: RateLimit | None) -> Response:
    """Return ``response`` carrying ``rate_limit`` (the same object when there is none)."""
    if rate_limit is None:
        return response
    return dataclasses.replace(response, rate_limit=rate_limit)


DONE: Any = object()
"""Marker :meth:`HTTPTransport.json_events` yields for a ``[DONE]`` event."""


def assistant_response(
    *,
    text: str,
    reasoning: str | None,
    calls: list[ToolCall],
    items: tuple[Mapping[str, Any], ...],
    finish: str,
    usage: Usage | None,
    model: str,
    response_id: str | None,
    profile: ProviderProfile,
    source_index: int,
    rate_limit: RateLimit | None = None,
    thinking: ThinkingObservation = ThinkingObservation.UNKNOWN,
) -> Response:
    """Build a :class:`Response` and the assistant :class:`Message` it carries.

    ``items`` are the provider's opaque reasoning items, kept verbatim on the message with
    the profile's ``reasoning_format`` (none when empty). The message's content is ``None``
    when the turn is only tool calls, as the chat wire expects. ``thinking`` is
    ``observed`` when the transport saw evidence of reasoning that no text or count shows.
    """
    message = Message(
        role="assistant",
        content=text if (text or not calls) else None,
        tool_calls=tuple(calls),
        reasoning=reasoning,
        reasoning_items=items,
        reasoning_format=profile.reasoning_format if items else None,
    )
    return Response(
        text=text,
        reasoning=reasoning,
        tool_calls=calls,
        finish_reason=finish,
        usage=usage,
        model=model,
        provider=profile.id,
        source_index=source_index,
        message=message,
        output_limited=finish == "length",
        id=response_id,
        rate_limit=rate_limit,
        thinking=thinking,
    )
