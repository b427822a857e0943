"""Faults the simulator injects: scripted per request, or drawn at random at a given rate.

Put a :class:`FaultPlan` on ``Settings.faults``. For every request the server hands the plan
the wire module's handler and runs what :meth:`FaultPlan.wrap` returns, so every wire module
gets every fault without knowing about any of them. A plan takes the next :class:`Fault`
from its script (a queue; ``None`` entries are clean answers), else draws one from ``mix``
with probability ``rate`` (seeded, so a run is reproducible), else lets the request through.

Faults (each in the dialect of the route — OpenAI Chat and Responses, Anthropic Messages,
Gemini — so the client's error mapping is exercised as against the real provider):

- :meth:`Fault.http`: an HTTP error (429, 500, 503, 529 …) with an optional
  ``retry-after`` in seconds, ``retry-after-ms``, ``retry-after`` as an HTTP date, and
  ``x-should-retry``; a Gemini 429 carries its wait as a ``RetryInfo`` detail instead;
- :meth:`Fault.reset`: the connection is reset (RST) before the response, or after
  ``after_chunks`` chunks of a streamed answer;
- :meth:`Fault.stall`: silence for ``seconds`` before the first byte or mid-stream, then the
  normal answer (ended early when the client hangs up);
- :meth:`Fault.malformed`: a body or a stream frame that is not JSON;
- :meth:`Fault.in_band`: an error event inside a 200 stream (Anthropic ``event: error``,
  OpenAI ``{"error": …}`` chunk, Responses ``error`` event, Gemini ``{"error": …}``);
- :meth:`Fault.raw`: bytes written verbatim, as the whole answer or after ``after_chunks``
  chunks of the normal stream — any documented provider shape, built with
  :mod:`polythink.simulator.shapes` (error objects beside ``choices``, an error chunk
  followed by ``[DONE]``, every finish reason, tool-call fragment variants, usage in each
  place, a last event without its blank line).

:class:`RateLimitHeaders` adds request-rate headers that count down on every answer
(OpenAI ``x-ratelimit-*``, Anthropic ``anthropic-ratelimit-*``; WIRE.md §8.1-8.2) and
answers 429 with ``retry-after`` once the window's budget is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import email.utils
import json
import math
import random
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from polythink.errors import InvalidInputError
from polythink.simulator.server import SimRequest, SimResponse

__all__ = [
    "DEFAULT_MIX",
    "Fault",
    "FaultPlan",
    "RateLimitHeaders",
    "dialect",
    "error_payload",
    "in_band_frame",
]

Handler = Callable[[SimRequest, SimResponse], Awaitable[None]]

_POLL = 0.02
"""Seconds between checks for a client that hung up during a stall."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected failure. Build it with the class methods; fields are seconds.

    Attributes:
        kind: ``"status"``, ``"reset"``, ``"stall"``, ``"malformed"`` or ``"in_band"``.
        status: the HTTP status of a ``status`` fault.
        retry_after: ``retry-after`` header in seconds (written as an integer when whole).
        retry_after_ms: ``retry-after-ms`` header in milliseconds.
        retry_after_date: ``retry-after`` as an HTTP date this many seconds ahead.
        should_retry: ``x-should-retry`` header value.
        error_type: the provider error type (``"overloaded_error"`` …); ``None`` = the
            status's usual one.
        seconds: length of a stall.
        after_chunks: ``None`` = before the response; ``n`` = after ``n`` chunks of a
            streamed answer (a non-streamed answer gets the fault before its response).
        frames: the bytes of a ``raw`` fault.
    """

    kind: str
    status: int = 200
    retry_after: float | None = None
    retry_after_ms: float | None = None
    retry_after_date: float | None = None
    should_retry: bool | None = None
    error_type: str | None = None
    seconds: float = 0.0
    after_chunks: int | None = None
    frames: bytes = b""

    @classmethod
    def http(
        cls,
        status: int,
        *,
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
        retry_after_date: float | None = None,
        should_retry: bool | None = None,
        error_type: str | None = None,
    ) -> Fault:
        """Answer HTTP ``status`` with the provider's error body and the given headers."""
        return cls(
            "status",
            status=status,
            retry_after=retry_after,
            retry_after_ms=retry_after_ms,
            retry_after_date=retry_after_date,
            should_retry=should_retry,
            error_type=error_type,
        )

    @classmethod
    def reset(cls, after_chunks: int | None = None) -> Fault:
        """Reset the connection before the response, or after ``after_chunks`` chunks."""
        return cls("reset", after_chunks=after_chunks)

    @classmethod
    def stall(cls, seconds: float, after_chunks: int | None = None) -> Fault:
        """Send nothing for ``seconds`` (before the first byte or after ``after_chunks``)."""
        return cls("stall", seconds=seconds, after_chunks=after_chunks)

    @classmethod
    def malformed(cls, after_chunks: int | None = None) -> Fault:
        """Answer 200 with a body (or, mid-stream, a frame) that is not JSON."""
        return cls("malformed", after_chunks=after_chunks)

    @classmethod
    def in_band(cls, error_type: str = "overloaded_error", after_chunks: int = 0) -> Fault:
        """Send an error event inside a 200 stream after ``after_chunks`` chunks."""
        return cls("in_band", error_type=error_type, after_chunks=after_chunks)

    @classmethod
    def raw(cls, frames: bytes, after_chunks: int | None = None, status: int = 200) -> Fault:
        """Answer with ``frames`` verbatim: a streamed answer's whole SSE body (or, with
        ``after_chunks``, its rest after that many normal chunks), else the JSON body of a
        non-streamed answer with HTTP ``status``. The connection closes after the bytes."""
        return cls("raw", status=status, after_chunks=after_chunks, frames=frames)

    @property
    def label(self) -> str:
        """A short name for counters: ``"429"``, ``"reset"``, ``"stall_mid"`` …"""
        base = str(self.status) if self.kind == "status" else self.kind
        return base + ("_mid" if self.after_chunks is not None and self.kind != "status" else "")


DEFAULT_MIX: tuple[Fault, ...] = (
    Fault.http(429, retry_after_ms=20),
    Fault.http(500),
    Fault.http(503),
    Fault.http(529),
    Fault.reset(),
    Fault.reset(after_chunks=3),
    Fault.stall(0.3),
    Fault.stall(0.3, after_chunks=3),
    Fault.malformed(),
    Fault.malformed(after_chunks=3),
    Fault.in_band("overloaded_error", after_chunks=1),
)
"""The faults a plan draws from by default, equally likely."""


def dialect(path: str) -> str:
    """The wire of a route: ``"openai"``, ``"responses"``, ``"anthropic"``, ``"gemini"`` or
    ``"bedrock"`` (Vertex's Claude routes speak Anthropic's errors, its Gemini ones Google's,
    Azure's OpenAI's)."""
    if "/model/" in path and path.endswith(
        ("/invoke", "/invoke-with-response-stream", "/converse", "/converse-stream")
    ):
        return "bedrock"
    if path.endswith(("/messages", ":rawPredict", ":streamRawPredict")):
        return "anthropic"
    if path.endswith("/responses"):
        return "responses"
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini"
    return "openai"


_OPENAI_TYPES = {
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    400: ("invalid_request_error", None, "Invalid request."),
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_GEMINI_IN_BAND = {
    "overloaded_error": (503, "UNAVAILABLE"),
    "rate_limit_error": (429, "RESOURCE_EXHAUSTED"),
    "api_error": (500, "INTERNAL"),
}


_BEDROCK_TYPES = {
    429: "ThrottlingException",
    400: "ValidationException",
    403: "AccessDeniedException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


def error_payload(wire: str, status: int, fault: Fault) -> dict[str, Any]:
    """The body a provider of ``wire`` sends with HTTP ``status``."""
    message = f"Simulated {status} error."
    if wire == "bedrock":
        return {"message": "Too many requests, please wait before trying again."}
    if wire == "anthropic":
        kind = fault.error_type or _ANTHROPIC_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if wire == "gemini":
        error: dict[str, Any] = {
            "code": status,
            "message": message,
            "status": fault.error_type or _GEMINI_STATUS.get(status, "INTERNAL"),
        }
        if status == 429 and fault.retry_after is not None:
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{fault.retry_after:g}s",
                }
            ]
        return {"error": error}
    kind, code, text = _OPENAI_TYPES.get(status, ("server_error", None, message))
    if fault.error_type is not None:
        kind = code = fault.error_type
    return {"error": {"message": text, "type": kind, "param": None, "code": code}}


def in_band_frame(wire: str, error_type: str, sequence: int) -> bytes:
    """One SSE event carrying an in-stream error, in ``wire``'s shape (on Bedrock, an
    event-stream exception message: ``rate_limit_error`` is its ``throttlingException``)."""
    message = f"Simulated in-stream {error_type}."
    payload: dict[str, Any]
    if wire == "bedrock":
        from polythink.simulator.clouds import exception

        kind = {
            "rate_limit_error": "throttlingException",
            "overloaded_error": "serviceUnavailableException",
        }.get(error_type, "internalServerException")
        return exception(kind, message)
    if wire == "anthropic":
        payload = {"type": "error", "error": {"type": error_type, "message": message}}
        return _sse(payload, "error")
    if wire == "responses":
        payload = {
            "type": "error",
            "code": error_type,
            "message": message,
            "param": None,
            "sequence_number": sequence,
        }
        return _sse(payload, "error")
    if wire == "gemini":
        code, status = _GEMINI_IN_BAND.get(error_type, (500, error_type))
        return _sse({"error": {"code": code, "message": message, "status": status}})
    return _sse({"error": {"message": message, "type": error_type, "param": None, "code": None}})


def _sse(payload: Mapping[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


_MALFORMED_BODY = b'{"id":"sim-malformed","choices":[{"index":0,"message":{"content":"tru'
_MALFORMED_FRAME = b'data: {"id":"sim-malformed","choices":[{"delta":{"content":"tru\n\n'


def _wants_stream(request: SimRequest) -> bool:
    if request.path.endswith(
        (":streamGenerateContent", ":streamRawPredict", "-with-response-stream", "/converse-stream")
    ):
        return True
    try:
        body = request.json()
    except ValueError:
        return False
    return isinstance(body, Mapping) and body.get("stream") is True


def _go_duration(seconds: float) -> str:
    """``seconds`` as a Go duration string, as OpenAI's ``x-ratelimit-reset-*`` (``6m0s``)."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    if minutes < 1:
        return f"{rest:.3g}s"
    return f"{int(minutes)}m{rest:.3g}s"


@dataclass
class RateLimitHeaders:
    """A request budget per window whose headers count down on every answer.

    Attributes:
        limit: requests allowed per window.
        window: the window's length in seconds; it starts with the first request.
    """

    limit: int = 60
    window: float = 60.0

    def __post_init__(self) -> None:
        self._started: float | None = None
        self._used = 0

    def take(self, now: float) -> tuple[int, float]:
        """Count one request at monotonic ``now``; return (remaining, seconds to reset).

        ``remaining`` is -1 when the budget was already spent (the request gets a 429).
        """
        if self._started is None or now - self._started >= self.window:
            self._started = now
            self._used = 0
        reset = self._started + self.window - now
        if self._used >= self.limit:
            return -1, reset
        self._used += 1
        return self.limit - self._used, reset

    def headers(self, wire: str, remaining: int, reset: float, wall: float) -> dict[str, str]:
        """The rate-limit headers of ``wire`` (none for Gemini, which sends none)."""
        left = str(max(remaining, 0))
        if wire in ("openai", "responses"):
            return {
                "x-ratelimit-limit-requests": str(self.limit),
                "x-ratelimit-remaining-requests": left,
                "x-ratelimit-reset-requests": _go_duration(reset),
            }
        if wire == "anthropic":
            at = datetime.datetime.fromtimestamp(wall + reset, datetime.UTC)
            return {
                "anthropic-ratelimit-requests-limit": str(self.limit),
                "anthropic-ratelimit-requests-remaining": left,
                "anthropic-ratelimit-requests-reset": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        return {}


class _Stop(Exception):
    """Ends a wire module's answer after a fault finished the response."""


class _FaultyResponse(SimResponse):
    """The answer channel handed to a wire module when a fault or extra headers apply."""

    def __init__(
        self,
        inner: SimResponse,
        fault: Fault | None,
        headers: Mapping[str, str],
        wire: str,
        injected: Counter[str],
    ) -> None:
        # Same connection as the server's own answer channel, so the wire module's bytes and
        # the fault's go out interleaved exactly as written.
        super().__init__(inner._writer, inner.request, inner.settings)
        self.chunk_delay = inner.chunk_delay
        self._fault = fault
        self._injected = injected
        self._extra = dict(headers)
        self._wire = wire
        self.chunks = 0

    def _headers(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        return {**self._extra, **(headers or {})}

    async def send(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        await super().send(status, body, content_type=content_type, headers=self._headers(headers))

    async def start_stream(
        self,
        status: int = 200,
        *,
        content_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        await super().start_stream(
            status, content_type=content_type, headers=self._headers(headers)
        )

    async def write(self, data: bytes) -> None:
        fault = self._fault
        if fault is not None and self.chunks == fault.after_chunks:
            self._fault = None
            await self.mid_stream(fault)
        await super().write(data)
        self.chunks += 1

    async def mid_stream(self, fault: Fault) -> None:
        """Apply ``fault`` between two chunks of a streamed answer."""
        self._injected[fault.label] += 1
        if fault.kind == "reset":
            self.reset()
        elif fault.kind == "stall":
            await self.stall(fault.seconds)
            return
        elif fault.kind == "malformed":
            await super().write(_MALFORMED_FRAME)
        elif fault.kind == "raw":
            await super().write(fault.frames)
        else:
            error_type = fault.error_type or "api_error"
            await super().write(in_band_frame(self._wire, error_type, self.chunks))
        await self.end()
        raise _Stop

    async def stall(self, seconds: float) -> None:
        """Send nothing for ``seconds``; reset at once when the client hangs up first."""
        # Nothing reads the connection while an answer is written, so the reader's EOF (kept
        # by asyncio's StreamWriter) is the only sign that the client hung up.
        reader = getattr(self._writer, "_reader", None)
        transport = self._writer.transport
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if transport.is_closing() or (reader is not None and reader.at_eof()):
                self.reset()
            await asyncio.sleep(min(_POLL, max(0.0, end - time.monotonic())))


class FaultPlan:
    """Which requests fail, and how. Set it as ``Settings(faults=FaultPlan(...))``.

    Args:
        script: faults for the next requests, in order (``None`` = a clean answer).
        rate: probability in [0, 1] that a request beyond the script draws a fault.
        mix: the faults drawn from, equally likely.
        seed: seed of the draw.
        rate_limit: request-rate headers that count down (and a 429 when spent).
        clock: monotonic seconds; ``wall``: epoch seconds (for HTTP dates).

    Raises:
        ValueError: for a rate outside [0, 1] or an empty mix with a positive rate.
    """

    def __init__(
        self,
        script: Iterable[Fault | None] = (),
        *,
        rate: float = 0.0,
        mix: Sequence[Fault] = DEFAULT_MIX,
        seed: int = 0,
        rate_limit: RateLimitHeaders | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise InvalidInputError(f"rate must be within [0, 1]; got {rate!r}")
        if rate and not mix:
            raise InvalidInputError("a positive rate needs a non-empty mix")
        self.script: deque[Fault | None] = deque(script)
        self.rate = rate
        self.mix = tuple(mix)
        self.rate_limit = rate_limit
        self._random = random.Random(seed)
        self._clock = clock
        self._wall = wall
        self.injected: Counter[str] = Counter()
        """Faults applied so far, by :attr:`Fault.label` (a mid-stream fault past the end of
        a shorter stream is never applied)."""

    def add(self, *faults: Fault | None) -> None:
        """Queue faults for the next requests (``None`` = a clean answer)."""
        self.script.extend(faults)

    def draw(self) -> Fault | None:
        """The fault for the next request: scripted, else drawn at ``rate``, else ``None``."""
        if self.script:
            return self.script.popleft()
        if self.rate and self._random.random() < self.rate:
            return self._random.choice(self.mix)
        return None

    def wrap(self, request: SimRequest, handle: Handler) -> Handler:
        """Return the handler that answers ``request``: ``handle``, or a faulty one."""
        headers: dict[str, str] = {}
        wire = dialect(request.path)
        if self.rate_limit is not None:
            remaining, reset = self.rate_limit.take(self._clock())
            headers = self.rate_limit.headers(wire, remaining, reset, self._wall())
            if remaining < 0:
                headers["retry-after"] = str(max(1, math.ceil(reset)))
                return self._run(Fault.http(429), headers, wire, handle)
        fault = self.draw()
        if fault is None and not headers:
            return handle
        return self._run(fault, headers, wire, handle)

    def _run(
        self, fault: Fault | None, headers: dict[str, str], wire: str, handle: Handler
    ) -> Handler:
        async def run(request: SimRequest, response: SimResponse) -> None:
            streamed = _wants_stream(request)
            early = fault is not None and (fault.after_chunks is None or not streamed)
            mid = None if early else fault
            proxy = _FaultyResponse(response, mid, headers, wire, self.injected)
            try:
                if (
                    fault is not None
                    and early
                    and await self._before(fault, request, proxy, wire, streamed)
                ):
                    return
                with contextlib.suppress(_Stop):
                    await handle(request, proxy)
            finally:
                response.status = proxy.status
                response.streaming = proxy.streaming
                response.finished = proxy.finished

        return run

    async def _before(
        self,
        fault: Fault,
        request: SimRequest,
        response: _FaultyResponse,
        wire: str,
        streamed: bool,
    ) -> bool:
        """Apply ``fault`` before any byte of the answer; return whether it answered."""
        self.injected[fault.label] += 1
        if fault.kind == "status":
            await response.send_json(
                fault.status,
                error_payload(wire, fault.status, fault),
                headers=self._fault_headers(fault, wire),
            )
            return True
        if fault.kind == "reset":
            response.reset()
        elif fault.kind == "stall":
            await response.stall(fault.seconds)
            return False
        if fault.kind == "raw":
            if streamed:
                await response.start_stream(fault.status)
                await response.write(fault.frames)
                await response.end()
            else:
                await response.send(fault.status, fault.frames)
            return True
        if fault.kind == "malformed":
            if streamed:
                await response.start_stream()
                await response.write(_MALFORMED_FRAME)
                await response.end()
            else:
                await response.send(200, _MALFORMED_BODY)
            return True
        error_type = fault.error_type or "api_error"
        if streamed:
            await response.start_stream()
            await response.write(in_band_frame(wire, error_type, 0))
            await response.end()
        else:
            body = json.loads(in_band_frame(wire, error_type, 0).split(b"data: ", 1)[1])
            await response.send_json(200, body)
        return True

    def _fault_headers(self, fault: Fault, wire: str) -> dict[str, str]:
        headers = {("request-id" if wire == "anthropic" else "x-request-id"): "sim-req-fault"}
        if wire == "bedrock":
            kind = fault.error_type or _BEDROCK_TYPES.get(fault.status, "InternalServerException")
            headers["x-amzn-ErrorType"] = f"{kind}:http://internal.amazon.com/coral/"
        if fault.retry_after is not None and wire != "gemini":
            headers["retry-after"] = f"{fault.retry_after:g}"
        if fault.retry_after_ms is not None:
            headers["retry-after-ms"] = f"{fault.retry_after_ms:g}"
        if fault.retry_after_date is not None:
            headers["retry-after"] = email.utils.formatdate(
                self._wall() + fault.retry_after_date, usegmt=True
            )
        if fault.should_retry is not None:
            headers["x-should-retry"] = "true" if fault.should_retry else "false"
        return headers
