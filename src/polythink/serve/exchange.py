"""One call through the gateway: send the parsed request through its route's onion, answer.

A front door (:mod:`.chat`, :mod:`.responses`, :mod:`.messages`) parses its format into a
:class:`Call`; :class:`Exchange` sends it with :meth:`polythink.Client.send` or
:meth:`~polythink.Client.send_stream` and answers in the door's format, one of two ways:

- **as the provider answered** when the source that answered speaks the door's wire and got
  the caller's own body (``Request.native``): its JSON body, or its stream events, relayed
  as they arrive (:class:`Relay`), with its status and the headers a client reads
  (``request-id``, ``retry-after``, rate limits …); its error bodies too, unmodified;
- **rendered by the door** from polythink's typed :class:`~polythink.Response` and stream
  events otherwise (another wire answered, or the answer came from the cache).

A relayed stream holds the provider's first events (Anthropic ``message_start`` and
``ping``, Responses ``response.created`` and ``.in_progress``) until its first content
event: an attempt that fails before it is retried or failed over as any other, and the
caller sees one stream. From the first content event on, events go to the caller as they
arrive, and a failure ends the stream (:attr:`Relay.committed`).

Every answer says what polythink did, in headers (streams: those known at the first byte),
and, on a stream, in a last SSE comment line the SDKs ignore::

    : polythink {"applied_effort": "high", "reasoning": "observed", "cost_usd": 0.0021, ...}

- ``x-polythink-route``, ``x-polythink-source`` (``provider/model`` that answered);
- ``x-polythink-requested-effort`` / ``-applied-effort`` (``unset`` when none);
- ``x-polythink-reasoning`` (``observed``, ``absent``, ``unknown``);
- ``x-polythink-cost-usd`` (``unknown`` without usage or a price), ``x-polythink-cache``;
- ``x-polythink-gateway-ms``: the call's time in the gateway, its wall time less the time
  spent in the sources' transports (sending and waiting on the provider);
- ``x-polythink-warnings``: the response's warnings, ``|``-separated (truncated); on a
  stream, those known before it was sent (what polythink changed in a body sent as written,
  what a translation leaves out), and every one in the last line.

While a stream is silent for ``keepalive`` seconds the door's keep-alive frame goes out
(Anthropic ``ping`` events, ``: keepalive`` comments, Responses ``response.in_progress``
once its stream started), the head first if it was not sent: Claude Code counts every byte,
and aborts a stream silent for 300 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import logging
import math
import secrets
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from aiohttp import web

from polythink.errors import (
    AuthError,
    BudgetExceededError,
    ContextWindowExceededError,
    InvalidInputError,
    ModelNotFoundError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    StreamInterruptedError,
    TransientError,
    holds_secret,
)
from polythink.middleware.base import CompleteNext, Passthrough, StreamNext
from polythink.serve.routing import Route
from polythink.transports.base import unwrapped_comments
from polythink.types import Effort, Request, Response, StreamEvent

__all__ = [
    "Call",
    "Door",
    "DoorError",
    "EventRenderer",
    "Exchange",
    "Observer",
    "Relay",
    "classify",
    "sse_frame",
]

_log = logging.getLogger("polythink.serve")

_FORWARDED = ("request-id", "x-request-id", "retry-after", "retry-after-ms", "x-should-retry")
_FORWARDED_PREFIXES = ("anthropic-ratelimit-", "x-ratelimit-")
"""Response headers of a provider a relayed answer keeps: the ids, retry advice and rate
limits clients read (Claude Code reads ``anthropic-ratelimit-unified-*`` on every response,
GATEWAY.md §3.9); never cookies, organisation ids or the provider's transfer headers."""

_WARNINGS_CHARS = 1000
_ERROR_EVENTS = frozenset({"error", "response.failed"})
_ERROR_DATA = ('{"error"', '{"type":"error"', '{"type": "error"', '{"type":"response.failed"')
"""How a relayed event that reports an error starts (Chat's ``{"error": …}`` chunks, and the
event types of the other wires when the provider names none)."""


class DoorError(Exception):
    """A request the front door refuses, with the status and words its answer gives.

    ``kind`` is one of the gateway's error kinds (:data:`KINDS`), which each door spells in
    its own error shape; ``param`` names the field at fault, where there is one; ``headers``
    go on the answer (``retry-after`` …).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        kind: str = "invalid_request",
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.kind = kind
        self.param = param
        self.headers = headers


KINDS = (
    "invalid_request",
    "context_length",
    "authentication",
    "billing",
    "permission",
    "not_found",
    "too_large",
    "rate_limit",
    "api_error",
    "overloaded",
    "timeout",
)
"""The error kinds a door spells in its own shape (Anthropic's ``error.type`` values,
GATEWAY.md §3.7, say which is which)."""


@dataclass(slots=True)
class Call:
    """One request a front door parsed.

    Attributes:
        request: the typed request, for every source (``stream`` as the caller asked).
        model: the model id the caller sent (what routes the call).
        native: whether the caller's own body goes to a source of the door's wire as
            written (set on ``request.native`` when the exchange sends it).
        body: the caller's body (the door's own format).
        notes: what a translation to another wire cannot carry (unknown fields, options
            without an equivalent): added to the response's warnings when one does.
        only_native: features only the door's own wire carries (server tools, …): a route
            with a source of another wire refuses the call, naming them.
        options: what the door's rendering needs of the request (``include_usage`` …).
    """

    request: Request
    model: str
    body: Mapping[str, Any]
    native: bool = True
    notes: list[str] = field(default_factory=list)
    only_native: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)


class EventRenderer(Protocol):
    """A door's stream, rendered from polythink's typed events (one per stream)."""

    def start(self) -> list[bytes]:
        """The frames that open the stream."""
        ...

    def feed(self, event: StreamEvent) -> list[bytes]:
        """The frames of one typed event (``done`` excluded)."""
        ...

    def finish(self, response: Response) -> list[bytes]:
        """The frames that end the stream, from the assembled response."""
        ...

    def fail(self, status: int, kind: str, message: str) -> list[bytes]:
        """The frames of an error that ends the stream after it started."""
        ...

    def keepalive(self) -> bytes:
        """A frame that keeps a started stream alive."""
        ...


class Door(Protocol):
    """What :class:`Exchange` needs of a front door."""

    wire: str
    request_id_header: str

    def render(self, call: Call, response: Response) -> dict[str, Any]:
        """The door's whole answer for ``response``."""
        ...

    def renderer(self, call: Call, model: str) -> EventRenderer:
        """A stream renderer for ``call``, naming ``model``."""
        ...

    def error_body(self, status: int, kind: str, message: str, param: str | None) -> Any:
        """The door's error body."""
        ...

    def error_status(self, status: int, kind: str) -> int:
        """The status the door answers an error of ``kind`` with (``status`` as given
        unless the door spells that kind with another)."""
        ...

    def idle_frame(self) -> bytes:
        """A keep-alive frame valid anywhere in the door's stream, even before it opened."""
        ...

    def relayed(self, call: Call, event_type: str, data: str) -> bytes | None:
        """The frame a relayed provider event becomes (``None``: left out)."""
        ...

    def preamble(self, event_type: str, data: str) -> bool:
        """Whether a relayed event only opens the stream (held until content arrives)."""
        ...


def sse_frame(event_type: str | None, data: str) -> bytes:
    """One server-sent event: an ``event:`` line unless the type is absent or the default
    ``message``, a ``data:`` line per line of ``data``, a blank line."""
    head = f"event: {event_type}\n" if event_type and event_type != "message" else ""
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return (head + lines + "\n").encode()


def classify(error: PolythinkError) -> tuple[int, str]:
    """The status and error kind an answer gives for ``error``: the provider's status
    when it answered with one (4xx, 5xx), else by the error's class (a spend budget: 402
    ``billing``, not retried by the SDKs; a deadline: 504; an in-stream overload:
    ``overloaded``). A stream that broke after output began is classified by what broke
    it (a rate limit stays ``rate_limit``), where the transport kept the cause."""
    cause = error.__cause__
    if isinstance(error, StreamInterruptedError) and isinstance(cause, PolythinkError):
        return classify(cause)
    given = (
        error.status_code if error.status_code is not None and error.status_code >= 400 else None
    )
    if isinstance(error, BudgetExceededError):
        return 402, "billing"
    if isinstance(error, RateLimitedError):
        return given or 429, "rate_limit"
    if isinstance(error, AuthError):
        status = given or 401
        return status, {402: "billing", 403: "permission"}.get(status, "authentication")
    if isinstance(error, ModelNotFoundError):
        return 404, "not_found"
    if isinstance(error, ContextWindowExceededError):
        return 400, "context_length"
    if isinstance(error, RequestRejectedError):
        status = given or 400
        return status, {404: "not_found", 413: "too_large"}.get(status, "invalid_request")
    if isinstance(error, InvalidInputError):
        return 400, "invalid_request"  # what the caller sent is refused before sending
    if isinstance(error, RequestTimeoutError):
        return 504, "timeout"
    if isinstance(error, TransientError | StreamInterruptedError):
        kind = (
            "overloaded" if given == 529 or error.error_type == "overloaded_error" else "api_error"
        )
        return given or (529 if kind == "overloaded" else 502), kind
    return given or 500, "api_error"


def _effort(value: Effort | None) -> str:
    return value.value if value is not None else "unset"


def _header_text(text: str) -> str:
    """``text`` fit for a header value: printable ASCII, one line."""
    return "".join(c if " " <= c <= "~" else "?" for c in text)


def forwarded_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The provider's response headers a relayed answer keeps (see :data:`_FORWARDED`)."""
    kept = {}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in _FORWARDED or lowered.startswith(_FORWARDED_PREFIXES):
            kept[lowered] = value
    return kept


@dataclass(slots=True)
class _Raw:
    source_index: int
    status: int
    headers: Mapping[str, str]
    content: bytes


class Relay:
    """Takes what a source of the door's wire answered to the caller's own body, as it
    answered it (:class:`~polythink.types.NativeRelay`).

    A non-streamed answer or error is kept for :class:`Exchange` to send. A stream's events
    are framed by the door (:meth:`Door.relayed`) and held while they only open the stream
    (:meth:`Door.preamble`); the first other event commits the attempt: the head goes out
    (the provider's status and forwarded headers, the gateway's own), then the held events
    and every later one as it arrives. A new attempt starts over (its events replace the
    held ones). Once the exchange renders the stream itself (:attr:`disabled`), events are
    dropped.
    """

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.committed = False
        self.disabled = False
        self.open: int | None = None
        self.status = 200
        self.headers: Mapping[str, str] = {}
        self.held: list[bytes] = []
        self.error_seen = False
        self.answer: _Raw | None = None
        self.failure: _Raw | None = None
        self.notes: tuple[int, Sequence[str]] | None = None

    def noted(self, source_index: int, notes: Sequence[str]) -> None:
        """What the transport changed in the caller's body for the attempt about to be sent
        on ``source_index`` (the stream's head says so)."""
        self.notes = (source_index, notes)

    def opened(self, source_index: int, status: int, headers: Mapping[str, str]) -> None:
        """A stream attempt's head arrived."""
        self.open = source_index
        self.status = status
        self.headers = headers
        self.held = []
        self.error_seen = False

    async def event(self, event_type: str, data: str) -> None:
        """One event of the stream attempt now open (a call the caller did not stream,
        which a provider answers only streamed, is answered whole, from the typed
        response). Leading data lines that are SSE comments are left out, and an event of
        nothing else is not relayed: comments themselves never reach here (the decoder
        skips them), so no door's output carries a ``data: :`` line."""
        exchange = self.exchange
        if self.disabled or not exchange.request.stream:
            return
        if data[:1] == ":":
            # A keep-alive comment an upstream gateway wrapped in data: (OpenRouter's
            # ": OPENROUTER PROCESSING"): never relayed as data, which no SDK parses (case C17).
            data = unwrapped_comments(data)
            if not data or data.isspace():
                return
        frame = exchange.door.relayed(exchange.call, event_type, data)
        if frame is None:
            return
        failing = event_type in _ERROR_EVENTS or data.startswith(_ERROR_DATA)
        self.error_seen = self.error_seen or failing
        if self.committed:
            await exchange.output.write(frame)
            return
        self.held.append(frame)
        # An error before content is the attempt's end, which may be retried: held too.
        if failing or exchange.door.preamble(event_type, data):
            return
        await exchange.commit_relay()

    def answered(
        self, source_index: int, status: int, headers: Mapping[str, str], content: bytes
    ) -> None:
        """A whole answer arrived."""
        self.answer = _Raw(source_index, status, headers, content)

    def failed(
        self, source_index: int, status: int, headers: Mapping[str, str], content: bytes
    ) -> None:
        """An attempt was answered with an error status."""
        self.failure = _Raw(source_index, status, headers, content)


class Output:
    """The answer's stream to the caller: its head sent once, and every write under one
    lock (the keep-alive task writes too); a caller gone is noted rather than raised, and so
    is one that reads nothing for ``write_timeout`` seconds (its connection is then closed).

    :meth:`write` takes the lock; code that holds it already uses :meth:`head` and
    :meth:`send`.
    """

    def __init__(self, request: web.Request, write_timeout: float | None = None) -> None:
        self.request = request
        self.write_timeout = write_timeout
        self.response: web.StreamResponse | None = None
        self.lock = asyncio.Lock()
        self.gone = False
        self.last = time.monotonic()

    @property
    def prepared(self) -> bool:
        """Whether the head was sent."""
        return self.response is not None

    async def head(self, status: int, headers: Mapping[str, str]) -> None:
        """Send the head of an event stream, once (the lock held)."""
        if self.response is not None:
            return
        response = web.StreamResponse(status=status)
        response.headers.update(headers)
        response.headers["content-type"] = "text/event-stream; charset=utf-8"
        response.headers["cache-control"] = "no-cache"
        self.response = response
        try:
            await response.prepare(self.request)
        except (ConnectionError, RuntimeError):
            self.gone = True
        self.last = time.monotonic()

    async def send(self, *frames: bytes) -> None:
        """Write ``frames`` after the head (the lock held)."""
        if self.gone or self.response is None:
            return
        data = b"".join(frames)
        if not data:
            return
        try:
            async with asyncio.timeout(self.write_timeout):
                await self.response.write(data)
        except TimeoutError:
            # A client that reads nothing for write_timeout seconds: drop it, which ends
            # its upstream call too.
            self.gone = True
            transport = self.request.transport
            if transport is not None:
                transport.abort()
        except (ConnectionError, RuntimeError):
            self.gone = True
        self.last = time.monotonic()

    async def write(self, *frames: bytes) -> None:
        """Write ``frames`` after the head, taking the lock."""
        async with self.lock:
            await self.send(*frames)

    async def end(self) -> None:
        """End the stream."""
        if self.response is not None and not self.gone:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.response.write_eof()


class Observer(Passthrough):
    """The gateway's layer on every source, innermost: it notes each attempt (its source,
    the tier the reasoning layer applied) and times the transport, for the exchange under
    way in this task."""

    def __init__(self, source_index: int) -> None:
        self.source_index = source_index

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Note the attempt; time it."""
        exchange = _current.get()
        if exchange is None:
            return await call_next(request)
        exchange.attempt(self.source_index, request)
        start = time.monotonic()
        try:
            return await call_next(request)
        finally:
            exchange.upstream += time.monotonic() - start

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        """Note the attempt; time each step of its stream."""
        exchange = _current.get()
        if exchange is None:
            return call_next(request)
        exchange.attempt(self.source_index, request)
        return exchange.timed(call_next(request))


_current: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar(
    "polythink_serve_exchange", default=None
)


class Exchange:
    """One request through the gateway (see the module docstring).

    Args:
        door: the front door that parsed it.
        call: what it parsed.
        route: where the model name goes.
        http_request: aiohttp's request (the stream is written to it).
        keepalive: seconds of silence before a keep-alive frame.
        caller_secrets: credential header values the caller sent: never echoed back.
        write_timeout: seconds a write may wait for the caller to read (``None``: no bound).

    After :meth:`complete` or :meth:`stream`, :attr:`final` is the assembled response
    (``None`` when the call failed) and :meth:`gateway_seconds` what the gateway added.
    """

    def __init__(
        self,
        door: Door,
        call: Call,
        route: Route,
        http_request: web.Request,
        *,
        keepalive: float,
        caller_secrets: tuple[str, ...] = (),
        write_timeout: float | None = None,
    ) -> None:
        self.door = door
        self.call = call
        self.route = route
        self.http_request = http_request
        self.keepalive = keepalive
        self.started = time.monotonic()
        self.upstream = 0.0
        self.requested: Effort | None = call.request.reasoning_effort
        self.applied: Effort | None = None
        self.source_index: int | None = None
        self.request_id = "gw_" + secrets.token_hex(12)
        self.output = Output(http_request, write_timeout)
        self.relay = Relay(self)
        self.renderer: EventRenderer | None = None
        self.final: Response | None = None
        self.cutting = False
        self._task: asyncio.Task[Any] | None = None
        self.on_error: Callable[[PolythinkError], DoorError | None] = _no_answer
        """Answers an error its own way (a tenant's spent budget), before the default."""
        self._secrets = (*caller_secrets, *route.secrets)
        request = call.request
        native = request.native
        if native is not None and call.native and door.wire in route.wires:
            request = request.with_(native=dataclasses.replace(native, relay=self.relay))
        elif native is not None:
            request = request.with_(native=None)
        self.request = request

    # -- what the onion reports -------------------------------------------------------

    def attempt(self, source_index: int, request: Request) -> None:
        """An attempt starts on ``source_index`` with ``request`` as it will be sent."""
        self.source_index = source_index
        resolution = request.resolution
        if resolution is not None:
            self.requested = resolution.requested_effort
            self.applied = resolution.applied_effort

    async def timed(
        self, events: AsyncGenerator[StreamEvent, None]
    ) -> AsyncGenerator[StreamEvent, None]:
        """``events``, the time spent waiting on each added to :attr:`upstream`."""
        async with aclosing(events):
            while True:
                start = time.monotonic()
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    self.upstream += time.monotonic() - start
                yield event

    # -- headers -----------------------------------------------------------------------

    def _model(self) -> str:
        index = self.source_index
        if index is not None and index < len(self.route.sources):
            return self.route.sources[index].model
        return self.call.model

    def early_headers(self) -> dict[str, str]:
        """What is known before the answer: the route, the requested and applied tiers, the
        source, and the warnings known before the attempt was sent (what polythink changed
        in the caller's body, or what a translation leaves out)."""
        headers = {
            "x-polythink-route": _header_text(self.route.name),
            "x-polythink-requested-effort": _effort(self.requested),
            "x-polythink-request-id": self.request_id,
        }
        if self.applied is not None:
            headers["x-polythink-applied-effort"] = self.applied.value
        index = self.source_index
        if index is not None:
            source = self.route.sources[index]
            headers["x-polythink-source"] = _header_text(f"{source.provider}/{source.model}")
            noted = self.relay.notes
            if noted is not None and noted[0] == index:
                warnings: Sequence[str] = noted[1]
            else:
                warnings = () if self._sent_native(index) else self.call.notes
            if warnings:
                joined = " | ".join(warnings)
                headers["x-polythink-warnings"] = _header_text(joined[:_WARNINGS_CHARS])
        return headers

    def gateway_seconds(self) -> float:
        """The call's time in the gateway so far: its wall time less the time in the
        sources' transports."""
        return max(0.0, time.monotonic() - self.started - self.upstream)

    def _gateway_ms(self) -> float:
        return self.gateway_seconds() * 1000

    def summary(self, response: Response) -> dict[str, Any]:
        """What polythink did, from the assembled response."""
        cost = response.cost
        return {
            "route": self.route.name,
            "source": f"{response.provider}/{response.model}",
            "requested_effort": _effort(response.requested_effort),
            "applied_effort": _effort(response.applied_effort),
            "reasoning": response.thinking.value,
            "cost_usd": round(cost.total, 10) if cost is not None else None,
            "cache": "hit" if response.cache_hit else "miss",
            "gateway_ms": round(self._gateway_ms(), 3),
            "warnings": list(response.warnings),
        }

    def final_headers(self, response: Response) -> dict[str, str]:
        """Every ``x-polythink-*`` header, from the assembled response."""
        summary = self.summary(response)
        headers = {
            "x-polythink-route": _header_text(summary["route"]),
            "x-polythink-source": _header_text(summary["source"]),
            "x-polythink-requested-effort": summary["requested_effort"],
            "x-polythink-applied-effort": summary["applied_effort"],
            "x-polythink-reasoning": summary["reasoning"],
            "x-polythink-cost-usd": (
                f"{summary['cost_usd']:.10f}".rstrip("0").rstrip(".")
                if summary["cost_usd"] is not None
                else "unknown"
            ),
            "x-polythink-cache": summary["cache"],
            "x-polythink-gateway-ms": f"{summary['gateway_ms']:.3f}",
            "x-polythink-request-id": self.request_id,
        }
        if response.warnings:
            joined = " | ".join(response.warnings)
            headers["x-polythink-warnings"] = _header_text(joined[:_WARNINGS_CHARS])
        return headers

    def trailer(self, response: Response) -> bytes:
        """The stream's last line: an SSE comment with :meth:`summary` as JSON (its
        ``warnings`` too: a stream's head carries only those known before it was sent)."""
        return b": polythink " + orjson.dumps(self.summary(response)) + b"\n\n"

    # -- answers -------------------------------------------------------------------------

    def _json(self, status: int, body: Any, headers: Mapping[str, str]) -> web.Response:
        return web.Response(
            status=status,
            body=orjson.dumps(body),
            headers={**headers, "content-type": "application/json"},
        )

    def error_answer(self, error: PolythinkError) -> web.Response:
        """The answer for an error raised before anything was sent: the provider's own
        error body and status when a source of the door's wire answered it (unless it
        holds a credential), else the door's error shape."""
        headers = {
            "x-polythink-route": _header_text(self.route.name),
            "x-polythink-request-id": self.request_id,
        }
        own = self.on_error(error)
        if own is not None:
            status = self.door.error_status(own.status, own.kind)
            body = self.door.error_body(status, own.kind, own.message, own.param)
            return self._json(status, body, {**headers, **(own.headers or {})})
        raw = self.relay.failure
        if (
            raw is not None
            and raw.source_index == error.source_index
            and raw.status == error.status_code
            and not holds_secret(raw.content.decode("utf-8", "replace"), self._secrets)
        ):
            content_type = raw.headers.get("content-type", "application/json")
            return web.Response(
                status=raw.status,
                body=raw.content,
                headers={
                    **forwarded_headers(raw.headers),
                    **headers,
                    "content-type": content_type,
                },
            )
        status, kind = classify(error)
        headers.update(_retry_headers(error))
        status = self.door.error_status(status, kind)
        body = self.door.error_body(status, kind, error.message, None)
        return self._json(status, body, headers)

    async def complete(self) -> web.Response:
        """Send the call and answer with the whole response."""
        token = _current.set(self)
        try:
            response = await self.route.client.send(self.request)
        except PolythinkError as exc:
            return self.error_answer(exc)
        finally:
            _current.reset(token)
        response = self.final = self._with_notes(response)
        headers = self.final_headers(response)
        raw = self.relay.answer
        if raw is not None and raw.source_index == response.source_index and not response.cache_hit:
            return web.Response(
                status=raw.status,
                body=raw.content,
                headers={
                    **forwarded_headers(raw.headers),
                    **headers,
                    "content-type": raw.headers.get("content-type", "application/json"),
                },
            )
        headers.setdefault(self.door.request_id_header, self.request_id)
        return self._json(200, self.door.render(self.call, response), headers)

    def _with_notes(self, response: Response) -> Response:
        """``response`` with the door's notes on what the translation left out, when a
        source sent a body of its own (not the caller's) answered."""
        if not self.call.notes or self._sent_native(response.source_index):
            return response
        return response.with_(warnings=[*response.warnings, *self.call.notes])

    def _sent_native(self, index: int) -> bool:
        if self.request.native is None or index >= len(self.route.sources):
            return False
        from polythink.providers import get_provider

        return get_provider(self.route.sources[index].provider).wire == self.door.wire

    async def commit_relay(self) -> None:
        """The relayed attempt's first content event is held: send the head and what is
        held; later events go straight out."""
        relay = self.relay
        output = self.output
        async with output.lock:
            if relay.disabled or relay.committed:
                return
            relay.committed = True
            await output.head(
                relay.status, {**forwarded_headers(relay.headers), **self.early_headers()}
            )
            held, relay.held = relay.held, []
            await output.send(*held)

    async def _typed_start(self) -> None:
        """Render the stream from typed events from here on (the lock held)."""
        if self.renderer is not None:
            return
        self.relay.disabled = True
        self.renderer = self.door.renderer(self.call, self._model())
        await self.output.head(
            200, {**self.early_headers(), self.door.request_id_header: self.request_id}
        )
        await self.output.send(*self.renderer.start())

    async def _keep_alive(self) -> None:
        output = self.output
        while True:
            await asyncio.sleep(max(0.0, self.keepalive - (time.monotonic() - output.last)))
            if time.monotonic() - output.last < self.keepalive:
                continue
            async with output.lock:
                if output.gone:
                    return
                relay = self.relay
                if self.renderer is not None:
                    await output.send(self.renderer.keepalive())
                elif relay.committed or self.request.native is not None:
                    # The answer may be relayed as the provider writes it: the door's idle
                    # frame is valid anywhere in that, and before it.
                    await output.head(200, self.early_headers())
                    await output.send(self.door.idle_frame())
                else:
                    await self._typed_start()
                    if self.renderer is not None:
                        await output.send(self.renderer.keepalive())

    def cut(self) -> None:
        """End the stream now with an error event in its format (the gateway is stopping
        and its drain time is over); only while :meth:`stream` runs."""
        if self._task is not None and not self._task.done():
            self.cutting = True
            self._task.cancel()

    async def stream(self) -> web.StreamResponse:
        """Send the call as a stream and answer with the door's event stream."""
        output = self.output
        relay = self.relay
        self._task = asyncio.current_task()
        token = _current.set(self)
        keeper = asyncio.create_task(self._keep_alive())
        final: Response | None = None
        failure: PolythinkError | None = None
        try:
            async with aclosing(self.route.client.send_stream(self.request)) as events:
                async for event in events:
                    if event.type == "done":
                        final = event.response
                        break
                    if output.gone:
                        break
                    if relay.committed:
                        continue
                    async with output.lock:
                        await self._typed_start()
                        assert self.renderer is not None
                        await output.send(*self.renderer.feed(event))
        except PolythinkError as exc:
            failure = exc
        except asyncio.CancelledError:
            if not self.cutting:
                raise
            # The gateway is stopping and the drain time is over: the stream ends with an
            # error event in its format, not a cut connection.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            await self._cut_short()
            return output.response if output.response is not None else web.Response(status=503)
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            _current.reset(token)
        if failure is not None:
            if not output.prepared:
                return await self._failed_before_head(failure)
            if not (relay.committed and relay.error_seen):
                status, kind = classify(failure)
                renderer = self.renderer or self.door.renderer(self.call, self._model())
                await output.write(*renderer.fail(status, kind, failure.message))
        elif final is not None:
            final = self.final = self._with_notes(final)
            async with output.lock:
                if not relay.committed:
                    await self._typed_start()
                    assert self.renderer is not None
                    await output.send(*self.renderer.finish(final))
                await output.send(self.trailer(final))
        await output.end()
        return output.response if output.response is not None else web.Response(status=499)

    async def _cut_short(self) -> None:
        output = self.output
        if not output.prepared or output.gone:
            return
        renderer = self.renderer or self.door.renderer(self.call, self._model())
        message = "the gateway stopped before this stream ended; send the request again"
        frames = renderer.fail(503, "overloaded", message)
        async with asyncio.timeout(1.0):
            await output.send(*frames)
            await output.end()

    async def _failed_before_head(self, error: PolythinkError) -> web.StreamResponse:
        """An error before anything was sent: the error answer, in the door's format and
        with the status its kind has (an in-stream ``overloaded_error`` before any output is
        a 529, a rate limit a 429), even when the provider said it inside a stream it had
        opened with 200: the SDKs pick their error class, and whether to retry, from the
        status (case C18: anthropic-sdk-python raises a bare ``APIStatusError(200)`` for the
        in-stream one)."""
        return self.error_answer(error)


def _no_answer(error: PolythinkError) -> DoorError | None:
    return None


def _retry_headers(error: PolythinkError) -> dict[str, str]:
    """``retry-after`` (whole seconds, rounded up), ``retry-after-ms`` and
    ``x-should-retry`` from the error, where it carries them."""
    headers: dict[str, str] = {}
    wait = error.retry_after
    if wait is not None and math.isfinite(wait) and wait >= 0:
        headers["retry-after"] = str(math.ceil(wait))
        headers["retry-after-ms"] = str(round(wait * 1000))
    if error.should_retry is not None:
        headers["x-should-retry"] = "true" if error.should_retry else "false"
    return headers


def json_body(text: bytes) -> Any:
    """Parse a request body.

    Raises:
        DoorError: the body is not a JSON object.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DoorError(f"the request body is not valid JSON: {exc.args[0]}") from None
    if not isinstance(data, dict):
        raise DoorError(f"the request body must be a JSON object; got {type(data).__name__}")
    return data


Handler = Callable[[web.Request], Any]
