"""A small HTTP/1.1 server on loopback that wire modules answer through.

The server parses requests (``Content-Length`` bodies, keep-alive), routes each one to the
first wire module whose ``matches(path)`` accepts it, and gives the module a
:class:`SimResponse` to answer with: a whole JSON body, or a chunked stream written piece by
piece. It is hand-written on asyncio streams rather than built on a framework so that every
byte on the wire is under control: that is what lets the simulator cut a connection in the
middle of a stream, stall before the first byte, or send a malformed frame on purpose.

The first path segment names the provider whose dialect to speak:
``http://127.0.0.1:PORT/{provider}/v1`` is the base URL of a simulated ``provider``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from polythink.simulator.prompt_cache import PrefixCache

__all__ = [
    "WIRE_MODULES",
    "Settings",
    "SimRequest",
    "SimResponse",
    "SimulatorServer",
    "Stats",
    "WireModule",
]

WIRE_MODULES: tuple[str, ...] = (
    "polythink.simulator.batches",
    "polythink.simulator.bedrock",
    "polythink.simulator.vertex",
    "polythink.simulator.azure",
    "polythink.simulator.openai_chat",
    "polythink.simulator.openai_responses",
    "polythink.simulator.anthropic",
    "polythink.simulator.gemini",
)
"""Wire modules tried in order; a module that is not present is skipped."""

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    498: "Capacity Exceeded",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}


@dataclass
class Settings:
    """How the simulator behaves; every request may override per-call values by header.

    Attributes:
        latency: seconds before the first byte of every answer (header ``x-sim-latency``).
        chunk_delay: seconds between two streamed chunks (header ``x-sim-chunk-delay``).
        answer_words: words in an answer (header ``x-sim-answer-words``); a stream sends one
            content chunk per word.
        tool_rounds: tool-call turns before the model answers in text when tools are offered
            (header ``x-sim-tool-rounds``).
        faults: an optional fault plan consulted for every request (see ``faults.py``).
        capabilities: models whose accepted tiers differ from polythink's registry: model
            name -> the :class:`~polythink.reasoning.Capability` the simulator plays instead,
            answering other tiers with each provider's own rejection (a model mapped to
            ``None`` takes no reasoning parameter at all). Matched by exact name, then by
            normalised name. Only the routes whose real API refuses a tier reject (OpenAI,
            Responses, Anthropic, Gemini, xAI, Groq, Mistral, MiniMax; Qwen refuses only
            switching off); DeepSeek, GLM, Kimi, OpenRouter, vLLM and Ollama answer as usual
            (``openai_chat.NOT_PLAYABLE``; the CLI's ``--play`` refuses their models).
        structured_output: how a request for structured output (a JSON Schema or JSON mode
            in the wire's own field) is answered (header ``x-sim-structured-output``):
            ``valid`` (an object that fits the schema), ``invalid`` (one missing a
            required property), ``refusal`` (the wire's refusal) or ``truncated`` (cut at
            half, with the wire's output-limit stop); see ``behaviour.STRUCTURED_OUTPUTS``.
        today: the date the simulator plays (``YYYY-MM-DD``; ``None`` = today, UTC). A model
            whose registry ``shutdown`` date has come, on the provider that retired it, is
            answered as that provider answers a retired model: "model not found" (OpenAI,
            Anthropic, Gemini without a replacement; Groq "decommissioned"), or, on Gemini, by
            its replacement, whose id the answer's ``modelVersion`` carries (CURRENT.md §3.2).
            A model given in ``capabilities`` is played as given, never retired.
        new_account: the Anthropic account was created on or after 2026-08-31, so models
            whose prefix check is enforced on such accounts only (``thinking_binding``
            ``new_accounts``: Fable 5.1, Opus 5.5) answer a failed check with the 400;
            ``False``: an older account, where the block reaches the model (listed as
            ``thinking_mismatch_allowed`` under the beta). Models enforced on every account
            (Fable and Mythos 5.2) always answer with the 400; models whose default is not
            documented (``checked``: Sonnet and Haiku 5.5) are played as older accounts
            (CONTINUITY.md §1.3).
        no_capacity: service tiers (``flex``, ``priority`` …) answered "no capacity" in the
            provider's shape (header ``x-sim-no-capacity``, comma-separated, overrides it);
            see ``tiers.py``.
        service_tiers: model -> the service tiers the simulated provider serves it at
            (others are refused where the provider's row says it refuses them, else served
            at ``standard``); a model not listed takes every tier its provider offers.
        batch_clock: the clock batches live on (Unix seconds; ``time.time``): a test moves a
            clock of its own to run a batch's day in a moment (see ``batches.py``).
        batch_timing: the seconds of a batch's phases on that clock
            (:class:`~polythink.simulator.batches.BatchTiming`; ``None``: its defaults).
        batch_store: what the simulated batch APIs hold (files, batches, answers); made on
            first use.
        deployments: the simulated Azure's deployments: deployment name -> the model it
            serves (a name not listed serves the model it names).
    """

    latency: float = 0.0
    chunk_delay: float = 0.0
    answer_words: int = 12
    tool_rounds: int = 1
    faults: Any = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    structured_output: str = "valid"
    today: str | None = None
    new_account: bool = True
    no_capacity: tuple[str, ...] = ()
    service_tiers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    batch_clock: Callable[[], float] = time.time
    batch_timing: Any = None
    batch_store: Any = field(default=None, repr=False)
    deployments: dict[str, str] = field(default_factory=dict)


@dataclass
class Stats:
    """What the simulator saw: counts, concurrency, arrival times (monotonic seconds)."""

    requests: int = 0
    by_path: Counter[str] = field(default_factory=Counter)
    by_provider: Counter[str] = field(default_factory=Counter)
    by_status: Counter[int] = field(default_factory=Counter)
    in_flight: int = 0
    max_in_flight: int = 0
    arrivals: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))
    connections: int = 0

    def reset(self) -> None:
        """Forget everything counted so far."""
        self.requests = 0
        self.by_path.clear()
        self.by_provider.clear()
        self.by_status.clear()
        self.max_in_flight = self.in_flight
        self.arrivals.clear()
        self.connections = 0


@dataclass
class SimRequest:
    """One parsed HTTP request."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    @property
    def provider(self) -> str:
        """The provider id named by the first path segment."""
        return self.path.lstrip("/").split("/", 1)[0]

    def json(self) -> Any:
        """The body parsed as JSON (``None`` when empty).

        Raises:
            ValueError: when the body is not JSON.
        """
        return json.loads(self.body) if self.body else None

    def header_float(self, name: str, default: float) -> float:
        """A numeric request header, or ``default`` when absent or malformed."""
        raw = self.headers.get(name)
        try:
            return float(raw) if raw is not None else default
        except ValueError:
            return default


class ConnectionReset(Exception):
    """Raised inside a wire module to abort the connection without an answer."""


class _Ended:
    """Ends one request's count in flight once: when its answer's last bytes are written,
    or when its handler returns without an answer."""

    __slots__ = ("_stats",)

    def __init__(self, stats: Stats) -> None:
        self._stats: Stats | None = stats

    def __call__(self) -> None:
        if self._stats is not None:
            self._stats.in_flight -= 1
            self._stats = None


class SimResponse:
    """The answer channel of one request: a whole body, or a chunked stream."""

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        request: SimRequest,
        settings: Settings,
        by_status: Counter[int] | None = None,
        on_done: Callable[[], None] | None = None,
        prompt_cache: PrefixCache | None = None,
    ):
        self.prompt_cache = prompt_cache if prompt_cache is not None else PrefixCache()
        """The server's prompt cache (:mod:`polythink.simulator.prompt_cache`)."""
        self._writer = writer
        self._by_status = by_status
        self._on_done = on_done
        self.request = request
        self.settings = settings
        self.status: int | None = None
        self.streaming = False
        self.finished = False
        self.chunk_delay = request.header_float("x-sim-chunk-delay", settings.chunk_delay)

    def _done(self) -> None:
        # Called as the last bytes are written, before anything awaits: a client that has
        # read the whole answer and sends its next request finds this one no longer running.
        self.finished = True
        if self._on_done is not None:
            self._on_done()
            self._on_done = None

    def _head(self, status: int, headers: Mapping[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines.extend(f"{k}: {v}" for k, v in headers.items())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def send(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send a complete answer with a ``Content-Length`` body."""
        self.status = status
        if self._by_status is not None:
            # Counted as the head goes out: a client that has read it finds it counted.
            self._by_status[status] += 1
        all_headers = {"content-type": content_type, "content-length": str(len(body))}
        if headers:
            all_headers.update(headers)
        self._writer.write(self._head(status, all_headers) + body)
        self._done()
        await self._writer.drain()

    async def send_json(
        self, status: int, payload: Any, *, headers: Mapping[str, str] | None = None
    ) -> None:
        """Send ``payload`` as a JSON answer."""
        body = json.dumps(payload, separators=(",", ":")).encode()
        await self.send(status, body, headers=headers)

    async def start_stream(
        self,
        status: int = 200,
        *,
        content_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send the status line and headers of a chunked answer."""
        self.status = status
        if self._by_status is not None:
            # Counted as the head goes out: a client that has read it finds it counted.
            self._by_status[status] += 1
        self.streaming = True
        all_headers = {"content-type": content_type, "transfer-encoding": "chunked"}
        if headers:
            all_headers.update(headers)
        self._writer.write(self._head(status, all_headers))
        await self._writer.drain()

    async def write(self, data: bytes) -> None:
        """Send one chunk of a streamed answer (after ``chunk_delay`` when set)."""
        if self.chunk_delay:
            await asyncio.sleep(self.chunk_delay)
        if data:
            self._writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await self._writer.drain()

    async def write_event(self, data: str, event: str | None = None, sep: str = "\n") -> None:
        """Send one server-sent event (``event:`` line when given, then ``data:``)."""
        head = f"event: {event}{sep}" if event else ""
        await self.write(f"{head}data: {data}{sep}{sep}".encode())

    async def end(self) -> None:
        """Finish a streamed answer."""
        self._writer.write(b"0\r\n\r\n")
        self._done()
        await self._writer.drain()

    def reset(self) -> None:
        """Abort the connection at once (the client sees a reset or an early EOF)."""
        transport = self._writer.transport
        with contextlib.suppress(Exception):
            sock = transport.get_extra_info("socket")
            if sock is not None:
                import socket
                import struct

                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
        self._done()
        raise ConnectionReset


class WireModule(Protocol):
    """What a simulator wire module provides.

    ``bad_request(message)`` is the provider's 400 body for a request it cannot read.
    """

    def matches(self, path: str) -> bool: ...

    def bad_request(self, message: str) -> Any: ...

    async def handle(self, request: SimRequest, response: SimResponse) -> None: ...


Handler = Callable[[SimRequest, SimResponse], Awaitable[None]]


def load_wires(names: tuple[str, ...] = WIRE_MODULES) -> list[ModuleType]:
    """Import the wire modules that exist, in order."""
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return modules


class SimulatorServer:
    """The asyncio server. Use :class:`polythink.simulator.Simulator` to run it."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.stats = Stats()
        self.prompt_cache = PrefixCache()
        """The prefixes of the requests this server answered, by provider route and model."""
        self.wires = load_wires()
        self._server: asyncio.base_events.Server | None = None
        self._open: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._closing = False
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on ``host:port`` (0 = an ephemeral port); return the port."""
        self._closing = False
        self._server = await asyncio.start_server(self._connection, host, port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        """Stop listening, drop open connections, and wait for their handlers to finish.

        Keep-alive connections a client still holds would otherwise leave their handler
        tasks pending when the loop stops, and a request still being answered (waiting out
        its latency, or streaming) is cancelled and ends quietly: no "Task was destroyed but
        it is pending" and no traceback from asyncio's stream callback.
        """
        self._closing = True
        if self._server is not None:
            self._server.close()
        for task, writer in list(self._open.items()):
            writer.transport.abort()
            task.cancel()
        if self._open:
            await asyncio.wait(list(self._open), timeout=1.0)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None

    async def _read_request(self, reader: asyncio.StreamReader) -> SimRequest | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = (*lines[0].split(" ", 2), "", "")[:3]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        try:
            length = max(0, int(headers.get("content-length", "0") or 0))
        except ValueError:
            length = 0
        body = await reader.readexactly(length) if length else b""
        parts = urlsplit(target)
        return SimRequest(method, parts.path, dict(parse_qsl(parts.query)), headers, body)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._open[task] = writer
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    break
                stats = self.stats
                ended = _Ended(stats)
                response = SimResponse(
                    writer, request, self.settings, stats.by_status, ended, self.prompt_cache
                )
                stats.requests += 1
                stats.by_path[request.path] += 1
                stats.by_provider[request.provider] += 1
                stats.arrivals.append(time.monotonic())
                stats.in_flight += 1
                stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
                try:
                    await self._dispatch(request, response)
                finally:
                    ended()
                if request.headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionReset, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Ended by close(): a handler that ends cancelled makes asyncio's stream
            # callback log a traceback.
            if not self._closing:
                raise
        finally:
            if task is not None:
                self._open.pop(task, None)
            with contextlib.suppress(Exception):
                writer.close()

    async def _dispatch(self, request: SimRequest, response: SimResponse) -> None:
        latency = request.header_float("x-sim-latency", self.settings.latency)
        if latency:
            await asyncio.sleep(latency)
        faults = self.settings.faults
        from polythink.simulator import behaviour

        behaviour.PLAYED.set(self.settings.capabilities)
        for wire in self.wires:
            if wire.matches(request.path):
                handle = wire.handle if faults is None else faults.wrap(request, wire.handle)
                try:
                    await handle(request, response)
                except (ConnectionReset, ConnectionError, asyncio.CancelledError):
                    raise
                except Exception as exc:
                    # A body of the right JSON shape but the wrong types deep inside: the
                    # providers answer 400 with their error body, never a dropped connection.
                    if response.status is not None:
                        raise
                    await response.send_json(
                        400,
                        wire.bad_request(
                            "The request body could not be read: "
                            f"{type(exc).__name__} at a field of an unexpected type."
                        ),
                    )
                    return
                if response.streaming and not response.finished:
                    await response.end()
                return
        await response.send_json(
            404,
            {"error": {"message": f"no simulated route for {request.path}", "type": "not_found"}},
        )
