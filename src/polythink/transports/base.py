"""What every transport shares: the SSE decoder, HTTP plumbing, and the error boundary.

A transport is the innermost handler of a source's onion: it builds the provider's body,
sends it with the client's one ``httpx.AsyncClient``, parses JSON or SSE, and maps every
failure to polythink's error taxonomy exactly once, here, with ``raise … from``.
"""

from __future__ import annotations

import codecs
import email.utils
import json
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import anyio
import httpx

from polythink.config import Source
from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    ThinkingUnsupportedError,
    TransientError,
    redact,
)
from polythink.providers import ProviderProfile
from polythink.types import RateLimit, Request, Response, StreamEvent

__all__ = [
    "HTTPTransport",
    "SSEDecoder",
    "deep_merge",
    "dumps",
    "error_from_body",
    "error_from_status",
    "error_from_transport",
    "parse_duration",
    "parse_rate_limit",
    "parse_retry_after",
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


def parse_retry_after(
    headers: Mapping[str, str], now: Callable[[], float] = time.time
) -> float | None:
    """Return the server's requested wait in seconds, or ``None``.

    Reads ``retry-after-ms`` (milliseconds), then ``retry-after`` as seconds (fractions
    allowed) or as an HTTP-date (minus ``now()``, never below 0). Unparseable or
    non-finite values give ``None`` (an overflow to infinity gives ``math.inf`` so a cap
    check refuses it). Conventions as the OpenAI and Anthropic SDKs (WIRE.md §8.3).
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = math.nan
        if value >= 0 and not math.isnan(value):
            return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isnan(seconds):
        return seconds if seconds >= 0 else None
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None:
        return None
    return max(0.0, parsed.timestamp() - now())


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


def _error_fields(body: Any) -> tuple[str | None, str | None, str | None]:
    """Return (error_type, message, param) from the common provider error shapes.

    OpenAI ``{"error": {"type", "code", "message", "param"}}``; Anthropic ``{"type": "error",
    "error": {"type", "message"}}``; Gemini ``{"error": {"code", "status", "message"}}``.
    """
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, Mapping):
        return None, None, None
    err = body.get("error", body)
    if not isinstance(err, Mapping):
        return None, str(err), None
    code = err.get("code")
    kind = code if isinstance(code, str) and code else err.get("type") or err.get("status")
    message = err.get("message")
    param = err.get("param")
    return (
        str(kind) if kind else None,
        str(message) if message is not None else None,
        str(param) if param else None,
    )


_REASONING_PARAMS = frozenset({"reasoning_effort", "reasoning.effort", "reasoning", "thinking"})


def error_from_status(
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    provider: str,
    source_index: int,
    secrets: Iterable[str | None] = (),
) -> PolythinkError:
    """Map an HTTP error response to polythink's taxonomy.

    429 -> :class:`RateLimitedError`; 401/403 -> :class:`AuthError`; 408, 409, 5xx, 529 ->
    :class:`TransientError`; other 4xx -> :class:`RequestRejectedError`, or
    :class:`ThinkingUnsupportedError` when the provider named a reasoning parameter as the
    unsupported one (OpenAI ``param: reasoning_effort``, ``code: unsupported_value``). The
    error's ``rate_limit`` holds the parsed rate-limit headers (:func:`parse_rate_limit`).
    """
    text = redact(content.decode("utf-8", errors="replace"), secrets)
    try:
        parsed = json.loads(content) if content else None
    except ValueError:
        parsed = None
    error_type, message, param = _error_fields(parsed)
    summary = message or text[:200] or httpx.codes.get_reason_phrase(status)
    cls: type[PolythinkError]
    if status == 429:
        cls = RateLimitedError
    elif status in (401, 403):
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
        retry_after=parse_retry_after(headers),
        should_retry=_should_retry(headers),
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
        "invalid_api_key",
        "unauthenticated",
        "permission_denied",
        "401",
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

    The class follows the provider's error type: rate-limit types ->
    :class:`RateLimitedError`; authentication/permission -> :class:`AuthError`; invalid
    request -> :class:`RequestRejectedError`; anything else (``overloaded_error``,
    ``api_error``, ``server_error`` …) -> :class:`TransientError`. ``status_code`` stays the
    stream's own (usually 200).
    """
    error_type, message, _ = _error_fields(error)
    if error_type is None and isinstance(error, Mapping):
        inner = error.get("error", error)
        if isinstance(inner, Mapping) and isinstance(inner.get("code"), int):
            error_type = str(inner["code"])
    kind = (error_type or "").lower()
    cls: type[PolythinkError]
    if kind in _RATE_TYPES:
        cls = RateLimitedError
    elif kind in _AUTH_TYPES:
        cls = AuthError
    elif kind in _REJECT_TYPES:
        cls = RequestRejectedError
    else:
        cls = TransientError
    body = redact(json.dumps(error, ensure_ascii=False, default=str), secrets)
    return cls(
        f"{provider} sent an in-stream error: {redact(message or kind or 'unknown', secrets)}",
        provider=provider,
        source_index=source_index,
        status_code=status_code,
        error_type=error_type,
        request_id=request_id,
        body=body,
    )


def error_from_transport(exc: BaseException, *, provider: str, source_index: int) -> PolythinkError:
    """Map an httpx or timeout exception to :class:`RequestTimeoutError` or
    :class:`TransientError`."""
    if isinstance(exc, httpx.ConnectTimeout):
        return RequestTimeoutError(
            f"{provider}: connect timeout",
            provider=provider,
            source_index=source_index,
            error_type="connect_timeout",
        )
    if isinstance(exc, httpx.TimeoutException):
        return RequestTimeoutError(
            f"{provider}: read timeout",
            provider=provider,
            source_index=source_index,
            error_type="read_timeout",
        )
    if isinstance(exc, TimeoutError):
        return RequestTimeoutError(
            f"{provider}: deadline exceeded",
            provider=provider,
            source_index=source_index,
            error_type="deadline",
        )
    return TransientError(
        f"{provider}: connection error ({type(exc).__name__})",
        provider=provider,
        source_index=source_index,
        error_type="connection_error",
    )


class HTTPTransport:
    """Base class of the provider transports: one source, the shared client, the URL.

    Subclasses implement ``complete`` and ``stream`` with the helpers here. Everything
    that does not change per call (URL, headers, timeouts) is computed once in
    ``__init__``.

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
        self._secrets = (api_key,)
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

    def _deadline(self, request: Request) -> float | None:
        return request.timeout if request.timeout is not None else self._total

    async def post_json(self, url: str, body: Mapping[str, Any], request: Request) -> Any:
        """POST ``body`` and return the parsed JSON of a 2xx answer.

        Raises:
            PolythinkError: the mapped error for a non-2xx answer, a transport failure,
                the deadline, or a body that is not JSON (:class:`TransientError`).
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
        deadline = self._deadline(request)
        try:
            with anyio.fail_after(deadline):
                response = await self.client.post(
                    url, content=dumps(body), headers=self.headers, timeout=self._timeout
                )
        except (httpx.HTTPError, TimeoutError) as exc:
            raise error_from_transport(
                exc, provider=self.profile.id, source_index=self.index
            ) from exc
        content = response.content
        if response.status_code >= 400:
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
                request_id=_request_id(response.headers),
                body=redact(content[:2000].decode("utf-8", "replace"), self._secrets),
            ) from exc

    @asynccontextmanager
    async def open_stream(
        self, url: str, body: Mapping[str, Any], request: Request
    ) -> AsyncIterator[httpx.Response]:
        """Open a streamed POST; yields the response once its status is known to be 2xx.

        The connection is released when the block exits, however it exits.

        Raises:
            PolythinkError: the mapped error for a non-2xx answer or a transport failure.
        """
        req = self.client.build_request(
            "POST",
            url,
            content=dumps(body),
            headers=self.stream_headers,
            timeout=self._timeout,
        )
        try:
            response = await self.client.send(req, stream=True)
        except httpx.HTTPError as exc:
            raise error_from_transport(
                exc, provider=self.profile.id, source_index=self.index
            ) from exc
        try:
            if response.status_code >= 400:
                try:
                    content = await response.aread()
                except httpx.HTTPError:
                    content = b""
                raise error_from_status(
                    response.status_code,
                    response.headers,
                    content,
                    provider=self.profile.id,
                    source_index=self.index,
                    secrets=self._secrets,
                )
            if self._idle is not None:
                # httpcore reads the read timeout from the request's extensions on every
                # body read, so from here on it bounds the silence between chunks.
                timeouts = response.request.extensions.get("timeout")
                if isinstance(timeouts, dict):
                    timeouts["read"] = self._idle
            yield response
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    async def sse_events(self, response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
        """Yield ``(event_type, data)`` pairs from a streamed response.

        Raises:
            PolythinkError: a transport failure mid-stream (mapped at this boundary).
        """
        decoder = SSEDecoder()
        try:
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    yield event
        except httpx.HTTPError as exc:
            raise error_from_transport(
                exc, provider=self.profile.id, source_index=self.index
            ) from exc

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
